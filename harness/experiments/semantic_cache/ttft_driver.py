"""Driver `semantic-ttft`: time to first token of SmolLM2-135M-Instruct over one query
stream, without a cache, with an exact-hash cache and with the LSH semantic cache (entries
in the Redis Cluster); process memory (and GPU memory when present) per mode."""

from __future__ import annotations

import csv
import random
import time

import numpy as np

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput
from harness.experiments.semantic_cache import common, datasets
from harness.experiments.semantic_cache import keys as K
from harness.experiments.semantic_cache import metrics as M

PARAMS = {
    **common.dataset_params(),
    "queries": Param(int, 100, "length of the query stream (a seeded sample of the workload's queries)"),
    "stream_seed": Param(int, 3, "seed of the stream sample"),
    "max_new_tokens": Param(int, 32, "tokens decoded on a miss (the answer that is stored)"),
    "lsh_seed": Param(int, 1, "seed of the hyperplanes"),
    "bands": Param(int, 8, "LSH bands of the radius index", (1, 2, 4, 8, 16, 32, 64)),
    "radius": Param(int, 7, "Hamming radius of a semantic hit"),
    "device": Param(str, "auto", "auto (cuda when present), cpu or cuda", ("auto", "cpu", "cuda")),
    "ttl_s": Param(int, 300, "TTL of every cache entry"),
}

CLAIM_P95_MS = {"hash_cache": 428.0, "semantic_cache": 211.0}
CLAIM_HIT_PCT = {"hash_cache": 31.2, "semantic_cache": 67.8}


def _check(where: str, p: dict) -> None:
    common.check_dataset(where, p)
    if p["queries"] < 2 or p["max_new_tokens"] < 1:
        raise BadInput(f"{where}: queries must be >= 2 and max_new_tokens >= 1")


def _device(p) -> str:
    import torch

    if p["device"] == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if p["device"] == "cuda" and not torch.cuda.is_available():
        raise BadInput("device: cuda was asked for, but torch sees no GPU; use device=auto or cpu")
    return p["device"]


@register("semantic-cache-ttft", params=PARAMS, needs="cluster", check=_check,
          description="SmolLM2 time to first token without cache, with a hash cache and with the LSH cache")
def run(ctx: CaseContext) -> CaseOutcome:
    p = ctx.params
    ds = datasets.load(p["dataset"], p["dataset_format"])
    wl = datasets.workload(ds, p["insert_fraction"], p["split_seed"])
    rng = random.Random(p["stream_seed"])
    stream = [wl.queries[i] for i in rng.sample(range(len(wl.queries)), min(p["queries"], len(wl.queries)))]
    present = {lab for _, lab in wl.inserts}
    with common.torch_threads(p["torch_threads"]):
        return _run(ctx, p, wl, stream, present)


def _run(ctx, p, wl, stream, present) -> CaseOutcome:
    import torch

    from harness.experiments.semantic_cache.embed import Embedder, cached_encode
    from harness.experiments.semantic_cache.store import Entry, Store
    from harness.experiments.semantic_cache.ttft import ModeResult, PeakRSS, generate, nvml_used_bytes
    from harness.models import smollm2

    dev = _device(p)
    ctx.log(f"loading SmolLM2-135M-Instruct and all-MiniLM-L6-v2 on {dev}")
    tok, model = smollm2(dev)
    emb = Embedder.load(dev)
    ins_vec = cached_encode(emb, [t for t, _ in wl.inserts], 64, ctx.log)
    proj = K.projection(emb.dim, p["lsh_seed"])
    ins_sig = K.signatures(ins_vec, proj)
    entries = [Entry(lab, f"[cached answer of entry {i}]") for i, (_, lab) in enumerate(wl.inserts)]
    generate(tok, model, stream[0][0], 2)  # warm-up
    emb.encode_one(stream[0][0])
    client = ctx.target.cluster_client()
    common.clear_patterns(ctx.target)
    results: list[ModeResult] = []
    try:
        for mode in ("no_cache", "hash_cache", "semantic_cache"):
            store = Store(client, p["ttl_s"], p["bands"])
            if mode == "hash_cache":
                store.put_many([(K.exact_key(t, True), e) for (t, _), e in zip(wl.inserts, entries)])
            elif mode == "semantic_cache":
                store.put_signatures(ins_sig, entries)
            res = ModeResult(mode)
            if dev == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            t_mode = time.perf_counter()
            with PeakRSS() as rss:
                for text, label in stream:
                    t0 = time.perf_counter()
                    if mode == "no_cache":
                        g = generate(tok, model, text, p["max_new_tokens"], t0, first_only=True)
                        res.ttft_s.append(g.ttft_s)
                        res.hit.append(False)
                        res.matched.append(None)
                        continue
                    if mode == "hash_cache":
                        key = K.exact_key(text, True)
                        entry = store.get(key)
                        sig = None
                    else:
                        sig = int(K.signatures(emb.encode_one(text), proj)[0])
                        entry, dist, _ = store.lsh_nearest(sig)
                        if entry is not None and dist > p["radius"]:
                            entry = None
                    if entry is not None:
                        res.ttft_s.append(time.perf_counter() - t0)  # the stored answer is there at once
                        res.hit.append(True)
                        res.matched.append(entry.label)
                        continue
                    g = generate(tok, model, text, p["max_new_tokens"], t0)
                    res.ttft_s.append(g.ttft_s)
                    res.hit.append(False)
                    res.matched.append(None)
                    new = Entry(label, g.text)
                    if mode == "hash_cache":
                        store.put_many([(key, new)])
                    else:
                        store.put_signatures(np.array([sig], dtype=np.uint64), [new])
            res.rss_peak = rss.peak
            if dev == "cuda":
                res.gpu_peak_alloc = int(torch.cuda.max_memory_allocated())
            res.nvml_used = nvml_used_bytes()
            store.clear()
            results.append(res)
            ctx.log(f"{mode}: {len(stream)} requests in {time.perf_counter() - t_mode:.1f} s, "
                    f"{sum(res.hit)} hits, P95 TTFT {1000 * np.percentile(res.ttft_s, 95):.0f} ms")
    finally:
        client.close()
    return _outcome(ctx, p, stream, present, results, dev)


