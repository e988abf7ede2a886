"""Suite specs (YAML in suites/): loading and strict validation.

Every field is checked; an unknown field is an error naming the file, the field and the
fix, so that a typo never passes silently. The claims ledger (suites/claims.yaml) is
checked here too.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness import drivers
from harness.errors import BadInput
from harness.paths import SUITES_DIR

OPS = ("<", "<=", ">", ">=")
CLAIMS_FILE = "claims.yaml"


@dataclass
class Threshold:
    case: str
    metric: str
    op: str
    value: float
    unit: str = ""
    reason: str = ""

    def describe(self) -> str:
        return f"{self.op} {self.value:g} {self.unit}".strip()

    def holds(self, measured: float) -> bool:
        return {"<": measured < self.value, "<=": measured <= self.value,
                ">": measured > self.value, ">=": measured >= self.value}[self.op]


@dataclass
class Profile:
    name: str
    description: str = ""
    repetitions: int = 3
    params: dict[str, dict] = field(default_factory=dict)  # case name -> overrides
    thresholds: list[Threshold] = field(default_factory=list)


@dataclass
class Case:
    name: str
    driver: str
    description: str = ""
    params: dict = field(default_factory=dict)


@dataclass
class Suite:
    name: str
    description: str
    claim: dict
    target: str
    cases: list[Case]
    profiles: dict[str, Profile]
    path: Path | None = None

    def case(self, name: str) -> Case:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(name)

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise BadInput(
                f"suite {self.name!r} has no profile {name!r}{_hint(name, self.profiles)}; "
                f"its profiles: {', '.join(sorted(self.profiles))}"
            )
        return self.profiles[name]

    def case_params(self, case: Case, profile: str) -> dict:
        """The case's parameters for a profile, checked against its driver, defaults filled."""
        merged = dict(case.params)
        merged.update(self.profile(profile).params.get(case.name, {}))
        where = f"{self._where()}: cases.{case.name}.params (profile {profile})"
        return drivers.get(case.driver, where).resolve_params(where, merged)

    def _where(self) -> str:
        return str(self.path) if self.path else self.name


def _hint(word: str, options) -> str:
    m = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


class _Fields:
    """Reads one mapping of a spec, refusing unknown keys and wrong types."""

    def __init__(self, where: str, data: Any, allowed: dict[str, tuple]):
        if not isinstance(data, dict):
            raise BadInput(f"{where}: expected a mapping, got {type(data).__name__}")
        unknown = [k for k in data if k not in allowed]
        if unknown:
            k = unknown[0]
            raise BadInput(
                f"{where}: unknown field {k!r}{_hint(str(k), allowed)}; "
                f"allowed fields: {', '.join(allowed)}"
            )
        self.where, self.data, self.allowed = where, data, allowed

    def get(self, key: str, default: Any = drivers.REQUIRED):
        types = self.allowed[key]
        if key not in self.data or self.data[key] is None:
            if default is drivers.REQUIRED:
                raise BadInput(f"{self.where}: field {key!r} is missing; add it ({types[1]})")
            return default
        value = self.data[key]
        want = types[0]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or (isinstance(value, bool) and want is not bool):
            raise BadInput(
                f"{self.where}.{key}: expected {getattr(want, '__name__', want)}, "
                f"got {type(value).__name__} ({value!r}); {types[1]}"
            )
        return value


SUITE_FIELDS = {
    "name": (str, "the suite's name, as used on the command line"),
    "description": (str, "one paragraph on what the suite measures"),
    "claim": (dict, "the source's claim: section, text, ids"),
    "target": (str, "'cluster' or 'none'"),
    "cases": (list, "a list of cases"),
    "profiles": (dict, "profiles by name, each with repetitions, params and thresholds"),
}
CLAIM_FIELDS = {
    "section": (str, "the source's section number, quoted, e.g. '2.5'"),
    "text": (str, "the claim in words"),
    "ids": (list, "claim ids of the ledger, e.g. [C12, C13]"),
    "differs": (str, "what in the source does not exist or differs, and what is measured instead"),
}
CASE_FIELDS = {
    "name": (str, "the case's name"),
    "driver": (str, "the driver that runs it (harness list shows them)"),
    "description": (str, "one line on the case"),
    "params": (dict, "the driver's parameters"),
}
PROFILE_FIELDS = {
    "description": (str, "what machine the profile is for"),
    "repetitions": (int, "how many times each case runs (>= 1)"),
    "params": (dict, "per-case parameter overrides: {case: {param: value}}"),
    "thresholds": (list, "a list of {case, metric, op, value, unit, reason}"),
}
THRESHOLD_FIELDS = {
    "case": (str, "the case whose metric is checked"),
    "metric": (str, "the metric's name, e.g. GET.p99_ms"),
    "op": (str, "one of < <= > >="),
    "value": (float, "the limit"),
    "unit": (str, "the unit of the limit, e.g. ms"),
    "reason": (str, "why this limit, for this profile"),
}


