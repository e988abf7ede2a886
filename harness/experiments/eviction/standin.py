"""The stand-ins of C18's checks and their own instruments (issue 52).

A stand-in is what a policy must beat for its hit rate to be its own: plain LRU (for LFU and
the hybrid) and LRU-K without the hybrid's LFU admission (for the hybrid). Each stand-in is run
by one function here, the same one the calibrated comparison and the stand-in's instrument call,
so a stand-in made quietly weaker shows in its instrument: a short request sequence whose hits
and misses under the stand-in are known by construction (written out below, not computed by any
simulator), replayed through the stand-in, every request's outcome compared.
"""

from __future__ import annotations

import numpy as np

from harness.mechanisms.cache_policies import sim as simulate
from harness.mechanisms.cache_policies.traces import next_access

KNOWN_CAPACITY = 4  # objects: the known sequences are built for a cache of 4


def lru_standin_hits(ids: np.ndarray, nxt: np.ndarray, capacity: int) -> np.ndarray:
    """The plain-LRU stand-in: the simulator's own LRU (libCacheSim), as in the calibrated sweep."""
    return simulate.policy_hits("lru", ids, nxt, capacity)


def lruk_standin_hits(ids: np.ndarray, capacity: int, k: int) -> np.ndarray:
    """The LRU-K stand-in of the hybrid: libCacheSim's LRU-K with this K, no admission rule."""
    return lruk_standin_run(ids, capacity, k)[0]


def lruk_standin_run(ids: np.ndarray, capacity: int, k: int) -> tuple[np.ndarray, int]:
    """The LRU-K stand-in's hits and the capacity (objects) its libCacheSim cache reports it ran
    with: the known sequence runs at KNOWN_CAPACITY whatever the calibrated size, so the size
    of the calibrated run is shown apart (the case's fact standin_capacity_ratio)."""
    return simulate.lib_run_with("LRUK", {"k": int(k)}, ids, capacity)


def known_lru_sequence() -> tuple[np.ndarray, np.ndarray]:
    """(request ids, expected hit per request) of exact LRU with a cache of KNOWN_CAPACITY (4):

    1. a loop over 4 keys that fits, 5 times: the first pass misses, the other 16 requests hit;
    2. a loop over 5 keys (one more than fits), 5 times: LRU evicts each key just before it
       comes back, so all 25 requests miss (random eviction or LFU would hit some);
    3. a hot key requested between 10 fresh keys (20, 30, 20, 31, 20, ...): under LRU the hot
       key is always among the 2 most recent, so its 10 repeats hit and the fresh keys miss
       (FIFO would evict the hot key after 4 insertions)."""
    ids, hit = [], []
    for r in range(5):
        ids += [0, 1, 2, 3]
        hit += [r > 0] * 4
    for _ in range(5):
        ids += [10, 11, 12, 13, 14]
        hit += [False] * 5
    ids.append(20)
    hit.append(False)
    for i in range(10):
        ids += [30 + i, 20]
        hit += [False, True]
    return np.array(ids, dtype=np.int64), np.array(hit, dtype=bool)


def known_lruk_sequence(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(request ids, expected hit per request) of LRU-K (K >= 2) with a cache of 4: three times,
    two hot keys requested K times each (the first request misses, the other K-1 hit), then a
    scan of 10 fresh keys requested once (all miss: each has fewer than K accesses, so they
    evict one another, oldest first, and never the hot keys), then the two hot keys again: both
    hit (plain LRU, K = 1, would have evicted them during the scan)."""
    if k < 2:
        raise ValueError(f"the LRU-K stand-in's known sequence is for K >= 2, not {k}")
    ids, hit = [], []
    for rnd in range(3):
        hot = [100 + 2 * rnd, 101 + 2 * rnd]
        for h in hot:
            ids += [h] * k
            hit += [False] + [True] * (k - 1)
        ids += [1000 + 10 * rnd + i for i in range(10)]
        hit += [False] * 10
        ids += hot
        hit += [True, True]
    return np.array(ids, dtype=np.int64), np.array(hit, dtype=bool)


def agree_pct(got: np.ndarray, expected: np.ndarray) -> float:
    """Percent of requests whose hit/miss is the expected one."""
    return 100.0 * float(np.mean(np.asarray(got, dtype=bool) == expected))


def lru_instrument() -> float:
    ids, expected = known_lru_sequence()
    return agree_pct(lru_standin_hits(ids, next_access(ids), KNOWN_CAPACITY), expected)


def lruk_instrument(k: int) -> float:
    ids, expected = known_lruk_sequence(k)
    return agree_pct(lruk_standin_hits(ids, KNOWN_CAPACITY, k), expected)
