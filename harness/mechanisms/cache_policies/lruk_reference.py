"""The scan-based reference of LRU-K and of the eviction suite's hybrid (LRU-K eviction with
LFU admission), written for clarity, not speed: the policy as lruk.py's docstring states it.

It is the independent reference of lruk.py's `lruk_hits` (the fast loop both suites run), of
the compiled loop (mechanisms/kv_blocks/compiled.py) and of libCacheSim's LRUK, and it imports none of
them: a reference that imported what it checks would always agree with it (the ledger's
`independent_of` for mechanisms/cache_policies/reference.py names harness.mechanisms.cache_policies.lruk).
"""

from __future__ import annotations

from collections import deque
from typing import Any


class Expiring:
    """TTL in the scan-based references: before a lookup at `now`, every cached key last
    used more than ttl_ms earlier is dropped (scan). A subclass records each cached key's
    last use in `used` and forgets the keys expire() returns."""

    used: dict[Any, Any]  # cached key -> its last use (ms; None without a TTL)

    def __init__(self, ttl_ms: float | None):
        self.ttl_ms, self.used = ttl_ms, {}

    def expire(self, now: float) -> list:
        if self.ttl_ms is None:
            return []
        gone = [k for k, u in self.used.items() if now - u > self.ttl_ms]
        for k in gone:
            del self.used[k]
        return gone


class RefLRUK(Expiring):
    """The module's LRU-K written for clarity, not speed (victims and expired objects are
    found by scanning): use it on short traces. The independent reference of `lruk_hits`,
    of the compiled loop and of libCacheSim's LRUK; `access(key, t, nxt=None, now=None)`
    (nxt is not used; now: the lookup's time in ms, with a TTL)."""

    hist: dict[Any, deque]  # cached key -> its last <= k lookup times, oldest first
    inserted: dict[Any, Any]  # cached key -> the time of its insertion

    def __init__(self, capacity: int, k: int = 2, ttl_ms: float | None = None, admit_lfu: bool = False):
        super().__init__(ttl_ms)
        self.cap, self.k, self.hist, self.inserted = capacity, k, {}, {}
        self.count: dict | None = {} if admit_lfu else None

    def victim(self):
        young = [x for x, h in self.hist.items() if len(h) < self.k]
        if young:
            return min(young, key=lambda x: self.inserted[x])
        return min(self.hist, key=lambda x: self.hist[x][0])

    def access(self, key, t, nxt=None, now=None) -> bool:
        for gone in self.expire(now):
            del self.hist[gone], self.inserted[gone]
        if self.count is not None:
            self.count[key] = self.count.get(key, 0) + 1
        h = self.hist.get(key)
        if h is not None:
            h.append(t)
            if len(h) > self.k:
                h.popleft()
            self.used[key] = now
            return True
        if len(self.hist) >= self.cap:
            victim = self.victim()
            if self.count is not None and self.count[key] <= self.count[victim]:
                return False
            del self.hist[victim], self.inserted[victim]
            self.used.pop(victim, None)
        self.hist[key], self.inserted[key] = deque([t]), t
        self.used[key] = now
        return False


class RefHybrid(RefLRUK):
    """The eviction suite's hybrid: LRU-K eviction (K = `k`) with LFU admission (see the
    module's docstring)."""

    def __init__(self, capacity: int, k: int = 2):
        super().__init__(capacity, k, admit_lfu=True)
