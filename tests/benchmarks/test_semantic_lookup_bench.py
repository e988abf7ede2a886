"""One semantic-cache lookup at a time (issue 24): the harness with its query embedding from
ONNX Runtime (the lookup's fused graph, "onnx", and the engine suite's unfused export,
"onnx_unfused", the graph it used before; "onnx_2threads", the fused graph on two intra-op
threads, to show what the second core would give; "onnx_int8", the fused graph quantized to int8 per
channel, issue 45's int8 arm, searching its own int8 inserts), the harness with the torch embedding, and GPTCache 0.1.44 (SQLite + Faiss, the
same torch all-MiniLM-L6-v2 as its embedding_func), on the real Redis Cluster and GPTCache's
paraphrases (pytest-benchmark).

Runs only with `make bench` (or pytest --benchmark-enable); the normal test run skips it.
Targets of issue 24: the ONNX path's lookup P50 at most 6 ms on this machine and at least 5x
faster than GPTCache's in the same run; issue 45: the int8 path's P50 at most 6 ms and, under 8
concurrent clients, at least 5x GPTCache's queries/s (`test_concurrent_lookups`, every subject
answering the same queries from 8 threads at once). `test_lookups_interleaved` runs the suite's own
interleaved stream (every query through every subject, order rotated) and writes each
subject's P50/P95 split (embedding / search / store), the ratios and whether each target was
met into its extra_info, with the machine's load average before and after (the machine is
shared: a busy one shows in the numbers); the per-subject benchmarks time one lookup per round so that
pytest-benchmark's comparison with the last saved run tracks each median. A busy machine shows
up in the numbers instead of failing a timed test.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from harness.experiments.semantic_cache import gptcache_subject
from harness.experiments.semantic_cache.lookup_latency import concurrent, harness_answer, harness_lookup, interleaved
from harness.mechanisms.semantic import common, datasets

P50_TARGET_MS = 6.0
SPEEDUP_TARGET = 5.0
QUERIES = 60
CLIENTS = 8
THRESHOLD = 0.85
pytestmark = pytest.mark.skipif(gptcache_subject.missing() is not None, reason=str(gptcache_subject.missing()))


def _skip_unless_enabled(benchmark):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")


@pytest.fixture(scope="module")
def setup(request, tmp_path_factory):
    """Half of the origins of 300 seeded records in Redis and in GPTCache (disk and RAM),
    both models loaded and warm, 60 paraphrases to ask. Nothing is loaded or started when
    the benchmarks are disabled (the normal test run)."""
    opt = request.config.getoption
    if opt("benchmark_disable") and not opt("benchmark_enable"):  # pytest-benchmark's own rule
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")
    cluster = request.getfixturevalue("cluster")
    import torch

    from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder
    from harness.mechanisms.semantic.embed import Embedder, cached_encode
    from harness.mechanisms.semantic.store import Entry, Store

    torch.set_num_threads(1)
    _, wl = common.load(
        {
            "dataset": datasets.DEFAULT_DATASET,
            "dataset_format": "auto",
            "dataset_rows": 300,
            "split_seed": 0,
            "insert_fraction": 0.5,
        }
    )  # the local profile's sample and split
    emb, onnx, unfused, two, int8 = (
        Embedder.load(),
        OnnxEmbedder.load(1),
        OnnxEmbedder.load(1, graph="engine"),
        OnnxEmbedder.load(2),
        OnnxEmbedder.load(1, graph="int8"),
    )
    ins_texts, labels = [t for t, _ in wl.inserts], [lab for _, lab in wl.inserts]
    ins_vec = cached_encode(emb, ins_texts)
    index = {"onnx_int8": (int8.encode(ins_texts), THRESHOLD)}  # the int8 arm searches int8 inserts
    known = dict(zip(ins_texts, ins_vec))
    embed = lambda t: known[t] if t in known else emb.encode_one(t)  # noqa: E731
    client = cluster.cluster_client()
    store = Store(client)
    store.put_many([(f"gcnn_{i}", Entry(lab, str(i))) for i, lab in enumerate(labels)], nx=False)
    caches = {
        "gptcache": gptcache_subject.GptCache(embed, threshold=0.925, base_dir=str(tmp_path_factory.mktemp("gptcache")))
    }
    if gptcache_subject.filesystem(Path("/dev/shm")) == "tmpfs":
        caches["gptcache_ram"] = gptcache_subject.GptCache(embed, threshold=0.925, base_dir="/dev/shm")
    for c in caches.values():
        c.__enter__()
        c.import_data(ins_texts, labels)
    known.clear()  # queries are embedded live from here on
    texts = [t for t, _ in random.Random(7).sample(wl.queries, QUERIES)]
    arms = {
        "torch": emb.encode_one,
        "onnx": onnx.encode_one,
        "onnx_unfused": unfused.encode_one,
        "onnx_2threads": two.encode_one,
        "onnx_int8": int8.encode_one,
    }
    for fn in arms.values():
        fn(texts[0])
    yield {"texts": texts, "arms": arms, "caches": caches, "ins_vec": ins_vec, "store": store, "index": index}
    for c in caches.values():
        c.__exit__(None, None, None)
    store.clear()
    client.close()


def _p50(tm, arm, part="lookup"):
    return round(tm.p50(arm, part), 3)


def test_lookups_interleaved(benchmark, setup):
    _skip_unless_enabled(benchmark)
    s = setup
    load_before = os.getloadavg()[0]
    res = benchmark.pedantic(
        interleaved,
        args=(s["texts"], s["arms"], s["caches"], s["ins_vec"], THRESHOLD, s["store"], "gcnn_"),
        kwargs={"index": s["index"]},
        rounds=1,
        iterations=1,
    )
    tm = res[0]
    info = {
        arm: {
            part: {"p50_ms": _p50(tm, arm, part), "p95_ms": round(float(np.percentile(tm.part(arm, part), 95)), 3)}
            for part in ("embed", "search", "store", "lookup")
        }
        for arm in tm.rows
    }
    onnx_p50 = tm.p50("onnx")
    info["load_average_1min_before_after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    info["speedup_fused_vs_unfused_embed"] = round(tm.p50("onnx_unfused", "embed") / tm.p50("onnx", "embed"), 3)
    info["onnx_p50_at_most_6ms"] = onnx_p50 <= P50_TARGET_MS
    info["onnx_int8_p50_at_most_6ms"] = tm.p50("onnx_int8") <= P50_TARGET_MS
    info["speedup_int8_vs_fp32"] = round(onnx_p50 / tm.p50("onnx_int8"), 3)
    for arm in s["caches"]:
        info[f"speedup_vs_{arm}"] = round(tm.p50(arm) / onnx_p50, 2)
        info[f"speedup_vs_{arm}_at_least_5x"] = tm.p50(arm) / onnx_p50 >= SPEEDUP_TARGET
        info[f"onnx_2threads_speedup_vs_{arm}"] = round(tm.p50(arm) / tm.p50("onnx_2threads"), 2)
    benchmark.extra_info.update(info)
    assert len(tm.part("onnx", "lookup")) == len(s["texts"])


@pytest.mark.parametrize("arm", ["onnx", "onnx_int8", "onnx_unfused", "torch"])
def test_harness_lookup(benchmark, setup, arm):
    _skip_unless_enabled(benchmark)
    s = setup
    it = iter(s["texts"] * 3)
    vec, th = s["index"].get(arm, (s["ins_vec"], THRESHOLD))
    benchmark.pedantic(
        lambda: harness_lookup(s["arms"][arm], next(it), vec, th, s["store"], "gcnn_"), rounds=QUERIES, iterations=1
    )
    benchmark.extra_info["p50_at_most_6ms"] = benchmark.stats.stats.median * 1000 <= P50_TARGET_MS


@pytest.mark.parametrize("arm", ["gptcache", "gptcache_ram"])
def test_gptcache_lookup(benchmark, setup, arm):
    _skip_unless_enabled(benchmark)
    if arm not in setup["caches"]:
        pytest.skip("/dev/shm is not a tmpfs here: no GPTCache arm with its SQLite file in RAM")
    it = iter(setup["texts"] * 3)
    benchmark.pedantic(lambda: setup["caches"][arm].lookup(next(it)), rounds=QUERIES, iterations=1)


def _concurrent_pass(s: dict) -> dict:
    """Every subject answering the same queries from CLIENTS threads at once, twice, the order
    rotated: subject -> queries/s over both rounds."""
    fns = {arm: (lambda t, c=cache: c.lookup(t)[0]) for arm, cache in s["caches"].items()}
    for arm in ("onnx", "onnx_int8"):
        vec, th = s["index"].get(arm, (s["ins_vec"], THRESHOLD))
        fns[arm] = lambda t, e=s["arms"][arm], v=vec, h=th: harness_answer(e, t, v, h, s["store"], "gcnn_")
    names, seconds = list(fns), dict.fromkeys(fns, 0.0)
    for r in range(2):
        for arm in names[r:] + names[:r]:
            qps, _ = concurrent(fns[arm], s["texts"], CLIENTS)
            seconds[arm] += len(s["texts"]) / qps
    return {arm: 2 * len(s["texts"]) / sec for arm, sec in seconds.items()}


def test_concurrent_lookups(benchmark, setup):
    """Issue 45: queries/s of the int8 and the FP32 lookups and of GPTCache under 8 concurrent
    clients, and whether the int8 path reaches 5x GPTCache's."""
    _skip_unless_enabled(benchmark)
    load_before = os.getloadavg()[0]
    qps = benchmark.pedantic(_concurrent_pass, args=(setup,), rounds=1, iterations=1)
    info = {
        "clients": CLIENTS,
        "queries_per_s": {k: round(v, 1) for k, v in qps.items()},
        "load_average_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    for theirs in setup["caches"]:
        for arm in ("onnx", "onnx_int8"):
            info[f"{arm}_over_{theirs}"] = round(qps[arm] / qps[theirs], 2)
        info[f"onnx_int8_at_least_5x_{theirs}"] = qps["onnx_int8"] / qps[theirs] >= SPEEDUP_TARGET
    benchmark.extra_info.update(info)
    assert all(v > 0 for v in qps.values())
