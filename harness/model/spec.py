"""Suite specs (harness/experiments/<suite>/suite.yaml) and the claims ledger (harness/experiments/claims.yaml): loading,
strict validation, and the typed objects that the runner stores with a run and the
analysis reads back (each serialises and loads itself).

Every field is checked; an unknown field is an error naming the file, the field and the
fix, so that a typo never passes silently. Names that become paths (suite, case, profile)
are checked when the spec is loaded. YAML aliases are refused (a 1 KB alias bomb expands
to gigabytes), as are non-finite numbers and files that are not UTF-8 text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from harness.base import file_cache
from harness.base.errors import BadInput, did_you_mean
from harness.base.paths import SUITES_DIR
from harness.model import driver_contract, identifiers

OPS = ("<", "<=", ">", ">=")
BAND_OP = "in"  # a threshold given as band: [low, high]
CLAIMS_FILE = "claims.yaml"
SUITE_FILE = "suite.yaml"  # a suite folder's spec
MAX_SPEC_BYTES = 1 << 20  # 1 MiB: a suite spec is a page of YAML
NAME_RULE = identifiers.NAME_WORDS  # suite, case and profile names (harness.model.identifiers)


def stored_names(d: dict, *keys: str) -> list[str]:
    """The names (case, metric, suite) of a threshold or check stored in a results file: text,
    or BadInput naming the field (the file was edited)."""
    out = []
    for k in keys:
        v = d[k]
        if not isinstance(v, str):
            raise BadInput(
                f"a stored threshold or claim check has a {k} that is a {type(v).__name__}, not text; "
                f"the results file is damaged, re-run the suites"
            )
        out.append(v)
    return out


MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
PARAM_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_absence_bound(op: str | None, value: float | None) -> bool:
    """`< 0`/`<= 0`: a bound that judges an absence (0 lost, 0 failed, 0 mixed). Such a bound
    needs a denominator (what the count is out of) and, on a ledger check, evidence that the
    dangerous situation happened in the judged run (issue 52)."""
    return op in ("<", "<=") and value is not None and value == 0


def compare(op: str, measured: float, limit: float) -> bool:
    """The one threshold test: `measured OP limit`."""
    return {"<": measured < limit, "<=": measured <= limit, ">": measured > limit, ">=": measured >= limit}[op]


def check_name(where: str, kind: str, name: Any) -> str:
    """Names become folder names, HTML ids and log words: refuse anything else."""
    if not identifiers.NAME.ok(name):
        raise BadInput(f"{where}: {kind} name {name!r} is not allowed; use {NAME_RULE}")
    return name


# ---- YAML loading -------------------------------------------------------------------------
class AliasRefused(BadInput):
    """A YAML alias in a spec or a --set value (refused: a 1 KB alias bomb expands to gigabytes)."""


# libyaml's parser (7x faster than PyYAML's own; it also caps nesting at 1000 levels) with the
# safe constructor; PyYAML's pure-Python SafeLoader where libyaml is not installed.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _refuse_aliases(text: str) -> None:
    """Aliases (and so alias bombs) are refused before anything is built."""
    for ev in yaml.parse(text, Loader=_LOADER):
        if isinstance(ev, yaml.AliasEvent):
            raise AliasRefused(
                f"YAML aliases (*{ev.anchor}) are not allowed in specs; write the value out "
                f"(line {getattr(ev.start_mark, 'line', -1) + 1})"
            )


def parse_yaml_text(text: str, where: str):
    try:
        _refuse_aliases(text)
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 - CSafeLoader or SafeLoader
    except BadInput as e:
        raise type(e)(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        raise BadInput(f"{where}: not valid YAML: {e}".replace("\n", " ")) from None
    except (RecursionError, ValueError, OverflowError) as e:
        raise BadInput(f"{where}: YAML that cannot be read ({type(e).__name__}); simplify the file") from None


def load_yaml(path: Path, what: str = "spec file"):
    """Read a YAML file, refusing folders, devices, huge or binary files with one line."""
    path = Path(path)
    try:
        if not path.exists():
            raise BadInput(f"{path}: no such {what}")
        if path.is_dir():
            raise BadInput(f"{path}: is a folder, not a {what}; give a .yaml file")
        if not path.is_file():
            raise BadInput(f"{path}: is not a regular file (a device or a pipe?); give a .yaml file")
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise BadInput(f"{path}: {size} bytes is too large for a {what} (at most {MAX_SPEC_BYTES})")
        raw = path.read_bytes()
    except OSError as e:
        raise BadInput(f"{path}: cannot be read ({e.strerror or e})") from None
    if b"\x00" in raw:
        raise BadInput(f"{path}: is a binary file, not a YAML {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path}: is not UTF-8 text; save the {what} as UTF-8") from None
    return parse_yaml_text(text, str(path))


# ---- field reader -------------------------------------------------------------------------
class _Fields:
    """Reads one mapping of a spec, refusing unknown keys and wrong types."""

    def __init__(self, where: str, data: Any, allowed: dict[str, tuple]):
        if not isinstance(data, dict):
            raise BadInput(f"{where}: expected a mapping, got {type(data).__name__}")
        for k in data:
            if not isinstance(k, str):
                raise BadInput(f"{where}: field names must be text, got {k!r}; quote it or remove it")
        unknown = [k for k in data if k not in allowed]
        if unknown:
            k = unknown[0]
            raise BadInput(
                f"{where}: unknown field {k!r}{did_you_mean(k, allowed)}; allowed fields: {', '.join(allowed)}"
            )
        self.where, self.data, self.allowed = where, data, allowed

    def get(self, key: str, default: Any = driver_contract.REQUIRED):
        types = self.allowed[key]
        if key not in self.data or self.data[key] is None:
            if default is driver_contract.REQUIRED:
                raise BadInput(f"{self.where}: field {key!r} is missing; add it ({types[1]})")
            return default
        value = self.data[key]
        want = types[0]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise BadInput(f"{self.where}.{key}: {value} is too large for a number; {types[1]}") from None
        if not isinstance(value, want) or (isinstance(value, bool) and want is not bool):
            raise BadInput(
                f"{self.where}.{key}: expected {getattr(want, '__name__', want)}, "
                f"got {type(value).__name__} ({str(value)[:60]!r}); {types[1]}"
            )
        if want is float and not math.isfinite(value):
            raise BadInput(f"{self.where}.{key}: {value} is not a finite number; {types[1]}")
        if want is dict:
            for k in value:
                if not isinstance(k, str):
                    raise BadInput(f"{self.where}.{key}: keys must be text, got {k!r}")
        return value


def _finite(where: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadInput(f"{where}: expected a number, got {type(v).__name__} ({str(v)[:60]!r})")
    try:
        f = float(v)
    except OverflowError:
        raise BadInput(f"{where}: {v} is too large for a number") from None
    if not math.isfinite(f):
        raise BadInput(f"{where}: {v} is not a finite number")
    return f


# ---- suite objects ------------------------------------------------------------------------
@dataclass
class Threshold:
    case: str
    metric: str
    op: str
    value: float
    unit: str = ""
    reason: str = ""
    high: float | None = None  # op "in": the band [value, high] (a claimed point, not a bound)
    of: str | None = None  # a count's denominator: the metric of the same case it is out of

    @property
    def bounds_an_absence(self) -> bool:
        """A bound of 0 from above (`errors <= 0`): it judges that something did not happen."""
        return is_absence_bound(self.op, self.value)

    def holds(self, measured: float) -> bool:
        if self.op == BAND_OP:
            return self.value <= measured <= cast(float, self.high)  # a band always has its high bound
        return compare(self.op, measured, self.value)

    def text(self) -> str:
        """'< 1.2 ms' or 'in [0.46, 0.56]'."""
        if self.op == BAND_OP:
            return f"in [{self.value:g}, {self.high:g}] {self.unit}".strip()
        return f"{self.op} {self.value:g} {self.unit}".strip()

    def to_json(self) -> dict:
        out = {
            "case": self.case,
            "metric": self.metric,
            "op": self.op,
            "value": self.value,
            "unit": self.unit,
            "reason": self.reason,
        }
        if self.high is not None:
            out["high"] = self.high
        if self.of is not None:
            out["of"] = self.of
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Threshold":
        """A threshold stored in a results file (which the user may have edited)."""
        where = f"threshold {str(d.get('case'))[:40]!r}/{str(d.get('metric'))[:60]!r}"  # repr: one line
        op, high = d["op"], d.get("high")
        if op not in (*OPS, BAND_OP) or (op == BAND_OP) != (high is not None):
            raise BadInput(
                f"{where}: op {str(op)[:20]!r} is not one of {', '.join(OPS)} or {BAND_OP!r} with a high "
                f"bound; the file is damaged, re-run the suites"
            )
        of = stored_names(d, "of")[0] if d.get("of") is not None else None
        case, metric = stored_names(d, "case", "metric")
        return cls(
            case,
            metric,
            op,
            _stored_number(where, d["value"]),
            d.get("unit", ""),
            d.get("reason", ""),
            None if high is None else _stored_number(where, high),
            of,
        )


def _stored_number(where: str, v: Any) -> float:
    """A threshold's limit read back: a number, or BadInput. NaN is kept (an edited file's NaN
    limit fails its check and draws no line in the history); an infinite one is refused, since
    `<= Infinity` would pass whatever was measured."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadInput(
            f"{where}: expected a number, got {type(v).__name__} ({str(v)[:60]!r}); "
            f"the results file is damaged, re-run the suites"
        )
    try:
        f = float(v)
    except OverflowError:
        raise BadInput(
            f"{where}: {str(v)[:40]}... is too large for a number; the results file is damaged, re-run the suites"
        ) from None
    if math.isinf(f):
        raise BadInput(f"{where}: the limit {f} is not a finite number; the results file is damaged, re-run the suites")
    return f


