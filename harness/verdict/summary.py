"""The terminal summary: a plain text table of threshold verdicts and case statuses."""

from __future__ import annotations

from harness.base.safe_text import for_terminal
from harness.verdict.analysis import Analysis, Verdict
from harness.verdict.display import describe, threshold_text


def _cell(value, max_width: int) -> str:
    """A cell for the terminal: control characters, line breaks and lone surrogates shown
    as escapes (a name from a results folder cannot clear the screen or forge a line),
    then cut to the column's width."""
    text = for_terminal(value, max_width)
    return text if len(text) <= max_width else text[: max_width - 1] + "~"


def table(headers: list[str], rows: list[list[str]], max_width: int = 48) -> str:
    """A plain text table; every cell is made safe for the terminal and cut to `max_width`."""
    cells = [[_cell(c, max_width) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def summary_text(a: Analysis, suite_wall_s: dict[str, float] | None = None) -> str:
    parts = []
    rows = [
        [
            t.suite,
            t.case,
            t.metric,
            threshold_text(t.threshold),
            describe(t.summary),
            t.verdict.value if t.verdict is Verdict.PASS else t.verdict.value.upper(),
        ]
        for t in a.thresholds
    ]
    if rows:
        parts.append(table(["suite", "case", "metric", "threshold", "median (min-max)", "verdict"], rows))
    notes = [
        [c.suite, c.case, ", ".join(f"{n} {k}" for k, n in c.statuses.items()), "; ".join(c.reasons)]
        for c in a.cases
        if set(c.statuses) != {"ok"}
    ]
    if notes:
        parts.append(table(["suite", "case", "status", "reason"], notes, max_width=90))
    claims = [
        [c.id, c.outcome.value, "; ".join(sorted({k.reason for k in c.checks if k.reason}))[:90] or c.note[:90]]
        for c in a.claims
        if c.checks
    ]
    if claims:
        parts.append(table(["claim", "verdict", "why"], claims, max_width=90))
    if suite_wall_s:
        parts.append(
            table(
                ["suite", "wall time"],
                [[k, f"{v:.0f} s"] for k, v in suite_wall_s.items()] + [["all", f"{sum(suite_wall_s.values()):.0f} s"]],
            )
        )
    parts.append("thresholds: " + ", ".join(f"{n} {v.value}" for v, n in a.counts().items()))
    return "\n\n".join(parts)
