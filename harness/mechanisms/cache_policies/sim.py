"""Simulation: libCacheSim's policies, the hybrid and the optimal bound on a token trace.

Capacities are in objects: every request has size 1, so libCacheSim's byte capacity is
the number of tokens the cache holds. libcachesim is imported inside the functions.
"""

from __future__ import annotations

import heapq
import time
from pathlib import Path

import numpy as np

from harness.mechanisms.cache_policies.lruk import lruk_hits

# name -> (libCacheSim class name, keyword arguments); the order is the report's order
LIB_POLICIES: dict[str, tuple[str, dict[str, float]]] = {
    "lru": ("LRU", {}),
    "lfu": ("LFU", {}),
    "lru-2": ("LRUK", {"k": 2}),
    "lru-3": ("LRUK", {"k": 3}),
    "lru-5": ("LRUK", {"k": 5}),
    "arc": ("ARC", {}),
    "s3fifo": ("S3FIFO", {}),
    "wtinylfu": ("WTinyLFU", {}),
}
PY_POLICIES = ("hybrid", "opt")  # fast loops here (the hybrid's in ../lruk.py), references in reference.py
ALL_POLICIES = tuple(LIB_POLICIES) + PY_POLICIES
CONTROL_POLICY = "random"  # seeded random eviction: the control of the policy comparisons
LIB_BELADY = "belady-lib"  # libCacheSim's Belady, checked against "opt"
NO_NEXT = 2**62
# S3-FIFO's small queue is int(10% of capacity) and admits only objects smaller than it:
# below 20 objects it caches nothing (and below 10 libCacheSim aborts), so sizes start here
MIN_CAPACITY = 20  # next access time of a request that is never repeated


def lib_cache(name: str, capacity: int):
    import libcachesim as lcs

    if name == LIB_BELADY:
        return lcs.Belady(capacity)
    cls, kwargs = LIB_POLICIES[name]
    if name == "s3fifo" and int(capacity * 0.1) < 1:
        # libCacheSim aborts the whole process (S3FIFO.c: "Invalid cache size configuration")
        raise ValueError(f"S3-FIFO needs a capacity of at least 10 objects, got {capacity}")
    if name == "wtinylfu":
        # libCacheSim sizes the window as int(window_size * capacity): with its default 0.01 a
        # cache under 100 objects gets an empty window and never hits; keep one object at least
        kwargs = {**kwargs, "window_size": max(0.01, 1.5 / capacity)}
    return getattr(lcs, cls)(capacity, **kwargs)


def lib_hits(name: str, ids: np.ndarray, nxt: np.ndarray, capacity: int) -> np.ndarray:
    """Per-request hits of a libCacheSim policy, one Request at a time."""
    return _lib_loop(lib_cache(name, capacity), ids, nxt if name == LIB_BELADY else None)


def lib_hits_with(cls: str, kwargs: dict, ids: np.ndarray, capacity: int) -> np.ndarray:
    """Per-request hits of libCacheSim class `cls` built with `kwargs` as given."""
    return lib_run_with(cls, kwargs, ids, capacity)[0]


def lib_run_with(cls: str, kwargs: dict, ids: np.ndarray, capacity: int) -> tuple[np.ndarray, int]:
    """lib_hits_with's hits and the capacity (objects) the cache that produced them reports
    after the replay (libCacheSim's cache_size, read back from the cache object, not the
    argument): a caller can show the size a simulation really ran at."""
    import libcachesim as lcs

    cache = getattr(lcs, cls)(capacity, **kwargs)
    hits = _lib_loop(cache, ids, None)
    return hits, int(cache.cache_size)


def _lib_loop(cache, ids: np.ndarray, nxt: np.ndarray | None) -> np.ndarray:
    import libcachesim as lcs

    req = lcs.Request()
    req.obj_size = 1
    get = cache.get
    out = np.zeros(len(ids), dtype=bool)
    if nxt is None:
        for i, o in enumerate(ids.tolist()):
            req.obj_id = o
            req.clock_time = i
            out[i] = get(req)
    else:
        for i, (o, n) in enumerate(zip(ids.tolist(), nxt.tolist())):
            req.obj_id = o
            req.clock_time = i
            req.next_access_vtime = n if n >= 0 else NO_NEXT
            out[i] = get(req)
    return out


def hybrid_hits(ids: np.ndarray, capacity: int, k: int = 2) -> np.ndarray:
    """The hybrid (LRU-K eviction, LFU admission): LRU-K's fast loop with LFU admission
    (harness/mechanisms/cache_policies/lruk.py; its reference is RefHybrid in lruk_reference.py)."""
    return lruk_hits(ids.tolist(), capacity, k, admit_lfu=True)


def opt_hits(ids: np.ndarray, nxt: np.ndarray, capacity: int) -> np.ndarray:
    """Belady's MIN with bypass (reference.RefBelady) with a lazy max-heap of next uses."""
    nxt_of: dict[int, int] = {}
    heap: list = []  # (-next access, key)
    out = np.zeros(len(ids), dtype=bool)
    for t, (key, n) in enumerate(zip(ids.tolist(), nxt.tolist())):
        n = n if n >= 0 else NO_NEXT
        if key in nxt_of:
            out[t] = True
        elif len(nxt_of) >= capacity:
            while -heap[0][0] != nxt_of.get(heap[0][1]):
                heapq.heappop(heap)
            far, victim = -heap[0][0], heap[0][1]
            if far <= n:
                continue  # bypass: the new object is needed last (or never again)
            heapq.heappop(heap)
            del nxt_of[victim]
        nxt_of[key] = n
        heapq.heappush(heap, (-n, key))
    return out


