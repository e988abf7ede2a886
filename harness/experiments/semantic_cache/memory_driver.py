"""Driver `semantic-cache-memory` (claim C4): the memory peak of serving the same stream with
no cache, an exact-hash cache and the LSH semantic cache, each mode in a fresh subprocess
(memory_probe) with the same decode work; the control is a second no-cache process (cache
off twice), which shows how far two identical processes differ. Each process loads SmolLM2
when the first request the model must serve arrives, so a process whose requests all hit
never holds it (the `stream` parameter: semantic-hits is such a stream for the semantic cache,
to show that the check sees a working cache; not a measurement of the claim)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, Series, register
from harness.errors import EnvironmentProblem
from harness.experiments.semantic_cache import ttft_driver
from harness.toolkit import torch_threads

PARAMS = {**ttft_driver.STREAM_PARAMS,
          "queries": Param(int, 20, "length of the stream each mode serves (from the test split)", min=1),
          "timeout_s": Param(int, 900, "longest time one mode's process may take", min=10),
          "parallel": Param(int, 1, "mode processes run at the same time (each measures only its own memory)",
                            min=1, max=4)}
RUNS = ("no_cache", "hash_cache", "semantic_cache", "control.no_cache")


def _probe(ctx: CaseContext, p: dict, job: dict, name: str) -> dict:
    from harness.runner import PASSWORD_ENV

    env = dict(os.environ)
    if ctx.target.password:
        env[PASSWORD_ENV] = ctx.target.password
    with tempfile.TemporaryDirectory(prefix="semantic-memory-") as tmp:
        jp, op = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jp.write_text(json.dumps(job))
        r = subprocess.run([sys.executable, "-m", "harness.experiments.semantic_cache.memory_probe", str(jp), str(op)],
                           capture_output=True, text=True, env=env, timeout=p["timeout_s"])
        if r.returncode != 0 or not op.exists():
            ctx.raw_path(f"memory_{name}.stderr").write_text(r.stderr[-20000:])
            tail = " | ".join(r.stderr.strip().splitlines()[-2:])
            raise EnvironmentProblem(f"the {name} memory process exited with code {r.returncode}: {tail} "
                                     f"(memory_{name}.stderr in raw/)")
        return json.loads(op.read_text())


@register("semantic-cache-memory", params=PARAMS, needs="cluster", check=ttft_driver.check,
          description="C4: memory peak per serving mode, each in a fresh process, same decode work")
def run(ctx: CaseContext) -> CaseOutcome:
    p = ctx.params
    from harness.experiments.semantic_cache.embed import Embedder

    dev = ttft_driver.device_of(p)
    with torch_threads(p["torch_threads"]):
        s = ttft_driver.prepare(p, Embedder.load(), ctx.log)
    base = {"device": dev, "torch_threads": p["torch_threads"] or 1, "lsh_seed": p["lsh_seed"], "ttl_s": p["ttl_s"],
            "bands": p["bands"], "radius": s.radius, "signature": p["signature"], "max_new_tokens": p["max_new_tokens"],
            "inserts": [list(x) for x in s.workload.inserts], "insert_sigs": [int(x) for x in s.insert_sigs],
            "requests": [list(x) for x in s.requests], "target": ctx.target.to_json(),
            "username": ctx.target.username}
    shift = (ctx.repetition - 1) % len(RUNS)
    order = RUNS[shift:] + RUNS[:shift]  # which mode's process goes first rotates per repetition
    from concurrent.futures import ThreadPoolExecutor

    ctx.log(f"{len(order)} fresh processes ({', '.join(order)}) serve {len(s.requests)} requests each, "
            f"{p['parallel']} at a time")
    jobs = {name: {**base, "mode": name.removeprefix("control."), "prefix": f"mem{i}"} for i, name in enumerate(order)}
    with ThreadPoolExecutor(p["parallel"]) as pool:
        futures = {name: pool.submit(_probe, ctx, p, job, name.replace(".", "_")) for name, job in jobs.items()}
        res = {name: futures[name].result() for name in order}
    mib = 2 ** 20
    m: dict[str, Metric] = {}
    for name, r in res.items():
        m[f"{name}.rss_peak_mb"] = Metric(r["rss_peak"] / mib, "MiB", "lower", "peak RSS while serving (10 ms samples)")
        m[f"{name}.ru_maxrss_mb"] = Metric(r["ru_maxrss"] / mib, "MiB", "lower", "the process's whole-life peak")
        if r["gpu_peak_alloc"] is not None:
            m[f"{name}.gpu_peak_mb"] = Metric(r["gpu_peak_alloc"] / mib, "MiB", "lower", "torch peak allocated")

    def change(key: str, a: str, b: str) -> float:
        return 100 * (res[a][key] - res[b][key]) / res[b][key]

    m["memory.rss_change_pct"] = Metric(change("rss_peak", "semantic_cache", "no_cache"), "%", "lower",
                                        "peak RSS while serving, semantic cache vs no cache")
    m["control.rss_change_pct"] = Metric(change("rss_peak", "control.no_cache", "no_cache"), "%", "lower",
                                         "cache off twice: two fresh no-cache processes")
    m["memory.hash_rss_change_pct"] = Metric(change("rss_peak", "hash_cache", "no_cache"), "%", "lower")
    if res["no_cache"]["gpu_peak_alloc"]:
        m["memory.gpu_change_pct"] = Metric(change("gpu_peak_alloc", "semantic_cache", "no_cache"), "%", "lower",
                                            "torch peak allocated, semantic cache vs no cache")
        m["control.gpu_change_pct"] = Metric(change("gpu_peak_alloc", "control.no_cache", "no_cache"), "%", "lower")
    names = list(res)
    series = {"modes": Series({
        "mode": names, "order": [order.index(n) + 1 for n in names],
        "rss_peak_mb": [res[n]["rss_peak"] / mib for n in names],
        "ru_maxrss_mb": [res[n]["ru_maxrss"] / mib for n in names],
        "gpu_peak_mb": [res[n]["gpu_peak_alloc"] / mib if res[n]["gpu_peak_alloc"] else None for n in names],
        "model_served": [sum(o != "hit" for o in res[n]["outcomes"]) for n in names],
        "model_loaded": ["yes" if res[n]["model_loaded"] else "no" for n in names],
        "correct_hits": [res[n]["outcomes"].count("hit") for n in names],
        "wrong_hits": [res[n]["outcomes"].count("wrong_hit") for n in names]},
        {"rss_peak_mb": "MiB", "ru_maxrss_mb": "MiB", "gpu_peak_mb": "MiB"},
        f"each mode in its own fresh process on {dev}: {len(s.requests)} requests, {p['max_new_tokens']} tokens "
        f"decoded whenever the model serves (SmolLM2 is loaded at the first such request; stream "
        f"{p['stream']}); the semantic cache's process also holds all-MiniLM-L6-v2")}
    return CaseOutcome("ok", metrics=m, series=series, details={"device": dev, "process_order": list(order)})
