"""The semantic cache against the real Redis Cluster and the real models (all-MiniLM-L6-v2,
SmolLM2-135M-Instruct), on small fixtures cut from GPTCache's data."""

import json

import numpy as np
import pytest

from harness.mechanisms.semantic import keys
from harness.mechanisms.semantic.store import Entry, Store
from harness.model import driver_contract
from harness.model.driver_contract import CaseContext
from tests import TESTS

FIX = TESTS / "fixtures" / "semantic"


def test_banded_lookup_through_redis_matches_exhaustive_search(cluster_client):
    rng = np.random.default_rng(11)
    stored = rng.integers(0, 2**62, 200, dtype=np.uint64) * np.uint64(3)
    store = Store(cluster_client, ttl_s=300, bands=8)
    store.put_signatures(stored, [Entry(str(i), f"answer {i}") for i in range(len(stored))])
    queries = []
    for s in stored[:40]:
        q = int(s)
        for b in rng.choice(64, size=int(rng.integers(0, 8)), replace=False):
            q ^= 1 << int(b)
        queries.append(q)
    idx, dist = keys.nearest_hamming(np.array(queries, dtype=np.uint64), stored)
    for q, _i, d in zip(queries, idx, dist):
        entry, got_d, got_sig = store.lsh_nearest(q)
        assert got_d == d  # d <= 7 < 8 bands: banding is exact
        assert int(keys.hamming(np.uint64(got_sig), np.uint64(q))) == d
        assert entry is not None
    sigs, dists = store.nearest_many(np.array(queries, dtype=np.uint64), chunk=16)
    assert list(dists) == list(dist)
    assert [e.label for e in store.get_many([keys.sem_key(s) for s in sigs])] == [
        str(i) for i in idx
    ]  # the nearest entry of each query, fetched in one pipeline
    ttl = cluster_client.ttl(keys.sem_key(stored[0]))
    assert 0 < ttl <= 300
    n = store.clear()
    assert n >= 200 and cluster_client.get(keys.sem_key(stored[0])) is None


@pytest.fixture(scope="module")
def embedder():
    from harness.mechanisms.semantic.embed import Embedder

    return Embedder.load()


def test_our_embeddings_equal_sentence_transformers(embedder):
    rows = [r.split("\t") for r in (FIX / "pairs_small.tsv").read_text().splitlines()[1:]]
    texts = [r[1] for r in rows]
    a, b = embedder.encode(texts, batch_size=8), embedder.reference_encode(texts, batch_size=8)
    assert a.shape == (24, 384)
    assert float((a * b).sum(1).min()) > 0.9999
    assert np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    assert float(embedder.encode_one(texts[0]) @ a[0]) > 0.9999


def test_paraphrases_share_more_lsh_bits_than_unrelated_pairs(embedder):
    rows = [r.split("\t") for r in (FIX / "pairs_small.tsv").read_text().splitlines()[1:]]
    s1 = embedder.encode([r[0] for r in rows])
    s2 = embedder.encode([r[1] for r in rows])
    lab = np.array([int(r[2]) for r in rows])
    proj = keys.projection(384, seed=1)
    d = keys.hamming(keys.signatures(s1, proj), keys.signatures(s2, proj))
    cos = (s1 * s2).sum(1)
    assert d[lab == 1].mean() + 8 < d[lab == 0].mean()
    assert cos[lab == 1].min() > cos[lab == 0].max() - 0.2


def _run(driver: str, case: str, cluster, tmp_path, **params):
    drv = driver_contract.get(driver)
    p = drv.resolve_params("test", params)
    out = drv.run(CaseContext("semantic-cache", case, 1, "local", p, tmp_path, cluster, log=lambda m: None))
    assert out.status == "ok", out.reason
    assert "tables" not in out.details and "charts" not in out.details
    return out, {k: v.value for k, v in out.metrics.items()}


def test_semantic_keys_driver_on_a_pairs_tsv(cluster, tmp_path):
    out, m = _run(
        "semantic-cache-keys",
        "semantic",
        cluster,
        tmp_path,
        dataset=str(FIX / "pairs_small.tsv"),
        latency_queries=5,
        radii=[0, 4, 8],
        thresholds=[0.9, 0.7],
        torch_threads=1,
    )
    queries = out.series["schemes"].columns["queries"][0]
    assert 0 < queries < 24  # the test split only: the calibration split chose the settings
    assert m["nn.threshold"] in (0.9, 0.7) and m["lsh.radius"] in (0, 4, 8)
    assert m["nn.correct_hit_rate_pct"] + m["nn.wrong_hit_rate_pct"] <= 100
    assert m["hash.correct_hit_rate_pct"] == 0  # no sentence2 equals a sentence1
    assert m["control.exact_key.correct_hit_rate_pct"] == 0 and m["pairs.roc_auc_cosine"] > 0.8
    assert m["lookup.p50_ms"] >= m["embed.p50_ms"]
    sweep = out.series["lsh_sweep"].columns
    assert sorted(set(sweep["split"])) == ["calibration", "test"] and sorted(set(sweep["radius"])) == [0, 4, 8]
    assert "pairs" in out.series and "c7_streams" in out.series
    meta = json.loads((tmp_path / "lsh_projection.json").read_text())
    proj = np.load(tmp_path / "lsh_projection.npy")
    assert np.array_equal(proj, keys.projection(384, meta["seed"]))  # the run's hyperplanes reproduce
    assert (tmp_path / "per_query.csv").read_text().count("\n") == 25
    assert not list(cluster.cluster_client().scan_iter(match="sem*"))  # the driver cleans up


