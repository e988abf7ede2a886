"""The hot-swap case: hot swaps under a request stream, with a restart, an in-place swap, a
no-drain swap and a pause interleaved as the controls (its parameters, SWAP_PARAMS; the
second model version it alternates with; its raw files and series). The actions are in
swap_actions.py, the measures in swap_service.py and hot_swap_metrics.py."""

from __future__ import annotations

import json
from pathlib import Path

from harness.experiments.engine_hotload.backend_ort import save_optimized
from harness.experiments.engine_hotload.backend_trt import cached_plan
from harness.experiments.engine_hotload.fingerprint import Fingerprints
from harness.experiments.engine_hotload.gpu import MemorySampler
from harness.experiments.engine_hotload.hot_swap_metrics import swap_metrics
from harness.experiments.engine_hotload.lifecycle import parse_buckets
from harness.experiments.engine_hotload.series import ACTIONS, LATENCY_WINDOWS, MEMORY
from harness.experiments.engine_hotload.served import (
    COMMON,
    MIB,
    Served,
    env_details,
    skip_reason,
    trusted_manifest,
)
from harness.experiments.engine_hotload.swap import EngineSlot
from harness.experiments.engine_hotload.swap_actions import run_actions
from harness.experiments.engine_hotload.swap_service import action_rows, arm_of
from harness.experiments.engine_hotload.swap_stream import reported_facts, run_stream
from harness.experiments.engine_hotload.workload import windows
from harness.mechanisms.onnx_models.export import engine_cache_dir, perturbed_onnx, sha256_file
from harness.model.driver_contract import CaseContext, Param, Record, Series
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
            lambda: run_actions(ctx, served, slot, files, verifiers, done, errors, prints, straddles, t0, reported),
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