@dataclass
class Profile:
    name: str
    description: str = ""
    repetitions: int = 3
    params: dict[str, dict] = field(default_factory=dict)  # case name -> overrides
    thresholds: list[Threshold] = field(default_factory=list)
    conditions: dict[str, Any] = field(default_factory=dict)  # what this profile runs on (hosts, clients...)
    skipped_fails: bool = False  # a skipped case fails the run (lab profiles) unless --allow-skipped
    # the cases a plain run of the suite runs with this profile (None: all); SUITE/CASE still
    # selects one left out, and `leaves_out` says why it is left out
    cases: list[str] | None = None
    leaves_out: str = ""
    # fewer repetitions for single cases (an expensive one), below `repetitions`; --repeat overrides
    case_repetitions: dict[str, int] = field(default_factory=dict)


@dataclass
class Case:
    name: str
    driver: str
    description: str = ""
    params: dict = field(default_factory=dict)
    repetitions: int | None = None  # as run: fewer than the suite's (the profile's case_repetitions)

    def to_json(self) -> dict:
        out = {"name": self.name, "driver": self.driver, "description": self.description, "params": self.params}
        return {**out, "repetitions": self.repetitions} if self.repetitions else out

    @classmethod
    def from_json(cls, d: dict) -> "Case":
        reps = d.get("repetitions")
        return cls(
            d["name"],
            d["driver"],
            d.get("description", ""),
            dict(d.get("params") or {}),
            int(reps) if isinstance(reps, int) and not isinstance(reps, bool) and reps >= 1 else None,
        )


@dataclass
class SuiteClaim:
    section: str
    text: str
    ids: list[str] = field(default_factory=list)
    differs: str = ""

    def to_json(self) -> dict:
        return {"section": self.section, "text": self.text, "ids": self.ids, "differs": self.differs}

    @classmethod
    def from_json(cls, d: dict) -> "SuiteClaim":
        return cls(str(d.get("section", "")), d.get("text", ""), list(d.get("ids") or []), d.get("differs", ""))


@dataclass
class Suite:
    name: str
    description: str
    claim: SuiteClaim
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
                f"suite {self.name!r} has no profile {name!r}{did_you_mean(name, self.profiles)}; "
                f"its profiles: {', '.join(sorted(self.profiles))}"
            )
        return self.profiles[name]

    def case_params(self, case: Case, profile: str, overrides: dict | None = None) -> dict:
        """The one parameter merge: the case's params, then the profile's, then --set
        overrides; checked against the driver, defaults filled."""
        merged = {**case.params, **self.profile(profile).params.get(case.name, {}), **(overrides or {})}
        where = f"{self._where()}: cases.{case.name}.params (profile {profile})"
        return driver_contract.get(case.driver, where).resolve_params(where, merged)

    def as_run(self, profile: str, repetitions: int, params: dict[str, dict], repeat_given: bool = False) -> "SuiteRun":
        """The suite as it runs; a case the profile repeats less runs its own repetitions,
        unless --repeat gave the number for all."""
        prof = self.profile(profile)
        own = {} if repeat_given else prof.case_repetitions
        cases = [
            Case(
                c.name,
                c.driver,
                c.description,
                params[c.name],
                min(own[c.name], repetitions) if c.name in own else None,
            )
            for c in self.cases
        ]
        return SuiteRun(
            self.name,
            self.description,
            self.claim,
            self.target,
            profile,
            prof.description,
            repetitions,
            cases,
            list(prof.thresholds),
            dict(prof.conditions),
            prof.skipped_fails,
        )

    def _where(self) -> str:
        return str(self.path) if self.path else self.name


