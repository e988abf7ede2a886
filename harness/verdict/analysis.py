"""From records to verdicts: aggregates over repetitions, threshold verdicts, the claims
ledger with its controls, and the exit code. Pure functions over a RunData; nothing here
runs anything, and nothing here formats: numbers and enum verdicts only (the report,
the summary and JUnit format them).

A claim check is judged with its controls (docs/cli.md, "Reading a verdict"): an instrument control
that does not see its known effect, or a computed number that disagrees with its independent
reference (or whose reference was not measured), makes the check inconclusive; with the
measurement trusted, a claimed effect that is absent or opposite is `not reproduced`; an
effect that is there but does not go away with the mechanism off, or that a cheaper stand-in
gives as well, is `not attributable`; one that goes away is `reproduced`, `exceeded` (past a
claimed band on its better side) or `direction reproduced, magnitude differs`. A control that
cannot exist is named with its reason. Conditions the claim needs are compared with what the
run measured (harness.model.conditions).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import cast

from harness.base import import_graph, machine_load, stats
from harness.base.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_THRESHOLD
from harness.base.safe_text import NAME, TEXT, for_terminal
from harness.model import conditions
from harness.model.ledger import EXERCISE, INSTRUMENT, MECHANISM_OFF, STAND_IN, Claim, ClaimCheck, Control, Reference
from harness.model.spec import Threshold, compare
from harness.model.stored_run import RunData

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
    EXCEEDED = "exceeded"  # past a claimed band on its better side: counted with reproduced
    DIRECTION = "direction reproduced, magnitude differs"
    NOT_REPRODUCED = "not reproduced"
    NOT_ATTRIBUTABLE = "not attributable"
    INCONCLUSIVE = "inconclusive"
    NOT_COMPARABLE = "not comparable here"
    NOT_MEASURED = "not measured"
    NOT_MEASURABLE = "not measurable here"
    NOT_RUN = "not run"

    def __str__(self) -> str:
        return self.value


# A claim with several checks takes the first of these that any check has.
CLAIM_PRECEDENCE = (
    Outcome.NOT_REPRODUCED,
    Outcome.NOT_ATTRIBUTABLE,
    Outcome.DIRECTION,
    Outcome.INCONCLUSIVE,
    Outcome.NOT_MEASURED,
    Outcome.NOT_COMPARABLE,
    Outcome.REPRODUCED,
    Outcome.EXCEEDED,
)
# the verdicts that say the claim holds: a claim's verdict is `reproduced` when its checks are
# reproduced or exceeded (CLAIM_PRECEDENCE), `exceeded` only when every one is
HOLDS = (Outcome.REPRODUCED, Outcome.EXCEEDED)


@dataclass
class MetricSummary:
    """One metric of one case over the values it pools: a run's repetitions, or (a pooled
    baseline, harness.verdict.baseline) the per-run medians of `runs` runs. The one summary
    that analysis, the report and comparison read; `of` computes it."""

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
    runs: int = 1  # how many runs the values come from

    @classmethod
    def of(
        cls,
        suite: str,
        case: str,
        metric: str,
        unit: str,
        better: str | None,
        values: list[float],
        *,
        note: str = "",
        runs: int = 1,
    ) -> "MetricSummary":
        """The summary of `values`: median, range, spread and whether it is noisy."""
        values = list(values)
        return cls(
            suite,
            case,
            metric,
            unit,
            better,
            values,
            stats.median(values),
            min(values),
            max(values),
            stats.is_noisy(values, NOISE_LIMIT),
            stats.relative_spread(values),
            note,
            runs,
        )

    @property
    def cv(self) -> float:
        """Coefficient of variation (sample stdev / |mean|); 0 for one value."""
        return stats.coefficient_of_variation(self.values)


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
class ControlResult:
    """One control of a check, as measured: its metric, what it was compared with, whether it held."""

    control: Control
    summary: MetricSummary | None = None
    reference: float | None = None  # what the control's metric was compared with
    held: bool | None = None  # None: not measured

    @property
    def kind(self) -> str:
        return self.control.kind

    def describe(self) -> str:
        """'instrument (text): 12 vs 4.5, held' for a reason line."""
        if self.held is None:
            return f"{self.control.label} control ({self.control.text}): not measured"
        return (
            f"{self.control.label} control ({self.control.text}): {self.control.describe()} is "
            # held is set only with a summary (_control_result)
            f"{_num(cast(MetricSummary, self.summary).median)} vs {_num(self.reference)}, "
            + ("held" if self.held else "did not hold")
        )


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


@dataclass
class ReferenceResult:
    """A check's independent cross-check as measured: the reference's value and whether it agreed."""

    reference: Reference
    summary: MetricSummary | None = None
    agrees: bool | None = None  # None: the reference was not measured

    def describe(self) -> str:
        ref = self.reference
        if self.agrees is None:
            return f"reference ({ref.text}): {ref.metric} not measured"
        return (
            # agrees is set only with a summary (_reference_result)
            f"reference ({ref.text}): {ref.metric} is {_num(cast(MetricSummary, self.summary).median)}, "
            + ("agrees within" if self.agrees else "differs by more than")
            + f" {ref.tolerance:g}"
        )


@dataclass
class CheckVerdict:
    check: ClaimCheck
    outcome: Outcome
    summary: MetricSummary | None = None
    controls: list[ControlResult] = field(default_factory=list)
    reason: str = ""
    facts: dict = field(default_factory=dict)  # the measured conditions the check was compared with
    reference: ReferenceResult | None = None
    doubts: list[str] = field(default_factory=list)  # evidence that failed: each makes the check inconclusive

    @property
    def control(self) -> MetricSummary | None:
        return self.controls[0].summary if self.controls else None

    @property
    def control_held(self) -> bool | None:
        """True when every control held, False when one did not, None when one was not measured."""
        if not self.controls or any(r.held is None for r in self.controls):
            return None
        return all(r.held for r in self.controls)


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
        out.append(
            MetricSummary.of(suite, case, name, ms[0].unit, ms[0].better, [m.value for m in ms], note=ms[0].note)
        )
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
                    out.append(
                        ThresholdVerdict(suite_name, t, Verdict.SKIPPED, None, "; ".join(cs.reasons), claim_id, claimed)
                    )
                else:
                    why = "; ".join(cs.reasons) if cs else "the case did not run"
                    out.append(
                        ThresholdVerdict(
                            suite_name,
                            t,
                            Verdict.MISSING,
                            None,
                            f"not measured: {why or 'no such metric in the results'}",
                            claim_id,
                            claimed,
                        )
                    )
                continue
            d = a.metric(suite_name, t.case, t.of) if t.of else None
            if t.of and (d is None or not d.median > 0):
                out.append(
                    ThresholdVerdict(
                        suite_name,
                        t,
                        Verdict.MISSING,
                        m,
                        f"{for_terminal(t.metric, NAME)} counts out of nothing: "
                        f"{for_terminal(t.of, NAME)} is "
                        + ("not measured" if d is None else _num(d.median))
                        + "; 0 of 0 is no evidence",
                        claim_id,
                        claimed,
                    )
                )
                continue
            verdict = Verdict.PASS if t.holds(m.median) else Verdict.FAIL
            # a failure on a loaded machine says so (issue 53); the verdict stays what was measured
            loaded = (
                ""
                if verdict is Verdict.PASS
                else machine_load.note([r.machine_load for r in run.ok_records(suite_name, t.case)])
            )
            out.append(ThresholdVerdict(suite_name, t, verdict, m, loaded, claim_id, claimed))
    return out


def _control_result(a: Analysis, chk: ClaimCheck, ctl: Control) -> ControlResult:
    r = ControlResult(ctl, a.metric(chk.suite, chk.case, ctl.metric))
    if ctl.than is not None:
        ref = a.metric(chk.suite, chk.case, ctl.than)
        r.reference = None if ref is None else ref.median * ctl.factor
    else:
        r.reference = ctl.value
    if r.summary is not None and r.reference is not None:
        r.held = compare(ctl.op, r.summary.median, r.reference)
    return r


def _effect(chk: ClaimCheck, measured: float) -> Outcome:
    if chk.in_claim(measured):
        return Outcome.REPRODUCED
    if chk.past_claim(measured):
        return Outcome.EXCEEDED
    if chk.direction is not None and chk.direction.holds(measured):
        return Outcome.DIRECTION
    return Outcome.NOT_REPRODUCED


def _reference_result(a: Analysis, chk: ClaimCheck, measured: float) -> ReferenceResult | None:
    if chk.reference is None:
        return None
    r = ReferenceResult(chk.reference, a.metric(chk.suite, chk.case, chk.reference.metric))
    if r.summary is not None:
        r.agrees = chk.reference.agrees(measured, r.summary.median)
    return r


def _untrusted(cv: CheckVerdict) -> str:
    """Why the measurement cannot be trusted ('' when it can): a blind instrument, a reference
    that disagrees, was not measured or shares code with what it checks, a check of an absence
    whose dangerous situation did not happen, and what `_evidence` found."""
    blind = [r for r in cv.controls if r.kind == INSTRUMENT and r.held is not True]
    why = ["the instrument cannot be trusted: " + "; ".join(r.describe() for r in blind)] if blind else []
    idle = [r for r in cv.controls if r.kind == EXERCISE and r.held is not True]
    if idle:
        why.append(
            "the dangerous situation did not occur in the judged run, so an absence proves nothing: "
            + "; ".join(r.describe() for r in idle)
        )
    if cv.reference is not None and cv.reference.agrees is not True:
        why.append(
            "the computed number "
            + ("disagrees with" if cv.reference.agrees is False else "has no")
            + " independent reference: "
            + cv.reference.describe()
        )
    return "; ".join(why + cv.doubts)


def _judge(cv: CheckVerdict) -> None:
    """The verdict rule, once the metric is measured and the conditions match."""
    chk = cv.check
    m = cast(MetricSummary, cv.summary)  # check_verdict judges only a measured metric
    untrusted = _untrusted(cv)
    if untrusted:
        cv.outcome = Outcome.INCONCLUSIVE
        cv.reason = f"{untrusted}; measured {_num(m.median)} {chk.unit}".rstrip()
        return
    instruments = [r for r in cv.controls if r.kind in (INSTRUMENT, EXERCISE)]
    seen = "; ".join(r.describe() for r in instruments) or (
        f"no instrument control ({chk.no_instrument})" if chk.no_instrument else "no instrument control"
    )
    effect = _effect(chk, m.median)
    if effect is Outcome.NOT_REPRODUCED:
        cv.outcome = Outcome.NOT_REPRODUCED
        cv.reason = f"measured {_num(m.median)} {chk.unit}, the claim needs {chk.describe()}; {seen}"
        return
    others = [r for r in cv.controls if r.kind in (MECHANISM_OFF, STAND_IN)]
    unsure = [r for r in others if r.held is None]
    failed = [r for r in others if r.held is False]
    if failed:
        cv.outcome = Outcome.NOT_ATTRIBUTABLE
        cv.reason = "the effect is there just as much without the mechanism or with a cheaper stand-in: " + "; ".join(
            r.describe() for r in failed
        )
    elif unsure:
        cv.outcome = Outcome.INCONCLUSIVE
        cv.reason = "the effect is there, but what it comes from was not measured: " + "; ".join(
            r.describe() for r in unsure
        )
    else:
        cv.outcome = effect
        parts = [r.describe() for r in cv.controls]
        if chk.no_mechanism_off:
            parts.append(f"no mechanism-off control ({chk.no_mechanism_off})")
        if cv.reference is not None:
            parts.append(cv.reference.describe())
        cv.reason = "; ".join(parts)


def absent_why(run: RunData, suite: str, case: str, metric: str) -> str:
    """Why the case's records have no `metric`, where the case said so (its details'
    absent_metrics: metric -> one line); '' where none did. Read from a stored file: bounded."""
    for r in run.ok_records(suite, case):
        said = r.details.get("absent_metrics") if isinstance(r.details, dict) else None
        why = said.get(metric) if isinstance(said, dict) else None
        if isinstance(why, str) and why:
            return for_terminal(why, TEXT)
    return ""


def check_verdict(run: RunData, a: Analysis, chk: ClaimCheck, facts_of_run: dict | None = None) -> CheckVerdict:
    srun = run.suites.get(chk.suite)
    if srun is None or chk.case not in srun.case_names():
        what = f"suite {chk.suite}" if srun is None else f"case {chk.case}"
        return CheckVerdict(
            chk,
            Outcome.NOT_RUN,
            controls=[ControlResult(c) for c in chk.controls],
            reason=f"{what} was not part of this run",
        )
    m = a.metric(chk.suite, chk.case, chk.metric)
    facts = conditions.case_facts(
        run.ok_records(chk.suite, chk.case) or [r for r in run.records if (r.suite, r.case) == (chk.suite, chk.case)],
        facts_of_run if facts_of_run is not None else conditions.run_facts(run.manifest),
    )
    cv = CheckVerdict(
        chk,
        Outcome.NOT_MEASURED,
        m,
        [_control_result(a, chk, c) for c in chk.controls],
        facts={k: facts.get(k) for k in chk.conditions},
    )
    differ = conditions.differ(chk.conditions, facts)
    if differ:
        cv.outcome = Outcome.NOT_COMPARABLE
        cv.reason = "what the run measured differs from what the claim needs: " + "; ".join(differ)
        return cv
    if m is None:
        cs = a.case_status(chk.suite, chk.case)
        why = absent_why(run, chk.suite, chk.case, chk.metric)
        cv.reason = f"{chk.case}: " + (
            "; ".join(cs.reasons) if cs and cs.reasons else f"no metric {chk.metric}" + (f": {why}" if why else "")
        )
        return cv
    if not chk.controls:
        cv.outcome = Outcome.INCONCLUSIVE
        cv.reason = "no control was run for this check, so it cannot show that it could have come out the other way"
        return cv
    cv.reference = _reference_result(a, chk, m.median)
    cv.controls += [_control_result(a, chk, own) for own in _stand_in_instruments(chk)]
    cv.doubts = _evidence(run, a, chk, facts)
    _judge(cv)
    return cv


def _stand_in_instruments(chk: ClaimCheck) -> list[Control]:
    """Each stand-in's own instrument, as an instrument control of the check."""
    return [
        replace(s.instrument, text=f"the stand-in's own instrument: {s.instrument.text}")
        for s in chk.stand_ins
        if s.instrument is not None
    ]


