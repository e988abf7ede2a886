"""From records to verdicts: aggregates over repetitions, threshold verdicts, the claims
ledger with its controls, and the exit code. Pure functions over a RunData; nothing here
runs anything, and nothing here formats: numbers and enum verdicts only (the report,
the summary and JUnit format them).

A claim check counts only when its control (the same workload with the mechanism off,
measured in the same case) differs as the ledger says; otherwise it is inconclusive.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from harness import stats
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_THRESHOLD
from harness.results import RunData
from harness.spec import Claim, ClaimCheck, Threshold, compare

NOISE_LIMIT = 0.10  # spread over 10% of the median flags a metric as noisy


class Verdict(str, enum.Enum):
    """A threshold's verdict."""

    PASS = "pass"
    FAIL = "fail"
    MISSING = "missing"  # not measured: counts as a failure
    SKIPPED = "skipped"  # the case could not run here, with the reason

    def __str__(self) -> str:
        return self.value


class Outcome(str, enum.Enum):
    """A claim check's (and a claim's) verdict in the ledger."""

    REPRODUCED = "reproduced"
    DIRECTION = "direction reproduced, magnitude differs"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"
    NOT_COMPARABLE = "not comparable here"
    NOT_MEASURED = "not measured"
    NOT_MEASURABLE = "not measurable here"
    NOT_RUN = "not run"

    def __str__(self) -> str:
        return self.value


# A claim with several checks takes the first of these that any check has.
CLAIM_PRECEDENCE = (Outcome.NOT_REPRODUCED, Outcome.DIRECTION, Outcome.INCONCLUSIVE, Outcome.NOT_MEASURED,
                    Outcome.NOT_COMPARABLE, Outcome.REPRODUCED)


@dataclass
class MetricSummary:
    suite: str
    case: str
    metric: str
    unit: str
    better: str | None
    values: list[float]
    median: float
    min: float
    max: float
    noisy: bool
    spread: float
    note: str = ""


@dataclass
class ThresholdVerdict:
    suite: str
    threshold: Threshold
    verdict: Verdict
    summary: MetricSummary | None = None
    detail: str = ""  # why missing or skipped
    claim_id: str = ""  # the ledger claim that checks the same metric, if any
    claimed: ClaimCheck | None = None

    @property
    def case(self) -> str:
        return self.threshold.case

    @property
    def metric(self) -> str:
        return self.threshold.metric


@dataclass
class CheckVerdict:
    check: ClaimCheck
    outcome: Outcome
    summary: MetricSummary | None = None
    control: MetricSummary | None = None  # the control's metric
    control_reference: float | None = None  # what the control was compared with
    control_held: bool | None = None  # None: no control or not measured
    reason: str = ""


@dataclass
class ClaimVerdict:
    claim: Claim
    outcome: Outcome
    checks: list[CheckVerdict] = field(default_factory=list)
    note: str = ""

    @property
    def id(self) -> str:
        return self.claim.id


@dataclass
class CaseStatus:
    suite: str
    case: str
    statuses: dict[str, int]
    reasons: list[str]

    @property
    def all_skipped(self) -> bool:
        return set(self.statuses) == {"skipped"}


@dataclass
class Analysis:
    metrics: list[MetricSummary] = field(default_factory=list)
    thresholds: list[ThresholdVerdict] = field(default_factory=list)
    claims: list[ClaimVerdict] = field(default_factory=list)
    cases: list[CaseStatus] = field(default_factory=list)
    exit_code: int = EXIT_OK
    exit_reason: str = ""
    _index: dict = field(default_factory=dict, repr=False)

    def metric(self, suite: str, case: str, name: str) -> MetricSummary | None:
        if not self._index:
            self._index.update({(m.suite, m.case, m.metric): m for m in self.metrics})
        return self._index.get((suite, case, name))

    def case_status(self, suite: str, case: str) -> CaseStatus | None:
        for c in self.cases:
            if (c.suite, c.case) == (suite, case):
                return c
        return None

    def counts(self) -> dict[Verdict, int]:
        return {v: sum(t.verdict is v for t in self.thresholds) for v in Verdict}


