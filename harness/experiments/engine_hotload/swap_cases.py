"""The engine-hotload drivers for swaps: hot swaps under a request stream (with restarts as
the control, interleaved) and swaps to incompatible models (with the compatibility check
off as the control)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from harness.base import stats
from harness.experiments.engine_hotload.backend_ort import save_optimized
from harness.experiments.engine_hotload.backend_trt import cached_plan
from harness.experiments.engine_hotload.fingerprint import UNKNOWN, Fingerprints
from harness.experiments.engine_hotload.gpu import MemorySampler, peak_extra
from harness.experiments.engine_hotload.lifecycle import parse_buckets
from harness.experiments.engine_hotload.series import ACTIONS, LATENCY_WINDOWS, MEMORY, SWAP_ATTEMPTS
from harness.experiments.engine_hotload.served import (
    COMMON,
    MIB,
    Served,
    env_details,
    skip_reason,
    trusted_manifest,
)
from harness.experiments.engine_hotload.signing import Verifier, write_manifest
from harness.experiments.engine_hotload.swap import EngineSlot, IncompatibleEngine
from harness.experiments.engine_hotload.workload import (
    Request,
    RequestStream,
    answer_gaps,
    steady_gap_ms,
    summary,
    windows,
)
from harness.mechanisms.onnx_models.export import engine_cache_dir, perturbed_onnx, sha256_file, tiny_onnx
from harness.model.driver_contract import CaseContext, Metric, Param, Record, Series
from harness.model.driver_helpers import write_csv

SWAP_PARAMS = {
    **COMMON,
    "threads": Param(int, 4, "request threads", min=1),
    "interval_ms": Param(float, 10.0, "each thread sends one request per interval (0 = back to back)", min=0),
    "swaps": Param(
        int,
        3,
        "hot swaps during the stream; after each, a restart, an in-place swap, a no-drain "
        "swap and a pause (the controls), interleaved",
        min=1,
    ),
    "before_s": Param(float, 2.0, "steady stream before the first swap", min=0),
    "gap_s": Param(float, 3.0, "time between the starts of two actions (swap or restart)", min=0),
    "after_s": Param(float, 2.0, "stream after the last action finished", min=0),
    "sample_ms": Param(float, 10.0, "memory sampling interval", min=1),
    "window_ms": Param(float, 250.0, "window of the latency-over-time series", min=1),
    "pause_ms": Param(
        float,
        300.0,
        "the pause control: the slot's lock held this long, nothing loaded "
        "(a stall of known length the clients must see)",
        min=1,
    ),
    "straddle": Param(
        list,
        [2, 64],
        "[batch, sequence] of the long requests sent back to back through "
        "the slot from the new engine's prewarm until the hot swap switches; the swap "
        "switches while one that has just begun is in flight on the old engine (waiting at "
        "most 5 s), and a short probe sent at the switch is answered by the new engine first "
        "(the situation the drain exists for); their records are kept apart from the paced "
        "stream's",
    ),
    "drain": Param(
        str,
        "wait",
        "wait: close the old engine after the calls in flight on it finished; "
        "broken: close it at once, under a call in flight (the drain removed, a control run)",
        ("wait", "broken"),
    ),
}


def _second_version(served: Served, log=lambda m: None) -> Path:
    """The engine file the swap alternates with: a second version of the model (the same
    graph and IO, weights with seeded noise: export.perturbed_onnx), so that its answers
    differ from the first's and a client can tell which engine answered. For ONNX Runtime its
    optimized graph saved once; for TensorRT its plan with the same profiles."""
    key = sha256_file(served.onnx)[:12]  # kept in the cache folder, never beside a user's model
    v2 = perturbed_onnx(served.onnx, engine_cache_dir() / f"{served.onnx.stem}-{key}-v2.onnx")
    if served.backend != "ort":
        return cached_plan(v2, served.params["trt_profiles"], engine_cache_dir(), log=log)

    dst = v2.with_name(v2.stem + "-ortopt.onnx")
    return save_optimized(v2, dst, "extended")


def run_stream(served: Served, slot, p: dict, t0: float, actions, prints: Fingerprints | None = None):
    """Run the request stream around `actions()`; returns the stream's records (each with the
    model version its answer is, where `prints` are given)."""

    def call(bucket, i):
        out, version = slot.infer(served.feeds.feeds(slot.engine.io(), bucket, i))
        return version, (prints.which(bucket.name, i, out) if prints is not None else "")

    stream = RequestStream(call, served.buckets, p["threads"], p["interval_ms"], t0).start()
    try:
        actions()
    finally:
        records = stream.stop()
    return records


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


def reported_facts(reported: list[dict]) -> dict:
    """Facts `engine.<setting>` from what the runtime reported for every engine the case
    loaded (Engine.reported(): read back from the runtime, not the options the harness
    passed); a setting the engines reported differently reads as all its values."""
    out = {}
    for key in dict.fromkeys(k for r in reported for k in r):
        values = list(dict.fromkeys(str(r.get(key)) for r in reported))
        out[f"engine.{key}"] = (
            reported[0][key]
            if len(values) == 1 and isinstance(reported[0].get(key), (str, int, float, bool))
            else " | ".join(values)
        )
    return out


ARMS = ("swap", "restart", "in-place", "no-drain", "pause")  # one round of actions, in this order


class Straddle:
    """Long requests sent back to back through the slot, from the new engine's prewarm (the
    first feeds the swap asks for) until the slot has switched (or the swap returned), and one
    short probe sent as soon as the slot has switched: the hot swap switches while a long
    request that has just begun is in flight on the old engine (`fresh`, the swap's
    `switch_when`), and the probe, answered by the new engine, comes back before it does. That
    is the situation the drain exists for, created on purpose rather than left to the
    scheduler's timing (a 2-core CI host under load once switched with none in flight). Whether
    one really straddled the switch is judged from the answers (swap_exercise), not from this
    class; its records are kept apart from the paced stream's."""

    def __init__(self, served, slot, prints: Fingerprints | None, bucket, t0: float, records: list, probe=None):
        self.served, self.slot, self.prints, self.bucket, self.t0 = served, slot, prints, bucket, t0
        self.probe_bucket = probe if probe is not None else served.buckets[0]
        self.records = records
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._began: float | None = None  # when the long request now in flight was sent (None: none is)
        self._last_s = 0.0  # how long the last long request took

    def begin(self) -> None:
        if not self._threads:
            version = self.slot.version
            self._threads = [
                threading.Thread(target=self._run, args=(version,), name="straddle", daemon=True),
                threading.Thread(target=self._probe, args=(version,), name="straddle-probe", daemon=True),
            ]
            for t in self._threads:
                t.start()

    def fresh(self) -> bool:
        """A long request is in flight and began less than a quarter of the last one's time ago
        (any long request in flight while none has finished yet): switching now leaves most of
        it to run on the old engine after the switch."""
        with self._lock:
            if self._began is None:
                return False
            return self._last_s == 0.0 or time.perf_counter() - self._began < 0.25 * self._last_s

    def end(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)

    def _send(self, bucket, v: int) -> Request:
        t = time.perf_counter()
        try:
            out, version = self.slot.infer(self.served.feeds.feeds(self.slot.engine.io(), bucket, v))
            by = self.prints.which(bucket.name, v, out) if self.prints is not None else ""
            return Request(t - self.t0, (time.perf_counter() - t) * 1e3, True, -1, bucket.name, version, "", by)
        except Exception as e:  # a failed request is data
            return Request(
                t - self.t0,
                (time.perf_counter() - t) * 1e3,
                False,
                -1,
                bucket.name,
                -1,
                f"{type(e).__name__}: {e}"[:300],
            )

    def _run(self, version_at_begin: int) -> None:
        v = 0
        while not self._stop.is_set() and self.slot.version == version_at_begin:
            with self._lock:
                self._began = time.perf_counter()
            rec = self._send(self.bucket, v)
            with self._lock:
                self._last_s, self._began = time.perf_counter() - self._began, None
            self.records.append(rec)
            v += 1

    def _probe(self, version_at_begin: int) -> None:
        """One short request as soon as the slot has switched (its answer, the new version's,
        is the first the clients get from the new engine)."""
        while not self._stop.is_set() and self.slot.version == version_at_begin:
            time.sleep(0.0002)
        if self.slot.version != version_at_begin:
            self.records.append(self._send(self.probe_bucket, 0))


