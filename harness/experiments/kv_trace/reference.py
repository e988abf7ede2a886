"""Small scan-based references for cross-checking the simulator request by request.

Written for clarity, not speed: victims and expired blocks are found by scanning every
cached block, so use them on a slice. Each reference has
`access(key, t, now_ms, parent, next_use, depth) -> hit`; the libCacheSim policies are
checked against the eviction suite's references (harness/mechanisms/cache_policies/reference.py), wrapped here, and
LRU-K (with its TTL) and the hybrid against the reference both suites share
(harness/mechanisms/cache_policies/lruk_reference.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.mechanisms.cache_policies import reference as ev
from harness.mechanisms.cache_policies.lruk_reference import Expiring, RefHybrid, RefLRUK
from harness.mechanisms.kv_blocks.policies import NO_NEXT, Stream


class RefLRU(Expiring):
    last: dict[Any, int]  # cached key -> the position of its last lookup

    def __init__(self, capacity: int, ttl_ms: float | None = None):
        super().__init__(ttl_ms)
        self.cap, self.last = capacity, {}

    def access(self, key, t, now, parent=-1, next_use=NO_NEXT, depth=0) -> bool:
        for k in self.expire(now):
            del self.last[k]
        hit = key in self.last
        if not hit and len(self.last) >= self.cap:
            victim = min(self.last, key=self.last.__getitem__)
            del self.last[victim]
            self.used.pop(victim, None)
        self.last[key], self.used[key] = t, now
        return hit


class RefLeafLRU(Expiring):
    """Evict the least recently used block that no cached block depends on. A block's
    parent link holds while the parent stays cached since the block's insertion."""

    last: dict[Any, int]  # cached key -> the position of its last lookup
    parent: dict[Any, Any]  # cached key -> its parent while that stays cached, else None

    def __init__(self, capacity: int, ttl_ms: float | None = None):
        super().__init__(ttl_ms)
        self.cap, self.last, self.parent = capacity, {}, {}

    def _remove(self, k):
        del self.last[k], self.parent[k]
        self.used.pop(k, None)
        for c, p in self.parent.items():
            if p == k:
                self.parent[c] = None

    def access(self, key, t, now, parent=-1, next_use=NO_NEXT, depth=0) -> bool:
        for k in self.expire(now):
            self._remove(k)
        hit = key in self.last
        if not hit and len(self.last) >= self.cap:
            parents = set(self.parent.values())
            leaves = [k for k in self.last if k not in parents]
            self._remove(min(leaves, key=self.last.__getitem__))
        if not hit:
            self.parent[key] = parent if parent in self.last and parent != key else None
        self.last[key], self.used[key] = t, now
        return hit


class RefPrefixMIN:
    """Belady's MIN with bypass, ties (never used again) broken deepest block first."""

    cached: dict[Any, tuple[Any, Any]]  # cached key -> (its next use, its depth)

    def __init__(self, capacity: int):
        self.cap, self.cached = capacity, {}

    def access(self, key, t, now, parent=-1, next_use=NO_NEXT, depth=0) -> bool:
        if key in self.cached:
            self.cached[key] = (next_use, depth)
            return True
        if len(self.cached) < self.cap:
            self.cached[key] = (next_use, depth)
            return False
        victim = max(self.cached, key=lambda k: (self.cached[k], -k))  # ties: the smaller block id
        if self.cached[victim] > (next_use, depth):
            del self.cached[victim]
            self.cached[key] = (next_use, depth)
        return False


class RefRandom:
    """Random eviction with the same seeded draws as the eviction suite's random_hits (one
    uniform number per lookup; the victim is the slot it picks)."""

    slots: list[Any]  # the cached keys

    def __init__(self, capacity: int, n: int, seed: int = 0):
        self.cap, self.picks, self.slots = capacity, np.random.default_rng(seed).random(n), []

    def access(self, key, t, now, parent=-1, next_use=NO_NEXT, depth=0) -> bool:
        if key in self.slots:
            return True
        if len(self.slots) < self.cap:
            self.slots.append(key)
        else:
            self.slots[int(self.picks[t] * self.cap)] = key
        return False


class Wrapped:
    """An eviction-suite reference (access(key, t, nxt)) in this module's interface; `timed`:
    one of lruk.py's, which also takes the lookup's time (access(key, t, nxt, now), its TTL)."""

    def __init__(self, ref, timed: bool = False):
        self.ref, self.timed = ref, timed

    def access(self, key, t, now, parent=-1, next_use=NO_NEXT, depth=0) -> bool:
        return self.ref.access(key, t, None, now) if self.timed else self.ref.access(key, t, None)


def make(name: str, capacity: int, ttl_s: float | None = None, n: int = 0, seed: int = 0, hybrid_k: int = 2):
    """The reference of policy `name` (the policy names of policies.py)."""
    ttl_ms = None if ttl_s is None else ttl_s * 1000.0
    if name == "lru":
        return RefLRU(capacity, ttl_ms)
    if name.startswith("lru-"):
        return Wrapped(RefLRUK(capacity, int(name[4:]), ttl_ms), timed=True)
    if name == "leaf-lru":
        return RefLeafLRU(capacity, ttl_ms)
    if name == "opt":
        return RefPrefixMIN(capacity)
    if name == "random":
        return RefRandom(capacity, n, seed)
    if name == "hybrid":
        return Wrapped(RefHybrid(capacity, hybrid_k))
    return Wrapped(ev.REFERENCES[name](capacity))


def run(ref, stream: Stream) -> np.ndarray:
    """Per-block hits of a reference on a stream."""
    out = np.zeros(len(stream.ids), dtype=bool)
    for t, key in enumerate(stream.ids):
        out[t] = ref.access(key, t, stream.times[t], stream.parents[t], stream.next_use[t], stream.depths[t])
    return out
