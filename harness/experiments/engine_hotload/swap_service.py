"""The hot-swap case's service as the clients saw it, attributed by the driver's time windows:
one row per action with its window (action_rows), failed requests by the action whose window
they fall in, and the latency and answer-gap measures of each arm against steady state
(service_metrics)."""

from __future__ import annotations

from harness.base import stats
from harness.experiments.engine_hotload.gpu import peak_extra
from harness.experiments.engine_hotload.served import MIB
from harness.experiments.engine_hotload.workload import answer_gaps, steady_gap_ms, summary
from harness.model.driver_contract import Metric


def attribute_failures(records, actions: list[dict]) -> dict[str, int]:
    """Failed requests by the arm whose recorded time window they fall in: a failure whose
    request [start, end] overlaps an action's [t_start_s, t_released_s] belongs to that
    action's kind ('swap', 'restart', 'in-place' or 'no-drain'; the latest such action if
    several), any other to 'outside' (no action running). The error text decides nothing."""
    out = {kind: 0 for kind in ("swap", "restart", *(a["kind"] for a in actions), "outside")}
    for r in records:
        if not r.ok:
            out[arm_of(r, actions)] += 1
    return out


def arm_of(r, actions: list[dict]) -> str:
    """The kind of the latest action whose window the request [start, end] overlaps, or 'outside'."""
    a = _latest_overlapping(r.t, r.t + r.ms / 1e3, actions)
    return a["kind"] if a else "outside"


def action_rows(done: list, samples: list, t0: float, gpu: bool) -> list[dict]:
    """One row per action (kind, its SwapReport, the driver's perf_counter before the call and
    after it returned): its phases as the mechanism reported them (shown only), its time window
    as the driver took it around the call (seconds since the stream's t0: what failures and
    latencies are attributed by, so the mechanism cannot shorten it), and the memory peak
    over the baseline inside that window."""

    acts = []
    for kind, rep, called, returned, *asked in done:
        d = rep.durations_ms()
        w = (called - t0, returned - t0)
        _, extra = peak_extra(samples, w[0], w[1])
        gpu_extra = peak_extra(samples, w[0], w[1], "gpu_used_bytes")[1] / MIB if gpu else None
        acts.append(
            {
                "kind": kind,
                **d,
                "call_ms": (returned - called) * 1e3,
                "no_engine_ms": (rep.switched - rep.started) * 1e3 if kind == "restart" else 0.0,
                "t_start_s": w[0],
                "t_switch_s": rep.switched - t0,
                "t_released_s": w[1],
                "inflight_at_switch": rep.inflight_at_switch,
                "old": rep.old_label,
                "new": rep.new_label,
                "from_file": asked[0] if asked else "",
                "to_file": asked[1] if asked else "",
                "rss_extra_mib": extra / MIB,
                "gpu_extra_mib": gpu_extra,
            }
        )
    return acts


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _latest_overlapping(lo: float, hi: float, actions: list[dict]) -> dict | None:
    hit = [a for a in actions if lo <= a["t_released_s"] and hi >= a["t_start_s"]]
    return max(hit, key=lambda a: a["t_start_s"]) if hit else None


def _arm_service(records, gaps, acts: list[dict], kind: str) -> dict:
    """What the clients saw inside the windows of one kind of action: the worst request and
    the P99 of the requests overlapping them, the longest answer gap across them, the
    driver-timed call. A request or a gap belongs to the latest action whose window it
    overlaps (as failures do), so adjacent windows never share one."""
    mine = [a for a in acts if a["kind"] == kind]
    if not mine:
        return {}
    by_action: dict[int, list[float]] = {}
    for r in records:
        a = _latest_overlapping(r.t, r.t + r.ms / 1e3, acts)
        if a is not None and a["kind"] == kind:
            by_action.setdefault(id(a), []).append(r.ms)
    lat = [v for vs in by_action.values() for v in vs]
    waited = [max(by_action[id(a)]) / a["call_ms"] for a in mine if id(a) in by_action and a["call_ms"] > 0]
    per_action: dict[int, float] = {}
    for lo, hi in gaps:
        a = _latest_overlapping(lo, hi, acts)
        if a is not None and a["kind"] == kind:
            per_action[id(a)] = max(per_action.get(id(a), 0.0), (hi - lo) * 1e3)
    arm_gaps = list(per_action.values())
    return {
        "max": max(lat) if lat else None,
        "p99": stats.percentile(lat, 99) if lat else None,
        "n": len(lat),
        "gap_max": max(arm_gaps) if arm_gaps else None,
        "gap_median": stats.median(arm_gaps) if arm_gaps else None,
        "call_ms": stats.median([a["call_ms"] for a in mine]),
        "waited": max(waited) if waited else None,
    }


