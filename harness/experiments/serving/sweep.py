"""What a load sweep measured at each point, and what the points say together: whether the
load sent was the load configured, where the server stopped keeping up (the knee), and the
highest load at which a latency objective (SLO) still held.

A point is one load level of one arm: an open-loop rate (requests per second, Poisson or a
trace's timestamps scaled) or a closed-loop concurrency. Its requests that were scheduled in
the warm-up (the point's first `warmup_s`) are sent but kept out of every statistic.

- **Valid** (the load sent is the load configured): the client dispatched at least
  `1 - margin` of the offered rate over the window, and its schedule's lateness (P95 of
  dispatch minus scheduled time) stayed under `max_late_ms`. Otherwise the point is
  `invalid`, with the numbers: a client that cannot send the load measures itself.
- **Saturated** (the server no longer keeps up): fewer answers ended inside the window (shifted
  by the point's median time in the system) than `1 - margin` of the requests sent in it, or
  TTFT grew through the point (the median TTFT of
  the last third of its requests over the first third's above `growth`, and by more than a
  tenth of the window): a queue building up.
- **The SLO**: TTFT P95, TPOT P95 (either may be absent) and the share of requests that met
  both (`min_met_pct`); goodput is the requests per second that met it.
- **The highest load at the SLO** is the highest valid point at which the SLO held and held
  at every valid point below it: a point that passes above a failing one is luck, not capacity.

Pure functions over the client's Results (harness.experiments.serving.client).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base import stats

from .client import Result, usage_problems


@dataclass(frozen=True)
class Slo:
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    min_met_pct: float = 90.0  # of the window's requests, the share that must meet both bounds

    def met(self, r: Result) -> bool:
        """A request met the SLO: it completed, within both bounds (each one it has)."""
        if r.status != "ok" or r.ttft_ms is None:
            return False
        if self.ttft_p95_ms is not None and r.ttft_ms > self.ttft_p95_ms:
            return False
        return not (self.tpot_p95_ms is not None and r.tpot_ms is not None and r.tpot_ms > self.tpot_p95_ms)

    def text(self) -> str:
        parts = [f"TTFT P95 <= {self.ttft_p95_ms:g} ms"] if self.ttft_p95_ms is not None else []
        parts += [f"TPOT P95 <= {self.tpot_p95_ms:g} ms"] if self.tpot_p95_ms is not None else []
        return " and ".join(parts) + f", at least {self.min_met_pct:g}% of requests within them"


@dataclass(frozen=True)
class Rules:
    margin: float = 0.1  # sent below (1 - margin) x offered: invalid; completed below (1 - margin) x sent: saturated
    max_late_ms: float = 50.0  # schedule lateness P95 above this: invalid
    growth: float = 2.0  # last third's median TTFT over the first third's above this: saturated


@dataclass
class PointStats:
    level: float  # the offered rate (req/s) or the concurrency
    offered_rps: float | None  # open loop: the configured rate; closed loop: None
    sent_rps: float
    completed_rps: float
    goodput_rps: float
    met_pct: float
    late_p95_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    tpot_p95_ms: float | None
    ttft_growth_x: float | None
    ttft_rise_ms: float
    requests: int
    invalid: str  # '' when the load sent was the load configured
    saturated: str  # '' when the server kept up
    slo_held: bool
    errors: int = 0  # measured requests that did not complete (left out of the percentiles)


def measured(results: list[Result], warmup_s: float) -> list[Result]:
    """The requests scheduled after the warm-up."""
    return [r for r in results if r.scheduled_s >= warmup_s]


def _pct(values: list[float], q: float) -> float | None:
    return stats.percentile(values, q) if values else None


def growth(results: list[Result]) -> tuple[float | None, float]:
    """(median TTFT of the last third of the completed requests, in scheduled order, over the
    first third's; the difference in ms); (None, 0) with fewer than 6."""
    done = [r.ttft_ms for r in sorted(results, key=lambda r: r.scheduled_s) if r.status == "ok" and r.ttft_ms]
    if len(done) < 6:
        return None, 0.0
    third = len(done) // 3
    first, last = stats.median(done[:third]), stats.median(done[-third:])
    return (last / first if first > 0 else None), last - first


def finished_s(r: Result) -> float | None:
    """When the request's answer ended, in seconds from the point's start; None if it was not sent."""
    if r.late_ms is None or r.e2e_ms is None:
        return None
    return r.scheduled_s + (r.late_ms + r.e2e_ms) / 1000


def point_stats(
    everything: list[Result],
    level: float,
    warmup_s: float,
    window_s: float,
    slo: Slo,
    rules: Rules,
    offered_rps: float | None,
    queued: list[Result] | None = None,
) -> PointStats:
    """One point's figures. Latencies, the SLO and goodput over the requests scheduled in the
    window (after the warm-up); the server's throughput as the answers that ended inside the
    window shifted by the median time in the system, whenever they were sent: a server that
    falls behind completes fewer per second than it is sent, even when it answers every
    request in the end, while one that keeps up at a high but steady latency does not."""
    results = measured(everything, warmup_s)
    n = len(results)
    ok = [r for r in results if r.status == "ok"]
    met = [r for r in ok if slo.met(r)]
    # sent in the window itself: a request scheduled after it (a Poisson schedule may run past
    # its span) is measured, but its answer would count against the next window
    sent = sum(r.late_ms is not None and r.scheduled_s < warmup_s + window_s for r in results)
    # the window's answers, shifted by the point's median time in the system: a server that
    # keeps up answers what it was sent one latency later, however long that latency is
    lag = stats.median([r.e2e_ms / 1000 for r in ok if r.e2e_ms is not None]) if ok else 0.0
    ended = sum(
        1
        for r in everything
        if r.status == "ok" and warmup_s + lag <= (finished_s(r) or -1) < warmup_s + window_s + lag
    )
    late = [r.late_ms for r in results if r.late_ms is not None]
    # TTFT growth over the requests that could queue (`queued`: a cache's hits cannot; by default all)
    g, rise = growth(measured(queued, warmup_s) if queued is not None else results)
    p = PointStats(
        level,
        offered_rps,
        sent / window_s,
        ended / window_s,
        len(met) / window_s,
        100.0 * len(met) / n if n else 0.0,
        _pct(late, 95),
        _pct([r.ttft_ms for r in ok if r.ttft_ms is not None], 50),
        _pct([r.ttft_ms for r in ok if r.ttft_ms is not None], 95),
        _pct([r.tpot_ms for r in ok if r.tpot_ms is not None], 95),
        g,
        rise,
        n,
        "",
        "",
        False,
    )
    p.errors = n - len(ok)
    p.invalid = "; ".join(x for x in (_invalid(p, rules), usage_problems(results)) if x)
    p.saturated = _saturated(p, rules, window_s)
    p.slo_held = not p.invalid and n > 0 and p.met_pct >= slo.min_met_pct
    return p


def _invalid(p: PointStats, rules: Rules) -> str:
    why = []
    if p.offered_rps is not None and p.sent_rps < (1 - rules.margin) * p.offered_rps:
        why.append(
            f"the client sent {p.sent_rps:.2f} req/s of the {p.offered_rps:.2f} configured "
            f"(under {1 - rules.margin:.0%})"
        )
    if p.late_p95_ms is not None and p.late_p95_ms > rules.max_late_ms:
        why.append(f"its schedule ran {p.late_p95_ms:.0f} ms late at P95 (over {rules.max_late_ms:g} ms)")
    if not p.requests:
        why.append("no request was scheduled after the warm-up")
    return "; ".join(why)


def _saturated(p: PointStats, rules: Rules, window_s: float) -> str:
    why = []
    if p.sent_rps > 0 and p.completed_rps < (1 - rules.margin) * p.sent_rps:
        why.append(f"completed {p.completed_rps:.2f} req/s of the {p.sent_rps:.2f} sent")
    if p.ttft_growth_x is not None and p.ttft_growth_x > rules.growth and p.ttft_rise_ms > 100 * window_s:
        why.append(f"TTFT grew {p.ttft_growth_x:.1f}x ({p.ttft_rise_ms:.0f} ms) through the point")
    return "; ".join(why)


def knee(points: list[PointStats]) -> PointStats | None:
    """The first valid point (in increasing load) at which the server no longer kept up."""
    return next((p for p in sorted(points, key=lambda p: p.level) if not p.invalid and p.saturated), None)


def should_stop(points: list[PointStats]) -> bool:
    """A sweep climbs until one point past the knee (it runs at most one)."""
    k = knee(points)
    return k is not None and any(p.level > k.level for p in points)


def highest_at_slo(points: list[PointStats]) -> PointStats | None:
    """The highest valid point at which the SLO held, and held at every valid point below it."""
    best = None
    for p in sorted(points, key=lambda p: p.level):
        if p.invalid:
            continue
        if not p.slo_held:
            break
        best = p
    return best
