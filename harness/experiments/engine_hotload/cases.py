"""The engine-hotload drivers for cold start and prewarm. Every engine they time runs in a
fresh process (fresh.py), so process-level first-use costs land on the engine that pays
them in a real service: the first one after a start.

Every driver takes `backend: ort | trt`; a TensorRT case is skipped with the reason where
tensorrt or a GPU is missing.
"""

from __future__ import annotations

from typing import cast

from harness.base import stats
from harness.experiments.engine_hotload.fresh import run_fresh
from harness.experiments.engine_hotload.series import COLD_STARTS, FIRST_REQUESTS, PREWARM, STEADY
from harness.experiments.engine_hotload.served import COMMON, MIB, Served, env_details, skip_reason
from harness.model.driver_contract import CaseContext, Metric, Param, Record
from harness.model.driver_helpers import write_csv

MODE_PREFIX = {"cold": "cold", "profile0": "profile0", "all": "prewarmed"}  # mode -> metric prefix


def _tokens(ctx: CaseContext, served: Served):
    return served.feeds.save_tokens(ctx.raw_path("request_tokens.npz"), served.buckets)


# ---- cold start ----------------------------------------------------------------------------


def cold_start(ctx: CaseContext) -> Record:
    if why := skip_reason(ctx):
        return Record("skipped", why)

    served = Served(ctx)
    tokens = _tokens(ctx, served)
    cols = ["read_ms", "verify_ms", "deserialize_ms", "context_ms", "first_infer_ms", "total_ms"]
    rows, first = [], None
    for i in range(ctx.params["cold_starts"]):
        r = run_fresh(served.fresh_spec(tokens, "cold", verify=True), ctx.raw_dir)
        tm = r["timings"]
        rows.append(
            [
                i + 1,
                tm["read_ms"],
                tm["verify_ms"],
                tm["deserialize_ms"],
                tm["context_ms"],
                r["first"][0]["ms"],
                r["to_first_result_ms"],
            ]
        )
        first = first or r
        ctx.log(
            f"cold start {i + 1}: {r['to_first_result_ms']:.0f} ms (deserialize {tm['deserialize_ms']:.0f} ms, "
            f"first inference {r['first'][0]['ms']:.1f} ms on {r['first'][0]['bucket']})"
        )
    first = cast(dict, first)  # the loop ran: cold_starts has min=1 (drivers.py)
    write_csv(ctx.raw_path("cold_starts.csv"), ["cold start"] + cols, rows)
    m = {c: Metric(stats.median([row[k + 1] for row in rows]), "ms", "lower") for k, c in enumerate(cols)}
    m["engine_mib"] = Metric(first["engine_bytes"] / MIB, "MiB")
    note = (
        "ONNX Runtime has no execution context: context_ms is making the RunOptions; deserialize_ms is "
        "InferenceSession creation from the verified bytes; the file is read from the page cache after the "
        "first load."
        if served.backend == "ort"
        else "TensorRT: deserialize_cuda_engine, then one execution context per optimization profile."
    )
    series = COLD_STARTS.make(
        {"cold start": [r[0] for r in rows], **{c: [r[k + 1] for r in rows] for k, c in enumerate(cols)}},
        f"each load in a fresh process; first inference on bucket {first['first'][0]['bucket']}. {note}",
    )
    return Record(
        "ok",
        metrics=m,
        series={COLD_STARTS.name: series},
        details=env_details(served, first["io"], first["profiles"], first["memory"], first["engine_bytes"]),
    )


# ---- prewarm ---------------------------------------------------------------------------------

PREWARM_PARAMS = {
    **COMMON,
    "cold_starts": Param(
        int, 5, "fresh processes per prewarm mode (none, profile 0 only, every profile and bucket), interleaved", min=1
    ),
    "steady_requests": Param(
        int, 10, "steady-state requests per bucket on each fresh engine, after its first requests", min=1
    ),
}