def _act(kind: str, slot, load, served, drain: str, pause_s: float, straddle: Straddle | None = None):
    """One action on the slot: the hot swap (drain as the case says), a restart (the control:
    close, then load), an in-place swap (loading aside removed: the new engine loaded and warmed
    under the slot's lock), a no-drain swap (the drain removed: the old engine closed under a
    call in flight) or a pause (the slot's lock held for pause_s, nothing loaded: a stall of
    known length, the instrument)."""
    if kind == "restart":
        return slot.restart(load)
    if kind == "pause":
        return slot.hold(pause_s)

    def feeds_for(b):
        if straddle is not None:  # the new engine is loaded and checked: its prewarm begins
            straddle.begin()
        return served.feeds.feeds(slot.engine.io(), b, 0)

    if kind == "in-place":
        return slot.swap(load, served.buckets, feeds_for, aside=False)
    return slot.swap(
        load,
        served.buckets,
        feeds_for,
        drain="broken" if kind == "no-drain" else drain,
        switch_when=straddle.fresh if straddle is not None else None,
    )


def _swap_actions(
    ctx: CaseContext,
    served: Served,
    slot,
    files: list[Path],
    verifiers: list,
    done: list,
    errors: list,
    prints: Fingerprints | None = None,
    straddles: list | None = None,
    t0: float = 0.0,
    reported: list | None = None,
) -> None:
    """The hot swaps and, interleaved, the controls (a restart, an in-place swap, a no-drain
    swap and a pause per hot swap), `gap_s` apart, under the stream. Each action's window is taken here,
    around the call, with the clock the request threads use. Every action that loads one loads
    the other file than the one served (so every hot swap changes the model version the
    clients get); a hot swap has its straddling requests (Straddle) when `straddles` is a list."""
    p = ctx.params
    reported = [] if reported is None else reported
    time.sleep(p["before_s"])
    plan = [kind for _ in range(p["swaps"]) for kind in ARMS]
    serving = 0  # index in files of the file the driver last had loaded
    straddle_bucket = parse_buckets([p["straddle"]])[0]
    for k, kind in enumerate(plan):
        start = time.perf_counter()
        idx = serving if kind == "pause" else 1 - serving
        label = f"v{k + 1} {files[idx].name}"

        def load(i=idx, lb=label):
            eng = served.open(files[i], label=lb, verifier=verifiers[i])
            reported.append(eng.reported())  # the runtime's own settings for each engine the driver loads
            return eng

        straddle = (
            Straddle(served, slot, prints, straddle_bucket, t0, straddles)
            if kind == "swap" and straddles is not None
            else None
        )
        try:
            called = time.perf_counter()
            rep = _act(kind, slot, load, served, p["drain"], p["pause_ms"] / 1e3, straddle)
            done.append((kind, rep, called, time.perf_counter(), files[serving].name, files[idx].name))
            serving = idx
            ctx.log(f"{kind} {k + 1}: serving {files[idx].name} after {rep.durations_ms()['to_serving_ms']:.0f} ms")
        except Exception as e:
            errors.append(f"{kind} {k + 1}: {type(e).__name__}: {e}")
        finally:
            if straddle is not None:  # after the window was taken: waiting for it is not the swap's time
                straddle.end()
        if k < len(plan) - 1:
            time.sleep(max(0.0, p["gap_s"] - (time.perf_counter() - start)))
    time.sleep(p["after_s"])