def service_metrics(records, acts: list[dict]) -> dict[str, Metric]:
    """ "No interruption" as the clients saw it, from request timestamps alone (each request
    thread's perf_counter before its call and after it returned; the windows are the driver's,
    around each call): the worst request overlapping a hot swap's window against the swap's
    own length (did any request wait for it?) and against steady state (requests overlapping
    no action's window), and the longest time no client got an answer against steady state and
    against a restart's outage (the same measure over a restart). The in-place arm (loading
    aside removed: requests wait on the slot's lock) and the pause (the lock held for a known
    time) show what the same measures see when requests do wait."""

    spans = [(a["t_start_s"], a["t_released_s"]) for a in acts]
    gaps = answer_gaps(records)
    steady = summary([r.ms for r in records if r.ok and arm_of(r, acts) == "outside"])
    steady_gap = steady_gap_ms(gaps, spans)
    sw, rs, ip, pa = (_arm_service(records, gaps, acts, k) for k in ("swap", "restart", "in-place", "pause"))
    outage = rs.get("gap_median")
    m = {
        "steady.p50_ms": Metric(steady.get("p50"), "ms", "lower", "requests overlapping no action's window"),
        "steady.p99_ms": Metric(steady.get("p99"), "ms", "lower", "requests overlapping no action's window"),
        "steady.gap_ms": Metric(
            steady_gap,
            "ms",
            "lower",
            "longest time no client got an answer, outside every action's window (the request pacing's own gaps)",
        ),
        "restart.outage_ms": Metric(
            outage,
            "ms",
            "lower",
            "restart (the control): longest time no client got an answer across its window, median over restarts",
        ),
        "restart.outage_over_steady": Metric(
            _ratio(outage, steady_gap), "x", None, "restart outage / steady longest answer gap (the instrument)"
        ),
    }
    for prefix, arm, what in (
        ("swap", sw, "a hot swap"),
        ("in_place", ip, "an in-place swap (the control)"),
        ("pause", pa, "a pause (the instrument)"),
    ):
        m[f"{prefix}.window_max_ms"] = Metric(
            arm.get("max"), "ms", "lower", f"worst request overlapping {what}'s window"
        )
        m[f"{prefix}.window_p99_ms"] = Metric(
            arm.get("p99"), "ms", "lower", f"P99 of the requests overlapping {what}'s windows"
        )
        m[f"{prefix}.window_requests"] = Metric(arm.get("n"), "requests")
        m[f"{prefix}.window_over_steady"] = Metric(
            _ratio(arm.get("max"), steady.get("p99")),
            "x",
            "lower",
            f"worst request overlapping {what}'s window / steady P99",
        )
        m[f"{prefix}.gap_ms"] = Metric(
            arm.get("gap_max"), "ms", "lower", f"longest time no client got an answer across {what}'s window"
        )
        m[f"{prefix}.gap_over_steady"] = Metric(
            _ratio(arm.get("gap_max"), steady_gap), "x", "lower", f"{prefix}.gap_ms / steady.gap_ms"
        )
        m[f"{prefix}.gap_over_restart_outage"] = Metric(
            _ratio(arm.get("gap_max"), outage), "x", "lower", f"{prefix}.gap_ms / restart.outage_ms"
        )
        m[f"{prefix}.window_max_over_call"] = Metric(
            arm.get("waited"),
            "x",
            "lower",
            f"worst request overlapping {what}'s window / that action's "
            "call (driver-timed), the largest over the actions: about 1 "
            "when requests wait for the whole action, small when none waits",
        )
        m[f"{prefix}.call_ms"] = Metric(
            arm.get("call_ms"), "ms", "lower", f"{what}: the driver's time from the call to its return (median)"
        )
    return m
