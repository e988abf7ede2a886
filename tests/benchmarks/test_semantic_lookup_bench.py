"""One semantic-cache lookup at a time (issue 24): the harness with its query embedding from
ONNX Runtime (the lookup's fused graph, "onnx", and the engine suite's unfused export,
"onnx_unfused", the graph it used before; "onnx_2threads", the fused graph on two intra-op
threads, to show what the second core would give), the harness with the torch embedding, and GPTCache 0.1.44 (SQLite + Faiss, the
same torch all-MiniLM-L6-v2 as its embedding_func), on the real Redis Cluster and GPTCache's
paraphrases (pytest-benchmark).

Runs only with `make bench` (or pytest --benchmark-enable); the normal test run skips it.
Targets of issue 24: the ONNX path's lookup P50 at most 6 ms on this machine and at least 5x
faster than GPTCache's in the same run. `test_lookups_interleaved` runs the suite's own
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

from harness.experiments.semantic_cache import common, datasets, gptcache_subject
from harness.experiments.semantic_cache.lookup_latency import harness_lookup, interleaved

P50_TARGET_MS = 6.0
SPEEDUP_TARGET = 5.0
QUERIES = 60
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

    from harness.experiments.semantic_cache.embed import Embedder, cached_encode
    from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder
    from harness.experiments.semantic_cache.store import Entry, Store

    torch.set_num_threads(1)
    _, wl = common.load({"dataset": datasets.DEFAULT_DATASET, "dataset_format": "auto", "dataset_rows": 300,
                         "split_seed": 0, "insert_fraction": 0.5})  # the local profile's sample and split
    emb, onnx, unfused, two = (Embedder.load(), OnnxEmbedder.load(1), OnnxEmbedder.load(1, graph="engine"),
                               OnnxEmbedder.load(2))
    ins_texts, labels = [t for t, _ in wl.inserts], [lab for _, lab in wl.inserts]
    ins_vec = cached_encode(emb, ins_texts)
    known = dict(zip(ins_texts, ins_vec))
    embed = lambda t: known[t] if t in known else emb.encode_one(t)  # noqa: E731
    client = cluster.cluster_client()
    store = Store(client)
    store.put_many([(f"gcnn_{i}", Entry(lab, str(i))) for i, lab in enumerate(labels)], nx=False)
    caches = {"gptcache": gptcache_subject.GptCache(embed, threshold=0.925,
                                                    base_dir=str(tmp_path_factory.mktemp("gptcache")))}
    if gptcache_subject.filesystem(Path("/dev/shm")) == "tmpfs":
        caches["gptcache_ram"] = gptcache_subject.GptCache(embed, threshold=0.925, base_dir="/dev/shm")
    for c in caches.values():
        c.__enter__()
        c.import_data(ins_texts, labels)
    known.clear()  # queries are embedded live from here on
    texts = [t for t, _ in random.Random(7).sample(wl.queries, QUERIES)]
    arms = {"torch": emb.encode_one, "onnx": onnx.encode_one, "onnx_unfused": unfused.encode_one,
            "onnx_2threads": two.encode_one}
    for fn in arms.values():
        fn(texts[0])
    yield {"texts": texts, "arms": arms, "caches": caches, "ins_vec": ins_vec, "store": store}
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
    res = benchmark.pedantic(interleaved, args=(s["texts"], s["arms"], s["caches"], s["ins_vec"], 0.85, s["store"],
                                                "gcnn_"), rounds=1, iterations=1)
    tm = res[0]
    info = {arm: {part: {"p50_ms": _p50(tm, arm, part), "p95_ms": round(float(np.percentile(tm.part(arm, part), 95)),
                                                                           3)}
                  for part in ("embed", "search", "store", "lookup")} for arm in tm.rows}
    onnx_p50 = tm.p50("onnx")
    info["load_average_1min_before_after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    info["speedup_fused_vs_unfused_embed"] = round(tm.p50("onnx_unfused", "embed") / tm.p50("onnx", "embed"), 3)
    info["onnx_p50_at_most_6ms"] = onnx_p50 <= P50_TARGET_MS
    for arm in s["caches"]:
        info[f"speedup_vs_{arm}"] = round(tm.p50(arm) / onnx_p50, 2)
        info[f"speedup_vs_{arm}_at_least_5x"] = tm.p50(arm) / onnx_p50 >= SPEEDUP_TARGET
        info[f"onnx_2threads_speedup_vs_{arm}"] = round(tm.p50(arm) / tm.p50("onnx_2threads"), 2)
    benchmark.extra_info.update(info)
    assert len(tm.part("onnx", "lookup")) == len(s["texts"])


@pytest.mark.parametrize("arm", ["onnx", "onnx_unfused", "torch"])
def test_harness_lookup(benchmark, setup, arm):
    _skip_unless_enabled(benchmark)
    s = setup
    it = iter(s["texts"] * 3)
    benchmark.pedantic(lambda: harness_lookup(s["arms"][arm], next(it), s["ins_vec"], 0.85, s["store"], "gcnn_"),
                       rounds=QUERIES, iterations=1)
    benchmark.extra_info["p50_at_most_6ms"] = benchmark.stats.stats.median * 1000 <= P50_TARGET_MS


@pytest.mark.parametrize("arm", ["gptcache", "gptcache_ram"])
def test_gptcache_lookup(benchmark, setup, arm):
    _skip_unless_enabled(benchmark)
    if arm not in setup["caches"]:
        pytest.skip("/dev/shm is not a tmpfs here: no GPTCache arm with its SQLite file in RAM")
    it = iter(setup["texts"] * 3)
    benchmark.pedantic(lambda: setup["caches"][arm].lookup(next(it)), rounds=QUERIES, iterations=1)