def prewarm_summary(runs: list[dict], buckets: list[str]) -> tuple[dict[str, float], dict[str, dict]]:
    """From fresh-engine runs ({mode, first: [{bucket, ms}], steady: {bucket: [ms]}}) to
    (metrics, steady per bucket). Per mode: first_ms = median of the very first request,
    first_over_p50 / first_over_p99 = the worst bucket's median first request over the
    steady p50 / p99 pooled over every run."""
    steady = {}
    for b in buckets:
        pool = [v for r in runs for v in r["steady"].get(b, [])]
        steady[b] = {"n": len(pool), "p50": stats.percentile(pool, 50), "p99": stats.percentile(pool, 99)}
    out: dict[str, float] = {}
    for mode, prefix in MODE_PREFIX.items():
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        out[f"{prefix}.first_ms"] = stats.median([r["first"][0]["ms"] for r in mine])
        per_bucket = {b: stats.median([f["ms"] for r in mine for f in r["first"] if f["bucket"] == b]) for b in buckets}
        for b, v in per_bucket.items():
            out[f"{b}.{prefix}_first_ms"] = v
        out[f"{prefix}.first_over_p50"] = max(per_bucket[b] / steady[b]["p50"] for b in buckets)
        out[f"{prefix}.first_over_p99"] = max(per_bucket[b] / steady[b]["p99"] for b in buckets)
    for b in buckets:
        out[f"{b}.p50_ms"], out[f"{b}.p99_ms"] = steady[b]["p50"], steady[b]["p99"]
    return out, steady


_NOTES = {
    "first_ms": "the very first request after load (at a shape the source's profile-0 prewarm did not run), "
    "median over fresh processes",
    "first_over_p50": "worst bucket: median first request / steady p50",
    "first_over_p99": "worst bucket: median first request / steady p99",
}


def prewarm(ctx: CaseContext) -> Record:
    if why := skip_reason(ctx):
        return Record("skipped", why)

    served = Served(ctx)
    p = ctx.params
    tokens = _tokens(ctx, served)
    runs: list[dict] = []
    first_rows: list[list] = []
    warm_rows: list[list] = []
    for i in range(p["cold_starts"]):
        for mode in MODE_PREFIX:  # interleaved: the control (cold) beside each prewarm mode
            r = run_fresh(served.fresh_spec(tokens, mode, p["steady_requests"]), ctx.raw_dir)
            runs.append(r)
            first_rows += [[i + 1, mode, k + 1, f["bucket"], f["ms"]] for k, f in enumerate(r["first"])]
            warm_rows += [[i + 1, mode, w["profile"], w["bucket"], w["ms"]] for w in r["prewarm"]]
        ctx.log(
            f"engine {i + 1}/{p['cold_starts']}: first request cold {runs[-3]['first'][0]['ms']:.1f} ms, "
            f"profile 0 {runs[-2]['first'][0]['ms']:.1f} ms, every profile {runs[-1]['first'][0]['ms']:.1f} ms"
        )
    names = [b.name for b in served.buckets]
    values, steady = prewarm_summary(runs, names)
    write_csv(ctx.raw_path("first_requests.csv"), ["engine", "mode", "position", "bucket", "ms"], first_rows)
    metrics = {}
    for k, v in values.items():
        note = next((n for suffix, n in _NOTES.items() if k.endswith(suffix) and k.count(".") == 1), "")
        metrics[k] = Metric(v, "x" if "_over_" in k else "ms", "lower", note)
    metrics["prewarm_runs"] = Metric(
        stats.median([len(r["prewarm"]) for r in runs if r["mode"] == "all"]),
        "inferences",
        None,
        "every profile and bucket: one per (profile, bucket it covers)",
    )
    metrics["prewarm_ms"] = Metric(
        stats.median([sum(w["ms"] for w in r["prewarm"]) for r in runs if r["mode"] == "all"]), "ms", "lower"
    )
    first = runs[0]
    first_cols, warm_cols = (
        ("engine", "mode", "position", "bucket", "ms"),
        ("engine", "mode", "profile", "bucket", "ms"),
    )
    series = {
        FIRST_REQUESTS.name: FIRST_REQUESTS.rows([dict(zip(first_cols, r)) for r in first_rows]),
        STEADY.name: STEADY.make(
            {
                "bucket": names,
                "n": [steady[b]["n"] for b in names],
                "p50_ms": [steady[b]["p50"] for b in names],
                "p99_ms": [steady[b]["p99"] for b in names],
            }
        ),
        PREWARM.name: PREWARM.rows([dict(zip(warm_cols, r)) for r in warm_rows]),
    }
    return Record(
        "ok",
        metrics=metrics,
        series=series,
        details={
            **env_details(served, first["io"], first["profiles"], first["memory"], first["engine_bytes"]),
            "first_request_order": [f["bucket"] for f in first["first"]],
        },
    )