@dataclass
class SuiteRun:
    """A suite as it ran: one profile, the resolved parameters of every case."""

    name: str
    description: str
    claim: SuiteClaim
    target: str
    profile: str
    profile_description: str
    repetitions: int
    cases: list[Case]
    thresholds: list[Threshold]
    conditions: dict = field(default_factory=dict)
    skipped_fails: bool = False

    def to_json(self) -> dict:
        return {
            "description": self.description,
            "claim": self.claim.to_json(),
            "target": self.target,
            "profile": self.profile,
            "profile_description": self.profile_description,
            "repetitions": self.repetitions,
            "cases": [c.to_json() for c in self.cases],
            "thresholds": [t.to_json() for t in self.thresholds],
            "conditions": self.conditions,
            "skipped_fails": self.skipped_fails,
        }

    @classmethod
    def from_json(cls, name: str, d: dict) -> "SuiteRun":
        return cls(
            name,
            d.get("description", ""),
            SuiteClaim.from_json(d.get("claim") or {}),
            d.get("target", "none"),
            d.get("profile", ""),
            d.get("profile_description", ""),
            int(d.get("repetitions") or 1),
            [Case.from_json(c) for c in d.get("cases", [])],
            [Threshold.from_json(t) for t in d.get("thresholds", [])],
            dict(d.get("conditions") or {}),
            bool(d.get("skipped_fails", False)),
        )

    def case_names(self) -> list[str]:
        return [c.name for c in self.cases]

    def reps(self, case: Case) -> int:
        """How many repetitions `case` runs."""
        return case.repetitions or self.repetitions


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
    "conditions": (
        dict,
        "what the profile runs on, compared with a claim's conditions, e.g. {hosts: '6 hosts', clients: 200}",
    ),
    "skipped_fails": (bool, "true: a skipped case fails the run (lab profiles) unless --allow-skipped is given"),
    "cases": (
        list,
        "the cases a run of the suite runs with this profile (default: all); SUITE/CASE selects one left out",
    ),
    "leaves_out": (str, "with cases: why the others are left out (shown when a run leaves them out)"),
    "case_repetitions": (
        dict,
        "fewer repetitions for single cases, e.g. {sweep: 1} (an expensive case); --repeat overrides",
    ),
}
THRESHOLD_FIELDS = {
    "case": (str, "the case whose metric is checked"),
    "metric": (str, "the metric's name, e.g. GET.p99_ms"),
    "op": (str, "one of < <= > >="),
    "value": (float, "the limit"),
    "band": (list, "instead of op + value: [low, high] for a claimed point (a point is a band, not a bound)"),
    "unit": (str, "the unit of the limit, e.g. ms"),
    "reason": (str, "why this limit, for this profile"),
    "of": (
        str,
        "a bound of 0 from above (0 errors, 0 lost): the metric of the same case the count is out of "
        "(requests sent, writes acknowledged); not measured or 0 makes the threshold missing",
    ),
}


def _profile_cases(pw: str, pf, case_names: list[str]) -> list[str] | None:
    """A profile's `cases` (checked against the suite's; in the suite's order), or None."""
    given = pf.get("cases", None)
    if given is None:
        if pf.get("leaves_out", ""):
            raise BadInput(f"{pw}.leaves_out: only with cases (the cases the profile runs)")
        return None
    for c in given:
        if not isinstance(c, str) or c not in case_names:
            raise BadInput(f"{pw}.cases: no case named {c!r}{did_you_mean(str(c), case_names)}")
    if not given:
        raise BadInput(f"{pw}.cases: name at least one case (or leave cases out to run them all)")
    if len(given) < len(case_names) and not pf.get("leaves_out", "").strip():
        raise BadInput(
            f"{pw}.leaves_out: say why the profile leaves out {', '.join(c for c in case_names if c not in given)}"
        )
    return [c for c in case_names if c in given]


def _profile_thresholds(pw: str, pf, case_names: list[str], runs: list[str] | None) -> list[Threshold]:
    thresholds = []
    for j, traw in enumerate(pf.get("thresholds", [])):
        tw = f"{pw}.thresholds[{j}]"
        t = _threshold(tw, _Fields(tw, traw, THRESHOLD_FIELDS))
        if t.case not in case_names:
            raise BadInput(f"{tw}.case: no case named {t.case!r}{did_you_mean(t.case, case_names)}")
        if not t.reason:
            raise BadInput(f"{tw}: give the threshold a reason (why this limit for this profile)")
        if runs is not None and t.case not in runs:
            raise BadInput(
                f"{tw}.case: {t.case!r} is not one of the profile's cases ({', '.join(runs)}); "
                f"add it to {pw}.cases or drop the threshold"
            )
        thresholds.append(t)
    return thresholds


def _threshold(tw: str, tf: "_Fields") -> Threshold:
    band = tf.get("band", None)
    case, metric = tf.get("case"), _metric_name(tw, tf.get("metric"))
    unit, reason = tf.get("unit", ""), tf.get("reason", "")
    if band is not None:
        if tf.get("op", None) is not None or tf.get("value", None) is not None:
            raise BadInput(f"{tw}: give either op + value (a bound) or band: [low, high] (a point), not both")
        if len(band) != 2:
            raise BadInput(f"{tw}.band: expected [low, high]")
        low, high = _finite(f"{tw}.band", band[0]), _finite(f"{tw}.band", band[1])
        if low > high:
            raise BadInput(f"{tw}.band: low {low:g} is above high {high:g}")
        if tf.get("of", None) is not None:
            raise BadInput(f"{tw}.of: only a bound of 0 from above (op <= or <, value 0) names a denominator")
        return Threshold(case, metric, BAND_OP, low, unit, reason, high)
    op = tf.get("op")
    if op not in OPS:
        raise BadInput(f"{tw}.op: {op!r} is not one of {' '.join(OPS)}")
    value = tf.get("value")
    return Threshold(case, metric, op, value, unit, reason, None, _denominator(tw, tf.get("of", None), op, value))


def _denominator(where: str, of: str | None, op: str | None, value: float | None) -> str | None:
    """A count's denominator (`of`): required on a bound of 0 from above, refused elsewhere."""
    if of is None:
        if is_absence_bound(op, value):
            raise BadInput(
                f"{where}: a bound of 0 ({op} 0) on a count needs of: the metric it is out of (requests "
                f"sent, writes acknowledged), so that 0 of 0 is never a pass"
            )
        return None
    if not is_absence_bound(op, value):
        raise BadInput(f"{where}.of: only a bound of 0 from above (op <= or <, value 0) names a denominator")
    return _metric_name(f"{where}.of", of)


def _metric_name(where: str, name: str) -> str:
    """A metric name as a spec or the ledger gives it (harness.model.identifiers.METRIC)."""
    return identifiers.METRIC.check(where, name)


def parse_suite(data: Any, path: Path | None = None) -> Suite:
    where = str(path) if path else "suite"
    f = _Fields(where, data, SUITE_FIELDS)
    name = check_name(f"{where}.name", "suite", f.get("name"))
    target = f.get("target", "none")
    if target not in driver_contract.TARGET_KINDS:
        raise BadInput(f"{where}.target: {target!r} is not one of {', '.join(driver_contract.TARGET_KINDS)}")
    claim_f = _Fields(f"{where}.claim", f.get("claim"), CLAIM_FIELDS)
    ids = claim_f.get("ids", [])
    for i, cid in enumerate(ids):
        identifiers.CLAIM_ID.check(f"{where}.claim.ids[{i}]", cid)
    claim = SuiteClaim(claim_f.get("section"), claim_f.get("text"), ids, claim_f.get("differs", ""))
    cases: list[Case] = []
    for i, raw in enumerate(f.get("cases")):
        cf = _Fields(f"{where}.cases[{i}]", raw, CASE_FIELDS)
        case = Case(
            check_name(f"{where}.cases[{i}].name", "case", cf.get("name")),
            cf.get("driver"),
            cf.get("description", ""),
            cf.get("params", {}),
        )
        if any(c.name == case.name for c in cases):
            raise BadInput(f"{where}.cases[{i}]: case name {case.name!r} is used twice; rename one")
        drv = driver_contract.get(case.driver, f"{where}.cases[{i}].driver")
        if drv.needs == "cluster" and target != "cluster":
            raise BadInput(f"{where}.cases[{i}]: driver {case.driver!r} needs a cluster; set target: cluster")
        cases.append(case)
    if not cases:
        raise BadInput(f"{where}.cases: a suite needs at least one case")
    case_names = [c.name for c in cases]
    profiles: dict[str, Profile] = {}
    for pname, praw in f.get("profiles").items():
        pw = f"{where}.profiles.{pname}"
        check_name(pw, "profile", pname)
        pf = _Fields(pw, praw, PROFILE_FIELDS)
        reps = pf.get("repetitions", 3)
        if not 1 <= reps <= 1000:
            raise BadInput(f"{pw}.repetitions: must be between 1 and 1000, got {reps}")
        overrides = pf.get("params", {})
        for cname, over in overrides.items():
            if cname not in case_names:
                raise BadInput(f"{pw}.params: no case named {cname!r}{did_you_mean(cname, case_names)}")
            if not isinstance(over, dict):
                raise BadInput(f"{pw}.params.{cname}: expected a mapping of parameters")
        runs = _profile_cases(pw, pf, case_names)
        thresholds = _profile_thresholds(pw, pf, case_names, runs)
        profiles[pname] = Profile(
            pname,
            pf.get("description", ""),
            reps,
            overrides,
            thresholds,
            pf.get("conditions", {}),
            pf.get("skipped_fails", False),
            runs,
            pf.get("leaves_out", ""),
            _case_repetitions(pw, pf, case_names, reps),
        )
    if not profiles:
        raise BadInput(f"{where}.profiles: a suite needs at least one profile (local)")
    suite = Suite(name, f.get("description"), claim, target, cases, profiles, path)
    for pname in profiles:  # check every case's parameters under every profile
        for case in cases:
            suite.case_params(case, pname)
    return suite