@pytest.mark.slow
def test_ttft_driver_interleaves_the_modes_on_smollm2(cluster, tmp_path):
    out, m = _run(
        "semantic-cache-ttft",
        "ttft",
        cluster,
        tmp_path,
        dataset=str(FIX / "gptcache_small.json"),
        insert_fraction=1.0,
        queries=3,
        max_new_tokens=2,
        torch_threads=1,
        device="cpu",
    )
    for mode in ("no_cache", "hash_cache", "semantic_cache"):
        assert m[f"{mode}.p50_ms"] > 0
    assert m["no_cache.p50_ms"] > 5  # a real prefill is not free
    req = out.series["requests"].columns
    assert len(req["mode"]) == 12 and set(req["outcome"]) <= {"model", "hit", "miss", "wrong_hit"}
    firsts = [md for md, pos in zip(req["mode"], req["position"]) if pos == 0]
    assert firsts == ["no_cache", "hash_cache", "semantic_cache"]  # the order rotates per query
    oracle = [o for md, o in zip(req["mode"], req["outcome"]) if md == "oracle_cache"]
    assert oracle == ["hit"] * 3 and m["oracle_cache.p95_ms"] < m["no_cache.p50_ms"]  # the instrument
    slowest_model = min(t for t, o in zip(req["ttft_ms"], req["outcome"]) if o == "model")
    for t, o in zip(req["ttft_ms"], req["outcome"]):
        if o == "wrong_hit":  # an error is served by the model, never a fast TTFT
            assert t > slowest_model / 3
    assert out.details["device"] == "cpu"


@pytest.mark.slow  # five fresh processes that each load SmolLM2
def test_memory_driver_measures_each_mode_in_its_own_process(cluster, tmp_path):
    out, m = _run(
        "semantic-cache-memory",
        "memory",
        cluster,
        tmp_path,
        dataset=str(FIX / "gptcache_small.json"),
        insert_fraction=1.0,
        queries=1,
        max_new_tokens=1,
        torch_threads=1,
        device="cpu",
        parallel=5,
    )
    modes = out.series["modes"].columns
    assert sorted(modes["mode"]) == [
        "control.no_cache",
        "hash_cache",
        "instrument.extra_allocation",
        "no_cache",
        "semantic_cache",
    ]
    assert all(v > 100 for v in modes["rss_peak_mb"])  # a process that holds SmolLM2
    assert out.facts == {"memory_measured": "process_rss"}  # no GPU here
    # the semantic cache's process also holds the embedding model
    assert m["semantic_cache.rss_peak_mb"] > m["no_cache.rss_peak_mb"]
    assert abs(m["control.rss_change_pct"]) < abs(m["memory.rss_change_pct"])


# On the test split the semantic cache hits too few queries to move a P95, so the C3 and C4
# verdict tests (tests/suites/semantic_cache/test_semantic_verdicts.py) serve stream=semantic-hits: only queries the
# LSH cache answers (chosen with the LSH signatures in both runs, so the same stream).
HITS = dict(
    dataset="data/gptcache_mock_data.json", dataset_rows=300, stream="semantic-hits", torch_threads=1, device="cpu"
)


def test_the_semantic_hits_stream_is_the_same_with_and_without_the_mechanism(embedder):
    from harness.experiments.semantic_cache import ttft_case

    drv = driver_contract.get("semantic-cache-ttft")
    base = dict(dataset=str(FIX / "gptcache_small.json"), insert_fraction=1.0, queries=20, torch_threads=1)
    streams = {
        sig: ttft_case.prepare(
            drv.resolve_params("test", dict(base, stream="semantic-hits", signature=sig)), embedder, lambda m: None
        )
        for sig in ("lsh", "exact")
    }
    test = ttft_case.prepare(drv.resolve_params("test", base), embedder, lambda m: None)
    hits, exact = streams["lsh"], streams["exact"]
    assert hits.requests == exact.requests and 0 < len(hits.requests) < len(test.requests)
    assert set(hits.requests) < set(test.requests)  # a part of the test split
    proj = keys.projection(embedder.dim, 1)
    sigs = keys.signatures(embedder.encode([t for t, _ in hits.requests]), proj)
    idx, dist = keys.nearest_hamming(sigs, hits.insert_sigs)
    assert all(d <= hits.radius for d in dist)  # each one hits its own origin's entry
    assert [hits.workload.inserts[i][1] for i in idx] == [lab for _, lab in hits.requests]
    assert not np.array_equal(exact.insert_sigs, hits.insert_sigs)  # served with the text hash
