"""The case of driver `semantic-cache-embed-perf`: batched embedding throughput (ours vs sentence-transformers'
own encode, interleaved in the same process), single-query embedding rate, and the time to
compute 64-bit LSH signatures of many vectors."""

from __future__ import annotations

import time

import numpy as np

from harness.experiments.semantic_cache.series import ROUNDS
from harness.mechanisms.semantic import common, datasets, keys
from harness.mechanisms.semantic.embed import Embedder
from harness.model.driver_contract import INPUT_FILE, CaseContext, Metric, Param, Record
from harness.model.driver_helpers import torch_threads

PARAMS = {
    "dataset": Param(
        str,
        datasets.DEFAULT_DATASET,
        "texts to embed (any supported format; relative to the repository or absolute)",
        kind=INPUT_FILE,
    ),
    "dataset_format": Param(str, "auto", "auto, gptcache, groups or pairs", datasets.FORMATS),
    "texts_per_pass": Param(int, 512, "texts embedded per timed pass", min=1),
    "rounds": Param(int, 2, "timed passes per path (best is kept); the paths alternate", min=1),
    "batch_size": Param(int, 64, "batch size of both batched paths", min=1),
    "single_queries": Param(int, 100, "texts embedded one at a time", min=1),
    "lsh_vectors": Param(int, 100000, "vectors signed in the LSH timing", min=1),
    "torch_threads": Param(int, 0, "torch threads for the batched paths (0 = torch's default)", min=0),
    "single_threads": Param(int, 1, "torch threads for the single-query path", min=1),
}


def texts_of(ds: datasets.Dataset) -> list[str]:
    if ds.fmt == "gptcache":
        return [s for _, s in ds.rows]
    if ds.fmt == "groups":
        return [q for q, _ in ds.rows]
    return [r[1] for r in ds.rows]


def run(ctx: CaseContext) -> Record:
    p = ctx.params

    texts = texts_of(datasets.load(p["dataset"], p["dataset_format"]))
    texts = (texts * (p["texts_per_pass"] // len(texts) + 1))[: p["texts_per_pass"]]
    emb = Embedder.load()
    ours: list[float]  # texts per second, one per round
    ref: list[float]
    ours, ref = [], []
    with torch_threads(p["torch_threads"]):
        emb.encode(texts[: p["batch_size"]], p["batch_size"])  # warm-up
        for r in range(p["rounds"]):
            for name, fn, acc in (("ours", emb.encode, ours), ("sentence-transformers", emb.reference_encode, ref)):
                t0 = time.perf_counter()
                fn(texts, p["batch_size"])
                acc.append(len(texts) / (time.perf_counter() - t0))
                ctx.log(f"round {r + 1}: {name} {acc[-1]:.1f} texts/s")
        a, b = emb.encode(texts[:64]), emb.reference_encode(texts[:64])
        agree = float((a * b).sum(1).min())
    with torch_threads(p["single_threads"]):
        single = texts[: p["single_queries"]]
        emb.encode_one(single[0])
        t0 = time.perf_counter()
        for t in single:
            emb.encode_one(t)
        single_qps = len(single) / (time.perf_counter() - t0)
    vecs = np.random.default_rng(0).standard_normal((p["lsh_vectors"], emb.dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    proj = keys.projection(emb.dim, 1)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sigs = keys.signatures(vecs, proj)
        [keys.sem_key(s) for s in sigs[:1000]]
        best = min(best, time.perf_counter() - t0)
    common.write_json(
        ctx.raw_path("embed_perf.json"),
        {
            "ours_texts_per_s": ours,
            "sentence_transformers_texts_per_s": ref,
            "single_qps": single_qps,
            "lsh_seconds": best,
            "lsh_vectors": p["lsh_vectors"],
            "min_cosine_ours_vs_st": agree,
            "texts": len(texts),
            "batch_size": p["batch_size"],
        },
    )
    m = {
        "embed_batch.ours_qps": Metric(max(ours), "texts/s", "higher", "best of the rounds"),
        "embed_batch.st_qps": Metric(max(ref), "texts/s", "higher", "SentenceTransformer.encode, best of the rounds"),
        "embed_batch.ours_vs_st": Metric(max(ours) / max(ref), "x", "higher", "ours / sentence-transformers"),
        "embed_batch.min_cosine_vs_st": Metric(agree, "", "higher", "vectors of both paths agree"),
        "embed_single.qps": Metric(single_qps, "texts/s", "higher", f"{p['single_threads']} torch thread(s)"),
        "lsh_sign.seconds": Metric(best, "s", "lower", f"{p['lsh_vectors']} x {emb.dim} vectors -> 64-bit signatures"),
        "lsh_sign.vectors_per_s": Metric(p["lsh_vectors"] / best, "vectors/s", "higher"),
    }
    rounds = list(range(1, p["rounds"] + 1))
    series = {
        ROUNDS.name: ROUNDS.make(
            {
                "round": rounds * 2,
                "path": ["ours"] * len(ours) + ["sentence-transformers"] * len(ref),
                "texts_per_s": ours + ref,
            },
            f"{len(texts)} texts per pass, batch {p['batch_size']}, "
            f"{p['torch_threads'] or 'default'} torch threads, the two paths alternating; "
            f"ours tokenizes once and sorts by token count, sentence-transformers sorts by "
            f"characters",
        )
    }
    return Record("ok", metrics=m, series=series)