def _case_repetitions(pw: str, pf: "_Fields", case_names: list[str], reps: int) -> dict[str, int]:
    out = pf.get("case_repetitions", {})
    for cname, n in out.items():
        if cname not in case_names:
            raise BadInput(f"{pw}.case_repetitions: no case named {cname!r}{did_you_mean(cname, case_names)}")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= reps:
            raise BadInput(
                f"{pw}.case_repetitions.{cname}: give a whole number from 1 to the profile's repetitions "
                f"({reps}), got {n!r}"
            )
    return dict(out)


def load_suite_file(path: Path) -> Suite:
    return parse_suite(load_yaml(Path(path)), Path(path))


def suite_files(directory: Path = SUITES_DIR) -> list[Path]:
    """The specs of a folder of suites: each subfolder's suite.yaml (harness/experiments/), or
    the folder's own *.yaml files but the ledger (a folder of your own specs)."""
    return sorted(directory.glob(f"*/{SUITE_FILE}")) + sorted(
        p for p in directory.glob("*.yaml") if p.name != CLAIMS_FILE
    )


def load_all_suites(directory: Path = SUITES_DIR) -> dict[str, Suite]:
    """Every suite spec in the folder (kept while its files are unchanged; each caller gets
    its own copy: harness.base.file_cache)."""
    files = suite_files(directory)
    known = tuple(sorted(driver_contract.load_all()))  # a suite is checked against the drivers there are
    return file_cache.cached(
        ("suites", str(Path(directory).resolve()), known), files, lambda: _load_suites(files), MAX_SPEC_BYTES
    )


def _load_suites(files: list[Path]) -> dict[str, Suite]:
    suites: dict[str, Suite] = {}
    for p in files:
        s = load_suite_file(p)
        if s.name in suites:
            raise BadInput(f"{p}: suite name {s.name!r} is also used by {suites[s.name].path}")
        suites[s.name] = s
    return suites


def select_suites(names: list[str], directory: Path = SUITES_DIR) -> list[Suite]:
    """Suites by name or by spec path, each once; all suites when names is empty."""
    available = load_all_suites(directory)
    if not names:
        return list(available.values())
    chosen: list[Suite] = []
    for n in names:
        if n.endswith((".yaml", ".yml")) or "/" in n:
            s = load_suite_file(Path(n))
        elif n in available:
            s = available[n]
        else:
            raise BadInput(
                f"no suite named {n!r}{did_you_mean(n, available)}; known suites: {', '.join(sorted(available))}"
            )
        if any(c.name == s.name for c in chosen):
            raise BadInput(f"suite {s.name!r} is named twice; name each suite once")
        chosen.append(s)
    return chosen


# ---- the claims ledger ----------------------------------------------------------------------
LEDGER_FIELDS = {
    "id": (str, "C1, C2, ..."),
    "section": (str, "the source's section, quoted"),
    "text": (str, "the claim in words"),
    "checks": (list, "a list of checks {suite, case, metric, op+value or band, control, ...} that test the claim"),
    "figures": (dict, "the source's numbers that views show beside measurements: {name: number or list of numbers}"),
    "not_measurable": (str, "why this claim cannot be measured by the harness"),
    "not_measured": (str, "why this version does not measure the claim yet (it could be)"),
    "differs": (str, "what in the claim does not exist or differs from what is measured"),
}
CHECK_FIELDS = {
    "suite": (str, "suite name"),
    "case": (str, "case name"),
    "metric": (str, "metric name"),
    "op": (str, "one-sided claims ('at least', 'below'): one of < <= > >="),
    "value": (float, "the claimed number (with op)"),
    "band": (list, "two-sided claims ('~X', 'X -> Y'): [low, high] inside which the claim counts as reproduced"),
    "band_reason": (str, "why the band is this wide"),
    "direction": (
        dict,
        "{op, value}: the ordering or sign the claim implies; outside the band but in this "
        "direction is 'direction reproduced, magnitude differs'",
    ),
    "instrument": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them: a condition "
        "where the effect is known to be there; the measurement must see it, else the "
        "verdict is inconclusive",
    ),
    "mechanism_off": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them: the same "
        "workload with the mechanism removed; an effect that is seen must go away, else "
        "the verdict is 'not attributable'",
    ),
    "better": (
        str,
        "which side of the claim is better: higher or lower (an op check: the op's side; a band: past "
        "it on this side is 'exceeded'), or neither (a band only: past it on either side refutes it)",
    ),
    "observed": (
        str,
        "the independent observation the metric comes from (client histories against a read-back, "
        "server counters, the engine's /metrics, request timestamps), never the mechanism's own "
        "bookkeeping",
    ),
    "reference": (
        dict,
        "{metric, tolerance, text}: the same number computed independently in the same case; a "
        "difference over the tolerance (or the reference not measured) makes the check inconclusive",
    ),
    "no_instrument": (str, "why no instrument control can exist for this check"),
    "no_mechanism_off": (str, "why no mechanism-off control can exist for this check"),
    "stand_in": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them: a cheaper stand-in "
        "for the named mechanism (a character hash for an embedding, plain LRU for LRU-K); the "
        "effect must exceed the stand-in's, else the verdict is 'not attributable'",
    ),
    "conditions": (
        dict,
        "what the claim needs, compared with what the run measured: {gpu: A100, redis_hosts: 6, "
        "loadgen_separate: true, clients: 200, ...} (case facts, the case's parameters, the "
        "manifest); a difference gives 'not comparable here'",
    ),
    "unit": (str, "unit of the claimed number"),
    "of": (
        str,
        "a check of an absence (op <= or <, value 0): the metric of the same case the count is out of "
        "(reads checked, writes acknowledged); not measured or 0 makes the check inconclusive",
    ),
    "exercised": (
        (dict, list),
        "{metric, op, value | than [, factor], text} or a list of them, on a check of an "
        "absence: a counter showing that the dangerous situation happened in the judged run "
        "(conflicts that reached the CAS, requests in flight across the swap) and its "
        "minimum; below it the check is inconclusive",
    ),
    "no_exercise": (str, "on a check of an absence: why no counter can show the situation happened"),
    "configured": (
        dict,
        "server configuration the check depends on, as the case read it back from the server "
        "(CONFIG GET, INFO, the engine's own settings) and recorded as facts: {fact: expected}; a "
        "mismatch or a fact not recorded makes the check inconclusive",
    ),
}
CONTROL_FIELDS = {
    "metric": (str, "the control's metric, measured in the same case"),
    "op": (str, "one of < <= > >="),
    "value": (float, "compare the control's metric with this number"),
    "than": (str, "or compare it with this other metric of the case (the mechanism on)"),
    "factor": (float, "with 'than': compare with factor x that metric (default 1)"),
    "text": (str, "what the control is, in words (e.g. 'prewarm off: first request on a fresh engine')"),
}
DIRECTION_FIELDS = {"op": (str, "one of < <= > >="), "value": (float, "the boundary, e.g. 0 for a sign")}
STAND_IN_FIELDS = {
    **CONTROL_FIELDS,
    "params": (
        dict,
        "the stand-in's strength, fixed here: {case parameter: value}; the case runs with these "
        "values (a spec, profile or --set that sets one is refused) and a run that used others is "
        "inconclusive",
    ),
    "no_params": (str, "why the stand-in has no strength to fix (plain LRU at the same capacity)"),
    "instrument": (
        dict,
        "{metric, op, value | than [, factor], text}: the stand-in's own instrument, showing it "
        "does what it is said to do; not held makes the check inconclusive",
    ),
    "no_instrument": (str, "why the stand-in can have no instrument of its own"),
}
REFERENCE_FIELDS = {
    "metric": (str, "the reference's metric, measured in the same case by independent code"),
    "tolerance": (float, "the largest difference |metric - reference| that still agrees, in the check's unit"),
    "text": (str, "what the reference is, in words"),
    "module": (str, "the module that computes the reference (harness.experiments.kv_trace.recount)"),
    "independent_of": (
        list,
        "the modules or packages that compute the checked number: the reference module may not "
        "import any of them, directly or through what it imports (a test of the import graph "
        "and the run both check it)",
    ),
    "not_code": (str, "instead of module: why the reference is not code of this project (a server's own counters)"),
}
BETTER = ("higher", "lower")
NEITHER = "neither"  # a band only: a claimed point where no side is better (a formula's value, an agreement)


