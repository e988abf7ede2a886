"""C18's stand-ins and their own instruments (issue 52): plain LRU and the hybrid's LRU-K on
sequences whose outcome is known by construction, and the LRU stand-in of allkeys-lfu on a
real redis-server (the recency probe). Each instrument must read its known value for the real
stand-in and fail for a weaker one (random, FIFO, plain LRU in LRU-K's place, maxmemory-samples 1)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from harness.experiments.eviction import drivers, simulate, standin
from harness.experiments.eviction.redis_replay import bytes_per_key, recency_probe


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
    assert drivers.SIM_PARAMS["standin_lruk_k"].default == 2
    assert drivers.REDIS_PARAMS["standin_lru_samples"].default == 5


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
