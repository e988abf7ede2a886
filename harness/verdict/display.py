"""Numbers and verdicts for people: the one place where analysis results become text.

Everything the report, the terminal summary and JUnit show goes through these functions;
analysis itself returns numbers and enum verdicts.
"""

from __future__ import annotations

import math

from markupsafe import escape as _escape

from harness.base.safe_text import NAME, for_html
from harness.model.ledger import ClaimCheck, Control
from harness.model.spec import Threshold
from harness.verdict.analysis import MetricSummary, Outcome, ThresholdVerdict, Verdict


def esc(text, limit: int = NAME) -> str:
    """The one escaping path for text placed in HTML or SVG (element text and attribute
    values alike): & < > " ' are all escaped; the text is bounded to `limit` characters
    and its control characters and lone surrogates are shown as escapes first
    (harness.base.safe_text.for_html), since chart titles and series names come from results."""
    return str(_escape(for_html(text, limit)))


def fmt(x) -> str:
    """Numbers for people: 3 significant digits below 1000, thousands separators above."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 1000 else str(x)
    if not isinstance(x, float):
        return str(x)
    if not math.isfinite(x):
        return "-"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.1f}".rstrip("0").rstrip(".")
    if a >= 1 or a == 0:
        return f"{x:.3g}" if a < 10 else f"{x:.2f}".rstrip("0").rstrip(".")
    return f"{x:.3g}"


def describe(m: MetricSummary | None) -> str:
    """'median (min-max) unit', or the single value."""
    if m is None:
        return "-"
    if len(m.values) == 1:
        return f"{fmt(m.median)} {m.unit}".strip()
    return f"{fmt(m.median)} ({fmt(m.min)}-{fmt(m.max)}) {m.unit}".strip()


def threshold_text(t: Threshold) -> str:
    if t.high is not None:
        return f"in [{fmt(t.value)}, {fmt(t.high)}] {t.unit}".strip()
    return f"{t.op} {fmt(t.value)} {t.unit}".strip()


def check_text(c: ClaimCheck) -> str:
    better = f" ({c.better} is better)" if c.better else ""
    if c.band is not None:
        return f"{c.metric} in [{fmt(c.band[0])}, {fmt(c.band[1])}] {c.unit}".strip() + better
    return f"{c.metric} {c.op} {fmt(c.value)} {c.unit}".strip()


def control_text(ctl: Control) -> str:
    """A control's comparison: 'metric op value' (or 'op factor x other metric')."""
    rhs = f"{fmt(ctl.factor)} x {ctl.than}" if ctl.than and ctl.factor != 1 else (ctl.than or fmt(ctl.value))
    return f"{ctl.metric} {ctl.op} {rhs}"


def claimed_text(tv: ThresholdVerdict) -> str:
    if tv.claimed is None:
        return ""
    c = tv.claimed
    value = f"[{fmt(c.band[0])}, {fmt(c.band[1])}]" if c.band is not None else f"{c.op} {fmt(c.value)}"
    return f"{tv.claim_id}: {value} {c.unit}".strip()


def noisy_text(m: MetricSummary | None) -> str:
    return f"noisy: spread {m.spread:.0%} of the median" if m is not None and m.noisy else ""


def css_class(verdict) -> str:
    """The CSS class of a verdict badge (v-pass, v-fail, v-reproduced, ...)."""
    value = verdict.value if isinstance(verdict, (Verdict, Outcome)) else str(verdict)
    return "v-" + "".join(ch if ch.isalnum() else "-" for ch in value)