@dataclass
class Condition:
    op: str
    value: float

    def holds(self, measured: float) -> bool:
        return compare(self.op, measured, self.value)

    def to_json(self) -> dict:
        return {"op": self.op, "value": self.value}


INSTRUMENT = "instrument"
MECHANISM_OFF = "mechanism_off"
STAND_IN = "stand_in"
EXERCISE = "exercised"  # evidence that the dangerous situation happened (a check of an absence)
CONTROL_KINDS = (INSTRUMENT, MECHANISM_OFF, STAND_IN, EXERCISE)
CONTROL_LABELS = {INSTRUMENT: "instrument", MECHANISM_OFF: "mechanism off", STAND_IN: "stand-in", EXERCISE: "exercise"}


@dataclass
class Reference:
    """An independent computation of a check's number in the same case: the check's metric must
    agree with it within the tolerance, else the instrument disagrees with its reference."""

    metric: str
    tolerance: float
    text: str
    module: str = ""  # the module computing the reference
    independent_of: tuple[str, ...] = ()  # the modules computing the checked number: never imported by `module`
    not_code: str = ""  # instead of module: why the reference is not this project's code

    def agrees(self, measured: float, reference: float) -> bool:
        return abs(measured - reference) <= self.tolerance

    def independence(self) -> str:
        """How the reference's independence is enforced, in words."""
        if self.module:
            return (
                f"{self.module} imports none of {', '.join(self.independent_of)} (the import graph, checked by a "
                f"test and by every run)"
            )
        return f"not code of this project: {self.not_code}" if self.not_code else "not stated"

    def to_json(self) -> dict:
        out = {"metric": self.metric, "tolerance": self.tolerance, "text": self.text}
        if self.module:
            out["module"], out["independent_of"] = self.module, list(self.independent_of)
        if self.not_code:
            out["not_code"] = self.not_code
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Reference":
        deps = d.get("independent_of")
        (metric,) = stored_names(d, "metric")
        return cls(
            metric,
            _stored_number("reference", d.get("tolerance")),
            str(d.get("text", "")),
            str(d.get("module") or ""),
            tuple(str(x) for x in deps) if isinstance(deps, list) else (),
            str(d.get("not_code") or ""),
        )


@dataclass
class Control:
    """One control of a claim check. An instrument control (positive) is a condition where the
    effect is known to be there: the measurement must see it. A mechanism-off control
    (negative) is the same workload with the mechanism removed: an effect that is seen must go
    away with it. A stand-in control is the same workload with a cheaper stand-in in the named
    mechanism's place: the effect must exceed the stand-in's to be attributed to the mechanism."""

    metric: str
    op: str
    text: str
    value: float | None = None
    than: str | None = None
    factor: float = 1.0
    kind: str = INSTRUMENT
    params: dict = field(default_factory=dict)  # a stand-in's strength, fixed by the ledger
    instrument: "Control | None" = None  # a stand-in's own instrument
    no_params: str = ""
    no_instrument: str = ""

    def __post_init__(self):
        if self.kind not in CONTROL_KINDS:
            raise ValueError(f"a control's kind is one of {CONTROL_KINDS}, not {self.kind!r}")

    @property
    def label(self) -> str:
        return CONTROL_LABELS[self.kind]

    def describe(self) -> str:
        rhs = f"{self.factor:g} x {self.than}" if self.than and self.factor != 1 else (self.than or f"{self.value:g}")
        return f"{self.metric} {self.op} {rhs}"

    def to_json(self) -> dict:
        out: dict[str, Any] = {"metric": self.metric, "op": self.op, "text": self.text, "kind": self.kind}
        if self.value is not None:
            out["value"] = self.value
        if self.than is not None:
            out["than"] = self.than
            out["factor"] = self.factor
        if self.params:
            out["params"] = self.params
        if self.instrument is not None:
            out["instrument"] = self.instrument.to_json()
        for key in ("no_params", "no_instrument"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, d: dict, kind: str = INSTRUMENT) -> "Control":
        own = d.get("instrument")
        params = d.get("params")
        (metric,) = stored_names(d, "metric")
        return cls(
            metric,
            d["op"],
            d.get("text", ""),
            d.get("value"),
            d.get("than"),
            float(d.get("factor", 1.0)),
            d.get("kind", kind),
            dict(params) if isinstance(params, dict) else {},
            cls.from_json(own, INSTRUMENT) if isinstance(own, dict) else None,
            str(d.get("no_params") or ""),
            str(d.get("no_instrument") or ""),
        )