def summarize_metrics(run: RunData) -> list[MetricSummary]:
    grouped: dict[tuple, list] = {}
    for r in run.records:
        if r.status != "ok":
            continue
        for name, m in r.metrics.items():
            if m.value is None:
                continue
            grouped.setdefault((r.suite, r.case, name), []).append(m)
    out = []
    for (suite, case, name), ms in grouped.items():
        vals = [m.value for m in ms]
        out.append(MetricSummary(suite, case, name, ms[0].unit, ms[0].better, vals,
                                 stats.median(vals), min(vals), max(vals),
                                 stats.is_noisy(vals, NOISE_LIMIT), stats.relative_spread(vals), ms[0].note))
    return out


def case_statuses(run: RunData) -> list[CaseStatus]:
    out: dict[tuple, CaseStatus] = {}
    for r in run.records:
        cs = out.setdefault((r.suite, r.case), CaseStatus(r.suite, r.case, {}, []))
        cs.statuses[r.status] = cs.statuses.get(r.status, 0) + 1
        if r.reason and r.reason not in cs.reasons:
            cs.reasons.append(r.reason)
    return list(out.values())


def _claimed_for(run: RunData, suite: str, case: str, metric: str) -> tuple[str, ClaimCheck | None]:
    for c in run.claims:
        for chk in c.checks:
            if (chk.suite, chk.case, chk.metric) == (suite, case, metric):
                return c.id, chk
    return "", None


def threshold_verdicts(run: RunData, a: Analysis) -> list[ThresholdVerdict]:
    out = []
    for suite_name, srun in run.suites.items():
        for t in srun.thresholds:
            claim_id, claimed = _claimed_for(run, suite_name, t.case, t.metric)
            m = a.metric(suite_name, t.case, t.metric)
            cs = a.case_status(suite_name, t.case)
            if m is None:
                if cs and cs.all_skipped:
                    out.append(ThresholdVerdict(suite_name, t, Verdict.SKIPPED, None, "; ".join(cs.reasons),
                                                claim_id, claimed))
                else:
                    why = "; ".join(cs.reasons) if cs else "the case did not run"
                    out.append(ThresholdVerdict(suite_name, t, Verdict.MISSING, None,
                                                f"not measured: {why or 'no such metric in the results'}",
                                                claim_id, claimed))
                continue
            verdict = Verdict.PASS if t.holds(m.median) else Verdict.FAIL
            out.append(ThresholdVerdict(suite_name, t, verdict, m, "", claim_id, claimed))
    return out


def conditions_differ(check: ClaimCheck, profile_conditions: dict) -> list[str]:
    """The claim's conditions this profile does not meet, as 'name: here X, claim Y'."""
    out = []
    for k, v in check.conditions.items():
        here = profile_conditions.get(k)
        if here is None or str(here) != str(v):
            out.append(f"{k}: here {here if here is not None else 'not stated'}, claim {v}")
    return out


