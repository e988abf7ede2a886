"""The terminal summary: a plain text table of threshold verdicts and case statuses."""

from __future__ import annotations

from harness.analysis import Analysis


def table(headers: list[str], rows: list[list[str]], max_width: int = 48) -> str:
    cells = [[str(c) if len(str(c)) <= max_width else str(c)[: max_width - 1] + "~" for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def summary_text(a: Analysis) -> str:
    parts = []
    rows = [[t.suite, t.case, t.metric, t.threshold, t.measured, t.verdict.upper() if t.verdict != "pass" else "pass"]
            for t in a.thresholds]
    if rows:
        parts.append(table(["suite", "case", "metric", "threshold", "median (min-max)", "verdict"], rows))
    notes = [[c.suite, c.case, ", ".join(f"{n} {k}" for k, n in c.statuses.items()), "; ".join(c.reasons)]
             for c in a.cases if set(c.statuses) != {"ok"}]
    if notes:
        parts.append(table(["suite", "case", "status", "reason"], notes, max_width=90))
    counts = {k: sum(t.verdict == k for t in a.thresholds) for k in ("pass", "fail", "missing", "skipped")}
    parts.append("thresholds: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    return "\n\n".join(parts)


def comparison_text(rows: list[dict]) -> str:
    return table(["suite", "case", "metric", "baseline", "current", "change", "p", "assessment"],
                 [[r["suite"], r["case"], r["metric"], r["baseline"], r["current"], r["change"], r["p"], r["assessment"]]
                  for r in rows])
