"""The case of driver `semantic-cache-memory` (claim C4): the memory peak of serving the same stream with
no cache, an exact-hash cache and the LSH semantic cache, each mode in a fresh subprocess
(memory_probe) with the same decode work. Every process holds SmolLM2 from its start, after
a warm-up generation that makes its weights resident (a process whose requests all hit holds
it too), so a difference between the modes is the cache's own. Controls: a second no-cache process (cache off twice: how far two identical
processes differ) and the instrument, a no-cache process that holds a known extra
allocation (`instrument_extra_mb`): the probe must see that much more. The case's fact
`memory_measured` says what was measured: "gpu" when NVML measured a GPU, else
"process_rss"."""

from __future__ import annotations

import os

from harness.experiments.semantic_cache import memory_probe, ttft_case
from harness.experiments.semantic_cache.series import MEMORY_MODES
from harness.mechanisms.semantic.embed import Embedder
from harness.model import child
from harness.model.driver_contract import CaseContext, Metric, Param, Record, Series
from harness.model.driver_helpers import torch_threads

PARAMS = {
    **{k: v for k, v in ttft_case.STREAM_PARAMS.items() if k != "oracle"},
    "queries": Param(int, 20, "length of the stream each mode serves (from the test split)", min=1),
    "timeout_s": Param(int, 900, "longest time one mode's process may take", min=10),
    "parallel": Param(int, 1, "mode processes run at the same time (each measures only its own memory)", min=1, max=5),
    "instrument_extra_mb": Param(
        int,
        256,
        "the instrument: the known extra allocation (MiB) its no-cache process holds; the probe must see it",
        min=1,
    ),
}
RUNS = ("no_cache", "hash_cache", "semantic_cache", "control.no_cache", "instrument.extra_allocation")


def _probe(ctx: CaseContext, p: dict, job: dict, name: str) -> dict:
    """One mode in a fresh process (harness.model.child): its peaks, or its error raised here."""
    return child.run(
        memory_probe.MODULE,
        job,
        timeout=p["timeout_s"],
        what=f"the {name} memory process",
        env={**os.environ, **ctx.target.to_env()},  # the password in the environment, never the job
        log=ctx.log,
        stderr_path=ctx.raw_path(f"memory_{name}.stderr"),
    )


def run(ctx: CaseContext) -> Record:
    p = ctx.params

    dev = ttft_case.device_of(p)
    with torch_threads(p["torch_threads"]):
        s = ttft_case.prepare(p, Embedder.load(), ctx.log)
    base = {
        "device": dev,
        "torch_threads": p["torch_threads"] or 1,
        "lsh_seed": p["lsh_seed"],
        "ttl_s": p["ttl_s"],
        "bands": p["bands"],
        "radius": s.radius,
        "signature": p["signature"],
        "max_new_tokens": p["max_new_tokens"],
        "inserts": [list(x) for x in s.workload.inserts],
        "insert_sigs": [int(x) for x in s.insert_sigs],
        "requests": [list(x) for x in s.requests],
        "target": ctx.target.to_json(),
        "username": ctx.target.username,
        "extra_mb": p["instrument_extra_mb"],
    }
    shift = (ctx.repetition - 1) % len(RUNS)
    order = RUNS[shift:] + RUNS[:shift]  # which mode's process goes first rotates per repetition
    from concurrent.futures import ThreadPoolExecutor

    ctx.log(
        f"{len(order)} fresh processes ({', '.join(order)}) serve {len(s.requests)} requests each, "
        f"{p['parallel']} at a time"
    )
    jobs = {name: {**base, "mode": name.split(".")[-1], "prefix": f"mem{i}"} for i, name in enumerate(order)}
    with ThreadPoolExecutor(p["parallel"]) as pool:
        futures = {name: pool.submit(_probe, ctx, p, job, name.replace(".", "_")) for name, job in jobs.items()}
        res = {name: futures[name].result() for name in order}
    gpu = all(r["nvml_used"] is not None for r in res.values())
    return Record(
        "ok",
        metrics=_metrics(res, p),
        series=_series(res, order, dev, p),
        details={"device": dev, "process_order": list(order)},
        facts={"memory_measured": "gpu" if gpu else "process_rss"},
    )


