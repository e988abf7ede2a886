"""Per-metric change between two results folders, with significance and size.

A change counts only when it is both large (past FACTOR of the baseline median) and
clear (the repetitions' ranges do not overlap); the Mann-Whitney p-value is shown beside
it. With 3 repetitions per side no two-sided test can reach p < 0.05 (the smallest
possible p is 0.1), so the range rule carries the decision and the p-value informs.
"""

from __future__ import annotations

from harness import stats
from harness.analysis import Analysis
from harness.report.format import fmt

FACTOR = 0.05  # 5%: past this a change in the worse direction is a regression


def compare(base: Analysis, new: Analysis, factor: float = FACTOR) -> list[dict]:
    rows = []
    base_idx = {(m.suite, m.case, m.metric): m for m in base.metrics}
    for m in new.metrics:
        b = base_idx.get((m.suite, m.case, m.metric))
        if b is None:
            continue
        change = stats.relative_change(b.median, m.median)
        p = stats.mann_whitney_p(b.values, m.values)
        overlap = not (m.min > b.max or m.max < b.min)
        noisy = b.noisy or m.noisy
        if abs(change) <= factor or m.better is None:
            assessment, css = "no change", "ok" if abs(change) <= factor else "skipped"
            if m.better is None and abs(change) > factor:
                assessment = "changed"
        elif overlap:
            assessment, css = "within noise", "skipped"
        else:
            worse = (change > 0) == (m.better == "lower")
            assessment, css = ("regression", "fail") if worse else ("improvement", "pass")
        if noisy and assessment in ("regression", "improvement"):
            assessment += " (noisy: re-run with more repetitions)"
        rows.append({"suite": m.suite, "case": m.case, "metric": m.metric, "unit": m.unit,
                     "baseline": f"{fmt(b.median)} {m.unit}".strip(), "current": f"{fmt(m.median)} {m.unit}".strip(),
                     "change": "inf" if change == float("inf") else f"{change:+.1%}", "p": f"{p:.3f}",
                     "assessment": assessment, "css": css, "regression": assessment.startswith("regression")})
    return rows
