"""From records to verdicts: aggregates over repetitions, threshold verdicts, the claims
ledger, and the exit code. Pure functions over a RunData; nothing here runs anything."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness import stats
from harness.errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_THRESHOLD
from harness.results import RunData

NOISE_LIMIT = 0.10  # spread over 10% of the median flags a metric as noisy


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

    def describe(self) -> str:
        if len(self.values) == 1:
            return f"{fmt(self.median)} {self.unit}".strip()
        return f"{fmt(self.median)} ({fmt(self.min)}-{fmt(self.max)}) {self.unit}".strip()


@dataclass
class ThresholdVerdict:
    suite: str
    case: str
    metric: str
    threshold: str
    reason: str
    verdict: str  # pass | fail | missing | skipped
    measured: str
    detail: str = ""
    claimed: str = ""


@dataclass
class ClaimVerdict:
    id: str
    section: str
    text: str
    claimed: str
    measured: str
    verdict: str  # reproduced | not reproduced | not measured | not measurable here | not run
    note: str = ""


@dataclass
class CaseStatus:
    suite: str
    case: str
    statuses: dict[str, int]
    reasons: list[str]


@dataclass
class Analysis:
    metrics: list[MetricSummary] = field(default_factory=list)
    thresholds: list[ThresholdVerdict] = field(default_factory=list)
    claims: list[ClaimVerdict] = field(default_factory=list)
    cases: list[CaseStatus] = field(default_factory=list)
    exit_code: int = EXIT_OK
    exit_reason: str = ""

    def metric(self, suite: str, case: str, name: str) -> MetricSummary | None:
        for m in self.metrics:
            if (m.suite, m.case, m.metric) == (suite, case, name):
                return m
        return None

    def case_status(self, suite: str, case: str) -> CaseStatus | None:
        for c in self.cases:
            if (c.suite, c.case) == (suite, case):
                return c
        return None

    def to_json(self) -> dict:
        return asdict(self)


def fmt(x: float) -> str:
    """Numbers for people: 3 significant digits below 1000, thousands separators above."""
    if x is None:
        return "-"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.1f}".rstrip("0").rstrip(".")
    if a >= 1 or a == 0:
        return f"{x:.3g}" if a < 10 else f"{x:.2f}".rstrip("0").rstrip(".")
    return f"{x:.3g}"


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
                                 stats.is_noisy(vals, NOISE_LIMIT), stats.relative_spread(vals),
                                 ms[0].note))
    return out


def case_statuses(run: RunData) -> list[CaseStatus]:
    out: dict[tuple, CaseStatus] = {}
    for r in run.records:
        cs = out.setdefault((r.suite, r.case), CaseStatus(r.suite, r.case, {}, []))
        cs.statuses[r.status] = cs.statuses.get(r.status, 0) + 1
        if r.reason and r.reason not in cs.reasons:
            cs.reasons.append(r.reason)
    return list(out.values())


def _claimed_for(run: RunData, suite: str, case: str, metric: str) -> str:
    for c in run.claims:
        for chk in c.get("checks", []):
            if (chk["suite"], chk["case"], chk["metric"]) == (suite, case, metric):
                return f"{c['id']}: {chk['op']} {fmt(chk['value'])} {chk.get('unit', '')}".strip()
    return ""


def threshold_verdicts(run: RunData, a: Analysis) -> list[ThresholdVerdict]:
    out = []
    for suite_name, spec in run.suites.items():
        for t in spec.get("thresholds", []):
            desc = f"{t['op']} {fmt(t['value'])} {t.get('unit', '')}".strip()
            claimed = _claimed_for(run, suite_name, t["case"], t["metric"])
            m = a.metric(suite_name, t["case"], t["metric"])
            cs = a.case_status(suite_name, t["case"])
            if m is None:
                if cs and set(cs.statuses) == {"skipped"}:
                    out.append(ThresholdVerdict(suite_name, t["case"], t["metric"], desc, t.get("reason", ""),
                                                "skipped", "-", "; ".join(cs.reasons), claimed))
                else:
                    why = "; ".join(cs.reasons) if cs else "the case did not run"
                    out.append(ThresholdVerdict(suite_name, t["case"], t["metric"], desc, t.get("reason", ""),
                                                "missing", "-", f"not measured: {why or 'no such metric in the results'}", claimed))
                continue
            ok = _holds(t["op"], m.median, t["value"])
            out.append(ThresholdVerdict(suite_name, t["case"], t["metric"], desc, t.get("reason", ""),
                                        "pass" if ok else "fail", m.describe(),
                                        "noisy: spread {:.0%} of the median".format(m.spread) if m.noisy else "",
                                        claimed))
    return out


def _holds(op: str, measured: float, limit: float) -> bool:
    return {"<": measured < limit, "<=": measured <= limit, ">": measured > limit, ">=": measured >= limit}[op]


def claim_verdicts(run: RunData, a: Analysis) -> list[ClaimVerdict]:
    out = []
    for c in run.claims:
        note = c.get("differs", "")
        checks = c.get("checks", [])
        claimed = "; ".join(f"{chk['metric']} {chk['op']} {fmt(chk['value'])} {chk.get('unit', '')}".strip()
                            for chk in checks) or c["text"]
        if c.get("not_measured"):
            out.append(ClaimVerdict(c["id"], c["section"], c["text"], claimed, "-", "not measured",
                                    (c["not_measured"] + (" " + note if note else "")).strip()))
            continue
        if c.get("not_measurable"):
            out.append(ClaimVerdict(c["id"], c["section"], c["text"], claimed, "-",
                                    "not measurable here", (c["not_measurable"] + (" " + note if note else "")).strip()))
            continue
        measured, verdicts, reasons = [], [], []
        for chk in checks:
            if chk["suite"] not in run.suites:
                verdicts.append("not run")
                reasons.append(f"suite {chk['suite']} was not part of this run")
                continue
            m = a.metric(chk["suite"], chk["case"], chk["metric"])
            if m is None:
                cs = a.case_status(chk["suite"], chk["case"])
                verdicts.append("not measured")
                reasons.append(f"{chk['case']}: " + ("; ".join(cs.reasons) if cs and cs.reasons else f"no metric {chk['metric']}"))
                continue
            line = f"{chk['metric']} = {m.describe()}"
            if line not in measured:
                measured.append(line)
            verdicts.append("reproduced" if _holds(chk["op"], m.median, chk["value"]) else "not reproduced")
        if "not reproduced" in verdicts:
            v = "not reproduced"
        elif "not measured" in verdicts:
            v = "not measured"
        elif "not run" in verdicts:
            v = "not run" if not measured else "not measured"
        else:
            v = "reproduced"
        out.append(ClaimVerdict(c["id"], c["section"], c["text"], claimed, "; ".join(measured) or "-", v,
                                "; ".join(x for x in [note] + reasons if x)))
    return out


def analyze(run: RunData) -> Analysis:
    a = Analysis()
    a.metrics = summarize_metrics(run)
    a.cases = case_statuses(run)
    a.thresholds = threshold_verdicts(run, a)
    a.claims = claim_verdicts(run, a)
    broken = [c for c in a.cases if c.statuses.get("failed") or c.statuses.get("invalid")]
    failing = [t for t in a.thresholds if t.verdict in ("fail", "missing")]
    if broken:
        a.exit_code = EXIT_ENVIRONMENT
        a.exit_reason = "failed or invalid runs: " + ", ".join(f"{c.suite}/{c.case}" for c in broken)
    elif failing:
        a.exit_code = EXIT_THRESHOLD
        a.exit_reason = f"{len(failing)} threshold(s) not met: " + ", ".join(
            f"{t.suite}/{t.case} {t.metric} ({t.verdict})" for t in failing[:5])
    return a
