"""The hot-swap case's metrics (swap_metrics): the service measures (swap_service.py), failures
by arm, switch and drain times, memory over the engine's size, and the exercise evidence that
each hot swap had requests in flight across its switch and was answered by the new engine
(swap_exercise, told from the clients' answers alone)."""

from __future__ import annotations

from harness.base import stats
from harness.experiments.engine_hotload.fingerprint import UNKNOWN
from harness.experiments.engine_hotload.swap_service import attribute_failures, service_metrics
from harness.model.driver_contract import Metric


def swap_exercise(records, acts: list[dict]) -> dict:
    """Whether each hot swap created the situation its failures check is about, told from the
    clients' answers alone (the model version each answer is: fingerprint.py; client
    timestamps), never from the slot's label, version or in-flight count:

    - answered by the new engine: requests answered with the new version's output (the file the
      driver asked the swap to load), sent from the swap's call until the next action's;
    - in flight across the switch: requests answered with the old version's output whose
      answer came after the first answer of the new version had come (so the old engine was
      still computing them after the new one served: they were sent before the switch and
      answered after it), and requests that failed after that answer came though they were
      sent before the new version's first answered request was (an old engine closed under
      them: in flight too, with no answer to fingerprint)."""
    starts = sorted(a["t_start_s"] for a in acts)
    out = {
        "new_answers": 0,
        "swaps_answered_by_new": 0,
        "inflight": 0,
        "swaps_with_inflight": 0,
        "requests_across": 0,
        "unrecognised": sum(r.ok and r.answered_by == UNKNOWN for r in records),
    }
    for a in (a for a in acts if a["kind"] == "swap"):
        lo, hi = a["t_start_s"], a["t_released_s"]
        nxt = next((t for t in starts if t > lo), float("inf"))
        across = [r for r in records if r.t <= hi and r.t + r.ms / 1e3 >= lo]
        out["requests_across"] += len(across)
        new = [r for r in records if r.ok and r.answered_by == a["to_file"] and lo <= r.t < nxt]
        out["new_answers"] += len(new)
        out["swaps_answered_by_new"] += bool(new)
        if not new or a["to_file"] == a["from_file"]:
            continue
        first_new = min(r.t + r.ms / 1e3 for r in new)
        first_sent = min(r.t for r in new)
        inflight = [
            r
            for r in across
            if r.t + r.ms / 1e3 > first_new
            and ((r.ok and r.answered_by == a["from_file"]) or (not r.ok and r.t < first_sent))
        ]
        out["inflight"] += len(inflight)
        out["swaps_with_inflight"] += bool(inflight)
    return out


def _exercise_metrics(ex: dict, straddles: list | None) -> dict:
    """What shows that a hot swap's dangerous situation happened (swap_exercise's counts): requests
    across the swap, answered by the new version, in flight across the switch."""
    return {
        "swap.requests_across": Metric(
            ex["requests_across"],
            "requests",
            None,
            "requests (paced and straddling) whose [sent, answered] overlaps a hot swap's "
            "window: what failed_requests is out of",
        ),
        "swap.new_answers": Metric(
            ex["new_answers"],
            "requests",
            None,
            "requests answered with the new model version's output (its fingerprint, not the "
            "slot's label), sent between a hot swap's call and the next action",
        ),
        "swap.swaps_answered_by_new": Metric(
            ex["swaps_answered_by_new"],
            "swaps",
            None,
            "hot swaps after which at least one request was answered with the new version's output",
        ),
        "swap.inflight_requests": Metric(
            ex["inflight"],
            "requests",
            None,
            "requests answered with the old version's output (or failed, sent before "
            "the new version's first answered request) after the new version's first "
            "answer had come: in flight across the switch",
        ),
        "swap.swaps_with_inflight": Metric(
            ex["swaps_with_inflight"], "swaps", None, "hot swaps with at least one request in flight across the switch"
        ),
        "unrecognised_answers": Metric(
            ex["unrecognised"], "requests", None, "answers matching neither model version's output (shown)"
        ),
        "straddle_requests": Metric(
            len(straddles or []),
            "requests",
            None,
            "long requests sent back to back during hot swaps (kept apart from the latency measures)",
        ),
    }