def parse_suite(data: Any, path: Path | None = None) -> Suite:
    where = str(path) if path else "suite"
    f = _Fields(where, data, SUITE_FIELDS)
    name = f.get("name")
    target = f.get("target", "none")
    if target not in drivers.TARGET_KINDS:
        raise BadInput(f"{where}.target: {target!r} is not one of {', '.join(drivers.TARGET_KINDS)}")
    claim_f = _Fields(f"{where}.claim", f.get("claim"), CLAIM_FIELDS)
    claim = {"section": claim_f.get("section"), "text": claim_f.get("text"),
             "ids": claim_f.get("ids", []), "differs": claim_f.get("differs", "")}
    cases: list[Case] = []
    for i, raw in enumerate(f.get("cases")):
        cf = _Fields(f"{where}.cases[{i}]", raw, CASE_FIELDS)
        case = Case(cf.get("name"), cf.get("driver"), cf.get("description", ""), cf.get("params", {}))
        if any(c.name == case.name for c in cases):
            raise BadInput(f"{where}.cases[{i}]: case name {case.name!r} is used twice; rename one")
        drv = drivers.get(case.driver, f"{where}.cases[{i}].driver")
        if drv.needs == "cluster" and target != "cluster":
            raise BadInput(f"{where}.cases[{i}]: driver {case.driver!r} needs a cluster; set target: cluster")
        cases.append(case)
    if not cases:
        raise BadInput(f"{where}.cases: a suite needs at least one case")
    profiles: dict[str, Profile] = {}
    for pname, praw in f.get("profiles").items():
        pw = f"{where}.profiles.{pname}"
        pf = _Fields(pw, praw, PROFILE_FIELDS)
        reps = pf.get("repetitions", 3)
        if reps < 1:
            raise BadInput(f"{pw}.repetitions: must be at least 1, got {reps}")
        overrides = pf.get("params", {})
        for cname, over in overrides.items():
            if cname not in {c.name for c in cases}:
                raise BadInput(f"{pw}.params: no case named {cname!r}{_hint(cname, [c.name for c in cases])}")
            if not isinstance(over, dict):
                raise BadInput(f"{pw}.params.{cname}: expected a mapping of parameters")
        thresholds = []
        for j, traw in enumerate(pf.get("thresholds", [])):
            tf = _Fields(f"{pw}.thresholds[{j}]", traw, THRESHOLD_FIELDS)
            t = Threshold(tf.get("case"), tf.get("metric"), tf.get("op"), tf.get("value"),
                          tf.get("unit", ""), tf.get("reason", ""))
            if t.case not in {c.name for c in cases}:
                raise BadInput(f"{pw}.thresholds[{j}].case: no case named {t.case!r}{_hint(t.case, [c.name for c in cases])}")
            if t.op not in OPS:
                raise BadInput(f"{pw}.thresholds[{j}].op: {t.op!r} is not one of {' '.join(OPS)}")
            if not t.reason:
                raise BadInput(f"{pw}.thresholds[{j}]: give the threshold a reason (why this limit for this profile)")
            thresholds.append(t)
        profiles[pname] = Profile(pname, pf.get("description", ""), reps, overrides, thresholds)
    if not profiles:
        raise BadInput(f"{where}.profiles: a suite needs at least one profile (local)")
    suite = Suite(name, f.get("description"), claim, target, cases, profiles, path)
    for pname in profiles:  # check every case's parameters under every profile
        for case in cases:
            suite.case_params(case, pname)
    return suite


def load_suite_file(path: Path) -> Suite:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"{path}: no such spec file") from None
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: not valid YAML: {e}".replace("\n", " ")) from None
    return parse_suite(data, path)


def suite_files(directory: Path = SUITES_DIR) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if p.name != CLAIMS_FILE)


def load_all_suites(directory: Path = SUITES_DIR) -> dict[str, Suite]:
    suites: dict[str, Suite] = {}
    for p in suite_files(directory):
        s = load_suite_file(p)
        if s.name in suites:
            raise BadInput(f"{p}: suite name {s.name!r} is also used by {suites[s.name].path}")
        suites[s.name] = s
    return suites


