"""Driver `semantic-embed-perf`: batched embedding throughput (ours vs sentence-transformers'
own encode, interleaved in the same process), single-query embedding rate, and the time to
compute 64-bit LSH signatures of many vectors."""

from __future__ import annotations

import time

import numpy as np

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput
from harness.experiments.semantic_cache import common, datasets
from harness.experiments.semantic_cache import keys as K

PARAMS = {
    "dataset": Param(str, datasets.DEFAULT_DATASET, "texts to embed (any supported format)"),
    "dataset_format": Param(str, "auto", "auto, gptcache, groups or pairs", datasets.FORMATS),
    "texts": Param(int, 512, "texts embedded per timed pass"),
    "rounds": Param(int, 2, "timed passes per path (best is kept); the paths alternate"),
    "batch_size": Param(int, 64, "batch size of both batched paths"),
    "single_queries": Param(int, 100, "texts embedded one at a time"),
    "lsh_vectors": Param(int, 100000, "vectors signed in the LSH timing"),
    "torch_threads": Param(int, 0, "torch.set_num_threads for the batched paths (0 = torch's default)"),
    "single_threads": Param(int, 1, "torch threads for the single-query path"),
}


def _check(where: str, p: dict) -> None:
    for k in ("texts", "rounds", "batch_size", "single_queries", "lsh_vectors"):
        if p[k] < 1:
            raise BadInput(f"{where}.{k}: must be at least 1, got {p[k]}")
    try:
        datasets.load(p["dataset"], p["dataset_format"])
    except BadInput as e:
        raise BadInput(f"{where}.dataset: {e}") from None


def texts_of(ds: datasets.Dataset) -> list[str]:
    if ds.fmt == "gptcache":
        return [s for _, s in ds.rows]
    if ds.fmt == "groups":
        return [q for q, _ in ds.rows]
    return [r[1] for r in ds.rows]


@register("semantic-cache-embed-perf", params=PARAMS, check=_check,
          description="embedding throughput (ours vs sentence-transformers), single-query rate, LSH signing speed")
def run(ctx: CaseContext) -> CaseOutcome:
    p = ctx.params
    from harness.experiments.semantic_cache.embed import Embedder

    texts = texts_of(datasets.load(p["dataset"], p["dataset_format"]))
    texts = (texts * (p["texts"] // len(texts) + 1))[:p["texts"]]
    emb = Embedder.load()
    ours, ref = [], []
    with common.torch_threads(p["torch_threads"]):
        emb.encode(texts[:p["batch_size"]], p["batch_size"])  # warm-up
        for r in range(p["rounds"]):
            for name, fn, acc in (("ours", emb.encode, ours), ("sentence-transformers", emb.reference_encode, ref)):
                t0 = time.perf_counter()
                fn(texts, p["batch_size"])
                acc.append(len(texts) / (time.perf_counter() - t0))
                ctx.log(f"round {r + 1}: {name} {acc[-1]:.1f} texts/s")
        a, b = emb.encode(texts[:64]), emb.reference_encode(texts[:64])
        agree = float((a * b).sum(1).min())
    with common.torch_threads(p["single_threads"]):
        single = texts[:p["single_queries"]]
        emb.encode_one(single[0])
        t0 = time.perf_counter()
        for t in single:
            emb.encode_one(t)
        single_qps = len(single) / (time.perf_counter() - t0)
    vecs = np.random.default_rng(0).standard_normal((p["lsh_vectors"], emb.dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    proj = K.projection(emb.dim, 1)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sigs = K.signatures(vecs, proj)
        [K.sem_key(s) for s in sigs[:1000]]
        best = min(best, time.perf_counter() - t0)
    common.write_json(ctx.raw_path("embed_perf.json"), {
        "ours_texts_per_s": ours, "sentence_transformers_texts_per_s": ref, "single_qps": single_qps,
        "lsh_seconds": best, "lsh_vectors": p["lsh_vectors"], "min_cosine_ours_vs_st": agree,
        "texts": len(texts), "batch_size": p["batch_size"]})
    m = {
        "embed_batch.ours_qps": Metric(max(ours), "texts/s", "higher", "best of the rounds"),
        "embed_batch.st_qps": Metric(max(ref), "texts/s", "higher", "SentenceTransformer.encode, best of the rounds"),
        "embed_batch.ours_vs_st": Metric(max(ours) / max(ref), "x", "higher", "ours / sentence-transformers"),
        "embed_batch.min_cosine_vs_st": Metric(agree, "", "higher", "vectors of both paths agree"),
        "embed_single.qps": Metric(single_qps, "texts/s", "higher", f"{p['single_threads']} torch thread(s)"),
        "lsh_sign.seconds": Metric(best, "s", "lower", f"{p['lsh_vectors']} x {emb.dim} vectors -> 64-bit signatures"),
        "lsh_sign.vectors_per_s": Metric(p["lsh_vectors"] / best, "vectors/s", "higher"),
    }
    return CaseOutcome("ok", metrics=m, details={"tables": [{
        "title": "Embedding throughput, same process, alternating passes",
        "columns": ["path", *[f"round {i + 1} texts/s" for i in range(p["rounds"])]],
        "rows": [["ours (direct transformer, length-sorted batches)", *[round(x, 1) for x in ours]],
                 ["sentence-transformers encode", *[round(x, 1) for x in ref]]],
        "note": f"{len(texts)} texts, batch {p['batch_size']}, {p['torch_threads'] or 'default'} torch threads. "
                f"The project notes saw about 410 texts/s for short questions (batch 64) on this 2-core host; "
                f"GPTCache's paraphrases average about 35 tokens (up to 292), so fewer texts/s here. Ours "
                f"tokenizes once and sorts by token count; sentence-transformers sorts by characters. "
                f"GPTCache: 0.12-0.26 s per query end to end."}]})