def _metrics(res: dict, p: dict) -> dict[str, Metric]:
    mib = 2**20
    m: dict[str, Metric] = {}
    for name, r in res.items():
        m[f"{name}.rss_peak_mb"] = Metric(r["rss_peak"] / mib, "MiB", "lower", "peak RSS while serving (10 ms samples)")
        m[f"{name}.ru_maxrss_mb"] = Metric(r["ru_maxrss"] / mib, "MiB", "lower", "the process's whole-life peak")
        if r["gpu_peak_alloc"] is not None:
            m[f"{name}.gpu_peak_mb"] = Metric(r["gpu_peak_alloc"] / mib, "MiB", "lower", "torch peak allocated")

    def change(key: str, a: str, b: str) -> float:
        return 100 * (res[a][key] - res[b][key]) / res[b][key]

    m["memory.rss_change_pct"] = Metric(
        change("rss_peak", "semantic_cache", "no_cache"),
        "%",
        "lower",
        "peak RSS while serving, semantic cache vs no cache (both hold SmolLM2)",
    )
    m["control.rss_change_pct"] = Metric(
        change("rss_peak", "control.no_cache", "no_cache"),
        "%",
        "lower",
        "cache off twice: two fresh no-cache processes",
    )
    m["memory.hash_rss_change_pct"] = Metric(change("rss_peak", "hash_cache", "no_cache"), "%", "lower")
    known = p["instrument_extra_mb"]
    m["instrument.known_mb"] = Metric(
        known, "MiB", None, "the extra allocation the instrument's process holds (a parameter, not a measurement)"
    )
    ext = "instrument.extra_allocation"
    m["instrument.rss_seen_mb"] = Metric(
        (res[ext]["rss_peak"] - res["no_cache"]["rss_peak"]) / mib,
        "MiB",
        None,
        "peak RSS of the no-cache process holding the known extra allocation, minus the plain no-cache process's",
    )
    if res["no_cache"]["gpu_peak_alloc"]:
        m["memory.gpu_change_pct"] = Metric(
            change("gpu_peak_alloc", "semantic_cache", "no_cache"),
            "%",
            "lower",
            "torch peak allocated, semantic cache vs no cache",
        )
        m["control.gpu_change_pct"] = Metric(change("gpu_peak_alloc", "control.no_cache", "no_cache"), "%", "lower")
        m["instrument.gpu_seen_mb"] = Metric(
            (res[ext]["gpu_peak_alloc"] - res["no_cache"]["gpu_peak_alloc"]) / mib,
            "MiB",
            None,
            "torch peak allocated of the process holding the known extra allocation, minus no cache's",
        )
    return m


def _series(res: dict, order: tuple, dev: str, p: dict) -> dict[str, Series]:
    mib = 2**20
    names = list(res)
    return {
        MEMORY_MODES.name: MEMORY_MODES.make(
            {
                "mode": names,
                "order": [order.index(n) + 1 for n in names],
                "rss_peak_mb": [res[n]["rss_peak"] / mib for n in names],
                "ru_maxrss_mb": [res[n]["ru_maxrss"] / mib for n in names],
                "gpu_peak_mb": [res[n]["gpu_peak_alloc"] / mib if res[n]["gpu_peak_alloc"] else None for n in names],
                "model_served": [sum(o != "hit" for o in res[n]["outcomes"]) for n in names],
                "correct_hits": [res[n]["outcomes"].count("hit") for n in names],
                "wrong_hits": [res[n]["outcomes"].count("wrong_hit") for n in names],
            },
            f"each mode in its own fresh process on {dev}: {len(res['no_cache']['outcomes'])} requests, "
            f"{p['max_new_tokens']} tokens decoded whenever the model serves (every process holds SmolLM2 from its "
            f"start; stream {p['stream']}); the semantic cache's process also holds all-MiniLM-L6-v2; "
            f"instrument.extra_allocation is a no-cache process holding {p['instrument_extra_mb']} MiB more",
        )
    }