def _outcome(ctx, p, stream, present, results, dev) -> CaseOutcome:
    labels = [lab for _, lab in stream]
    should = [lab in present for lab in labels]
    with ctx.raw_path("ttft_per_request.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["request", "mode", "ttft_ms", "hit", "correct_hit", "should_hit"])
        for r in results:
            for i, (t, h, m) in enumerate(zip(r.ttft_s, r.hit, r.matched)):
                w.writerow([i, r.name, f"{1000 * t:.3f}", int(h), int(h and m == labels[i]), int(should[i])])
    metrics: dict[str, Metric] = {}
    rows = []
    by = {r.name: r for r in results}
    for r in results:
        ms = [1000 * t for t in r.ttft_s]
        metrics.update(common.pct_metrics(r.name, ms, f"TTFT over {len(ms)} requests, {dev}"))
        c = M.cache_counts(r.hit, r.matched, labels, should)
        metrics[f"{r.name}.rss_peak_mb"] = Metric(r.rss_peak / 2**20, "MiB", "lower", "peak RSS of this process")
        if r.name != "no_cache":
            metrics[f"{r.name}.hit_rate_pct"] = Metric(100 * c.hit_rate, "%", "higher")
            if c.hits:
                metrics[f"{r.name}.precision_pct"] = Metric(100 * c.precision, "%", "higher")
        gpu = "no GPU" if r.gpu_peak_alloc is None else f"{r.gpu_peak_alloc / 2**20:.1f} MiB peak allocated"
        if r.gpu_peak_alloc is not None:
            metrics[f"{r.name}.gpu_peak_alloc_mb"] = Metric(r.gpu_peak_alloc / 2**20, "MiB", "lower")
        if r.nvml_used is not None:
            gpu += f", NVML used {r.nvml_used / 2**20:.0f} MiB"
        rows.append([r.name, CLAIM_HIT_PCT.get(r.name, "-"),
                     "-" if r.name == "no_cache" else round(100 * c.hit_rate, 1),
                     "-" if r.name == "no_cache" else (round(100 * c.precision, 1) if c.hits else "- (no hit)"),
                     CLAIM_P95_MS.get(r.name, "-"), round(float(np.percentile(ms, 50)), 1),
                     round(float(np.percentile(ms, 95)), 1), round(r.rss_peak / 2**20, 1), gpu])
    base, sem = by["no_cache"], by["semantic_cache"]
    p95 = {r.name: float(np.percentile(r.ttft_s, 95)) for r in results}
    metrics["ttft.p95_change_semantic_vs_hash_pct"] = Metric(
        100 * (p95["semantic_cache"] - p95["hash_cache"]) / p95["hash_cache"], "%", "lower",
        "claim: 428 -> 211 ms, -50.7%")
    metrics["memory.rss_change_pct"] = Metric(100 * (sem.rss_peak - base.rss_peak) / base.rss_peak, "%", "lower",
                                              "peak RSS semantic cache vs no cache; claim (GPU memory): -39%")
    if sem.gpu_peak_alloc is not None and base.gpu_peak_alloc:
        metrics["memory.gpu_change_pct"] = Metric(
            100 * (sem.gpu_peak_alloc - base.gpu_peak_alloc) / base.gpu_peak_alloc, "%", "lower",
            "torch peak allocated, semantic cache vs no cache; claim: -39%")
    tables = [{
        "title": "The source's table: hash vs semantic cache, claimed vs measured",
        "columns": ["mode", "claimed hit rate %", "measured hit rate %", "precision %", "claimed P95 TTFT ms",
                    "P50 TTFT ms", "P95 TTFT ms", "peak RSS MiB", "GPU memory"],
        "rows": rows,
        "note": f"One stream of {len(stream)} queries (seeded sample, {sum(should)} whose answer is in the "
                f"cache), the same for every mode; SmolLM2-135M-Instruct on {dev}, greedy, "
                f"{p['max_new_tokens']} new tokens on a miss. A hit's TTFT is key + Redis lookup (the stored "
                f"answer is returned whole). The cache holds the workload's inserted origins (answer = "
                f"entry id, as in GPTCache's benchmark) plus every answer generated on a miss. Claimed "
                f"hit rates and P95 come from the source, which names neither its model size nor its "
                f"traffic."}]
    charts = [{"title": "TTFT per request (ms), same stream", "x_label": "request", "y_label": "ms",
               "kind": "scatter", "y_log": True,
               "series": [{"name": r.name, "points": [[i, round(1000 * t, 3)] for i, t in enumerate(r.ttft_s)]}
                          for r in results]}]
    return CaseOutcome("ok", metrics=metrics, details={"tables": tables, "charts": charts, "device": dev,
                                                       "gpu": "no GPU" if dev == "cpu" else dev})