def swap_metrics(records, acts: list[dict], engine_mib: float, gpu: bool, straddles: list | None = None) -> dict:
    """The hot-swap case's metrics; failures attributed to arms by their time windows (the
    straddling requests' too; they are left out of the latency and gap measures)."""
    swaps = [a for a in acts if a["kind"] == "swap"]
    restarts = [a for a in acts if a["kind"] == "restart"]
    everything = sorted([*records, *(straddles or [])], key=lambda r: r.t)
    failed = attribute_failures(everything, acts)
    ex = swap_exercise(everything, acts)
    m = {
        **service_metrics(records, acts),
        **_exercise_metrics(ex, straddles),
        "failed_requests": Metric(
            failed["swap"] + failed["outside"],
            "requests",
            "lower",
            "failed requests except those in a restart's time window: during hot swaps and outside any action",
        ),
        "swap_window.failed_requests": Metric(
            failed["swap"], "requests", "lower", "failed requests overlapping a hot swap's window (start to release)"
        ),
        "control.failed_requests": Metric(
            failed["restart"], "requests", None, "failed requests overlapping a restart's window (the control)"
        ),
        "no_drain.failed_requests": Metric(
            failed.get("no-drain"),
            "requests",
            None,
            "failed requests overlapping a no-drain swap's window (the old engine "
            "closed under a call in flight: the drain removed, a control)",
        ),
        "in_place.failed_requests": Metric(
            failed.get("in-place"), "requests", None, "failed requests overlapping an in-place swap's window"
        ),
        "requests": Metric(len(records), "requests", "higher"),
        "swaps_done": Metric(len(swaps), "swaps", "higher"),
        "restarts_done": Metric(len(restarts), "restarts"),
        "swap.to_serving_ms": Metric(
            stats.median([a["to_serving_ms"] for a in swaps]),
            "ms",
            "lower",
            "load aside + check + prewarm + switch, and the wait for a long request to be in flight "
            "(switch_wait_ms in the actions series; median over swaps)",
        ),
        "swap.switch_ms": Metric(
            max(a["switch_ms"] for a in swaps), "ms", "lower", "longest time the reference lock was held to switch"
        ),
        "swap.drain_ms": Metric(
            stats.median([a["drain_ms"] for a in swaps]), "ms", "lower", "wait for calls in flight on the old engine"
        ),
        "restart.no_engine_ms": Metric(
            stats.median([a["no_engine_ms"] for a in restarts]),
            "ms",
            None,
            "restart: time with no engine as the mechanism reported it (shown, not "
            "judged; restart.outage_ms is what the clients saw)",
        ),
        "engine_mib": Metric(engine_mib, "MiB"),
        "rss_peak_extra_mib": Metric(
            max(a["rss_extra_mib"] for a in swaps),
            "MiB",
            "lower",
            "largest RSS rise over the pre-swap baseline during a hot swap",
        ),
        "rss_peak_extra_over_engine": Metric(
            max(a["rss_extra_mib"] for a in swaps) / engine_mib,
            "x",
            "lower",
            "RSS peak extra during a hot swap / engine file size",
        ),
        "control.rss_peak_extra_over_engine": Metric(
            max(a["rss_extra_mib"] for a in restarts) / engine_mib,
            "x",
            None,
            "the same during a restart (old engine closed first)",
        ),
    }
    if gpu:
        m["gpu_peak_extra_over_engine"] = Metric(
            max(a["gpu_extra_mib"] for a in swaps) / engine_mib,
            "x",
            None,
            "GPU memory peak above the pre-swap baseline (the old engine loaded) during a hot swap / engine file "
            "size: >= 1 means the swap needed at least old + one more engine, the source's 'needs >= 2x'",
        )
        m["control.gpu_peak_extra_over_engine"] = Metric(
            max(a["gpu_extra_mib"] for a in restarts) / engine_mib,
            "x",
            None,
            "the same during a restart (old engine freed first)",
        )
    return {k: v for k, v in m.items() if v.value is not None}
