"""The simulator's loops compiled with numba: the same policies as policies.py, on dense
block ids, one lookup per block in order, per-block hits out (the prefix rule needs them).

Why numba: the loops stay Python source next to the pure-Python ones they must match line
for line, numba and llvmlite ship binary wheels for every platform the harness runs on (no
C compiler at `make setup` or in CI's fresh clone), and it is well kept (NumPy's own
ecosystem, releases for every new NumPy). A C extension or Cython would need a compiler on
every host and a second language beside the references. The compile cost is paid once:
every kernel is compiled with cache=True, so the machine code lands in __pycache__ and
later processes load it instead of compiling it again.

Every kernel takes `ids`, the trace's block ids mapped to dense integers 0..n_ids-1 once
per trace (policies.dense_ids), and returns one bool per lookup. The libCacheSim policies (LFU, ARC,
S3-FIFO, LRU-K) are rewritten here after the eviction suite's references, which are
cross-checked against libCacheSim; the compiled loops are checked request by request
against the pure-Python path and the scan-based references (tests/suites/kv_trace/test_kv_trace_compiled.py).

Indexed binary heaps order blocks by two int64 keys, ties broken by the smaller dense id
(the smaller block id, as the references do): k1[v], k2[v] are per-block arrays.
"""

from __future__ import annotations

import numba
import numpy as np

JIT = numba.njit(cache=True, nogil=True)
INLINE = numba.njit(cache=True, nogil=True, inline="always")
VERSION = numba.__version__


# ---- indexed binary heap (min first by k1, then k2, then id) -------------------------------


@INLINE
def _less(a, b, k1, k2):
    if k1[a] != k1[b]:
        return k1[a] < k1[b]
    if k2[a] != k2[b]:
        return k2[a] < k2[b]
    return a < b


@INLINE
def _place(heap, pos, i, v):
    """Put v at slot i of the heap."""
    heap[i] = v
    pos[v] = i


@INLINE
def _sift_up(heap, pos, k1, k2, i):
    v = heap[i]
    while i > 0:
        p = (i - 1) >> 1
        u = heap[p]
        if not _less(v, u, k1, k2):
            break
        _place(heap, pos, i, u)
        i = p
    _place(heap, pos, i, v)