@dataclass
class ClaimCheck:
    suite: str
    case: str
    metric: str
    op: str | None = None
    value: float | None = None
    unit: str = ""
    band: tuple[float, float] | None = None
    band_reason: str = ""
    direction: Condition | None = None
    controls: list[Control] = field(default_factory=list)
    conditions: dict = field(default_factory=dict)
    better: str = ""  # "higher" or "lower": which side of the claim is better ("" in results before issue 39)
    observed: str = ""  # the independent observation the metric comes from
    reference: Reference | None = None  # the same number computed independently
    no_instrument: str = ""  # why no instrument control can exist
    no_mechanism_off: str = ""  # why no mechanism-off control can exist
    of: str | None = None  # a check of an absence: the metric its count is out of
    no_exercise: str = ""  # a check of an absence: why no counter can show the situation happened
    configured: dict = field(default_factory=dict)  # server configuration read back: {fact: expected}

    @property
    def judges_an_absence(self) -> bool:
        """0 lost, 0 failed, 0 mixed: a check that passes when nothing happened."""
        return self.band is None and is_absence_bound(self.op, self.value)

    @property
    def exercises(self) -> list[Control]:
        return [c for c in self.controls if c.kind == EXERCISE]

    @property
    def instruments(self) -> list[Control]:
        return [c for c in self.controls if c.kind == INSTRUMENT]

    @property
    def mechanism_off(self) -> list[Control]:
        return [c for c in self.controls if c.kind == MECHANISM_OFF]

    @property
    def stand_ins(self) -> list[Control]:
        return [c for c in self.controls if c.kind == STAND_IN]

    def past_claim(self, measured: float) -> bool:
        """A band check's value past the band on its better side (the verdict 'exceeded')."""
        if self.band is None or self.better not in BETTER:
            return False
        return measured > self.band[1] if self.better == "higher" else measured < self.band[0]

    @property
    def control(self) -> Control | None:
        """The first control (instrument first), for views that show one."""
        first = self.instruments + self.mechanism_off
        return first[0] if first else None

    def in_claim(self, measured: float) -> bool:
        if self.band is not None:
            return self.band[0] <= measured <= self.band[1]
        return compare(cast(str, self.op), measured, cast(float, self.value))  # no band: op and value are given

    def describe(self) -> str:
        if self.band is not None:
            return f"{self.metric} in [{self.band[0]:g}, {self.band[1]:g}] {self.unit}".strip()
        of = f" of {self.of}" if self.of else ""
        return f"{self.metric} {self.op} {self.value:g} {self.unit}".strip() + of

    def to_json(self) -> dict:
        out: dict = {"suite": self.suite, "case": self.case, "metric": self.metric, "unit": self.unit}
        if self.band is not None:
            out["band"] = list(self.band)
            out["band_reason"] = self.band_reason
        else:
            out["op"], out["value"] = self.op, self.value
        if self.direction is not None:
            out["direction"] = self.direction.to_json()
        out["controls"] = [c.to_json() for c in self.controls]
        if self.conditions:
            out["conditions"] = self.conditions
        if self.reference is not None:
            out["reference"] = self.reference.to_json()
        for key in ("better", "observed", "no_instrument", "no_mechanism_off", "of", "no_exercise", "configured"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "ClaimCheck":
        """Also reads the format before controls had kinds: its one `control` was judged first
        (not held -> inconclusive), which is what an instrument control does."""
        band = d.get("band")
        direction = d.get("direction")
        controls = [Control.from_json(c) for c in d.get("controls") or []]
        for kind in CONTROL_KINDS:  # the ledger's own spelling
            raw = d.get(kind)
            controls += [Control.from_json(c, kind) for c in ([raw] if isinstance(raw, dict) else raw or [])]
        if not controls and d.get("control"):
            controls = [Control.from_json(d["control"], INSTRUMENT)]
        ref = d.get("reference")
        suite, case, metric = stored_names(d, "suite", "case", "metric")
        return cls(
            suite,
            case,
            metric,
            d.get("op"),
            d.get("value"),
            d.get("unit", ""),
            tuple(band) if band else None,
            d.get("band_reason", ""),
            Condition(direction["op"], float(direction["value"])) if direction else None,
            controls,
            dict(d.get("conditions") or {}),
            str(d.get("better") or ""),
            str(d.get("observed") or ""),
            Reference.from_json(ref) if isinstance(ref, dict) else None,
            str(d.get("no_instrument") or ""),
            str(d.get("no_mechanism_off") or ""),
            stored_names(d, "of")[0] if d.get("of") is not None else None,
            str(d.get("no_exercise") or ""),
            dict(d["configured"]) if isinstance(d.get("configured"), dict) else {},
        )


@dataclass
class Claim:
    id: str
    section: str
    text: str
    checks: list[ClaimCheck]
    not_measurable: str = ""
    differs: str = ""
    not_measured: str = ""
    figures: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "section": self.section,
            "text": self.text,
            "not_measurable": self.not_measurable,
            "differs": self.differs,
            "not_measured": self.not_measured,
            "figures": self.figures,
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, d: dict) -> "Claim":
        if not isinstance(d["id"], str):  # an edited results.json: the id keys boards and comparisons
            raise TypeError(f"a claim's id is a {type(d['id']).__name__}, not text")
        return cls(
            d["id"],
            str(d.get("section", "")),
            d.get("text", ""),
            [ClaimCheck.from_json(c) for c in d.get("checks", [])],
            d.get("not_measurable", ""),
            d.get("differs", ""),
            d.get("not_measured", ""),
            dict(d.get("figures") or {}),
        )

    @property
    def order(self) -> tuple:
        """C2 before C10 (harness.model.identifiers.id_order: ASCII digits, never raises)."""
        return identifiers.id_order(self.id)


def _op(where: str, op: Any) -> str:
    if op not in OPS:
        raise BadInput(f"{where}: {op!r} is not one of {' '.join(OPS)}")
    return op


def _parse_check(w: str, craw: Any, suites: dict[str, Suite]) -> ClaimCheck:
    cf = _Fields(w, craw, CHECK_FIELDS)
    suite, case = cf.get("suite"), cf.get("case")
    if suite not in suites:
        raise BadInput(f"{w}.suite: no suite named {suite!r}{did_you_mean(suite, suites)}")
    if case not in {x.name for x in suites[suite].cases}:
        raise BadInput(f"{w}.case: suite {suite!r} has no case {case!r}")
    metric = _metric_name(w, cf.get("metric"))
    op, value, band = _claimed(w, cf)
    better = _better(w, cf.get("better"), op)
    direction = None
    if cf.get("direction", None) is not None:
        df = _Fields(f"{w}.direction", cf.get("direction"), DIRECTION_FIELDS)
        direction = Condition(_op(f"{w}.direction.op", df.get("op")), df.get("value"))
    controls = [
        _parse_control(f"{w}.{kind}", raw, kind) for kind in CONTROL_KINDS for raw in _as_list(cf.get(kind, None))
    ]
    reasons = _missing_control_reasons(w, cf, controls)
    bounds = [("direction", direction)] if direction is not None else []
    if op is not None:
        bounds.append(("value", Condition(op, value)))
    _check_direction(w, better, bounds, controls)
    _fixed_params_declared(w, suites[suite], case, controls)
    reference = _parse_reference(w, cf.get("reference", None))
    _refuse_vacuous(w, metric, controls, reference)
    of = _denominator(w, cf.get("of", None), op, value)
    no_exercise = (cf.get("no_exercise", "") or "").strip()
    _exercise_evidence(w, op, value, [c for c in controls if c.kind == EXERCISE], no_exercise)
    configured = cf.get("configured", {})
    for k, v in configured.items():
        if not isinstance(v, (str, int, float, bool)):
            raise BadInput(
                f"{w}.configured.{k}: expected a string, number or boolean (the setting as the server "
                f"reports it), got {type(v).__name__}"
            )
    observed = cf.get("observed").strip()
    if not observed:
        raise BadInput(f"{w}.observed: empty; name the independent observation the metric comes from")
    conditions = cf.get("conditions", {})
    for k, v in conditions.items():
        if not isinstance(v, (str, int, float, bool)):
            raise BadInput(f"{w}.conditions.{k}: expected a string, number or boolean, got {type(v).__name__}")
    return ClaimCheck(
        suite,
        case,
        metric,
        op,
        value,
        cf.get("unit", ""),
        band,
        cf.get("band_reason", ""),
        direction,
        controls,
        conditions,
        better,
        observed,
        reference,
        *reasons,
        of,
        no_exercise,
        dict(configured),
    )


