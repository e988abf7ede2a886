"""LRU-K, written once for the eviction and kv-trace suites: its fast pure-Python loop and
its scan-based reference (the hybrid's LFU admission and a TTL are options of both).

The policy (O'Neil et al. 1993, without retained history, as libCacheSim's LRUK):
- capacity in objects (blocks); a miss inserts, a hit touches; the times that order objects
  are lookup positions, so no two are equal and there are no ties to break;
- victim: objects looked up fewer than K times since their insertion go first, the oldest
  insertion first; otherwise the object whose K-th most recent lookup is the oldest;
- an evicted object's lookups are forgotten (it comes back as new);
- TTL (optional, ms): before a lookup at `now`, every cached object last used more than
  ttl_ms before `now` is dropped (on the trace's own timestamps);
- LFU admission (optional, the eviction suite's hybrid): every key's lookups over the whole
  trace so far are counted, also after eviction; on a miss in a full cache the newcomer is
  cached only if its count (this lookup included) is higher than the LRU-K victim's,
  otherwise it is not cached and the victim stays.

Two implementations of it, kept apart on purpose (the project cross-checks every computed
number against an independent reference): `lruk_hits` here, a lazy heap, is the python engine
of both suites (mechanisms/cache_policies/sim.py's hybrid, mechanisms/kv_blocks/policies.py's lru-K); `RefLRUK` in
lruk_reference.py finds its victims by scanning, and is what `lruk_hits`, the compiled loop
(mechanisms/kv_blocks/compiled.py) and libCacheSim's LRUK are checked against request by request. The
two live in separate modules so that a reference (mechanisms/cache_policies/reference.py) never imports the
module it checks (the ledger's `independent_of`, enforced on the import graph). The kv-trace suite's ledger
recount (kv_trace/recount.py) has a third, textbook one on purpose: it shares no code with
the simulator or these references.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import cast

import numpy as np


def expire_idle(od: OrderedDict, cut: float, drop) -> None:
    """TTL in the fast loops: drop the entries of a recency-ordered {key: last use ms} last
    used before `cut`, calling drop(key) (when not None) for each."""
    while od:
        key = next(iter(od))
        if od[key] >= cut:
            return
        del od[key]
        if drop is not None:
            drop(key)


def lruk_hits(
    ids: list,
    capacity: int,
    k: int = 2,
    times: list | None = None,
    ttl_ms: float | None = None,
    admit_lfu: bool = False,
) -> np.ndarray:
    """Per-lookup hits of LRU-K with `capacity` objects (the module's policy), with a TTL
    (`times`: each lookup's time in ms) and with LFU admission (the hybrid) when asked.

    A lazy heap of priorities: (0, insertion position) while an object has fewer than K
    lookups since insertion, then (1, position of its K-th most recent lookup); a priority
    only grows, so stale heap entries are skipped when they surface."""
    hist: dict = {}  # cached key -> its last <= k lookup positions, oldest first
    prio: dict = {}  # cached key -> its priority (the heap entry that is not stale)
    heap: list = []
    count: dict | None = {} if admit_lfu else None  # every key -> lookups so far (kept after eviction)
    rec: OrderedDict | None = OrderedDict() if ttl_ms is not None else None  # cached key -> last use (ms)

    def drop(key):
        del hist[key], prio[key]

    out = bytearray(len(ids))
    prev = now = None
    for t, key in enumerate(ids):
        if rec is not None:
            now = cast(list, times)[t]  # rec exists only with ttl_ms, which comes with times
            if now != prev:
                expire_idle(rec, now - ttl_ms, drop)
                prev = now
        if count is not None:
            seen = count[key] = count.get(key, 0) + 1
        h = hist.get(key)
        if h is not None:
            out[t] = 1
            if rec is not None:
                rec.move_to_end(key)
                rec[key] = now
            h.append(t)
            if len(h) > k:
                del h[0]
            if len(h) < k:
                continue  # a young object keeps its insertion-time priority
        else:
            if len(hist) >= capacity:
                while prio.get(heap[0][2]) != (heap[0][0], heap[0][1]):
                    heapq.heappop(heap)
                victim = heap[0][2]
                if count is not None and seen <= count[victim]:
                    continue  # LFU admission refuses the newcomer
                heapq.heappop(heap)
                drop(victim)
                if rec is not None:
                    del rec[victim]
            h = hist[key] = [t]
            if rec is not None:
                rec[key] = now
        pr = (1, h[0]) if len(h) >= k else (0, t)
        prio[key] = pr
        heapq.heappush(heap, (pr[0], pr[1], key))
    return np.frombuffer(bytes(out), dtype=np.uint8).astype(bool)
