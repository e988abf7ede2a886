"""The semantic cache against the real Redis Cluster and the real models (all-MiniLM-L6-v2,
SmolLM2-135M-Instruct), on small fixtures cut from GPTCache's data."""

import json
from pathlib import Path

import numpy as np
import pytest

from harness import drivers
from harness.drivers import CaseContext
from harness.experiments.semantic_cache import keys as K
from harness.experiments.semantic_cache.store import Entry, Store

FIX = Path(__file__).parent / "fixtures" / "semantic"


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
    idx, dist = K.nearest_hamming(np.array(queries, dtype=np.uint64), stored)
    for q, i, d in zip(queries, idx, dist):
        entry, got_d, got_sig = store.lsh_nearest(q)
        assert got_d == d  # d <= 7 < 8 bands: banding is exact
        assert int(K.hamming(np.uint64(got_sig), np.uint64(q))) == d
        assert entry is not None
    sigs, dists = store.nearest_many(np.array(queries, dtype=np.uint64), chunk=16)
    assert list(dists) == list(dist)
    assert [e.label for e in store.get_many([K.sem_key(s) for s in sigs])] == \
        [str(i) for i in idx]  # the nearest entry of each query, fetched in one pipeline
    ttl = cluster_client.ttl(K.sem_key(stored[0]))
    assert 0 < ttl <= 300
    n = store.clear()
    assert n >= 200 and cluster_client.get(K.sem_key(stored[0])) is None


@pytest.fixture(scope="module")
def embedder():
    from harness.experiments.semantic_cache.embed import Embedder

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
    proj = K.projection(384, seed=1)
    d = K.hamming(K.signatures(s1, proj), K.signatures(s2, proj))
    cos = (s1 * s2).sum(1)
    assert d[lab == 1].mean() + 8 < d[lab == 0].mean()
    assert cos[lab == 1].min() > cos[lab == 0].max() - 0.2


def test_semantic_keys_driver_on_a_pairs_tsv(cluster, tmp_path):
    drv = drivers.get("semantic-cache-keys")
    p = drv.resolve_params("test", {"dataset": str(FIX / "pairs_small.tsv"), "latency_queries": 5,
                                    "radii": [0, 4, 8], "thresholds": [0.7, 0.9], "torch_threads": 1})
    ctx = CaseContext("semantic-cache", "semantic", 1, "local", p, tmp_path, cluster, log=lambda m: None)
    out = drv.run(ctx)
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    # 24 distinct sentence2 asked, 12 of them paraphrase an inserted sentence1, 12 must miss
    assert m["nn.correct_hits"] + m["nn.wrong_hits"] == pytest.approx(m["nn.hit_rate_pct"] * 24 / 100)
    assert m["nn.correct_hits"] <= 12
    assert m["hash.hit_rate_pct"] == 0  # no sentence2 equals a sentence1
    assert 0 <= m["pairs.nn.precision_pct"] <= 100 and m["pairs.roc_auc_cosine"] > 0.8
    assert m["lookup.p50_ms"] >= m["embed.p50_ms"]
    titles = [t["title"] for t in out.details["tables"]]
    assert any(t.startswith("Pair-level decisions") for t in titles)
    meta = json.loads((tmp_path / "lsh_projection.json").read_text())
    proj = np.load(tmp_path / "lsh_projection.npy")
    assert np.array_equal(proj, K.projection(384, meta["seed"]))  # the run's hyperplanes reproduce
    assert (tmp_path / "per_query.csv").read_text().count("\n") == 25
    assert not list(cluster.cluster_client().scan_iter(match="sem_*"))  # the driver cleans up


def test_ttft_driver_runs_smollm2_on_a_short_stream(cluster, tmp_path):
    drv = drivers.get("semantic-cache-ttft")
    p = drv.resolve_params("test", {"dataset": str(FIX / "gptcache_small.json"), "queries": 3,
                                    "max_new_tokens": 2, "torch_threads": 1, "device": "cpu"})
    ctx = CaseContext("semantic-cache", "ttft", 1, "local", p, tmp_path, cluster, log=lambda m: None)
    out = drv.run(ctx)
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    for mode in ("no_cache", "hash_cache", "semantic_cache"):
        assert m[f"{mode}.p50_ms"] > 0 and m[f"{mode}.rss_peak_mb"] > 100
    assert m["no_cache.p50_ms"] > 5  # a real prefill is not free
    rows = (tmp_path / "ttft_per_request.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 3
    assert out.details["gpu"] == "no GPU"