def _same_setting(need, have) -> bool:
    """A setting read back from a server against what the ledger needs: numbers as numbers,
    text exactly (case aside)."""
    if isinstance(have, conditions.Varied) or have is None:
        return False
    n, h = conditions.as_number(need), conditions.as_number(have)
    if n is not None and h is not None and not isinstance(need, bool) and not isinstance(have, bool):
        return n == h
    return str(need).strip().lower() == str(have).strip().lower()


def _evidence(run: RunData, a: Analysis, chk: ClaimCheck, facts: dict) -> list[str]:
    """Why the check's evidence cannot be trusted, beyond its instruments (issue 52): a count
    out of nothing, a server configured otherwise than the check depends on, a stand-in run
    with another strength than the ledger fixes, a reference that imports what it checks."""
    out = []
    if chk.of:
        d = a.metric(chk.suite, chk.case, chk.of)
        if d is None or not d.median > 0:
            out.append(
                f"the count is out of nothing: {chk.of} (what {chk.metric} is out of) is "
                + ("not measured" if d is None else f"{_num(d.median)}")
                + "; 0 of 0 is no evidence"
            )
    for key, need in chk.configured.items():
        have = facts.get(key)
        if not _same_setting(need, have):
            out.append(
                f"the server was not configured as the check needs: {key} read back from the server is "
                + ("not recorded" if have is None else f"{for_terminal(str(have), TEXT)}")
                + f", needed {need}"
            )
    for s in chk.stand_ins:
        for key, need in s.params.items():
            have = facts.get(key)
            if not _same_setting(need, have):
                out.append(
                    f"the stand-in ({s.text}) ran with {key}="
                    + ("(not recorded)" if have is None else for_terminal(str(have), TEXT))
                    + f", the ledger fixes {key}={need}"
                )
    ref = chk.reference
    if ref is not None and ref.module:  # a ledger that names the module (results schema 3 on): the run recorded it
        recorded = run.manifest.get("references")
        entry = recorded.get(ref.module) if isinstance(recorded, dict) else None
        if not isinstance(entry, dict):
            out.append(
                f"the reference's independence was not checked by the run: {ref.module} is not in its "
                f"manifest's record of what each reference imports"
            )
        elif entry.get("missing"):
            out.append(f"the reference module {ref.module} is not in the code the run executed")
        else:
            reached = [
                m
                for m in entry.get("reaches") or []
                if isinstance(m, str) and (m in ref.independent_of or m == import_graph.DYNAMIC)
            ]
            if reached:
                out.append(
                    f"the reference is not independent: {ref.module} imports {', '.join(reached)}, which "
                    f"computes the number it checks (or may: an import by a name computed at run time)"
                )
    return out