def _swap_series(
    p: dict, records: list, acts: list[dict], samples: list, engine_mib: float, gpu: bool, gpu_info: dict
) -> dict[str, Series]:

    win = windows(records, p["window_ms"] / 1e3)
    step = max(1, len(samples) // 400)
    kept = samples[::step]
    return {
        LATENCY_WINDOWS.name: LATENCY_WINDOWS.make(
            {
                "t_s": [w["t"] for w in win],
                "requests": [w["n"] for w in win],
                "p50_ms": [w["p50"] for w in win],
                "max_ms": [w["max"] for w in win],
                "failed": [w["failed"] for w in win],
            },
            f"{p['threads']} threads, one request per {p['interval_ms']:g} ms each; windows of {p['window_ms']:g} ms",
        ),
        ACTIONS.name: ACTIONS.make(
            {c.name: [a[c.name] for a in acts] for c in ACTIONS.columns},
            f"engine file {engine_mib:.1f} MiB; restarts close the served engine, then load the new one",
        ),
        MEMORY.name: MEMORY.make(
            {
                "t_s": [s.t for s in kept],
                "rss_mib": [s.rss_bytes / MIB for s in kept],
                "gpu_mib": [(s.gpu_used_bytes / MIB) if s.gpu_used_bytes is not None else None for s in kept],
            },
            "process RSS" + ("; GPU memory through NVML" if gpu else f" (no GPU: {gpu_info.get('reason', 'none')})"),
        ),
    }


def hot_swap(ctx: CaseContext) -> Record:
    if why := skip_reason(ctx):
        return Record("skipped", why)

    p = ctx.params
    served = Served(ctx)
    files = [served.file, _second_version(served, ctx.log)]
    verifiers = [served.verifier, trusted_manifest(files[1])]
    prints = Fingerprints.build(
        {f.name: f for f in files},
        [*served.buckets, *parse_buckets([p["straddle"]])],
        served.feeds,
        lambda f: served.open(f, label=f"fingerprint {f.name}", verifier=verifiers[files.index(f)]),
    )
    sampler = MemorySampler(interval_s=p["sample_ms"] / 1e3).start()
    t0 = sampler.t0
    first = served.open(files[0], label=f"v0 {files[0].name}")
    first.prewarm(served.buckets, served.feeds.feeds_for(first.io(), 0))
    env = env_details(
        served,
        [t.to_json() for t in first.io()],
        [pr.to_json() for pr in first.profiles()],
        first.memory(),
        first.size_bytes,
    )
    engine_mib = first.size_bytes / MIB
    slot = EngineSlot(first)
    done: list[tuple[str, object]] = []
    errors: list[str] = []

    straddles: list = []
    reported = [first.reported()]
    try:
        records = run_stream(
            served,
            slot,
            p,
            t0,
            lambda: _swap_actions(ctx, served, slot, files, verifiers, done, errors, prints, straddles, t0, reported),
            prints,
        )
    finally:
        samples = sampler.stop()
        slot.engine.close()
    if errors:
        return Record("failed", "; ".join(errors))
    write_csv(
        ctx.raw_path("requests.csv"),
        ["t_s", "latency_ms", "ok", "thread", "bucket", "version", "answered_by", "error"],
        [
            [f"{r.t:.6f}", f"{r.ms:.4f}", int(r.ok), r.thread, r.bucket, r.version, r.answered_by, r.error]
            for r in records
        ],
    )
    write_csv(
        ctx.raw_path("memory.csv"),
        ["t_s", "rss_bytes", "gpu_used_bytes", "gpu_util_pct"],
        [[f"{s.t:.4f}", s.rss_bytes, s.gpu_used_bytes, s.gpu_util_pct] for s in samples],
    )
    gpu = bool(sampler.gpu.get("present"))
    acts = action_rows(done, samples, t0, gpu)
    (ctx.raw_path("actions.json")).write_text(json.dumps(acts, indent=2))
    write_csv(
        ctx.raw_path("straddle.csv"),
        ["t_s", "latency_ms", "ok", "bucket", "version", "answered_by", "error"],
        [[f"{r.t:.6f}", f"{r.ms:.4f}", int(r.ok), r.bucket, r.version, r.answered_by, r.error] for r in straddles],
    )
    m = swap_metrics(records, acts, engine_mib, gpu, straddles)
    series = _swap_series(p, records, acts, samples, engine_mib, gpu, sampler.gpu)
    return Record(
        "ok",
        metrics=m,
        series=series,
        facts=reported_facts(reported),
        details={
            **env,
            "gpu_telemetry": sampler.gpu,
            "drain": p["drain"],
            "engine_reported": reported,
            "failures": [
                f"{arm_of(r, acts)} at {r.t:.3f} s: {r.error}"
                for r in records
                if not r.ok and arm_of(r, acts) in ("swap", "outside")
            ][:20],
        },
    )


# ---- a swap that must be refused ---------------------------------------------------------------


def incompatible_variants(folder: Path) -> list[tuple[str, Path, bool]]:
    """(what differs, ONNX file, should be refused) for the refused-swap case."""

    dyn = ("batch", "sequence")
    return [
        ("same IO as MiniLM (must be accepted)", tiny_onnx(folder / "same-io.onnx"), False),
        (
            "input 'token_type_ids' instead of 'attention_mask'",
            tiny_onnx(
                folder / "other-input.onnx", inputs=(("input_ids", "int64", dyn), ("token_type_ids", "int64", dyn))
            ),
            True,
        ),
        (
            "'attention_mask' is int32, not int64",
            tiny_onnx(
                folder / "int32-mask.onnx", inputs=(("input_ids", "int64", dyn), ("attention_mask", "int32", dyn))
            ),
            True,
        ),
        (
            "sequence fixed at 16: served buckets with longer sequences fall outside",
            tiny_onnx(
                folder / "seq16.onnx",
                inputs=(("input_ids", "int64", ("batch", 16)), ("attention_mask", "int64", ("batch", 16))),
            ),
            True,
        ),
        (
            "output 'sentence_embedding' has 256 values, not 384",
            tiny_onnx(folder / "out256.onnx", output=("sentence_embedding", "float32", ("batch", 256))),
            True,
        ),
    ]


def _variants(ctx: CaseContext, served: Served, folder: Path) -> list[tuple[str, Path, bool]]:
    """The incompatible variants, built as TensorRT plans where the backend is TensorRT."""
    variants = incompatible_variants(folder)
    if served.backend == "trt":
        p = ctx.params
        variants = [
            (
                w,
                cached_plan(
                    f,
                    p["trt_profiles"] if "seq16" not in f.name else [[[1, 16], [4, 16], [8, 16]]],
                    engine_cache_dir(),
                    log=ctx.log,
                ),
                r,
            )
            for w, f, r in variants
        ]
    return variants


class _Attempts:
    """Every variant swapped in with the check on, then at once with it off (the control),
    under the request stream. After each attempt probe requests as the service sends them (the
    served model's inputs, one per shape bucket) go through the slot: whether they are answered
    in the served model's output shapes is the clients' view of which engine serves, whatever
    the swap reported. A
    swap that got through (or an engine the probe does not recognise) is swapped back."""

    def __init__(
        self, ctx: CaseContext, served: Served, slot, variants: list, verifier, prints: Fingerprints | None = None
    ):
        self.ctx, self.served, self.slot, self.variants, self.verifier = ctx, served, slot, variants, verifier
        self.prints = prints  # which model answered a probe, told from its answer
        self.loading: dict = {}
        self.results: list[dict] = []
        self.io = slot.engine.io()  # the inputs the service sends
        self.shapes: dict | None = None

    def opener(self, path: Path, label: str, ver=None):
        def load():
            self.loading["engine"] = self.served.open(path, label=label, verifier=ver)
            return self.loading["engine"]

        return load

    def feeds_for(self, b):  # the engine being warmed gets feeds for its own inputs
        return self.served.feeds.feeds(self.loading["engine"].io(), b, 0)

    def probe(self) -> tuple[bool, str]:
        """One request per shape bucket with the served model's inputs through the slot: each
        answered, in the output shapes the served model answered with before any attempt?
        self.answered_by: the model every probe's answer is (its fingerprint), or "?"."""
        shapes, by = {}, set()
        self.answered_by = UNKNOWN
        for b in self.served.buckets:
            try:
                out, _ = self.slot.infer(self.served.feeds.feeds(self.io, b, 0))
            except Exception as e:
                return False, f"probe at {b.name} failed: {type(e).__name__}: {e}"[:200]
            shapes[b.name] = {k: list(v.shape) for k, v in out.items()}
            by.add(self.prints.which(b.name, 0, out) if self.prints is not None else UNKNOWN)
        self.answered_by = by.pop() if len(by) == 1 else UNKNOWN
        if self.shapes is None:
            self.shapes = shapes
        return shapes == self.shapes, f"probe answered {shapes}"

    def attempt(self, f: Path, check: bool) -> tuple[str, str]:

        self.loading = {}
        try:
            self.slot.swap(self.opener(f, f.name, self.verifier), self.served.buckets, self.feeds_for, check=check)
            return "accepted", f"now serving {f.name}"
        except IncompatibleEngine as e:
            return "refused", str(e)
        except Exception as e:  # the control may break at prewarm: not accepted, not refused by the check
            return "failed", f"{type(e).__name__}: {e}"[:300]

    def __call__(self) -> None:
        served, slot = self.served, self.slot
        time.sleep(0.3)
        self.probe()
        for what, f, should_refuse in self.variants:
            for check in (True, False):  # the control (check off) right after each checked attempt
                version_before = slot.version
                outcome, msg = self.attempt(f, check)
                loaded = "engine" in self.loading  # the driver's opener returned the new engine
                serves, seen = self.probe()
                answered_by = self.answered_by
                if outcome == "accepted" or not serves:  # back to the real model (no check: the served
                    # engine may be the incompatible one)
                    slot.swap(self.opener(served.file, "minilm"), served.buckets, self.feeds_for, check=False)
                self.results.append(
                    {
                        "variant": what,
                        "file": f.name,
                        "check": "on" if check else "off (control)",
                        "expected": "refused" if should_refuse else "accepted",
                        "outcome": outcome,
                        "serves_as_before": serves,
                        "message": f"{msg}; {seen}",
                        "loaded": loaded,
                        "answered_by": answered_by,
                        "version_before": version_before,
                        "version_after": slot.version,
                    }
                )
                self.ctx.log(f"{what}, check {'on' if check else 'off'}: {outcome}, {seen}")
                time.sleep(0.1)


def wrong(r: dict) -> bool:
    """A wrong verdict: the outcome is not the expected one, or a swap that had to be refused
    left the clients with an engine that does not answer as the served model did."""
    return r["outcome"] != r["expected"] or (r["expected"] == "refused" and not r["serves_as_before"])


def incompatible_swap(ctx: CaseContext) -> Record:
    if why := skip_reason(ctx):
        return Record("skipped", why)

    p = ctx.params
    served = Served(ctx)
    folder = ctx.raw_dir / "variants"
    folder.mkdir(parents=True, exist_ok=True)
    variants = _variants(ctx, served, folder)
    verifier = Verifier(write_manifest([f for _, f, _ in variants], folder / "manifest.json"))
    first = served.open(label="minilm")
    first.prewarm(served.buckets, served.feeds.feeds_for(first.io(), 0))
    facts = reported_facts([first.reported()])
    slot = EngineSlot(first)
    same_io = next(f for _, f, refuse in variants if not refuse)
    prints = Fingerprints.build(
        {served.file.name: served.file, same_io.name: same_io},
        served.buckets,
        served.feeds,
        lambda f: served.open(
            f, label=f"fingerprint {f.name}", verifier=served.verifier if f == served.file else verifier
        ),
        variants=1,
    )
    attempts = _Attempts(ctx, served, slot, variants, verifier, prints)
    try:
        records = run_stream(served, slot, p, time.perf_counter(), attempts)
    finally:
        slot.engine.close()
    results = attempts.results
    (ctx.raw_path("attempts.json")).write_text(json.dumps(results, indent=2))
    checked = [r for r in results if r["check"] == "on"]
    control = [r for r in results if r["check"] != "on"]
    m = {
        "refused": Metric(
            sum(r["outcome"] == "refused" and r["expected"] == "refused" for r in checked), "swaps", "higher"
        ),
        "expected_refusals": Metric(sum(r["expected"] == "refused" for r in checked), "swaps"),
        "wrong_verdicts": Metric(
            sum(wrong(r) for r in checked),
            "swaps",
            "lower",
            "outcome not the expected one, or a refused swap after which the probe request "
            "(the served model's inputs) is not answered as before",
        ),
        "control.wrong_verdicts": Metric(
            sum(wrong(r) for r in control), "swaps", None, "the same swaps with the compatibility check off"
        ),
        "served_changed_on_refusal": Metric(
            sum(r["outcome"] == "refused" and not r["serves_as_before"] for r in checked),
            "swaps",
            "lower",
            "refused swaps after which the probe was not answered as before",
        ),
        "failed_requests": Metric(sum(not r.ok for r in records), "requests", "lower"),
        "requests": Metric(len(records), "requests"),
        "swaps_attempted": Metric(
            len(checked), "swaps", None, "swaps attempted with the check on (what wrong_verdicts is out of)"
        ),
        "incompatible_loaded": Metric(
            sum(r["expected"] == "refused" and r["loaded"] for r in checked),
            "swaps",
            None,
            "incompatible models the driver's opener loaded aside, check on: they reached the compatibility check",
        ),
        "accepted_answered_by_new": Metric(
            sum(
                r["expected"] == "accepted" and r["outcome"] == "accepted" and r["answered_by"] == r["file"]
                for r in checked
            ),
            "swaps",
            None,
            "accepted swaps (check on) after which the probes were answered with the new model's output (its "
            "fingerprint, not the slot's label): the swap path really put the new engine in service",
        ),
    }
    series = {
        SWAP_ATTEMPTS.name: SWAP_ATTEMPTS.make({c.name: [r[c.name] for r in results] for c in SWAP_ATTEMPTS.columns})
    }
    return Record(
        "ok", metrics=m, series=series, facts=facts, details={"failures": [r.error for r in records if not r.ok][:20]}
    )
