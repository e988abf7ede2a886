"""The compiled simulator loops (mechanisms/kv_blocks/compiled.py, numba) against the pure-Python engine
(the loops of policies.py and libCacheSim's own policies) and the scan-based references,
request by request, per policy; what happens without numba; the synthetic trace generator."""

from __future__ import annotations

import numpy as np
import pytest

from harness.base.errors import EnvironmentProblem
from harness.base.paths import REPO_ROOT
from harness.experiments.kv_trace import analyses, crosscheck, reference, synth, tiers
from harness.mechanisms.kv_blocks import policies, prefix
from harness.mechanisms.kv_blocks import trace as T

TRACE = REPO_ROOT / "data/mooncake/conversation_trace.jsonl"
TTL_S = 120.0


@pytest.fixture(scope="module")
def mooncake():
    return T.load_trace(TRACE, 512)


@pytest.fixture(scope="module")
def sample(mooncake):
    return T.session_sample(mooncake, 0.01, 3)  # the slice test_kv_trace.py's cross-checks use


def _runs(t, hits):
    return prefix.leading_runs(hits, t.offsets).tolist()


def test_the_compiled_engine_runs_by_default():
    # numba is pinned in the experiments extra: without it this fails instead of running slower unseen
    assert policies.engine_name() == "compiled"
    assert policies.engine_description().startswith("compiled loops (numba ")


@pytest.mark.parametrize("name", policies.ALL_POLICIES)
def test_compiled_matches_python_and_the_reference_on_the_trace_slice(sample, name):
    s = policies.Stream(sample)
    for cap in (24, 96):
        for ttl in (None, TTL_S) if name in policies.TTL_POLICIES else (None,):
            fast = policies.block_hits(s, name, cap, ttl_s=ttl, engine="compiled")
            slow = policies.block_hits(s, name, cap, ttl_s=ttl, engine="python")
            ref = reference.run(reference.make(name, cap, ttl, n=sample.n_blocks), s)
            assert fast.tolist() == slow.tolist() == ref.tolist(), (name, cap, ttl)
            assert _runs(sample, fast) == _runs(sample, ref)
            assert fast.any() and not fast.all()  # hits and misses: the comparison is not of constants


@pytest.mark.parametrize("name", policies.ALL_POLICIES)
def test_compiled_matches_python_on_the_whole_trace(mooncake, name):
    s = policies.Stream(mooncake)
    cap = 3_000_000 // 512  # the benchmark's capacity: evictions all along the trace
    fast = policies.block_hits(s, name, cap, engine="compiled")
    assert fast.tolist() == policies.block_hits(s, name, cap, engine="python").tolist()
    if name in policies.TTL_POLICIES:
        ttl = policies.block_hits(s, name, cap, ttl_s=20.0, engine="compiled")  # shorter than most turn gaps
        assert ttl.tolist() == policies.block_hits(s, name, cap, ttl_s=20.0, engine="python").tolist()
        assert ttl.sum() < fast.sum()  # the TTL expires blocks the cache would have kept


def test_the_tiers_are_the_same_on_both_engines(sample, monkeypatch):
    s = policies.Stream(sample)
    specs = [
        tiers.TierSpec("L1", 8, 30.0, "lru"),
        tiers.TierSpec("L2", 40, 120.0, "leaf-lru"),
        tiers.TierSpec("L3", 200, 900.0, "lru-3"),
    ]
    fast = tiers.simulate(s, specs).served
    assert (fast == 3).any() and fast.tolist() == crosscheck.reference_tiers(sample, s, specs).tolist()
    monkeypatch.setitem(policies._LOADED, "module", None)
    assert tiers.simulate(policies.Stream(sample), specs).served.tolist() == fast.tolist()