def random_hits(ids: np.ndarray, capacity: int, seed: int = 0) -> np.ndarray:
    """Per-request hits of random eviction (the control: no use of recency or frequency):
    on a miss in a full cache a uniformly chosen cached object is evicted. Seeded (numpy
    PCG64), unlike libCacheSim's Random, so that a control run can be repeated exactly."""
    rng = np.random.default_rng(seed)
    picks = rng.random(len(ids))
    slots: list = []
    where: dict = {}
    out = np.zeros(len(ids), dtype=bool)
    for i, o in enumerate(ids.tolist()):
        if o in where:
            out[i] = True
            continue
        if len(slots) < capacity:
            where[o] = len(slots)
            slots.append(o)
            continue
        j = int(picks[i] * capacity)
        del where[slots[j]]
        slots[j] = o
        where[o] = j
    return out


def policy_hits(name: str, ids: np.ndarray, nxt: np.ndarray, capacity: int, hybrid_k: int = 2) -> np.ndarray:
    if name == "hybrid":
        return hybrid_hits(ids, capacity, hybrid_k)
    if name == "opt":
        return opt_hits(ids, nxt, capacity)
    if name == CONTROL_POLICY:
        return random_hits(ids, capacity)
    return lib_hits(name, ids, nxt, capacity)


def capacities(n_distinct: int, fractions: list[float]) -> list[int]:
    """Cache sizes in objects: round(fraction * distinct ids), at least MIN_CAPACITY, no repeats."""
    out = []
    for f in fractions:
        c = max(MIN_CAPACITY, int(round(f * n_distinct)))
        if c not in out:
            out.append(c)
    return out


def write_oracle_general(path: Path, ids: np.ndarray, nxt: np.ndarray) -> Path:
    """The trace in libCacheSim's oracleGeneral binary format: per request
    <uint32 clock_time, uint64 obj_id, uint32 obj_size, int64 next_access_vtime> (24 bytes,
    little-endian, packed); next_access_vtime is -1 when the object is never requested again."""
    dt = np.dtype([("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    arr = np.zeros(len(ids), dtype=dt)
    arr["t"] = np.arange(len(ids))
    arr["id"] = ids
    arr["size"] = 1
    arr["next"] = nxt
    path = Path(path)
    arr.tofile(path)
    return path


def lib_process_trace(name: str, path: Path, capacity: int) -> tuple[float, float]:
    """(miss ratio, requests/s) of libCacheSim's own C loop over an oracleGeneral file."""
    import libcachesim as lcs

    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = lib_cache(name, capacity)
    n = reader.get_num_of_req() if hasattr(reader, "get_num_of_req") else None
    t0 = time.perf_counter()
    miss_ratio, _ = cache.process_trace(reader)
    dt = time.perf_counter() - t0
    if n is None:
        n = Path(path).stat().st_size // 24
    return float(miss_ratio), n / dt if dt > 0 else 0.0


def timed_hits(name: str, ids: np.ndarray, nxt: np.ndarray, capacity: int, hybrid_k: int = 2):
    t0 = time.perf_counter()
    hits = policy_hits(name, ids, nxt, capacity, hybrid_k)
    return hits, time.perf_counter() - t0


def lru_stack_distances(ids: np.ndarray) -> np.ndarray:
    """Mattson's LRU stack distance of every request: 1 + the number of distinct ids requested
    since the previous request for the same id, or 0 for an id's first request. Exact LRU with
    capacity c hits exactly the requests with 1 <= distance <= c, so one pass gives LRU's hits
    at every size (a Fenwick tree marks each id's latest request time)."""
    n = len(ids)
    tree = [0] * (n + 1)
    out = np.zeros(n, dtype=np.int64)
    last: dict[int, int] = {}

    def add(i: int, v: int) -> None:
        i += 1
        while i <= n:
            tree[i] += v
            i += i & -i

    def prefix(i: int) -> int:  # marks at times [0, i)
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    for t, o in enumerate(np.asarray(ids).tolist()):
        j = last.get(o)
        if j is not None:
            out[t] = prefix(t) - prefix(j + 1) + 1
            add(j, -1)
        add(t, 1)
        last[o] = t
    return out


def lru_capacity_for(dist: np.ndarray, hit_pct: float, start: int = 0) -> int | None:
    """The smallest capacity at which exact LRU hits at least `hit_pct` % of the requests from
    `start` on (from lru_stack_distances), at least MIN_CAPACITY; None when no capacity does
    (the first requests of ids always miss)."""
    d = np.asarray(dist)[start:]
    need = int(np.ceil(hit_pct / 100.0 * len(d) - 1e-9))
    pos = np.sort(d[d > 0])
    if need > len(pos):
        return None
    return max(MIN_CAPACITY, int(pos[need - 1]) if need > 0 else 1)
