"""Suite specs (harness/experiments/<suite>/suite.yaml): strict validation, the typed objects
that the runner stores with a run and the analysis reads back (each serialises and loads
itself), and the loader of a folder of suites. The threshold test (`compare`, `OPS`,
`is_absence_bound`) is shared with the claims ledger (harness/model/ledger.py); YAML is read
by harness/model/yaml_fields.py.

Every field is checked; an unknown field is an error naming the file, the field and the
fix, so that a typo never passes silently. Names that become paths (suite, case, profile)
are checked when the spec is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from harness.base import file_cache
from harness.base.errors import BadInput, did_you_mean
from harness.base.paths import SUITES_DIR
from harness.model import driver_contract, identifiers
from harness.model.yaml_fields import MAX_SPEC_BYTES, Fields, finite, load_yaml, stored_names, stored_number

OPS = ("<", "<=", ">", ">=")
BAND_OP = "in"  # a threshold given as band: [low, high]
CLAIMS_FILE = "claims.yaml"
SUITE_FILE = "suite.yaml"  # a suite folder's spec
NAME_RULE = identifiers.NAME_WORDS  # suite, case and profile names (harness.model.identifiers)


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
            stored_number(where, d["value"]),
            d.get("unit", ""),
            d.get("reason", ""),
            None if high is None else stored_number(where, high),
            of,
        )


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
        t = _threshold(tw, Fields(tw, traw, THRESHOLD_FIELDS))
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


def _threshold(tw: str, tf: Fields) -> Threshold:
    band = tf.get("band", None)
    case, metric = tf.get("case"), metric_name(tw, tf.get("metric"))
    unit, reason = tf.get("unit", ""), tf.get("reason", "")
    if band is not None:
        if tf.get("op", None) is not None or tf.get("value", None) is not None:
            raise BadInput(f"{tw}: give either op + value (a bound) or band: [low, high] (a point), not both")
        if len(band) != 2:
            raise BadInput(f"{tw}.band: expected [low, high]")
        low, high = finite(f"{tw}.band", band[0]), finite(f"{tw}.band", band[1])
        if low > high:
            raise BadInput(f"{tw}.band: low {low:g} is above high {high:g}")
        if tf.get("of", None) is not None:
            raise BadInput(f"{tw}.of: only a bound of 0 from above (op <= or <, value 0) names a denominator")
        return Threshold(case, metric, BAND_OP, low, unit, reason, high)
    op = tf.get("op")
    if op not in OPS:
        raise BadInput(f"{tw}.op: {op!r} is not one of {' '.join(OPS)}")
    value = tf.get("value")
    return Threshold(case, metric, op, value, unit, reason, None, denominator(tw, tf.get("of", None), op, value))


def denominator(where: str, of: str | None, op: str | None, value: float | None) -> str | None:
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
    return metric_name(f"{where}.of", of)


def metric_name(where: str, name: str) -> str:
    """A metric name as a spec or the ledger gives it (harness.model.identifiers.METRIC)."""
    return identifiers.METRIC.check(where, name)


def parse_suite(data: Any, path: Path | None = None) -> Suite:
    where = str(path) if path else "suite"
    f = Fields(where, data, SUITE_FIELDS)
    name = check_name(f"{where}.name", "suite", f.get("name"))
    target = f.get("target", "none")
    if target not in driver_contract.TARGET_KINDS:
        raise BadInput(f"{where}.target: {target!r} is not one of {', '.join(driver_contract.TARGET_KINDS)}")
    claim_f = Fields(f"{where}.claim", f.get("claim"), CLAIM_FIELDS)
    ids = claim_f.get("ids", [])
    for i, cid in enumerate(ids):
        identifiers.CLAIM_ID.check(f"{where}.claim.ids[{i}]", cid)
    claim = SuiteClaim(claim_f.get("section"), claim_f.get("text"), ids, claim_f.get("differs", ""))
    cases: list[Case] = []
    for i, raw in enumerate(f.get("cases")):
        cf = Fields(f"{where}.cases[{i}]", raw, CASE_FIELDS)
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
        pf = Fields(pw, praw, PROFILE_FIELDS)
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


def _case_repetitions(pw: str, pf: Fields, case_names: list[str], reps: int) -> dict[str, int]:
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