def _refuse_vacuous(w: str, metric: str, controls: list[Control], reference: Reference | None) -> None:
    """A control or reference that measures the checked metric itself agrees with it whatever was
    measured: 'reference agrees', 'instrument seen' and 'mechanism off' would then say nothing."""
    if reference is not None and reference.metric == metric:
        raise BadInput(
            f"{w}.reference.metric: {metric!r} is the checked metric itself, so it always agrees; name "
            f"the same number computed independently (another metric of the case)"
        )
    own = [(f"{w}.{c.kind}", c) for c in controls]  # a control's kind is its field in the ledger
    own += [(f"{w}.{STAND_IN}.instrument", c.instrument) for c in controls if c.instrument is not None]
    for where, ctl in own:
        if ctl.metric == metric:
            raise BadInput(
                f"{where}.metric: {metric!r} is the checked metric itself; a {ctl.label} control measures "
                f"another metric of the case (the condition where the effect is known, or the mechanism removed)"
            )
        if ctl.than == ctl.metric:
            raise BadInput(f"{where}.than: {ctl.metric!r} compared with itself always holds; name another metric")


def _fixed_params_declared(w: str, suite: "Suite", case: str, controls: list[Control]) -> None:
    """A stand-in's fixed strength names parameters of the case's driver, and no spec or profile
    of the suite sets them to anything else (the ledger is where they live)."""
    c = next(x for x in suite.cases if x.name == case)
    declared = driver_contract.get(c.driver, f"{w}.case").params
    for ctl in controls:
        for key, value in ctl.params.items():
            if key not in declared:
                raise BadInput(
                    f"{w}.stand_in.params.{key}: case {case!r} (driver {c.driver!r}) has no parameter "
                    f"{key!r}{did_you_mean(key, declared)}; its parameters: {', '.join(sorted(declared))}"
                )
            declared[key].check(f"{w}.stand_in.params.{key}", value)
            given = [(f"{suite._where()}: cases.{case}.params", c.params)] + [
                (f"{suite._where()}: profiles.{name}.params.{case}", prof.params.get(case, {}))
                for name, prof in suite.profiles.items()
            ]
            for where, params in given:
                if key in params:
                    raise BadInput(
                        f"{where}.{key}: fixed by the ledger ({w}: a stand-in's strength lives there, "
                        f"{key}={value!r}); remove it from the suite"
                    )


def fixed_params(claims: list["Claim"]) -> dict[tuple[str, str], dict[str, tuple[Any, str]]]:
    """(suite, case) -> {parameter: (value, claim id)}: the stand-ins' strengths the ledger fixes."""
    out: dict[tuple[str, str], dict[str, tuple[Any, str]]] = {}
    for claim in claims:
        for chk in claim.checks:
            for ctl in chk.stand_ins:
                for key, value in ctl.params.items():
                    have = out.setdefault((chk.suite, chk.case), {})
                    if key in have and have[key][0] != value:
                        raise BadInput(
                            f"claims {have[key][1]} and {claim.id} fix {chk.suite}/{chk.case}'s parameter "
                            f"{key} to {have[key][0]!r} and {value!r}; a case runs with one value"
                        )
                    have[key] = (value, claim.id)
    return out


def _parse_reference(w: str, raw: Any) -> Reference | None:
    if raw is None:
        return None
    rf = _Fields(f"{w}.reference", raw, REFERENCE_FIELDS)
    tolerance = rf.get("tolerance")
    if tolerance < 0:
        raise BadInput(
            f"{w}.reference.tolerance: {tolerance:g} is negative; give the largest difference that still agrees"
        )
    module, deps, not_code = rf.get("module", ""), rf.get("independent_of", []), (rf.get("not_code", "") or "").strip()
    if module and not_code:
        raise BadInput(f"{w}.reference: both module and not_code given; a reference is this project's code or not")
    if bool(module) != bool(deps):
        raise BadInput(
            f"{w}.reference: give module and independent_of together (the module computing the reference "
            f"and the modules computing the checked number, which it may not import)"
        )
    for name in [module, *deps]:
        if not isinstance(name, str) or (name and not MODULE_RE.fullmatch(name)):
            raise BadInput(f"{w}.reference: {str(name)[:60]!r} is not a dotted module name (harness.experiments.x.y)")
    for dep in deps if module else []:
        if dep == module or module.startswith(dep + ".") or dep.startswith(module + "."):
            raise BadInput(
                f"{w}.reference.independent_of: {dep!r} is the reference's own module {module!r} (or holds "
                f"it, or is held by it); list the modules computing the checked number, which it may not import"
            )
    if not module and not not_code:
        raise BadInput(
            f"{w}.reference: name the module computing it and independent_of (what it may not import), "
            f"or say in not_code why the reference is not this project's code"
        )
    return Reference(
        _metric_name(f"{w}.reference", rf.get("metric")), tolerance, rf.get("text"), module, tuple(deps), not_code
    )


def _exercise_evidence(w: str, op: str | None, value: float | None, exercises: list[Control], reason: str) -> None:
    """A check of an absence shows that the dangerous situation happened, or says why it cannot."""
    if not is_absence_bound(op, value):
        if exercises or reason:
            raise BadInput(f"{w}: exercised and no_exercise belong to a check of an absence (op <= or <, value 0)")
        return
    if exercises and reason:
        raise BadInput(f"{w}: both exercised and no_exercise given; keep the counter or the reason, not both")
    if not exercises and not reason:
        raise BadInput(
            f"{w}: a check of an absence ({op} 0) needs exercised: a counter showing the dangerous "
            f"situation happened in the judged run and its minimum (or no_exercise: why none can)"
        )


def _claimed(w: str, cf: "_Fields") -> tuple:
    """(op, value, band) of a check: one-sided or a band, never both."""
    band_raw, op = cf.get("band", None), cf.get("op", None)
    if (band_raw is None) == (op is None):
        raise BadInput(f"{w}: give either op + value (a one-sided claim) or band: [low, high] (a two-sided one)")
    if band_raw is None:
        return _op(f"{w}.op", op), cf.get("value"), None
    if len(band_raw) != 2:
        raise BadInput(f"{w}.band: expected [low, high]")
    band = (_finite(f"{w}.band", band_raw[0]), _finite(f"{w}.band", band_raw[1]))
    if band[0] > band[1]:
        raise BadInput(f"{w}.band: low {band[0]:g} is above high {band[1]:g}")
    if not cf.get("band_reason", ""):
        raise BadInput(f"{w}: a band needs band_reason (why it is this wide)")
    return None, None, band


def _side(op: str) -> str:
    return "higher" if op in (">", ">=") else "lower"


def _better(w: str, better: str, op: str | None) -> str:
    if better == NEITHER and op is None:
        return better
    if better not in BETTER:
        allowed = ", ".join(BETTER) + (f" (or {NEITHER} for a band)" if op is not None else f", {NEITHER}")
        raise BadInput(
            f"{w}.better: {str(better)[:20]!r} is not one of {allowed}; say which side of the claim is better"
        )
    if op is not None and _side(op) != better:
        raise BadInput(
            f"{w}.better: {better} contradicts op {op!r} (a one-sided claim's better side is its op's "
            f"side: {_side(op)})"
        )
    return better


