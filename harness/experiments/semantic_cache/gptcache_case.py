"""The case of driver `semantic-cache-gptcache`: GPTCache 0.1.44 measured beside the harness on the same
data, calibration/test split, model and machine, and the harness's lookup with its query
embedding from ONNX Runtime.

Accuracy (test split): GPTCache (SQLite + Faiss, `SearchDistanceEvaluation`, threshold chosen
on the calibration split) and the harness's exact cosine NN (threshold chosen the same way),
both on the same all-MiniLM-L6-v2 vectors. Latency: one query at a time, interleaved per query,
through the harness with the torch embedding ("before"), the harness with the ONNX Runtime
embedding ("after"), the ONNX path with a known added wait in its embedding (the instrument),
and GPTCache with the same torch embedding as its embedding_func, its SQLite file once on the
run's disk (as it ships: a lookup writes to SQLite) and once in RAM (tmpfs, like the Redis
Cluster here, which keeps nothing on disk). Each split into embedding, search and store.
GPTCache missing: the case is skipped with the reason."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np

from harness.driver_contract import CaseContext, CaseOutcome, Metric, Param, input_path
from harness.driver_helpers import torch_threads, write_csv
from harness.errors import BadInput
from harness.experiments.semantic_cache import common, gptcache_subject
from harness.experiments.semantic_cache.gptcache_accuracy import gptcache_accuracy, nn_accuracy
from harness.experiments.semantic_cache.gptcache_report import accuracy_outputs, latency_outputs
from harness.experiments.semantic_cache.lookup_latency import interleaved

PREFIX = "gcnn_"
PARAMS = {
    **common.dataset_params(),
    "thresholds": Param(list, [0.99, 0.97, 0.95, 0.925, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6],
                        "cosine thresholds of the harness's exact NN tried on the calibration split", min=-1, max=1),
    "gptcache_thresholds": Param(list, [0.995, 0.985, 0.975, 0.9625, 0.95, 0.925, 0.9, 0.875, 0.85, 0.825, 0.8],
                                 "GPTCache similarity_threshold values tried on the calibration split (t is about "
                                 "cosine >= 2t - 1: the default grid is the cosine grid's)", min=0, max=1),
    "latency_queries": Param(int, 40, "queries timed one at a time through every subject", min=1),
    "batch_size": Param(int, 64, "embedding batch size of the accuracy passes", min=1),
    "ttl_s": Param(int, 300, "TTL of the harness's entries in Redis", min=1),
    "onnx_threads": Param(int, 1, "ONNX Runtime intra-op threads of the single-query session", min=1),
    "fast_embedding": Param(str, "onnx", "onnx: the fast path under test; torch: the ONNX session replaced by the "
                                         "torch embedding (the mechanism removed, to show the checks would see it)",
                            ("onnx", "torch")),
    "instrument_delay_ms": Param(float, 10.0, "the instrument: a known wait added inside the fast path's "
                                              "embedding step (an arm of its own)", min=0),
    "gptcache_dir": Param(str, "", "folder for GPTCache's SQLite file and Faiss index, relative to the repository "
                                   "or absolute ('' = a temporary folder beside the run's results, on its disk)"),
    "gptcache_ram_dir": Param(str, "/dev/shm", "a RAM-backed folder for the GPTCache arm whose SQLite file "
                                               "is in memory ('' = no such arm)"),
}


def check(where: str, p: dict) -> None:
    common.check_dataset(where, p)
    if not p["thresholds"] or not p["gptcache_thresholds"]:
        raise BadInput(f"{where}: thresholds and gptcache_thresholds need at least one value each")


class LiveOrKnown:
    """GPTCache's embedding_func: a known vector for a text embedded before (the accuracy
    passes), else the live model (the timed calls, `known` emptied)."""

    def __init__(self, live, known: dict):
        self.live, self.known = live, known

    def __call__(self, text: str) -> np.ndarray:
        v = self.known.get(text)
        return self.live(text) if v is None else v


def run(ctx: CaseContext) -> CaseOutcome:
    p = ctx.params
    why = gptcache_subject.missing()
    if why:
        return CaseOutcome("skipped", why)
    _, wl = common.load(p)
    cal, test = common.split_queries(wl.queries, p["calibration_fraction"], p["split_seed"])
    ctx.log(f"{wl.name}; {len(cal)} calibration / {len(test)} test queries; GPTCache {gptcache_subject.VERSION}")
    from harness.experiments.semantic_cache.embed import Embedder, cached_encode

    with torch_threads(p["torch_threads"]):
        emb = Embedder.load()
        ins_vec = cached_encode(emb, [t for t, _ in wl.inserts], p["batch_size"], ctx.log)
        q_vec = cached_encode(emb, [t for t, _ in wl.queries], p["batch_size"], ctx.log)
    known = {t: v for (t, _), v in zip(wl.inserts + wl.queries, np.concatenate([ins_vec, q_vec]))}
    ins_labels = [lab for _, lab in wl.inserts]
    ours = nn_accuracy(q_vec, ins_vec, ins_labels, wl, cal, test, p["thresholds"])
    disk = input_path(p["gptcache_dir"]) if p["gptcache_dir"] else ctx.raw_dir.parent
    disk.mkdir(parents=True, exist_ok=True)
    ram_dir = input_path(p["gptcache_ram_dir"]) if p["gptcache_ram_dir"] else None
    ram = str(ram_dir) if ram_dir is not None and ram_dir.is_dir() else None
    embed = LiveOrKnown(emb.encode_one, known)
    out = CaseOutcome("ok", details={"workload": wl.name, "gptcache_version": gptcache_subject.VERSION})
    out.facts.update(gptcache_subject.store_facts(disk, ram))
    with torch_threads(p["torch_threads"] or 1), \
            gptcache_subject.GptCache(embed, emb.dim, max_size=max(1000, 2 * len(wl.inserts)),
                                      base_dir=ram or str(disk)) as first:
        first.import_data([t for t, _ in wl.inserts], ins_labels)
        key = _accuracy_key(wl, cal, p)
        theirs = _ACCURACY.get(key)
        if theirs is None:  # deterministic (same vectors, exact Faiss search): once per process
            theirs = _ACCURACY[key] = gptcache_accuracy(first, wl, cal, test, p["gptcache_thresholds"])
        else:
            ctx.log("GPTCache's accuracy passes are the same as an earlier repetition's (same vectors and split)")
        ctx.log(f"GPTCache: threshold {theirs['threshold']:g} chosen on the calibration split")
        accuracy_outputs(out, ours, theirs, len(test))
        _timed(ctx, p, wl, ins_vec, ours["threshold"], theirs["threshold"], _arms(p, emb, ctx.log),
               first if ram else None, embed, disk, out)
    return out


_ACCURACY: dict = {}


def _accuracy_key(wl, cal: list[int], p: dict) -> str:
    h = hashlib.sha256(json.dumps([wl.inserts, wl.queries, cal, sorted(p["gptcache_thresholds"])]).encode())
    return h.hexdigest()


def _arms(p: dict, emb, log) -> dict:
    """The harness's timed paths: torch ("before"), the fast path ("after"; the torch
    embedding when fast_embedding=torch) and the fast path with the instrument's known wait."""
    from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder

    if p["fast_embedding"] == "onnx":
        onnx = OnnxEmbedder.load(p["onnx_threads"], log)
        fast, delayed = onnx.encode_one, onnx.with_delay(p["instrument_delay_ms"]).encode_one
    else:
        fast, delayed = emb.encode_one, _delayed(emb.encode_one, p["instrument_delay_ms"])
    return {"torch": emb.encode_one, "onnx": fast, "instrument.delay": delayed}