def check_verdict(run: RunData, a: Analysis, chk: ClaimCheck) -> CheckVerdict:
    srun = run.suites.get(chk.suite)
    if srun is None:
        return CheckVerdict(chk, Outcome.NOT_RUN, reason=f"suite {chk.suite} was not part of this run")
    if chk.case not in srun.case_names():
        return CheckVerdict(chk, Outcome.NOT_RUN, reason=f"case {chk.case} was not part of this run")
    m = a.metric(chk.suite, chk.case, chk.metric)
    differ = conditions_differ(chk, srun.conditions)
    cv = CheckVerdict(chk, Outcome.NOT_MEASURED, m)
    if chk.control is not None:
        ctl = chk.control
        cv.control = a.metric(chk.suite, chk.case, ctl.metric)
        if ctl.than is not None:
            ref = a.metric(chk.suite, chk.case, ctl.than)
            cv.control_reference = None if ref is None else ref.median * ctl.factor
        else:
            cv.control_reference = ctl.value
        if cv.control is not None and cv.control_reference is not None:
            cv.control_held = compare(ctl.op, cv.control.median, cv.control_reference)
    if differ:
        cv.outcome = Outcome.NOT_COMPARABLE
        cv.reason = "conditions differ from the claim's: " + "; ".join(differ)
        return cv
    if m is None:
        cs = a.case_status(chk.suite, chk.case)
        cv.reason = f"{chk.case}: " + ("; ".join(cs.reasons) if cs and cs.reasons else f"no metric {chk.metric}")
        return cv
    if chk.control is None:
        cv.outcome = Outcome.INCONCLUSIVE
        cv.reason = "no control was run for this check, so it cannot show that it could have come out the other way"
        return cv
    if cv.control_held is not True:
        cv.outcome = Outcome.INCONCLUSIVE
        if cv.control_held is None:
            cv.reason = f"the control ({chk.control.text}) was not measured: no metric {chk.control.metric}" + (
                f" or {chk.control.than}" if chk.control.than else "")
        else:
            cv.reason = (f"the control ({chk.control.text}) did not differ as expected: "
                         f"{chk.control.describe()} does not hold")
        return cv
    if chk.in_claim(m.median):
        cv.outcome = Outcome.REPRODUCED
    elif chk.direction is not None and chk.direction.holds(m.median):
        cv.outcome = Outcome.DIRECTION
    else:
        cv.outcome = Outcome.NOT_REPRODUCED
    return cv


def claim_verdicts(run: RunData, a: Analysis) -> list[ClaimVerdict]:
    out = []
    for c in run.claims:
        if c.not_measured:
            out.append(ClaimVerdict(c, Outcome.NOT_MEASURED, [], c.not_measured))
            continue
        if c.not_measurable:
            out.append(ClaimVerdict(c, Outcome.NOT_MEASURABLE, [], c.not_measurable))
            continue
        checks = [check_verdict(run, a, chk) for chk in c.checks]
        ran = {cv.outcome for cv in checks} - {Outcome.NOT_RUN}
        if not checks:
            outcome = Outcome.NOT_MEASURED
        elif not ran:
            outcome = Outcome.NOT_RUN
        else:
            outcome = next(o for o in CLAIM_PRECEDENCE if o in ran)
        out.append(ClaimVerdict(c, outcome, checks, ""))
    return out


def analyze(run: RunData, *, allow_skipped: bool = False) -> Analysis:
    a = Analysis()
    a.metrics = summarize_metrics(run)
    a.cases = case_statuses(run)
    a.thresholds = threshold_verdicts(run, a)
    a.claims = claim_verdicts(run, a)
    broken = [c for c in a.cases if c.statuses.get("failed") or c.statuses.get("invalid")]
    strict = {name for name, s in run.suites.items() if s.skipped_fails}
    skipped = [c for c in a.cases if c.suite in strict and c.statuses.get("skipped")]
    failing = [t for t in a.thresholds if t.verdict in (Verdict.FAIL, Verdict.MISSING)]
    if broken:
        a.exit_code = EXIT_ENVIRONMENT
        a.exit_reason = "failed or invalid runs: " + ", ".join(f"{c.suite}/{c.case}" for c in broken)
    elif skipped and not allow_skipped:
        a.exit_code = EXIT_ENVIRONMENT
        a.exit_reason = ("skipped cases fail this profile (give --allow-skipped to accept them): "
                         + "; ".join(f"{c.suite}/{c.case} ({'; '.join(c.reasons)})" for c in skipped))
    elif failing:
        a.exit_code = EXIT_THRESHOLD
        a.exit_reason = f"{len(failing)} threshold(s) not met: " + ", ".join(
            f"{t.suite}/{t.case} {t.metric} ({t.verdict})" for t in failing[:5])
    if run.interrupted and a.exit_code == EXIT_OK:
        a.exit_reason = "the run was interrupted: " + str(run.interrupted.get("case", ""))
    return a
