"""Per-block hits of every policy on a trace's flat block stream (one lookup per block, in
order; a miss inserts, a hit touches). Capacities are in blocks. The prefix rule is
applied afterwards (prefix.py), so every policy here sees the same stream.

- libCacheSim 0.3.5: lru, lfu, arc, s3fifo, lru-2, lru-3 (LRU-K), without TTL;
- here: leaf-lru (a block can be evicted only when no cached block depends on it, least
  recently used leaf first: what vLLM's block manager and SGLang's radix cache do), lru and
  lru-K with TTL (used when a TTL is given, and by the tiers), random eviction (seeded,
  the floor), opt (Belady's MIN with bypass; ties among blocks never used again are broken
  deepest block first, so its cache stays prefix-closed and its block hits are prefix hits:
  no policy can have more, the ceiling), and the eviction suite's hybrid (LRU-K eviction
  with LFU admission, for the source's ordering lru < lfu < hybrid). LRU-K's python loop,
  the hybrid's too, is the one both suites share (harness/mechanisms/cache_policies/lruk.py).

TTL: expiry on the trace's own timestamps, active: when a request arrives at time t, every
cached block whose last use is more than the TTL before t is dropped before its lookups.

Two engines give the same per-block hits: "compiled" (compiled.py, numba: every policy,
libCacheSim's included, on dense block ids) and "python" (the loops below and
libCacheSim's own policies, one Python call per lookup). The compiled one is used whenever
numba imports; the python one is the fallback and what the compiled loops are checked
against request by request (tests/suites/kv_trace/test_kv_trace_compiled.py). `engine_name()` says which
one runs; the kv-trace driver records it beside each policy's lookups/s.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from harness.base.errors import BadInput, EnvironmentProblem
from harness.mechanisms.cache_policies import sim as simulate
from harness.mechanisms.cache_policies.lruk import expire_idle, lruk_hits
from harness.mechanisms.kv_blocks.trace import KVTrace

LIB_POLICIES = {
    "lru": ("LRU", {}),
    "lfu": ("LFU", {}),
    "arc": ("ARC", {}),
    "s3fifo": ("S3FIFO", {}),
    "lru-2": ("LRUK", {"k": 2}),
    "lru-3": ("LRUK", {"k": 3}),
}
OWN_POLICIES = ("leaf-lru", "random", "opt", "hybrid")
ALL_POLICIES = tuple(LIB_POLICIES) + OWN_POLICIES
TTL_POLICIES = ("lru", "leaf-lru", "lru-2", "lru-3")  # the ones with a TTL implementation here
NO_NEXT = 2**62


@dataclass
class Stream:
    """The flat block stream of a trace: as Python lists for the python engine (fast to
    iterate), as numpy arrays of dense block ids for the compiled one (built once, on use)."""

    trace: KVTrace

    @cached_property
    def ids(self) -> list:
        return self.trace.blocks.tolist()

    @cached_property
    def times(self) -> list:
        return self.time_array.tolist()

    @cached_property
    def parents(self) -> list:
        return self.trace.parents().tolist()

    @cached_property
    def depths(self) -> list:
        return self.depth_array.tolist()

    @cached_property
    def next_use(self) -> list:
        """Position of the next lookup of the same block, NO_NEXT when there is none."""
        return self.next_array.tolist()

    @cached_property
    def dense(self) -> tuple[np.ndarray, int]:
        """(block ids mapped to 0..n-1 in the order of the ids, n distinct blocks)."""
        return dense_ids(self.trace.blocks)

    @cached_property
    def time_array(self) -> np.ndarray:
        return self.trace.block_times_ms()

    @cached_property
    def depth_array(self) -> np.ndarray:
        return self.trace.depths()

    @cached_property
    def next_array(self) -> np.ndarray:
        return next_uses(self.dense[0])

    @cached_property
    def dense_parents(self) -> np.ndarray:
        """The dense id of the block before each block in its request, -1 for a first block."""
        ids, t = self.dense[0], self.trace
        par = np.empty(len(ids), dtype=np.int64)
        if len(ids):
            par[0] = -1
            par[1:] = ids[:-1]
            par[t.offsets[:-1][t.lengths > 0]] = -1
        return par


def dense_ids(blocks: np.ndarray) -> tuple[np.ndarray, int]:
    """(ids as dense integers 0..n-1 in the order of the original ids, n). Ids that are
    already small non-negative integers (the Mooncake release's are) go through a table,
    others through np.unique. The order is kept, so ties broken by the smaller id stay so."""
    blocks = np.asarray(blocks)
    if len(blocks) == 0:
        return np.zeros(0, np.int32), 0
    lo, hi = int(blocks.min()), int(blocks.max())
    if lo >= 0 and hi < 4 * len(blocks) + (1 << 20):
        seen = np.zeros(hi + 1, np.bool_)
        seen[blocks] = True
        n = int(np.count_nonzero(seen))
        dt = np.int32 if n < 2**31 else np.int64
        if n == hi + 1:  # already dense
            return blocks.astype(dt, copy=False), n
        table = (np.cumsum(seen, dtype=np.int64) - 1).astype(dt)
        return table[blocks], n
    uniq, inv = np.unique(blocks, return_inverse=True)
    return inv.astype(np.int32 if len(uniq) < 2**31 else np.int64), len(uniq)


def next_uses(ids: np.ndarray) -> np.ndarray:
    """Position of the next lookup of the same block, NO_NEXT when there is none."""
    nxt = np.full(len(ids), NO_NEXT, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    same = s[1:] == s[:-1]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def _bools(out: bytearray) -> np.ndarray:
    return np.frombuffer(bytes(out), dtype=np.uint8).astype(bool)


def check_policy(where: str, name: str, capacity: int, ttl_s: float | None) -> None:
    if name not in ALL_POLICIES:
        raise BadInput(f"{where}: unknown policy {name!r}; known: {', '.join(ALL_POLICIES)}")
    if capacity < 1:
        raise BadInput(f"{where}: a capacity of {capacity} blocks holds nothing; give at least one block")
    if name == "s3fifo" and int(capacity * 0.1) < 1:
        # libCacheSim aborts the whole process below 10 objects (S3FIFO.c)
        raise BadInput(f"{where}: S3-FIFO needs a capacity of at least 10 blocks, got {capacity}")
    if ttl_s is not None and name not in TTL_POLICIES:
        raise BadInput(f"{where}: policy {name!r} has no TTL here; with a TTL use one of {', '.join(TTL_POLICIES)}")


ENGINES = ("compiled", "python")
_LOADED: dict = {}
_NO_TIMES = np.zeros(0, dtype=np.int64)


def _compiled():
    """compiled.py, or None where numba does not import (loaded on first use: numba alone
    takes about 0.2 s to import, which every harness command would pay otherwise)."""
    if "module" not in _LOADED:
        try:
            import harness.mechanisms.kv_blocks.compiled as compiled  # lazy: numba, 0.2 s, maybe missing
        except ImportError as e:  # numba missing or broken: the python engine, same hits
            compiled, _LOADED["why"] = None, f"{type(e).__name__}: {e}"
        _LOADED["module"] = compiled
    return _LOADED["module"]


def engine_name(engine: str | None = None) -> str:
    """The engine that runs: `engine` when given, else compiled where numba imports."""
    if engine is None:
        return "compiled" if _compiled() is not None else "python"
    if engine not in ENGINES:
        raise BadInput(f"simulator engine {engine!r} is unknown; use one of {', '.join(ENGINES)}")
    if engine == "compiled" and _compiled() is None:
        raise EnvironmentProblem(
            f"the compiled simulator needs numba ({_LOADED.get('why')}); run `make setup`, or use the python engine"
        )
    return engine


def engine_description(engine: str | None = None) -> str:
    name = engine_name(engine)
    if name == "compiled":
        return f"compiled loops (numba {_compiled().VERSION})"
    why = _LOADED.get("why")
    return "pure-Python loops and libCacheSim's policies" + (f" (numba did not import: {why})" if why else "")


def prepare(stream: Stream, names=ALL_POLICIES, engine: str | None = None) -> None:
    """Build what the compiled loops read (dense ids, next uses, parents) and load the loops,
    once per trace, so that a timed simulation times the simulation only."""
    c = _kernels(engine)
    if c is None:
        return
    _ = stream.dense
    if "opt" in names:
        _ = stream.next_array, stream.depth_array
    if "leaf-lru" in names:
        _ = stream.dense_parents
    c.warm()


def _kernels(engine: str | None):
    return _compiled() if engine_name(engine) == "compiled" else None


def _times(stream: Stream, ttl_ms: float | None) -> np.ndarray:
    return _NO_TIMES if ttl_ms is None else stream.time_array


def block_hits(
    stream: Stream,
    name: str,
    capacity: int,
    ttl_s: float | None = None,
    seed: int = 0,
    hybrid_k: int = 2,
    engine: str | None = None,
) -> np.ndarray:
    """Per-block hits of policy `name` with `capacity` blocks (and a TTL in seconds)."""
    check_policy("policy", name, capacity, ttl_s)
    ttl_ms = None if ttl_s is None else ttl_s * 1000.0
    c = _kernels(engine)
    if name == "lru" and (ttl_ms is not None or c is not None):
        return lru(stream, capacity, ttl_ms, engine)
    if name.startswith("lru-") and (ttl_ms is not None or c is not None):
        return lruk(stream, capacity, int(name[4:]), ttl_ms, engine)
    if name == "leaf-lru":
        return leaf_lru(stream, capacity, ttl_ms, engine)
    if c is not None:
        return _compiled_hits(c, stream, name, capacity, seed, hybrid_k)
    if name in LIB_POLICIES:
        return lib_hits(name, stream.ids, capacity)
    if name == "opt":
        return opt_hits(stream.ids, stream.next_use, stream.depths, capacity)
    if name == "hybrid":
        return lruk_hits(stream.ids, capacity, hybrid_k, admit_lfu=True)

    return simulate.random_hits(stream.trace.blocks, capacity, seed)


def _compiled_hits(c, stream: Stream, name: str, capacity: int, seed: int, hybrid_k: int) -> np.ndarray:
    ids, n = stream.dense
    if name == "lfu":
        return c.lfu(ids, n, capacity)
    if name == "arc":
        return c.arc(ids, n, capacity)
    if name == "s3fifo":
        return c.s3fifo(ids, n, capacity)
    if name == "opt":
        return c.opt(ids, n, stream.next_array, stream.depth_array, capacity)
    if name == "random":
        return c.random(ids, n, capacity, seed)
    return c.lruk(ids, n, _NO_TIMES, capacity, hybrid_k, None, admit_lfu=True)  # the hybrid


def lru(stream: Stream, capacity: int, ttl_ms: float | None = None, engine: str | None = None) -> np.ndarray:
    """Exact LRU with optional TTL expiry (ms), on either engine."""
    c = _kernels(engine)
    if c is None:
        return lru_hits(stream.ids, stream.times, capacity, ttl_ms)
    ids, n = stream.dense
    return c.lru(ids, n, _times(stream, ttl_ms), capacity, ttl_ms)


def lruk(stream: Stream, capacity: int, k: int, ttl_ms: float | None = None, engine: str | None = None) -> np.ndarray:
    """LRU-K with optional TTL expiry (ms), on either engine (without TTL the python engine
    uses libCacheSim's LRUK for K = 2 and 3, as block_hits always did)."""
    c = _kernels(engine)
    if c is None:
        return lruk_hits(stream.ids, capacity, k, stream.times, ttl_ms)
    ids, n = stream.dense
    return c.lruk(ids, n, _times(stream, ttl_ms), capacity, k, ttl_ms)


def leaf_lru(stream: Stream, capacity: int, ttl_ms: float | None = None, engine: str | None = None) -> np.ndarray:
    """Leaf-first LRU with optional TTL expiry (ms), on either engine."""
    c = _kernels(engine)
    if c is None:
        return leaf_lru_hits(stream.ids, stream.parents, stream.times, capacity, ttl_ms)
    ids, n = stream.dense
    return c.leaf_lru(ids, n, stream.dense_parents, _times(stream, ttl_ms), capacity, ttl_ms)


def lib_hits(name: str, ids: list, capacity: int) -> np.ndarray:
    """libCacheSim's policy, one Request per block (the C++ cache's get, without the
    Python wrapper's extra call)."""
    import libcachesim as lcs

    cls, kwargs = LIB_POLICIES[name]
    cache = getattr(lcs, cls)(capacity, hashpower=max(12, min(24, int(capacity).bit_length() + 1)), **kwargs)
    get = cache._cache.get if hasattr(cache, "_cache") else cache.get
    req = lcs.Request()
    req.obj_size = 1
    out = bytearray(len(ids))
    for i, o in enumerate(ids):
        req.obj_id = o
        req.clock_time = i
        if get(req):
            out[i] = 1
    return _bools(out)


def lru_hits(ids: list, times: list, capacity: int, ttl_ms: float | None = None) -> np.ndarray:
    """Exact LRU, with optional TTL expiry (last use older than ttl_ms)."""
    od: OrderedDict = OrderedDict()
    mv, pop = od.move_to_end, od.popitem
    out = bytearray(len(ids))
    prev = None
    for i, key in enumerate(ids):
        now = times[i]
        if ttl_ms is not None and now != prev:
            expire_idle(od, now - ttl_ms, None)
            prev = now
        if key in od:
            out[i] = 1
            mv(key)
        elif len(od) >= capacity:
            pop(last=False)
        od[key] = now
    return _bools(out)


def _pop_leaf(heap: list, last: dict, kids: dict):
    """The least recently used leaf, skipping stale heap entries."""
    while True:
        lt, v = heapq.heappop(heap)
        if last.get(v) == lt and kids[v] == 0:
            return v


def leaf_lru_hits(ids: list, parents: list, times: list, capacity: int, ttl_ms: float | None = None) -> np.ndarray:
    """Leaf-first LRU: only a block no cached block depends on (a leaf of the prefix tree)
    can be evicted, the least recently used leaf first. A block's parent is the block
    before it in the request that inserted it."""
    last: dict = {}  # cached block -> position of its last use
    kids: dict = {}  # cached block -> cached children
    par: dict = {}  # cached block -> (its parent, the parent's insertion) when inserted, else None
    ins: dict = {}  # cached block -> position of its insertion (tells a re-inserted parent apart)
    heap: list = []  # (last use, block) of leaves; stale entries skipped
    rec: OrderedDict | None = OrderedDict() if ttl_ms is not None else None

    def drop(v):
        del last[v], kids[v], ins[v]
        link = par.pop(v)
        if link is not None and ins.get(link[0]) == link[1]:
            p = link[0]
            kids[p] -= 1
            if kids[p] == 0:
                heapq.heappush(heap, (last[p], p))

    out = bytearray(len(ids))
    prev = None
    pend = None  # (last use, block) of the newest leaf, pushed only if it stays a leaf (saves most pushes)
    push = heapq.heappush
    for t, key in enumerate(ids):
        now = times[t]
        if rec is not None:
            if now != prev:
                expire_idle(rec, now - ttl_ms, drop)
                prev = now
            rec.pop(key, None)
            rec[key] = now
        if key in last:
            if pend is not None:
                push(heap, pend)
                pend = None
            out[t] = 1
            last[key] = t
            if kids[key] == 0:
                pend = (t, key)
            continue
        p = parents[t]
        if len(last) >= capacity:
            if pend is not None:
                push(heap, pend)
                pend = None
            v = _pop_leaf(heap, last, kids)
            drop(v)
            if rec is not None:
                del rec[v]
        linked = p in kids and p != key
        if pend is not None and not (linked and pend[1] == p):
            push(heap, pend)  # still a leaf: the new block is not its child
        last[key], kids[key], ins[key] = t, 0, t
        par[key] = (p, ins[p]) if linked else None
        if linked:
            kids[p] += 1
        pend = (t, key)
    return _bools(out)


def opt_hits(ids: list, next_use: list, depths: list, capacity: int) -> np.ndarray:
    """Belady's MIN with bypass on the block stream: on a miss in a full cache, drop whichever
    of the cached blocks and the new one is used again furthest ahead (never = NO_NEXT);
    ties (blocks never used again) go to the deepest block. A block's next use comes after
    its parent's (a request uses the parent first), so the cache stays prefix-closed."""
    cached: dict = {}  # block -> (next use, depth)
    heap: list = []  # (-next use, -depth, block)
    out = bytearray(len(ids))
    for t, key in enumerate(ids):
        entry = (next_use[t], depths[t])
        if key in cached:
            out[t] = 1
        elif len(cached) >= capacity:
            while cached.get(heap[0][2]) != (-heap[0][0], -heap[0][1]):
                heapq.heappop(heap)
            far = (-heap[0][0], -heap[0][1])
            if far <= entry:
                continue  # bypass: the new block is the one needed last
            del cached[heapq.heappop(heap)[2]]
        cached[key] = entry
        heapq.heappush(heap, (-entry[0], -entry[1], key))
    return _bools(out)