def select_suites(names: list[str], directory: Path = SUITES_DIR) -> list[Suite]:
    """Suites by name or by spec path; all suites when names is empty."""
    available = load_all_suites(directory)
    if not names:
        return list(available.values())
    chosen = []
    for n in names:
        if n.endswith((".yaml", ".yml")) or "/" in n:
            chosen.append(load_suite_file(Path(n)))
        elif n in available:
            chosen.append(available[n])
        else:
            raise BadInput(f"no suite named {n!r}{_hint(n, available)}; known suites: {', '.join(sorted(available))}")
    return chosen


# ---- the claims ledger -------------------------------------------------------------------

LEDGER_FIELDS = {
    "id": (str, "C1, C2, ..."),
    "section": (str, "the source's section, quoted"),
    "text": (str, "the claim in words"),
    "checks": (list, "a list of {suite, case, metric, op, value, unit} that test the claim"),
    "not_measurable": (str, "why this claim cannot be measured by the harness"),
    "not_measured": (str, "why this version does not measure the claim yet (it could be)"),
    "differs": (str, "what in the claim does not exist or differs from what is measured"),
}
CHECK_FIELDS = {
    "suite": (str, "suite name"), "case": (str, "case name"), "metric": (str, "metric name"),
    "op": (str, "one of < <= > >="), "value": (float, "the claimed number"),
    "unit": (str, "unit of the claimed number"),
}


@dataclass
class ClaimCheck:
    suite: str
    case: str
    metric: str
    op: str
    value: float
    unit: str = ""


@dataclass
class Claim:
    id: str
    section: str
    text: str
    checks: list[ClaimCheck]
    not_measurable: str = ""
    differs: str = ""
    not_measured: str = ""


def load_claims(directory: Path = SUITES_DIR, suites: dict[str, Suite] | None = None) -> list[Claim]:
    path = directory / CLAIMS_FILE
    if not path.exists():
        return []
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: not valid YAML: {e}".replace("\n", " ")) from None
    if not isinstance(data, dict) or set(data) != {"claims"} or not isinstance(data["claims"], list):
        raise BadInput(f"{path}: expected one top-level field 'claims' holding a list")
    suites = suites if suites is not None else load_all_suites(directory)
    claims, seen = [], set()
    for i, raw in enumerate(data["claims"]):
        w = f"{path}: claims[{i}]"
        f = _Fields(w, raw, LEDGER_FIELDS)
        checks = []
        for j, craw in enumerate(f.get("checks", [])):
            cf = _Fields(f"{w}.checks[{j}]", craw, CHECK_FIELDS)
            c = ClaimCheck(cf.get("suite"), cf.get("case"), cf.get("metric"), cf.get("op"),
                           cf.get("value"), cf.get("unit", ""))
            if c.op not in OPS:
                raise BadInput(f"{w}.checks[{j}].op: {c.op!r} is not one of {' '.join(OPS)}")
            if c.suite not in suites:
                raise BadInput(f"{w}.checks[{j}].suite: no suite named {c.suite!r}{_hint(c.suite, suites)}")
            if c.case not in {x.name for x in suites[c.suite].cases}:
                raise BadInput(f"{w}.checks[{j}].case: suite {c.suite!r} has no case {c.case!r}")
            checks.append(c)
        claim = Claim(f.get("id"), f.get("section"), f.get("text"), checks,
                      f.get("not_measurable", ""), f.get("differs", ""), f.get("not_measured", ""))
        if claim.id in seen:
            raise BadInput(f"{w}.id: {claim.id!r} is listed twice")
        if not checks and not (claim.not_measurable or claim.not_measured):
            raise BadInput(f"{w}: claim {claim.id} needs checks, or a not_measurable or not_measured reason")
        seen.add(claim.id)
        claims.append(claim)
    return claims


def validate_paths(paths: list[str], directory: Path = SUITES_DIR) -> list[str]:
    """Validate spec files (all of suites/ and the ledger when none are given); returns OK lines."""
    if paths:
        return [f"{p}: ok ({load_suite_file(Path(p)).name})" for p in paths]
    suites = load_all_suites(directory)
    lines = [f"{s.path}: ok ({s.name})" for s in suites.values()]
    claims = load_claims(directory, suites)
    lines.append(f"{directory / CLAIMS_FILE}: ok ({len(claims)} claims)")
    return lines
