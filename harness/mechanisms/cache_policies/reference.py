"""Small, independent pure-Python cache policies for cross-checking libCacheSim.

Written for clarity, not speed (victims are found by scanning): use them on short traces
only. Every policy counts capacity in objects (all objects have size 1), admits on a miss
unless it says otherwise, and forgets an object's history when the object is evicted
(as libCacheSim's LRU, LFU and LRU-K do).

`run(policy, ids, nxt)` returns one boolean per request: hit or miss; `calibrated_rates`
computes every reference.* metric of the simulate case (the policies replayed and their hit
rates counted here; the driver only stores the numbers), so the code that produces the
reference numbers is this module, whose imports each run checks. LRU-K and the hybrid
(LRU-K eviction, LFU admission) are the reference shared with the kv-trace suite,
harness/mechanisms/cache_policies/lruk_reference.py (RefLRUK, RefHybrid), which does not import the fast loop
it checks (harness/mechanisms/cache_policies/lruk.py).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from harness.mechanisms.cache_policies.lruk_reference import RefHybrid, RefLRUK

INF = float("inf")


class RefLRU:
    """Evict the least recently used object."""

    d: OrderedDict[Any, bool]

    def __init__(self, capacity: int):
        self.cap, self.d = capacity, OrderedDict()

    def access(self, key, t, nxt=None) -> bool:
        if key in self.d:
            self.d.move_to_end(key)
            return True
        if len(self.d) >= self.cap:
            self.d.popitem(last=False)
        self.d[key] = True
        return False


class RefLFU:
    """Evict the object with the fewest accesses since it was inserted; among equal counts,
    the one that reached its count first (FIFO inside a frequency, as libCacheSim's LFU)."""

    freq: dict[Any, int]  # key -> accesses since insertion
    since: dict[Any, Any]  # key -> the time it reached its count

    def __init__(self, capacity: int):
        self.cap, self.freq, self.since = capacity, {}, {}

    def access(self, key, t, nxt=None) -> bool:
        if key in self.freq:
            self.freq[key] += 1
            self.since[key] = t
            return True
        if len(self.freq) >= self.cap:
            victim = min(self.freq, key=lambda k: (self.freq[k], self.since[k]))
            del self.freq[victim], self.since[victim]
        self.freq[key], self.since[key] = 1, t
        return False


class RefARC:
    """ARC (Megiddo and Modha, FAST 2003), the paper's pseudo-code with ghost lists B1, B2."""

    t1: OrderedDict[Any, bool]
    t2: OrderedDict[Any, bool]
    b1: OrderedDict[Any, bool]
    b2: OrderedDict[Any, bool]

    def __init__(self, capacity: int):
        self.c, self.p = capacity, 0.0
        self.t1, self.t2, self.b1, self.b2 = OrderedDict(), OrderedDict(), OrderedDict(), OrderedDict()

    def _replace(self, key):
        if self.t1 and (len(self.t1) > self.p or (key in self.b2 and len(self.t1) == self.p)):
            old, _ = self.t1.popitem(last=False)
            self.b1[old] = True
        else:
            old, _ = self.t2.popitem(last=False)
            self.b2[old] = True

    def access(self, key, t, nxt=None) -> bool:
        if key in self.t1:
            del self.t1[key]
            self.t2[key] = True
            return True
        if key in self.t2:
            self.t2.move_to_end(key)
            return True
        if key in self.b1:
            self.p = min(self.c, self.p + max(len(self.b2) / len(self.b1), 1))
            self._replace(key)
            del self.b1[key]
            self.t2[key] = True
            return False
        if key in self.b2:
            self.p = max(0.0, self.p - max(len(self.b1) / len(self.b2), 1))
            self._replace(key)
            del self.b2[key]
            self.t2[key] = True
            return False
        l1 = len(self.t1) + len(self.b1)
        if l1 == self.c:
            if len(self.t1) < self.c:
                self.b1.popitem(last=False)
                self._replace(key)
            else:
                self.t1.popitem(last=False)
        elif l1 < self.c:
            total = l1 + len(self.t2) + len(self.b2)
            if total >= self.c:
                if total == 2 * self.c:
                    self.b2.popitem(last=False)
                self._replace(key)
        self.t1[key] = True
        return False


class RefS3FIFO:
    """S3-FIFO (Yang et al., SOSP 2023) as libCacheSim 0.3.5 documents and implements it:
    a small FIFO S (int(10% of capacity)), a main FIFO M (the rest) and a ghost FIFO G of
    keys evicted from S (int(90% of capacity) entries). A hit adds 1 to the object's
    counter. Evicting from S moves an object with counter >= `move_to_main` to M (counter
    reset), else its key goes to G. Evicting from M reinserts an object whose counter is
    >= 1 with min(counter, 3) - 1, else drops it. A miss whose key is in G goes to M.
    Before the first eviction a full S overflows into M. S is evicted from unless M is over
    its size or S is empty."""

    s: OrderedDict[Any, bool]
    m: OrderedDict[Any, bool]
    g: OrderedDict[Any, bool]

    def __init__(self, capacity: int, small_ratio: float = 0.1, ghost_ratio: float = 0.9, move_to_main: int = 2):
        self.cap = capacity
        self.s_size = int(capacity * small_ratio)
        self.m_size = capacity - self.s_size
        self.g_size = int(capacity * ghost_ratio)
        self.move = move_to_main
        self.s, self.m, self.g = OrderedDict(), OrderedDict(), OrderedDict()
        self.freq: dict[Any, int] = {}
        self.has_evicted = False

    def _evict_small(self):
        while self.s:
            key, _ = self.s.popitem(last=False)
            if self.freq[key] >= self.move:
                self.m[key] = True
                self.freq[key] = 0
            else:
                del self.freq[key]
                if self.g_size > 0 and key not in self.g:
                    if len(self.g) >= self.g_size:
                        self.g.popitem(last=False)
                    self.g[key] = True
                return

    def _evict_main(self):
        while self.m:
            key, _ = self.m.popitem(last=False)
            f = self.freq[key]
            if f >= 1:
                self.m[key] = True
                self.freq[key] = min(f, 3) - 1
            else:
                del self.freq[key]
                return

    def access(self, key, t, nxt=None) -> bool:
        if key in self.s:
            self.freq[key] += 1
            return True
        hit_ghost = key in self.g
        if hit_ghost:
            del self.g[key]
        if key in self.m:
            self.freq[key] += 1
            return True
        if self.s_size < 1:  # libCacheSim's can_insert: the object must fit in S
            return False
        while len(self.s) + len(self.m) + 1 > self.cap:
            self.has_evicted = True
            if len(self.m) > self.m_size or not self.s:
                self._evict_main()
            else:
                self._evict_small()
        if hit_ghost:
            self.m[key] = True
        elif self.s_size <= 1:  # an object as large as S is not admitted
            return False
        elif not self.has_evicted and len(self.s) >= self.s_size:
            self.m[key] = True
        else:
            self.s[key] = True
        self.freq[key] = 0
        return False


class RefWTinyLFU:
    """W-TinyLFU (Einziger et al. 2017): a window LRU (1%) in front of a segmented LRU
    (20% probation, 80% protected). A window victim enters the main cache only if its
    estimated frequency beats the main victim's. Frequencies are exact counts here
    (libCacheSim uses a count-min sketch), halved every 10 x capacity accesses."""

    w: OrderedDict[Any, bool]
    prob: OrderedDict[Any, bool]
    prot: OrderedDict[Any, bool]
    count: dict[Any, int]

    def __init__(self, capacity: int, window_ratio: float = 0.01):
        self.cap = capacity
        self.w_cap = max(1, int(capacity * window_ratio))
        self.m_cap = max(1, capacity - self.w_cap)
        self.prot_cap = max(1, int(self.m_cap * 0.8))
        self.w, self.prob, self.prot = OrderedDict(), OrderedDict(), OrderedDict()
        self.count, self.n, self.reset_at = {}, 0, 10 * capacity

    def _record(self, key):
        self.count[key] = self.count.get(key, 0) + 1
        self.n += 1
        if self.n >= self.reset_at:
            self.count = {k: v // 2 for k, v in self.count.items() if v // 2}
            self.n //= 2

    def access(self, key, t, nxt=None) -> bool:
        self._record(key)
        if key in self.w:
            self.w.move_to_end(key)
            return True
        if key in self.prot:
            self.prot.move_to_end(key)
            return True
        if key in self.prob:
            del self.prob[key]
            self.prot[key] = True
            if len(self.prot) > self.prot_cap:
                k2, _ = self.prot.popitem(last=False)
                self.prob[k2] = True
            return True
        self.w[key] = True
        if len(self.w) > self.w_cap:
            cand, _ = self.w.popitem(last=False)
            if len(self.prob) + len(self.prot) < self.m_cap:
                self.prob[cand] = True
            else:
                victim = next(iter(self.prob)) if self.prob else next(iter(self.prot))
                if self.count.get(cand, 0) > self.count.get(victim, 0):
                    (self.prob if victim in self.prob else self.prot).pop(victim)
                    self.prob[cand] = True
        return False


class RefBelady:
    """Belady's MIN with bypass: on a miss in a full cache, drop whichever of the cached
    objects and the new one is requested again furthest in the future (never = infinity).
    No policy that knows only the past can have more hits on the same trace."""

    next: dict[Any, float]  # cached key -> the time it is requested next (INF: never)

    def __init__(self, capacity: int):
        self.cap, self.next = capacity, {}

    def access(self, key, t, nxt=None) -> bool:
        n = INF if nxt is None or nxt < 0 else nxt
        if key in self.next:
            self.next[key] = n
            return True
        if len(self.next) < self.cap:
            self.next[key] = n
            return False
        victim = max(self.next, key=lambda k: (self.next[k], k))
        if self.next[victim] > n:
            del self.next[victim]
            self.next[key] = n
        return False


REFERENCES = {
    "lru": RefLRU,
    "lfu": RefLFU,
    "lru-2": lambda c: RefLRUK(c, 2),
    "lru-3": lambda c: RefLRUK(c, 3),
    "lru-5": lambda c: RefLRUK(c, 5),
    "arc": RefARC,
    "s3fifo": RefS3FIFO,
    "wtinylfu": RefWTinyLFU,
    "opt": RefBelady,
    "hybrid": RefHybrid,
}


def run(policy, ids, nxt=None) -> list[bool]:
    """Feed a trace to a reference policy object; one bool (hit) per request."""
    out = []
    for t, key in enumerate(ids):
        out.append(policy.access(int(key), t, None if nxt is None else int(nxt[t])))
    return out


def rates(hits, tail) -> tuple[float, float]:
    """(hit rate, long-tail retention) in percent, counted here in plain Python: the share of
    all requests that hit, and of the requests whose `tail` flag is set (0.0 when none is)."""
    hits = [bool(h) for h in hits]
    tail = [bool(t) for t in (tail.tolist() if hasattr(tail, "tolist") else tail)]
    if len(hits) != len(tail):
        raise ValueError("hits and tail mask differ in length")
    n_tail = sum(tail)
    hit_tail = sum(1 for h, t in zip(hits, tail) if h and t)
    hr = 100.0 * (sum(hits) / len(hits)) if hits else 0.0
    return hr, (100.0 * (hit_tail / n_tail) if n_tail else 0.0)


def policy_object(name: str, capacity: int, hybrid_k: int = 2):
    """The reference policy named as the simulator's policies are ("hybrid" with its K)."""
    return RefHybrid(capacity, hybrid_k) if name == "hybrid" else REFERENCES[name](capacity)


def calibrated_rates(policies, ids, nxt, tail, capacity: int, hybrid_k: int = 2) -> dict[str, dict]:
    """Every reference.* number of the simulate case (eviction/simulate): each policy replayed
    by its reference here on the trace `ids` at `capacity`, its hits counted here (rates()).
    The driver only stores what this returns: policy -> {"hit_rate_pct", "long_tail_pct",
    "reference" (the class that ran), "seconds"}."""
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    nxt = None if nxt is None else (nxt.tolist() if hasattr(nxt, "tolist") else list(nxt))
    out: dict[str, dict] = {}
    for name in policies:
        t0 = time.perf_counter()
        policy = policy_object(name, capacity, hybrid_k)
        hits = run(policy, ids, nxt)
        hr, lt = rates(hits, tail)
        out[name] = {
            "hit_rate_pct": hr,
            "long_tail_pct": lt,
            "reference": type(policy).__name__,
            "seconds": time.perf_counter() - t0,
        }
    return out