@INLINE
def _sift_down(heap, pos, k1, k2, i, size):
    v = heap[i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _less(heap[c + 1], heap[c], k1, k2):
            c += 1
        u = heap[c]
        if not _less(u, v, k1, k2):
            break
        _place(heap, pos, i, u)
        i = c
    _place(heap, pos, i, v)


@INLINE
def _push(heap, pos, k1, k2, size, v):
    _place(heap, pos, size, v)
    _sift_up(heap, pos, k1, k2, size)
    return size + 1


@INLINE
def _remove(heap, pos, k1, k2, size, v):
    """Take v out of the heap (v must be in it); the new size."""
    i = pos[v]
    pos[v] = -1
    size -= 1
    if i == size:
        return size
    u = heap[size]
    _place(heap, pos, i, u)
    _sift_up(heap, pos, k1, k2, i)
    _sift_down(heap, pos, k1, k2, pos[u], size)
    return size


# ---- doubly linked lists: sentinel s, nxt[s] = oldest, prv[s] = newest ---------------------


@INLINE
def _append(prv, nxt, s, v):
    last = prv[s]
    prv[v] = last
    nxt[v] = s
    nxt[last] = v
    prv[s] = v


@INLINE
def _unlink(prv, nxt, v):
    a, b = prv[v], nxt[v]
    nxt[a] = b
    prv[b] = a


def _lists(n_ids: int, n_lists: int):
    """prv, nxt of n_ids blocks and n_lists empty lists (sentinels n_ids..n_ids+n_lists-1)."""
    prv = np.empty(n_ids + n_lists, np.int32 if n_ids + n_lists < 2**31 else np.int64)
    nxt = np.empty_like(prv)
    s = np.arange(n_ids, n_ids + n_lists)
    prv[s], nxt[s] = s, s
    return prv, nxt


def _heap(n_ids: int, capacity: int):
    """heap (slots for the cache's blocks), pos (-1: not in it), k1, k2."""
    return (
        np.zeros(min(capacity, n_ids) + 1, np.int64),
        np.full(n_ids, -1, np.int64),
        np.zeros(n_ids, np.int64),
        np.zeros(n_ids, np.int64),
    )


# ---- LRU -------------------------------------------------------------------------------------


@JIT
def _lru(ids, times, capacity, ttl_ms, use_ttl, prv, nxt, cached, last):
    n = ids.shape[0]
    s = prv.shape[0] - 1
    out = np.zeros(n, np.bool_)
    size = 0
    for t in range(n):
        key = ids[t]
        if use_ttl and (t == 0 or times[t] != times[t - 1]):
            cut = times[t] - ttl_ms
            while size > 0 and last[nxt[s]] < cut:
                v = nxt[s]
                _unlink(prv, nxt, v)
                cached[v] = False
                size -= 1
        if cached[key]:
            out[t] = True
            _unlink(prv, nxt, key)
        else:
            if size >= capacity:
                v = nxt[s]
                _unlink(prv, nxt, v)
                cached[v] = False
                size -= 1
            cached[key] = True
            size += 1
        _append(prv, nxt, s, key)
        if use_ttl:
            last[key] = times[t]
    return out


def lru(ids, n_ids, times, capacity, ttl_ms=None):
    """Exact LRU (policies.lru_hits), with optional TTL expiry (idle longer than ttl_ms)."""
    prv, nxt = _lists(n_ids, 1)
    last = np.zeros(n_ids if ttl_ms is not None else 1, np.int64)
    return _lru(
        ids,
        times,
        capacity,
        -1.0 if ttl_ms is None else float(ttl_ms),
        ttl_ms is not None,
        prv,
        nxt,
        np.zeros(n_ids, np.bool_),
        last,
    )


# ---- LRU-K and the hybrid (LRU-K eviction, LFU admission) ------------------------------------


@INLINE
def _lruk_remove(v, k, uses, yprv, ynxt, heap, pos, k1, k2, size):
    """Forget cached v: young ones are in the insertion-ordered list, the others in the heap."""
    if uses[v] < k:
        _unlink(yprv, ynxt, v)
    else:
        size = _remove(heap, pos, k1, k2, size, v)
    uses[v] = 0
    return size


@JIT
def _lruk(ids, times, capacity, k, ttl_ms, use_ttl, admit_lfu, heap, pos, k1, k2, yprv, ynxt, prv, nxt, last):
    n = ids.shape[0]
    n_ids = pos.shape[0]
    ys = yprv.shape[0] - 1  # young blocks (fewer than k uses), oldest insertion first
    s = prv.shape[0] - 1  # with a TTL: every cached block, least recently used first
    out = np.zeros(n, np.bool_)
    uses = np.zeros(n_ids, np.int64)  # uses since insertion; 0 = not cached
    hist = np.zeros(n_ids * k, np.int64)  # ring of the last k use positions
    count = np.zeros(n_ids if admit_lfu else 1, np.int64)  # every lookup, kept after eviction
    size = 0  # blocks in the heap (k uses or more), ordered by their k-th most recent use
    held = 0
    for t in range(n):
        key = ids[t]
        if use_ttl:
            if t == 0 or times[t] != times[t - 1]:
                cut = times[t] - ttl_ms
                while held > 0 and last[nxt[s]] < cut:
                    v = nxt[s]
                    _unlink(prv, nxt, v)
                    size = _lruk_remove(v, k, uses, yprv, ynxt, heap, pos, k1, k2, size)
                    held -= 1
            if uses[key] > 0:
                _unlink(prv, nxt, key)
            _append(prv, nxt, s, key)
            last[key] = times[t]
        if admit_lfu:
            count[key] += 1
        u = uses[key]
        if u > 0:
            out[t] = True
            u += 1
            uses[key] = u
            hist[key * k + (u - 1) % k] = t
            if u < k:
                continue  # a young block keeps its insertion-time priority
            k1[key] = hist[key * k + u % k]  # its k-th most recent use
            if u == k:
                _unlink(yprv, ynxt, key)
                size = _push(heap, pos, k1, k2, size, key)
            else:
                _sift_down(heap, pos, k1, k2, pos[key], size)
            continue
        if held >= capacity:
            v = ynxt[ys] if ynxt[ys] != ys else heap[0]  # young ones go first
            if admit_lfu and count[key] <= count[v]:
                continue  # LFU admission refuses the newcomer
            size = _lruk_remove(v, k, uses, yprv, ynxt, heap, pos, k1, k2, size)
            held -= 1
            if use_ttl:
                _unlink(prv, nxt, v)
        uses[key] = 1
        held += 1
        hist[key * k] = t
        if k <= 1:
            k1[key] = t
            size = _push(heap, pos, k1, k2, size, key)
        else:
            _append(yprv, ynxt, ys, key)
    return out


def lruk(ids, n_ids, times, capacity, k, ttl_ms=None, admit_lfu=False):
    """LRU-K (the compiled engine of harness/mechanisms/cache_policies/lruk.py's policy, as lruk_hits there
    and libCacheSim's LRUK) with optional TTL; with admit_lfu the eviction suite's hybrid (a
    newcomer is cached only when it has been looked up more often than the victim), without
    a TTL (the kernel keeps a refused newcomer on its TTL list)."""
    if admit_lfu and ttl_ms is not None:
        raise ValueError("the compiled LRU-K has no TTL with LFU admission")
    heap, pos, k1, k2 = _heap(n_ids, capacity)
    yprv, ynxt = _lists(n_ids, 1)
    prv, nxt = _lists(n_ids if ttl_ms is not None else 0, 1)
    last = np.zeros(n_ids if ttl_ms is not None else 1, np.int64)
    return _lruk(
        ids,
        times,
        capacity,
        k,
        -1.0 if ttl_ms is None else float(ttl_ms),
        ttl_ms is not None,
        admit_lfu,
        heap,
        pos,
        k1,
        k2,
        yprv,
        ynxt,
        prv,
        nxt,
        last,
    )


# ---- leaf-first LRU ----------------------------------------------------------------------------
# Cached blocks are in one of three places. LISTED: a list in order of last use (every hit or
# insertion goes to its newest end). PARKED: a block with cached children found at the list's
# oldest end while looking for a victim, taken out of the list. HEAPED: a parked block whose
# last child went (a leaf again), in a heap by last use. A block leaves the list only from its
# oldest end and comes back only when used, so every parked or heaped block is older than every
# listed one: the victim (the least recently used leaf) is the heap's first, else the first leaf
# from the list's oldest end (parking the blocks with children on the way; each is parked once).

LISTED, PARKED, HEAPED = 1, 2, 3


@INLINE
def _leaf_drop(v, state, heap, pos, k1, k2, size, prv, nxt, kids, par, par_ins, ins):
    """Forget v; its parent becomes a leaf when v was its last cached child."""
    if state[v] == LISTED:
        _unlink(prv, nxt, v)
    elif state[v] == HEAPED:
        size = _remove(heap, pos, k1, k2, size, v)
    state[v] = 0
    p = par[v]
    if p >= 0 and state[p] != 0 and ins[p] == par_ins[v]:
        kids[p] -= 1
        if kids[p] == 0 and state[p] == PARKED:
            state[p] = HEAPED
            size = _push(heap, pos, k1, k2, size, p)
    par[v] = -1
    return size


@INLINE
def _leaf_from_list(state, prv, nxt, s, kids):
    """The first leaf from the list's oldest end, parking the blocks with children before it."""
    v = nxt[s]
    while v != s and kids[v] > 0:
        _unlink(prv, nxt, v)
        state[v] = PARKED
        v = nxt[s]
    if v == s:
        raise ValueError("leaf-first LRU: a full cache without a leaf (a cycle in the parent links)")
    return v


@JIT
def _leaf_lru(ids, parents, times, capacity, ttl_ms, use_ttl, heap, pos, k1, k2, prv, nxt, rprv, rnxt, last):
    n = ids.shape[0]
    n_ids = pos.shape[0]
    s = prv.shape[0] - 1
    rs = rprv.shape[0] - 1  # with a TTL: every cached block by last use
    out = np.zeros(n, np.bool_)
    state = np.zeros(n_ids, np.int8)
    kids = np.zeros(n_ids, np.int64)  # cached children linked to this insertion
    par = np.full(n_ids, -1, np.int64)  # the parent at insertion when it was cached, else -1
    par_ins = np.zeros(n_ids, np.int64)  # ... and that parent's insertion (a re-inserted parent differs)
    ins = np.zeros(n_ids, np.int64)
    size = 0  # heaped blocks
    held = 0  # cached blocks
    for t in range(n):
        key = ids[t]
        if use_ttl:
            if t == 0 or times[t] != times[t - 1]:
                cut = times[t] - ttl_ms
                while held > 0 and last[rnxt[rs]] < cut:
                    v = rnxt[rs]
                    _unlink(rprv, rnxt, v)
                    size = _leaf_drop(v, state, heap, pos, k1, k2, size, prv, nxt, kids, par, par_ins, ins)
                    held -= 1
            if state[key] != 0:
                _unlink(rprv, rnxt, key)
            _append(rprv, rnxt, rs, key)
            last[key] = times[t]
        st = state[key]
        if st != 0:
            out[t] = True
            k1[key] = t
            if st == LISTED:
                _unlink(prv, nxt, key)
            elif st == HEAPED:
                size = _remove(heap, pos, k1, k2, size, key)
            state[key] = LISTED
            _append(prv, nxt, s, key)
            continue
        if held >= capacity:
            v = heap[0] if size > 0 else _leaf_from_list(state, prv, nxt, s, kids)
            size = _leaf_drop(v, state, heap, pos, k1, k2, size, prv, nxt, kids, par, par_ins, ins)
            held -= 1
            if use_ttl:
                _unlink(rprv, rnxt, v)
        p = parents[t]
        state[key] = LISTED
        _append(prv, nxt, s, key)
        held += 1
        k1[key] = t
        ins[key] = t
        kids[key] = 0
        if p >= 0 and p != key and state[p] != 0:
            par[key] = p
            par_ins[key] = ins[p]
            kids[p] += 1
            if kids[p] == 1 and state[p] == HEAPED:
                size = _remove(heap, pos, k1, k2, size, p)
                state[p] = PARKED
    return out


def leaf_lru(ids, n_ids, parents, times, capacity, ttl_ms=None):
    """Leaf-first LRU (policies.leaf_lru_hits); `parents` are dense ids, -1 for a first block."""
    heap, pos, k1, k2 = _heap(n_ids, capacity)
    prv, nxt = _lists(n_ids, 1)
    rprv, rnxt = _lists(n_ids if ttl_ms is not None else 0, 1)
    last = np.zeros(n_ids if ttl_ms is not None else 1, np.int64)
    return _leaf_lru(
        ids,
        parents,
        times,
        capacity,
        -1.0 if ttl_ms is None else float(ttl_ms),
        ttl_ms is not None,
        heap,
        pos,
        k1,
        k2,
        prv,
        nxt,
        rprv,
        rnxt,
        last,
    )


# ---- LFU (libCacheSim's: fewest uses, then the one that reached its count first) -------------


@JIT
def _lfu(ids, n_ids, capacity, prv, nxt):
    """One list per use count (sentinel n_ids + count), each in the order its blocks reached it."""
    n = ids.shape[0]
    out = np.zeros(n, np.bool_)
    freq = np.zeros(n_ids, np.int64)  # uses since insertion; 0 = not cached
    low = 1  # the smallest count a cached block has
    held = 0
    for t in range(n):
        key = ids[t]
        f = freq[key]
        if f > 0:
            out[t] = True
            _unlink(prv, nxt, key)
            if f == low and nxt[n_ids + f] == n_ids + f:
                low = f + 1
            freq[key] = f + 1
            _append(prv, nxt, n_ids + f + 1, key)
            continue
        if held >= capacity:
            v = nxt[n_ids + low]
            _unlink(prv, nxt, v)
            freq[v] = 0
            held -= 1
        freq[key] = 1
        held += 1
        low = 1
        _append(prv, nxt, n_ids + 1, key)
    return out


def lfu(ids, n_ids, capacity):
    """LFU as libCacheSim's (eviction.reference.RefLFU): uses since insertion, FIFO within a count."""
    most = int(np.bincount(ids).max()) if len(ids) else 0
    prv, nxt = _lists(n_ids, most + 2)
    return _lfu(ids, n_ids, capacity, prv, nxt)


# ---- Belady's MIN with the prefix rule's tie-break ---------------------------------------------


@JIT
def _opt(ids, next_use, depths, capacity, heap, pos, k1, k2):
    n = ids.shape[0]
    out = np.zeros(n, np.bool_)
    size = 0
    for t in range(n):
        key = ids[t]
        if pos[key] >= 0:
            out[t] = True
            k1[key] = -next_use[t]
            k2[key] = -depths[t]
            _sift_up(heap, pos, k1, k2, pos[key])  # needed later than before: nearer the top
            _sift_down(heap, pos, k1, k2, pos[key], size)
            continue
        if size >= capacity:
            v = heap[0]  # needed last; ties: deepest, then the smaller id
            far, deep = -k1[v], -k2[v]
            if far < next_use[t] or (far == next_use[t] and deep <= depths[t]):
                continue  # bypass: the new block is the one needed last
            size = _remove(heap, pos, k1, k2, size, v)
        k1[key] = -next_use[t]
        k2[key] = -depths[t]
        size = _push(heap, pos, k1, k2, size, key)
    return out


def opt(ids, n_ids, next_use, depths, capacity):
    """Belady's MIN with bypass (policies.opt_hits); next_use is policies.NO_NEXT when never again."""
    return _opt(ids, next_use, depths, capacity, *_heap(n_ids, capacity))


# ---- seeded random eviction ----------------------------------------------------------------------


@JIT
def _random(ids, picks, capacity, where, slots):
    n = ids.shape[0]
    out = np.zeros(n, np.bool_)
    size = 0
    for t in range(n):
        key = ids[t]
        if where[key] >= 0:
            out[t] = True
            continue
        if size < capacity:
            where[key] = size
            slots[size] = key
            size += 1
            continue
        j = int(picks[t] * capacity)
        where[slots[j]] = -1
        slots[j] = key
        where[key] = j
    return out


def random(ids, n_ids, capacity, seed=0):
    """Random eviction with the eviction suite's seeded draws (simulate.random_hits)."""
    picks = np.random.default_rng(seed).random(len(ids))
    return _random(ids, picks, capacity, np.full(n_ids, -1, np.int64), np.zeros(min(capacity, n_ids) + 1, np.int64))


# ---- ARC (the paper's pseudo-code, as eviction.reference.RefARC and libCacheSim) ---------------

T1, T2, B1, B2 = 1, 2, 3, 4


@INLINE
def _arc_replace(key_in_b2, p, where, prv, nxt, sz, s0):
    """Move T1's or T2's oldest to its ghost list (the paper's REPLACE)."""
    if sz[T1] > 0 and (sz[T1] > p or (key_in_b2 and sz[T1] == p)):
        src, dst = T1, B1
    else:
        src, dst = T2, B2
    v = nxt[s0 + src]
    _unlink(prv, nxt, v)
    sz[src] -= 1
    _append(prv, nxt, s0 + dst, v)
    sz[dst] += 1
    where[v] = dst


@INLINE
def _arc_drop_oldest(lst, where, prv, nxt, sz, s0):
    v = nxt[s0 + lst]
    _unlink(prv, nxt, v)
    sz[lst] -= 1
    where[v] = 0


@JIT
def _arc(ids, c, where, prv, nxt):
    n = ids.shape[0]
    s0 = where.shape[0] - 1  # sentinel of list L is s0 + L
    out = np.zeros(n, np.bool_)
    sz = np.zeros(5, np.int64)
    p = 0.0
    for t in range(n):
        key = ids[t]
        w = where[key]
        if w == T1 or w == T2:
            out[t] = True
            _unlink(prv, nxt, key)
            sz[w] -= 1
        elif w == B1 or w == B2:
            if w == B1:
                p = min(float(c), p + max(sz[B2] / sz[B1], 1.0))
            else:
                p = max(0.0, p - max(sz[B1] / sz[B2], 1.0))
            _arc_replace(w == B2, p, where, prv, nxt, sz, s0)
            _unlink(prv, nxt, key)
            sz[w] -= 1
        else:
            l1 = sz[T1] + sz[B1]
            if l1 == c:
                if sz[T1] < c:
                    _arc_drop_oldest(B1, where, prv, nxt, sz, s0)
                    _arc_replace(False, p, where, prv, nxt, sz, s0)
                else:
                    _arc_drop_oldest(T1, where, prv, nxt, sz, s0)
            elif l1 < c:
                total = l1 + sz[T2] + sz[B2]
                if total >= c:
                    if total == 2 * c:
                        _arc_drop_oldest(B2, where, prv, nxt, sz, s0)
                    _arc_replace(False, p, where, prv, nxt, sz, s0)
            _append(prv, nxt, s0 + T1, key)
            sz[T1] += 1
            where[key] = T1
            continue
        _append(prv, nxt, s0 + T2, key)
        sz[T2] += 1
        where[key] = T2
    return out


def arc(ids, n_ids, capacity):
    """ARC (eviction.reference.RefARC, libCacheSim's ARC)."""
    prv, nxt = _lists(n_ids + 1, 4)  # where[] has one spare slot so that s0 + L is a sentinel
    return _arc(ids, capacity, np.zeros(n_ids + 1, np.int64), prv, nxt)


# ---- S3-FIFO (libCacheSim 0.3.5, as eviction.reference.RefS3FIFO) ---------------------------------

S, M, G = 1, 2, 3


@INLINE
def _s3_evict_small(where, freq, prv, nxt, sz, s0, move, g_size):
    while sz[S] > 0:
        v = nxt[s0 + S]
        _unlink(prv, nxt, v)
        sz[S] -= 1
        if freq[v] >= move:
            _append(prv, nxt, s0 + M, v)
            sz[M] += 1
            where[v] = M
            freq[v] = 0
        else:
            where[v] = 0
            if g_size > 0:
                if sz[G] >= g_size:
                    g = nxt[s0 + G]
                    _unlink(prv, nxt, g)
                    sz[G] -= 1
                    where[g] = 0
                _append(prv, nxt, s0 + G, v)
                sz[G] += 1
                where[v] = G
            return


@INLINE
def _s3_evict_main(where, freq, prv, nxt, sz, s0):
    while sz[M] > 0:
        v = nxt[s0 + M]
        _unlink(prv, nxt, v)
        f = freq[v]
        if f >= 1:
            _append(prv, nxt, s0 + M, v)
            freq[v] = min(f, 3) - 1
        else:
            sz[M] -= 1
            where[v] = 0
            return


@JIT
def _s3fifo(ids, cap, s_size, m_size, g_size, move, where, prv, nxt):
    n = ids.shape[0]
    s0 = where.shape[0] - 1
    out = np.zeros(n, np.bool_)
    freq = np.zeros(where.shape[0], np.int64)
    sz = np.zeros(4, np.int64)
    evicted = False
    for t in range(n):
        key = ids[t]
        w = where[key]
        if w == S or w == M:
            freq[key] += 1
            out[t] = True
            continue
        hit_ghost = w == G
        if hit_ghost:
            _unlink(prv, nxt, key)
            sz[G] -= 1
            where[key] = 0
        if s_size < 1:
            continue
        while sz[S] + sz[M] + 1 > cap:
            evicted = True
            if sz[M] > m_size or sz[S] == 0:
                _s3_evict_main(where, freq, prv, nxt, sz, s0)
            else:
                _s3_evict_small(where, freq, prv, nxt, sz, s0, move, g_size)
        if hit_ghost:
            dst = M
        elif s_size <= 1:
            continue  # an object as large as S is not admitted
        elif not evicted and sz[S] >= s_size:
            dst = M
        else:
            dst = S
        _append(prv, nxt, s0 + dst, key)
        sz[dst] += 1
        where[key] = dst
        freq[key] = 0
    return out


def s3fifo(ids, n_ids, capacity, small_ratio=0.1, ghost_ratio=0.9, move_to_main=2):
    """S3-FIFO with libCacheSim 0.3.5's sizes (eviction.reference.RefS3FIFO)."""
    prv, nxt = _lists(n_ids + 1, 3)
    s_size = int(capacity * small_ratio)
    return _s3fifo(
        ids,
        capacity,
        s_size,
        capacity - s_size,
        int(capacity * ghost_ratio),
        move_to_main,
        np.zeros(n_ids + 1, np.int64),
        prv,
        nxt,
    )


# ---- the prefix rule ---------------------------------------------------------------------------------


@JIT
def leading_runs(hits, offsets):
    """Per request: how many of its first blocks were hits, up to its first miss."""
    n = offsets.shape[0] - 1
    runs = np.zeros(n, np.int64)
    for i in range(n):
        r = 0
        for j in range(offsets[i], offsets[i + 1]):
            if not hits[j]:
                break
            r += 1
        runs[i] = r
    return runs


def warm() -> None:
    """Load (or, the first time on a machine, compile) every loop, on a three-block stream,
    so that a timed simulation times the simulation only."""
    ids, times = np.array([0, 1, 0], np.int32), np.array([0, 0, 1], np.int64)
    parents, nxt, depth = np.array([-1, 0, -1], np.int64), np.array([2, 2**62, 2**62], np.int64), np.zeros(3, np.int64)
    leading_runs(np.ones(3, np.bool_), np.array([0, 2, 3], np.int64))
    lru(ids, 2, times, 1)
    lruk(ids, 2, times, 1, 2)
    leaf_lru(ids, 2, parents, times, 1)
    lfu(ids, 2, 1)
    opt(ids, 2, nxt, depth, 1)
    random(ids, 2, 1)
    arc(ids, 2, 1)
    s3fifo(ids, 2, 10)