def _missing_control_reasons(w: str, cf: "_Fields", controls: list[Control]) -> tuple[str, str]:
    """Both controls on every check, or the reason one cannot exist (never both, never neither)."""
    out = []
    for kind, key in ((INSTRUMENT, "no_instrument"), (MECHANISM_OFF, "no_mechanism_off")):
        has = any(c.kind == kind for c in controls)
        reason = (cf.get(key, "") or "").strip()
        if has and reason:
            raise BadInput(f"{w}: both {kind} and {key} given; keep the control or the reason, not both")
        if not has and not reason:
            raise BadInput(
                f"{w}: no {kind} control; add one ({CHECK_FIELDS[kind][1].split(':')[0]}) or say in "
                f"{key} why none can exist"
            )
        out.append(reason)
    return out[0], out[1]


def _check_direction(w: str, better: str, bounds: list[tuple[str, Condition]], controls: list[Control]) -> None:
    """A direction bound points to the better side, and every bound that can give a success
    verdict (a direction, a one-sided claim) lies at or past what a mechanism-off control on a
    fixed value tolerates: inside that noise, a run without the mechanism could pass it. (A
    control given as a ratio of the check's own metric, `than`, is checked when it is judged.)"""
    for where, bound in bounds:
        if better == NEITHER:
            raise BadInput(
                f"{w}.{where}: a band with no better side has no direction; drop the direction or say "
                f"which side is better"
            )
        if _side(bound.op) != better:
            raise BadInput(f"{w}.{where}: op {bound.op!r} points away from the better side ({better})")
        for c in controls:
            if c.kind != MECHANISM_OFF or c.value is None or _side(c.op) == better:
                continue
            inside = bound.value < c.value if better == "higher" else bound.value > c.value
            if inside:
                raise BadInput(
                    f"{w}.{where}: {bound.op} {bound.value:g} lies inside what the mechanism-off "
                    f"control tolerates ({c.metric} {c.op} {c.value:g}); move the bound to "
                    f"{c.value:g} or past it"
                )


def _as_list(raw: Any) -> list:
    if raw is None:
        return []
    return raw if isinstance(raw, list) else [raw]


def _parse_control(where: str, raw: Any, kind: str) -> Control:
    kf = _Fields(where, raw, STAND_IN_FIELDS if kind == STAND_IN else CONTROL_FIELDS)
    value_c, than = kf.get("value", None), kf.get("than", None)
    if (value_c is None) == (than is None):
        raise BadInput(f"{where}: give either value (a number) or than (another metric of the case)")
    control = Control(
        _metric_name(where, kf.get("metric")),
        _op(f"{where}.op", kf.get("op")),
        kf.get("text"),
        value_c,
        than,
        kf.get("factor", 1.0),
        kind,
    )
    if kind != STAND_IN:
        return control
    params, no_params = kf.get("params", {}), (kf.get("no_params", "") or "").strip()
    own, no_own = kf.get("instrument", None), (kf.get("no_instrument", "") or "").strip()
    for key, v in params.items():
        if not isinstance(v, (str, int, float, bool)) or not PARAM_NAME_RE.fullmatch(str(key)):
            raise BadInput(f"{where}.params.{str(key)[:40]}: give a case parameter's name and a plain value")
    if params and no_params or own is not None and no_own:
        raise BadInput(f"{where}: give params or no_params, instrument or no_instrument, not both of a pair")
    if not params and not no_params:
        raise BadInput(
            f"{where}: a stand-in's strength lives in the ledger: give params ({{case parameter: value}}) "
            f"or say in no_params why it has none"
        )
    if own is None and not no_own:
        raise BadInput(
            f"{where}: a stand-in needs its own instrument (showing it does what it is said to do) or "
            f"no_instrument with the reason"
        )
    control.params, control.no_params, control.no_instrument = dict(params), no_params, no_own
    if own is not None:
        control.instrument = _parse_control(f"{where}.instrument", own, INSTRUMENT)
    return control


def load_claims(directory: Path = SUITES_DIR, suites: dict[str, Suite] | None = None) -> list[Claim]:
    """The ledger in claim order (C1, C2, ... C22), checked against the suites (those of the
    folder unless given): kept while claims.yaml and the suites' case names are unchanged,
    each caller gets its own copy (harness.base.file_cache)."""
    path = directory / CLAIMS_FILE
    if not path.exists():
        return []
    return load_claims_file(path, suites if suites is not None else load_all_suites(directory))


def load_claims_file(path: Path, suites: dict[str, Suite] | None = None) -> list[Claim]:
    """One ledger file (the seed's, or a claim pack's), checked against the suites (those of
    harness/experiments/ unless given)."""
    suites = suites if suites is not None else load_all_suites()
    names = tuple(sorted((n, tuple(c.name for c in s.cases)) for n, s in suites.items()))
    return file_cache.cached(
        ("claims", str(path.resolve()), names), [path], lambda: _parse_claims(path, suites), MAX_SPEC_BYTES
    )


def _parse_claims(path: Path, suites: dict[str, Suite]) -> list[Claim]:
    data = load_yaml(path, "claims ledger")
    if not isinstance(data, dict) or set(data) != {"claims"} or not isinstance(data["claims"], list):
        raise BadInput(f"{path}: expected one top-level field 'claims' holding a list")
    claims, seen = [], set()
    for i, raw in enumerate(data["claims"]):
        w = f"{path}: claims[{i}]"
        f = _Fields(w, raw, LEDGER_FIELDS)
        identifiers.CLAIM_ID.check(f"{w}.id", f.get("id"))  # the rule results.json is read back by
        checks = [_parse_check(f"{w}.checks[{j}]", craw, suites) for j, craw in enumerate(f.get("checks", []))]
        figures = f.get("figures", {})
        for k, v in figures.items():
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                _finite(f"{w}.figures.{k}", x)
        claim = Claim(
            f.get("id"),
            f.get("section"),
            f.get("text"),
            checks,
            f.get("not_measurable", ""),
            f.get("differs", ""),
            f.get("not_measured", ""),
            figures,
        )
        if claim.id in seen:
            raise BadInput(f"{w}.id: {claim.id!r} is listed twice")
        if not checks and not (claim.not_measurable or claim.not_measured):
            raise BadInput(f"{w}: claim {claim.id} needs checks, or a not_measurable or not_measured reason")
        seen.add(claim.id)
        claims.append(claim)
    fixed_params(claims)  # two stand-ins fixing one parameter differently: refused here
    return sorted(claims, key=lambda c: c.order)


def claim_figure(claims: list[Claim], claim_id: str, name: str):
    """A claimed number (or list of numbers) from the ledger's `figures`; None when absent."""
    for c in claims:
        if c.id == claim_id:
            return c.figures.get(name)
    return None


def validate_paths(paths: list[str], directory: Path = SUITES_DIR) -> list[str]:
    """Validate spec files (every suite of harness/experiments/ and the ledger when none are given); returns OK lines."""
    if paths:
        return [f"{p}: ok ({load_suite_file(Path(p)).name})" for p in paths]
    suites = load_all_suites(directory)
    lines = [f"{s.path}: ok ({s.name})" for s in suites.values()]
    claims = load_claims(directory, suites)
    lines.append(f"{directory / CLAIMS_FILE}: ok ({len(claims)} claims)")
    return lines