def _delayed(fn, delay_ms: float):
    import time

    def inner(text):
        v = fn(text)
        time.sleep(delay_ms / 1000.0)
        return v

    return inner


def _timed(ctx, p, wl, ins_vec, nn_threshold, gc_threshold, arms, ram_cache, embed, disk, out) -> None:
    """The interleaved latency pass: the harness's entries in Redis, GPTCache on disk (and in
    RAM when `ram_cache` is given), every latency query through every arm."""
    from harness.experiments.semantic_cache.store import Entry, Store

    rng = random.Random(p["split_seed"] + 7)
    texts = [wl.queries[i][0] for i in rng.sample(range(len(wl.queries)), min(p["latency_queries"], len(wl.queries)))]
    client = ctx.target.cluster_client()
    store = Store(client, p["ttl_s"])
    try:
        store.put_many([(f"{PREFIX}{i}", Entry(lab, str(i))) for i, (_, lab) in enumerate(wl.inserts)], nx=False)
        with gptcache_subject.GptCache(embed, ins_vec.shape[1], threshold=gc_threshold,
                                       max_size=max(1000, 2 * len(wl.inserts)), base_dir=str(disk)) as on_disk:
            on_disk.import_data([t for t, _ in wl.inserts], [lab for _, lab in wl.inserts])
            embed.known = {}  # from here on GPTCache embeds every query live
            gc_arms = {"gptcache": on_disk}
            if ram_cache is not None:
                ram_cache.set_threshold(gc_threshold)
                gc_arms["gptcache_ram"] = ram_cache
            for fn in arms.values():  # warm-up: first calls of a session or model are slow
                fn(texts[0])
            tm, raw, vecs = interleaved(texts, arms, gc_arms, ins_vec, nn_threshold, store, PREFIX, ctx.log)
    finally:
        store.clear()
        client.close()
    write_csv(ctx.raw_path("lookup_latency_ms.csv"),
              ["query", "arm", "position", "embed_ms", "search_ms", "store_ms", "total_ms", "hit"], raw)
    torch_v, fast_v = np.stack(vecs["torch"]), np.stack(vecs["onnx"])
    out.metrics["onnx.min_cosine_vs_torch"] = Metric(float((torch_v * fast_v).sum(1).min()), "", "higher",
                                                     "the fast path's vectors against the torch path's, same texts")
    latency_outputs(out, tm, p, len(texts))