@pytest.mark.parametrize("broken", ["never evicts", "counts a miss as a hit", "one block too many"])
def test_a_broken_compiled_loop_fails_the_crosscheck(sample, monkeypatch, broken):
    c = policies._compiled()
    honest = c.lru
    if broken == "never evicts":

        def lru(ids, n_ids, times, capacity, ttl_ms=None):
            return honest(ids, n_ids, times, 10**9, ttl_ms)
    elif broken == "counts a miss as a hit":

        def lru(ids, n_ids, times, capacity, ttl_ms=None):
            out = honest(ids, n_ids, times, capacity, ttl_ms)
            out[np.nonzero(~out)[0][len(out) // 4]] = True
            return out
    else:

        def lru(ids, n_ids, times, capacity, ttl_ms=None):
            return honest(ids, n_ids, times, capacity + 1, ttl_ms)

    monkeypatch.setattr(c, "lru", lru)
    rows = crosscheck.compare_all(sample, ["lru"], [24], TTL_S, 0)
    assert [r["verdict"] for r in rows if r["policy"] == "lru"] == ["MISMATCH", "MISMATCH"]
    if broken == "never evicts":
        assert rows[-1]["verdict"] == "MISMATCH"  # the tiers' L1 and L2 are LRUs too


def test_without_numba_the_python_engine_gives_the_same_hits(sample, monkeypatch):
    s = policies.Stream(sample)
    fast = {n: policies.block_hits(s, n, 24) for n in policies.ALL_POLICIES}
    monkeypatch.setattr(policies, "_LOADED", {"module": None, "why": "ImportError: No module named 'numba'"})
    assert policies.engine_name() == "python"
    assert "numba did not import" in policies.engine_description()
    for n in policies.ALL_POLICIES:
        assert policies.block_hits(policies.Stream(sample), n, 24).tolist() == fast[n].tolist(), n
    with pytest.raises(EnvironmentProblem, match="needs numba"):
        policies.block_hits(s, "lru", 24, engine="compiled")


def test_the_sweep_is_the_same_on_both_engines(mooncake, monkeypatch):
    s = mooncake.slice(0, 2000)
    rows, rps = analyses.curve(s, policies.Stream(s), [10**5, 10**6], list(policies.ALL_POLICIES), log=lambda m: None)
    monkeypatch.setitem(policies._LOADED, "module", None)
    slow, _ = analyses.curve(s, policies.Stream(s), [10**5, 10**6], list(policies.ALL_POLICIES), log=lambda m: None)
    assert rows == slow and set(rps) == set(policies.ALL_POLICIES)


def test_dense_ids_keep_the_order_of_the_ids():
    for blocks in (np.array([7, 3, 7, 10**15, 3]), np.array([5, 2, 5, 9])):
        dense, n = policies.dense_ids(blocks)
        assert n == len(np.unique(blocks)) and dense.tolist() == np.unique(blocks, return_inverse=True)[1].tolist()


# ---- the synthetic Mooncake-shaped trace ------------------------------------------------------


def test_the_synthetic_trace_is_seeded_and_shaped_like_mooncake(mooncake):
    a, b, c = synth.synthetic_trace(12031, 1), synth.synthetic_trace(12031, 1), synth.synthetic_trace(12031, 2)
    assert a.digest() == b.digest() != c.digest()
    assert np.array_equal(np.unique(a.blocks), np.arange(a.blocks.max() + 1))  # ids 0..n-1
    assert (a.blocks[a.offsets[:-1]] == 0).all() and (np.diff(a.timestamps_ms) >= 0).all()
    assert (a.lengths == np.ceil(a.input_len / 512)).all()
    # prefix ids: a block id always follows the same block (equal ids mean equal prefixes)
    par = a.parents()
    first = {}
    assert all(first.setdefault(k, p) == p for k, p in zip(a.blocks.tolist(), par.tolist()))
    # the reuse and the request sizes are those of the real trace, within a few points
    real = prefix.rates(mooncake, analyses.infinite_hits(mooncake)).token
    assert abs(prefix.rates(a, analyses.infinite_hits(a)).token - real) < 0.06
    assert abs(a.lengths.mean() - mooncake.lengths.mean()) < 3


def test_the_synthetic_trace_reads_back_as_a_mooncake_file(tmp_path):
    t = synth.synthetic_trace(300, 5)
    synth.write_jsonl(t, tmp_path / "t.jsonl")
    back = T.load_trace(tmp_path / "t.jsonl", 512)
    assert back.digest() == t.digest() and back.n_mismatched == 0
    assert back.timestamps_ms.tolist() == t.timestamps_ms.tolist() and back.input_len.tolist() == t.input_len.tolist()