def claim_verdicts(run: RunData, a: Analysis) -> list[ClaimVerdict]:
    out = []
    facts_of_run = conditions.run_facts(run.manifest)
    for c in run.claims:
        if c.not_measured:
            out.append(ClaimVerdict(c, Outcome.NOT_MEASURED, [], c.not_measured))
            continue
        if c.not_measurable:
            out.append(ClaimVerdict(c, Outcome.NOT_MEASURABLE, [], c.not_measurable))
            continue
        checks = [check_verdict(run, a, chk, facts_of_run) for chk in c.checks]
        ran = {cv.outcome for cv in checks} - {Outcome.NOT_RUN}
        if not checks:
            outcome = Outcome.NOT_MEASURED
        elif not ran:
            outcome = Outcome.NOT_RUN
        else:
            outcome = next(o for o in CLAIM_PRECEDENCE if o in ran)
        out.append(ClaimVerdict(c, outcome, checks, ""))
    return out


def _where(suite: str, case: str) -> str:
    """'suite/case' for a message: names from a results folder, each one bounded line."""
    return f"{for_terminal(suite, NAME)}/{for_terminal(case, NAME)}"


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
    # the names and reasons come from the results folder: each one bounded line (harness.base.safe_text)
    if broken:
        a.exit_code = EXIT_ENVIRONMENT
        a.exit_reason = (
            "failed or invalid runs: "
            + ", ".join(_where(c.suite, c.case) for c in broken[:20])
            + (f" and {len(broken) - 20} more" if len(broken) > 20 else "")
        )
    elif skipped and not allow_skipped:
        a.exit_code = EXIT_ENVIRONMENT
        a.exit_reason = "skipped cases fail this profile (give --allow-skipped to accept them): " + "; ".join(
            f"{_where(c.suite, c.case)} ({for_terminal('; '.join(c.reasons), TEXT)})" for c in skipped[:5]
        )
    elif failing:
        a.exit_code = EXIT_THRESHOLD
        a.exit_reason = f"{len(failing)} threshold(s) not met: " + ", ".join(
            f"{_where(t.suite, t.case)} {for_terminal(t.metric, NAME)} ({t.verdict}"
            f"{'; ' + t.detail if t.verdict is Verdict.FAIL and t.detail else ''})"
            for t in failing[:5]
        )
    if run.interrupted and a.exit_code == EXIT_OK:
        a.exit_reason = "the run was interrupted: " + for_terminal(run.interrupted.get("case", ""), NAME)
    return a
