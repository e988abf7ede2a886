"""C18's stand-ins and their own instruments (issue 52): plain LRU and the hybrid's LRU-K on
sequences whose outcome is known by construction, and the LRU stand-in of allkeys-lfu on a
real redis-server (the recency probe). Each instrument must read its known value for the real
stand-in and fail for a weaker one (random, FIFO, plain LRU in LRU-K's place, maxmemory-samples 1)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from harness.experiments.eviction import calibrated_size, redis_case, simulate_case, standin
from harness.experiments.eviction.redis_replay import bytes_per_key, recency_probe
from harness.mechanisms.cache_policies import sim as simulate


def _ordered_dict_lru(ids, capacity: int) -> np.ndarray:
    """A third LRU, written here: the known sequence's expected outcome must be LRU's."""
    cache: OrderedDict = OrderedDict()
    out = []
    for o in ids.tolist():
        if o in cache:
            cache.move_to_end(o)
            out.append(True)
            continue
        out.append(False)
        if len(cache) >= capacity:
            cache.popitem(last=False)
        cache[o] = None
    return np.array(out)


def test_known_lru_sequence_is_lru_and_the_stand_in_reads_100():
    ids, expected = standin.known_lru_sequence()
    assert np.array_equal(_ordered_dict_lru(ids, standin.KNOWN_CAPACITY), expected)
    assert 0 < expected.sum() < len(expected)
    assert standin.lru_instrument() == 100.0


@pytest.mark.parametrize("weaker", ["random", "fifo", "lfu"])
def test_known_lru_sequence_fails_a_weaker_stand_in(weaker):
    ids, expected = standin.known_lru_sequence()
    if weaker == "random":
        got = simulate.random_hits(ids, standin.KNOWN_CAPACITY)
    elif weaker == "fifo":
        got = simulate.lib_hits_with("FIFO", {}, ids, standin.KNOWN_CAPACITY)
    else:
        got = simulate.policy_hits("lfu", ids, np.full(len(ids), -1), standin.KNOWN_CAPACITY)
    assert standin.agree_pct(got, expected) < 100


@pytest.mark.parametrize("k", [2, 3])
def test_known_lruk_sequence_reads_100_for_lruk_and_fails_plain_lru(k):
    ids, expected = standin.known_lruk_sequence(k)
    assert standin.lruk_instrument(k) == 100.0
    assert standin.agree_pct(_ordered_dict_lru(ids, standin.KNOWN_CAPACITY), expected) < 100
    with pytest.raises(ValueError):
        standin.known_lruk_sequence(1)


def test_lruk_stand_in_is_the_sweeps_lru2():
    """The hybrid's stand-in at K=2 is the same simulation as the sweep's lru-2 policy."""
    ids = np.random.default_rng(3).zipf(1.3, 3000) % 400
    nxt = np.full(len(ids), -1)
    assert np.array_equal(standin.lruk_standin_hits(ids, 50, 2), simulate.policy_hits("lru-2", ids, nxt, 50))


def test_stand_in_strength_is_a_parameter_of_the_cases():
    assert simulate_case.SIM_PARAMS["standin_lruk_k"].default == 2
    assert redis_case.REDIS_PARAMS["standin_lru_samples"].default == 5


def test_recency_probe_keeps_the_keys_lru_saw_last(redis_server):
    """The LRU stand-in's instrument on real servers: allkeys-lru (maxmemory-samples 5) keeps at
    least 90% of the keys read again after the clock moved; allkeys-random keeps far fewer."""
    kept = {}
    for policy, samples in (("allkeys-lru", 5), ("allkeys-random", 5)):
        c = redis_server({"maxmemory-policy": policy, "maxmemory-samples": samples}).client()
        pr = recency_probe(c, 4096, bytes_per_key(c, 4096, 0))
        kept[policy] = 100.0 * pr["kept"]["touched"] / pr["keys_per_group"]
        assert pr["evicted_keys"] > 0
        c.close()
    assert kept["allkeys-lru"] >= 90
    assert kept["allkeys-random"] < 90


def _calibrated(ratio: float) -> tuple[dict, dict]:
    from pathlib import Path

    from harness.mechanisms.cache_policies import traces
    from harness.model.driver_contract import CaseContext, Target

    p = {k: v.default for k, v in simulate_case.SIM_PARAMS.items()}
    p.update(calibrate_lru_hit_pct=50.0, reference_at_calibrated=False, standin_capacity_ratio=ratio)
    ids = traces.zipf_trace(6000, 800, 1.0, seed=3).ids
    tail = traces.tail_mask(ids, traces.head_ids(ids, 0.01))
    ctx = CaseContext("eviction", "simulate", 1, "local", p, Path("/nonexistent"), Target("none"), log=lambda m: None)
    m = simulate_case._calibrated_metrics(ctx, p, ids, traces.next_access(ids), tail, ["lru", "lfu", "hybrid"], "sim")
    return {k: v.value for k, v in m.items()}, calibrated_size.standin_facts(m, "sim")


def test_lruk_stand_in_runs_at_the_calibrated_size_and_says_so():
    """The LRU-K stand-in's size is what its libCacheSim cache reports (a metric) and, over the
    calibrated size, the fact standin_capacity_ratio that the ledger's stand-in params fix at 1:
    run at 80% its known-sequence instrument still reads 100, the fact reads 0.8 and the
    hybrid's check is inconclusive."""
    from tests.ledger_helpers import verdicts

    m, facts = _calibrated(1.0)
    assert m["sim.calibrated.standin.lruk.capacity_objects"] == m["sim.calibrated.capacity_objects"]
    assert facts == {"standin_capacity_ratio": 1.0}
    small, small_facts = _calibrated(0.8)
    assert small["sim.calibrated.standin.lruk.capacity_objects"] == round(0.8 * m["sim.calibrated.capacity_objects"])
    assert small_facts["standin_capacity_ratio"] == pytest.approx(0.8, abs=0.01)
    assert small["sim.standin.lruk.known_sequence_agree_pct"] == 100.0  # the instrument cannot see the size
    assert small["sim.calibrated.standin.lruk.hit_rate_pct"] < m["sim.calibrated.standin.lruk.hit_rate_pct"]
    got = verdicts("C18", "simulate", small, suite="eviction", facts={"standin_lruk_k": 2, **small_facts})
    hyb = got["sim.calibrated.hybrid.hit_rate_pct"]
    assert str(hyb.outcome) == "inconclusive", hyb
    assert "standin_capacity_ratio=0.8" in " ".join(hyb.doubts)


def test_lib_run_with_reads_the_size_back_from_the_cache():
    ids = np.arange(50) % 7
    hits, size = simulate.lib_run_with("LRUK", {"k": 2}, ids, 5)
    assert size == 5 and np.array_equal(hits, simulate.lib_hits_with("LRUK", {"k": 2}, ids, 5))
