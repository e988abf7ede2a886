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

The int8 arm (`int8_arm: true`; FP32 stays the harness's lookup): the same lookup with a
dynamic per-channel int8 quantization of the same ONNX graph, its inserts embedded by it too,
deciding at FP32's calibrated threshold (the same cache with another embedding). It runs in the interleaved
latency pass, in a concurrent pass (every subject answering the same queries from
`concurrent_clients` client threads; the instrument: the int8 lookup embedding each query
twice, a known doubling of its work) and in the accuracy pass, where its answers are compared
query by query with FP32's (same decision, same answer) and its precision and recall are
counted against the dataset's labels (the instrument: the int8 query vectors turned to a known
cosine of themselves, which the comparison must see). The answers its timed lookups gave are
checked against the accuracy pass's: the arm that was timed is the arm that was judged.
GPTCache missing: the case is skipped with the reason."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from harness.base.errors import BadInput
from harness.experiments.semantic_cache import gptcache_speed, gptcache_subject
from harness.experiments.semantic_cache.gptcache_accuracy import (
    agreement,
    answers_of,
    gptcache_accuracy,
    nn_accuracy,
    perturbed,
)
from harness.experiments.semantic_cache.gptcache_report import (
    accuracy_outputs,
    concurrent_outputs,
    int8_outputs,
    latency_outputs,
    served_outputs,
)
from harness.experiments.semantic_cache.lookup_latency import concurrent, harness_answer, interleaved
from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder
from harness.mechanisms.semantic import common
from harness.mechanisms.semantic.datasets import Workload
from harness.mechanisms.semantic.embed import Embedder, cached_encode
from harness.mechanisms.semantic.store import Entry, Store
from harness.model.driver_contract import CaseContext, Metric, Param, Record, input_path
from harness.model.driver_helpers import torch_threads, write_csv

PREFIX = "gcnn_"
PARAMS = {
    **common.dataset_params(),
    "thresholds": Param(
        list,
        [0.99, 0.97, 0.95, 0.925, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6],
        "cosine thresholds of the harness's exact NN tried on the calibration split",
        min=-1,
        max=1,
    ),
    "gptcache_thresholds": Param(
        list,
        [0.995, 0.985, 0.975, 0.9625, 0.95, 0.925, 0.9, 0.875, 0.85, 0.825, 0.8],
        "GPTCache similarity_threshold values tried on the calibration split (t is about "
        "cosine >= 2t - 1: the default grid is the cosine grid's)",
        min=0,
        max=1,
    ),
    "latency_queries": Param(int, 40, "queries timed one at a time through every subject", min=1),
    "batch_size": Param(int, 64, "embedding batch size of the accuracy passes", min=1),
    "ttl_s": Param(int, 300, "TTL of the harness's entries in Redis", min=1),
    "onnx_threads": Param(int, 1, "ONNX Runtime intra-op threads of the single-query session", min=1),
    "fast_embedding": Param(
        str,
        "onnx",
        "onnx: the fast path under test; torch: the ONNX session replaced by the "
        "torch embedding (the mechanism removed, to show the checks would see it)",
        ("onnx", "torch"),
    ),
    "instrument_delay_ms": Param(
        float,
        10.0,
        "the instrument: a known wait added inside the fast path's embedding step (an arm of its own)",
        min=0,
    ),
    "gptcache_dir": Param(
        str,
        "",
        "folder for GPTCache's SQLite file and Faiss index, relative to the repository "
        "or absolute ('' = a temporary folder beside the run's results, on its disk)",
    ),
    "gptcache_ram_dir": Param(
        str, "/dev/shm", "a RAM-backed folder for the GPTCache arm whose SQLite file is in memory ('' = no such arm)"
    ),
    "int8_arm": Param(
        bool,
        False,
        "add the int8 arm beside FP32: the lookup with a dynamic per-channel int8 "
        "quantization of the same ONNX graph (its latency, its throughput under "
        "concurrent clients against GPTCache's, its agreement with FP32); FP32 stays the "
        "harness's lookup",
    ),
    "concurrent_clients": Param(int, 8, "client threads of the int8 arm's concurrent pass", min=1),
    "concurrent_queries": Param(
        int,
        32,
        "queries every subject answers per round of the concurrent pass (sent again until concurrent_min_s is reached)",
        min=1,
    ),
    "concurrent_rounds": Param(int, 3, "rounds of the concurrent pass (the subjects' order rotated per round)", min=1),
    "concurrent_min_s": Param(
        float,
        0.4,
        "each subject's least time per round of the concurrent pass (a fast "
        "subject is timed over as long a window as a slow one)",
        min=0,
    ),
    "instrument_noise_cosine": Param(
        float,
        0.95,
        "the agreement checks' instrument: the int8 query vectors turned to this cosine of themselves",
        min=0,
        max=1,
    ),
    **gptcache_speed.PARAMS,
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


def run(ctx: CaseContext) -> Record:
    p = ctx.params
    why = gptcache_subject.missing()
    if why:
        return Record("skipped", why)
    _, wl = common.load(p)
    cal, test = common.split_queries(wl.queries, p["calibration_fraction"], p["split_seed"])
    ctx.log(f"{wl.name}; {len(cal)} calibration / {len(test)} test queries; GPTCache {gptcache_subject.VERSION}")

    with torch_threads(p["torch_threads"]):
        emb = Embedder.load()
        ins_vec = cached_encode(emb, [t for t, _ in wl.inserts], p["batch_size"], ctx.log)
        q_vec = cached_encode(emb, [t for t, _ in wl.queries], p["batch_size"], ctx.log)
    known = {t: v for (t, _), v in zip(wl.inserts + wl.queries, np.concatenate([ins_vec, q_vec]))}
    ins_labels = [lab for _, lab in wl.inserts]
    ours = nn_accuracy(q_vec, ins_vec, ins_labels, wl, cal, test, p["thresholds"])
    q8 = OnnxEmbedder.load(p["onnx_threads"], ctx.log, graph="int8") if p["int8_arm"] else None
    int8 = _int8_accuracy(q8, wl, cal, test, ours, p, ctx.log) if q8 is not None else None
    disk = input_path(p["gptcache_dir"]) if p["gptcache_dir"] else ctx.raw_dir.parent
    disk.mkdir(parents=True, exist_ok=True)
    ram_dir = input_path(p["gptcache_ram_dir"]) if p["gptcache_ram_dir"] else None
    ram = str(ram_dir) if ram_dir is not None and ram_dir.is_dir() else None
    embed = LiveOrKnown(emb.encode_one, known)
    out = Record("ok", details={"workload": wl.name, "gptcache_version": gptcache_subject.VERSION})
    out.facts.update(gptcache_subject.store_facts(disk, ram))
    with (
        torch_threads(p["torch_threads"] or 1),
        gptcache_subject.GptCache(
            embed, emb.dim, max_size=max(1000, 2 * len(wl.inserts)), base_dir=ram or str(disk)
        ) as first,
    ):
        first.import_data([t for t, _ in wl.inserts], ins_labels)
        key = _accuracy_key(wl, cal, p)
        theirs = _ACCURACY.get(key)
        if theirs is None:  # deterministic (same vectors, exact Faiss search): once per process
            theirs = _ACCURACY[key] = gptcache_accuracy(first, wl, cal, test, p["gptcache_thresholds"])
        else:
            ctx.log("GPTCache's accuracy passes are the same as an earlier repetition's (same vectors and split)")
        ctx.log(f"GPTCache: threshold {theirs['threshold']:g} chosen on the calibration split")
        accuracy_outputs(out, ours, theirs, len(test))
        if int8 is not None:
            int8_outputs(out, int8, len(test), wl.name)
        _timed(
            ctx,
            Subjects(
                wl,
                ins_vec,
                ours["threshold"],
                theirs["threshold"],
                _arms(p, emb, q8, ctx.log),
                first if ram else None,
                embed,
                disk,
                int8,
            ),
            out,
        )
        if p["llm_answer_tokens"]:
            first.set_threshold(theirs["threshold"])
            gptcache_speed.run(
                ctx,
                first,
                lambda: gptcache_subject.GptCache(
                    embed, emb.dim, threshold=theirs["threshold"], base_dir=ram or str(disk)
                ),
                [wl.queries[i] for i in test],
                out,
            )
    return out


_ACCURACY: dict = {}
_INT8_VECS: dict = {}  # (graph file, text) -> the int8 graph's vector (deterministic: kept across repetitions)


def _accuracy_key(wl, cal: list[int], p: dict) -> str:
    h = hashlib.sha256(json.dumps([wl.inserts, wl.queries, cal, sorted(p["gptcache_thresholds"])]).encode())
    return h.hexdigest()


def _int8_accuracy(q8, wl, cal: list[int], test: list[int], ours: dict, p: dict, log) -> dict:
    """The int8 arm's accuracy pass: inserts and queries embedded by the int8 graph, decided at
    FP32's calibrated threshold (the same cache with another embedding: a new calibration would
    move the threshold by a grid step and hide what the quantization changes), its answers
    compared with FP32's query by query; and the instrument (its query vectors turned to a known
    cosine of themselves) through the same code."""
    texts = [t for t, _ in wl.inserts] + [t for t, _ in wl.queries]
    todo = [t for t in dict.fromkeys(texts) if (q8.graph_file, t) not in _INT8_VECS]
    if todo:
        log(f"int8 arm: embedding {len(todo)} texts through {q8.graph_file}")
    for t in todo:
        _INT8_VECS[(q8.graph_file, t)] = q8.encode_one(t)
    vecs = np.stack([_INT8_VECS[(q8.graph_file, t)] for t in texts])
    i8, q = vecs[: len(wl.inserts)], vecs[len(wl.inserts) :]
    ins_labels = [lab for _, lab in wl.inserts]
    same = [ours["threshold"]]  # a drop-in embedding of the same cache: FP32's threshold, not a new calibration
    acc = nn_accuracy(q, i8, ins_labels, wl, cal, test, same)
    noisy = nn_accuracy(
        perturbed(q, p["instrument_noise_cosine"], p["split_seed"] + 11), i8, ins_labels, wl, cal, test, same
    )
    fp32_ans, int8_ans, noisy_ans = (answers_of(a, ins_labels) for a in (ours, acc, noisy))
    every = list(range(len(wl.queries)))
    qtexts = [t for t, _ in wl.queries]
    return {
        "acc": acc,
        "noisy": noisy,
        "ins_vec": i8,
        "noise_cosine": p["instrument_noise_cosine"],
        "agree": agreement(fp32_ans, int8_ans, test),
        "agree_all": agreement(fp32_ans, int8_ans, every),
        "noisy_agree": agreement(fp32_ans, noisy_ans, test),
        "answers": dict(zip(qtexts, int8_ans)),
        "fp32_answers": dict(zip(qtexts, fp32_ans)),
    }


def _arms(p: dict, emb, q8, log) -> dict:
    """The harness's timed paths: torch ("before"), the fast path ("after"; the torch
    embedding when fast_embedding=torch), the fast path with the instrument's known wait, and
    the int8 path when `q8` (its OnnxEmbedder) is given."""

    if p["fast_embedding"] == "onnx":
        onnx = OnnxEmbedder.load(p["onnx_threads"], log)
        fast, delayed = onnx.encode_one, onnx.with_delay(p["instrument_delay_ms"]).encode_one
    else:
        fast, delayed = emb.encode_one, _delayed(emb.encode_one, p["instrument_delay_ms"])
    arms = {"torch": emb.encode_one, "onnx": fast, "instrument.delay": delayed}
    if q8 is not None:
        arms["int8"] = q8.encode_one
    return arms


def _delayed(fn, delay_ms: float):
    import time

    def inner(text):
        v = fn(text)
        time.sleep(delay_ms / 1000.0)
        return v

    return inner


def _twice(fn):
    """The concurrent pass's instrument: the same embedding computed twice per lookup (a known
    doubling of its work), the second vector returned."""

    def inner(text):
        fn(text)
        return fn(text)

    return inner


@dataclass
class Subjects:
    """What the timed passes need: the workload, the harness's index and thresholds, its timed
    arms, GPTCache's embedding and folders, and the int8 arm's accuracy pass (or None)."""

    wl: Workload
    ins_vec: np.ndarray
    nn_threshold: float
    gc_threshold: float
    arms: dict
    ram_cache: gptcache_subject.GptCache | None
    embed: LiveOrKnown
    disk: Path
    int8: dict | None


def _timed(ctx, s: Subjects, out) -> None:
    """The interleaved latency pass (and the concurrent pass with the int8 arm): the harness's
    entries in Redis, GPTCache on disk (and in RAM when `s.ram_cache` is given), every latency
    query through every arm."""

    p, wl = ctx.params, s.wl
    rng = random.Random(p["split_seed"] + 7)
    texts = [wl.queries[i][0] for i in rng.sample(range(len(wl.queries)), min(p["latency_queries"], len(wl.queries)))]
    client = ctx.target.cluster_client()
    store = Store(client, p["ttl_s"])
    index = {"int8": (s.int8["ins_vec"], s.int8["acc"]["threshold"])} if s.int8 else {}
    try:
        store.put_many([(f"{PREFIX}{i}", Entry(lab, str(i))) for i, (_, lab) in enumerate(wl.inserts)], nx=False)
        with gptcache_subject.GptCache(
            s.embed,
            s.ins_vec.shape[1],
            threshold=s.gc_threshold,
            max_size=max(1000, 2 * len(wl.inserts)),
            base_dir=str(s.disk),
        ) as on_disk:
            on_disk.import_data([t for t, _ in wl.inserts], [lab for _, lab in wl.inserts])
            s.embed.known = {}  # from here on GPTCache embeds every query live
            gc_arms = {"gptcache": on_disk}
            if s.ram_cache is not None:
                s.ram_cache.set_threshold(s.gc_threshold)
                gc_arms["gptcache_ram"] = s.ram_cache
            for fn in s.arms.values():  # warm-up: first calls of a session or model are slow
                fn(texts[0])
            tm, raw, vecs = interleaved(
                texts, s.arms, gc_arms, s.ins_vec, s.nn_threshold, store, PREFIX, ctx.log, index
            )
            served = {
                "int8": list(zip(texts, vecs.get("int8.answers", []))),
                "onnx": list(zip(texts, vecs["onnx.answers"])),
            }
            if s.int8 is not None:
                qps = _concurrent(ctx, s, gc_arms, index, store, served)
    finally:
        store.clear()
        client.close()
    write_csv(
        ctx.raw_path("lookup_latency_ms.csv"),
        ["query", "arm", "position", "embed_ms", "search_ms", "store_ms", "total_ms", "hit"],
        raw,
    )
    torch_v, fast_v = np.stack(vecs["torch"]), np.stack(vecs["onnx"])
    out.metrics["onnx.min_cosine_vs_torch"] = Metric(
        float((torch_v * fast_v).sum(1).min()),
        "",
        "higher",
        "the fast path's vectors against the torch path's, same texts",
    )
    latency_outputs(out, tm, p, len(texts))
    if s.int8 is not None:
        int8_v = np.stack(vecs["int8"])
        out.metrics["int8.min_cosine_vs_fp32"] = Metric(
            float((int8_v * fast_v).sum(1).min()),
            "",
            None,
            "the int8 path's vectors against the FP32 ONNX path's, same texts (1 would mean no quantization)",
        )
        concurrent_outputs(out, qps, p)
        served_outputs(out, served, s.int8)


def _concurrent(ctx, s: Subjects, gc_arms: dict, index: dict, store, served: dict) -> dict:
    """Every subject answering the same queries from `concurrent_clients` threads at once, the
    subjects' order rotated per round. Returns subject -> (queries, seconds); the harness's
    answers go into `served`."""
    p, wl = ctx.params, s.wl
    rng = random.Random(p["split_seed"] + 13)
    texts = [wl.queries[rng.randrange(len(wl.queries))][0] for _ in range(p["concurrent_queries"])]
    fns: dict[str, Callable[..., str | None]] = {  # called with one text: its answer or None
        arm: (lambda t, c=cache: c.lookup(t)[0]) for arm, cache in gc_arms.items()
    }
    harness = {
        "onnx": (s.arms["onnx"], (s.ins_vec, s.nn_threshold)),
        "int8": (s.arms["int8"], index["int8"]),
        "instrument.double": (_twice(s.arms["int8"]), index["int8"]),
    }
    for arm, (embed, (vec, th)) in harness.items():
        fns[arm] = lambda t, e=embed, v=vec, h=th: harness_answer(e, t, v, h, store, PREFIX)
    names, totals = list(fns), {arm: [0, 0.0] for arm in fns}
    for r in range(p["concurrent_rounds"]):
        for arm in names[r % len(names) :] + names[: r % len(names)]:
            began = totals[arm][1]
            while totals[arm][1] - began < p["concurrent_min_s"] or totals[arm][1] == began:
                qps, answers = concurrent(fns[arm], texts, p["concurrent_clients"])
                totals[arm][0] += len(texts)
                totals[arm][1] += len(texts) / qps
                if arm in served:
                    served[arm] += list(zip(texts, answers))
        ctx.log(
            f"concurrent pass: round {r + 1}/{p['concurrent_rounds']}, {p['concurrent_clients']} clients, "
            + ", ".join(f"{a} {n / t:.0f} q/s" for a, (n, t) in totals.items())
        )
    return {arm: tuple(v) for arm, v in totals.items()}
