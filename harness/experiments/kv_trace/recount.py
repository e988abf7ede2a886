"""An independent recount of the numbers the ledger judges on a KV-block trace (issue 39).

The simulator (kv_blocks/trace.py, kv_blocks/prefix.py, kv_blocks/policies.py in
harness/mechanisms/, and this suite's tiers.py, analyses.py, shape.py) is fast: numpy
arrays, libCacheSim, lazy heaps. Its numbers are the ones judged, so a fault in it
(a cache that forgets, a prefix rule that stops too late) would be judged as a finding. This
module counts the same numbers again on the same trace by a separate path that shares no
code with it: it reads the trace file's lines itself (json, no numpy), keeps each cache in
plain dicts and OrderedDicts, applies the prefix rule request by request as it goes, and
sizes the GPU and the tiers from the parameters with its own arithmetic. Each number comes
out as the metric `reference.<the simulator's metric name>`; the ledger's `reference`
field compares the two and calls a difference inconclusive.

Written for clarity: the caches are the textbook ones (a set for the infinite cache, an
OrderedDict for LRU, frequency buckets for LFU, an insertion-ordered queue of young blocks
for LRU-K). The Mooncake trace takes seconds; the timings are metrics of the case
(reference.*.seconds).

Time and memory (issue 63; tests/suites/kv_trace/test_scaling.py). The time grows
linearly with the trace (a heap's logarithm aside): a sessions prompt's blocks are named by
one running SHA-256 (a block costs its own tokens, not its whole prefix again), and every
cache finds its victim without a scan (LFU keeps its lowest count; the leaf-first LRU keeps
its leaves, LRU-K and the hybrid their blocks used K times, in heaps by last use and K-th
use). The requests are held in at most READ_BYTES_PER_REQUEST bytes a Mooncake or Bailian
request plus READ_BYTES_PER_BLOCK a block id (a tuple with an array('q') of the ids; a
sessions file's block names are 64-character hex strings, ~113 bytes each). One cache is
held at a time (or one set of tiers, or the pool's caches), a few hundred bytes for every
block it holds (the leaf-first LRU the most, ~750) and never more blocks than its capacity
or the trace's distinct blocks; the hybrid also counts every block seen. On a Mooncake-like
trace at the case's sizes the whole recount peaks below the requests plus
PEAK_BYTES_PER_DISTINCT_BLOCK for every distinct block (a 45 MB trace of 3.8M block ids,
1.6M distinct: ~610 MB of resident memory, as before; the simulator's side of a run peaks
higher).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import time
from array import array
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

GIB = 2**30
GB = 10**9
READ_BYTES_PER_BLOCK = 10  # read_requests: an int64 in an array('q'), and slack
READ_BYTES_PER_REQUEST = 250  # its tuple, array header and two ints, and the list's slot
PEAK_BYTES_PER_DISTINCT_BLOCK = 600  # the recount's peak, on a Mooncake-like trace at the case's sizes


def session_turn(rec: dict, block_size: int) -> tuple[int, int, list]:
    """A sessions file's turn: its prompt's blocks named by the SHA-256 of every token before
    the block's end (equal names: the same prefix), without the loader's hashing. The name of
    block j is sha256(json.dumps(tokens[: (j + 1) x block_size])): one running SHA-256 is fed
    the JSON list's text block by block and a copy of it is closed with "]" for each name, so
    a block costs its own tokens, not the whole prefix again (linear in the prompt)."""
    prompt = rec["prompt"]
    tokens = prompt.encode("utf-8") if isinstance(prompt, str) else prompt
    running, names = hashlib.sha256(b"["), []
    for j in range(0, len(tokens), block_size):
        text = json.dumps(list(tokens[j : j + block_size]))[1:-1]  # "a, b, c": the block's part of the list
        running.update(((", " if j else "") + text).encode())
        name = running.copy()
        name.update(b"]")
        names.append(name.hexdigest())
    return round(float(rec["at_s"]) * 1000), len(tokens), names


def read_requests(
    path: Path, max_requests: int = 0, fmt: str = "auto", block_size: int = 512
) -> list[tuple[int, int, Sequence]]:
    """(timestamp ms, input tokens, block ids) of every request of a Mooncake-format file
    (ms), a Bailian-format one (seconds; chat_id and parent_chat_id on its lines) or a
    sessions file (at_s, prompt: its blocks named here). The driver has already checked the
    file; this is a second, plain reading."""
    out: list[tuple[int, int, Sequence]] = []
    seconds, turns = fmt == "bailian", fmt == "sessions"
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            if not out and fmt == "auto":
                seconds = "chat_id" in rec and "parent_chat_id" in rec
                turns = not seconds and "session" in rec and "prompt" in rec
            if turns:
                out.append(session_turn(rec, block_size))
            else:
                t = round(float(rec["timestamp"]) * 1000) if seconds else int(rec["timestamp"])
                out.append((t, int(rec["input_length"]), array("q", rec["hash_ids"])))
            if max_requests and len(out) >= max_requests:
                break
    return out


def block_tokens(input_len: int, j: int, block_size: int) -> int:
    """Tokens of a request's j-th block: a whole block, the remainder for the last one, none
    beyond the prompt."""
    return min(block_size, max(0, input_len - j * block_size))


# ---- caches: access(key, now_ms, parent) -> hit, then the block is cached (or refused) ----


class Forever:
    """The infinite cache: a block seen before is a hit."""

    def __init__(self):
        self.seen = set()

    def expire(self, now):
        pass

    def access(self, key, now, parent):
        hit = key in self.seen
        self.seen.add(key)
        return hit


class LRU:
    """Least recently used, with an optional idle time (TTL, ms): blocks last used more than
    ttl_ms before a request arrives are dropped before its lookups."""

    od: OrderedDict[Any, float]

    def __init__(self, capacity: int, ttl_ms: float | None = None):
        self.cap, self.ttl, self.od = capacity, ttl_ms, OrderedDict()  # key -> last use (ms), oldest first

    def expire(self, now):
        while self.ttl is not None and self.od and now - next(iter(self.od.values())) > self.ttl:
            self.od.popitem(last=False)

    def access(self, key, now, parent):
        hit = key in self.od
        if hit:
            self.od.move_to_end(key)
        elif len(self.od) >= self.cap:
            self.od.popitem(last=False)
        self.od[key] = now
        return hit


class LFU:
    """Fewest uses since insertion first; among equal counts, the block that reached its
    count first. One insertion-ordered bucket per count, and the lowest count with a bucket
    (a new block's 1, or one more when a hit empties the lowest bucket)."""

    count: dict[Any, int]  # key -> its uses since insertion
    buckets: dict[int, OrderedDict[Any, bool]]  # count -> the keys with it, in the order they reached it

    def __init__(self, capacity: int):
        self.cap, self.count, self.buckets, self.low = capacity, {}, {}, 1

    def expire(self, now):
        pass

    def access(self, key, now, parent):
        c = self.count.get(key)
        if c is not None:
            del self.buckets[c][key]
            if not self.buckets[c]:
                del self.buckets[c]
                if self.low == c:
                    self.low = c + 1
            self.count[key] = c + 1
            self.buckets.setdefault(c + 1, OrderedDict())[key] = True
            return True
        if len(self.count) >= self.cap:
            victim, _ = self.buckets[self.low].popitem(last=False)
            if not self.buckets[self.low]:
                del self.buckets[self.low]
            del self.count[victim]
        self.count[key], self.low = 1, 1
        self.buckets.setdefault(1, OrderedDict())[key] = True
        return False


class LRUK:
    """LRU-K without retained history: blocks used fewer than K times since insertion are
    evicted first, in insertion order; then the block whose K-th most recent use is the
    oldest. Uses are counted in lookups (the position in the block stream). The policy of
    harness/mechanisms/cache_policies/lruk.py, written again here on purpose: this recount shares no code
    with the simulator (lruk_hits there) or its request-by-request reference (RefLRUK in
    lruk_reference.py). The blocks used K times wait in a heap by their K-th most recent
    use; an entry whose block has been used again or dropped since is skipped when met."""

    def __init__(self, capacity: int, k: int, ttl_ms: float | None = None):
        self.cap, self.k, self.ttl = capacity, k, ttl_ms
        self.young: OrderedDict[Any, bool] = OrderedDict()  # fewer than K uses, insertion order
        self.uses: dict[Any, list[int]] = {}  # key -> its last K use positions
        self.last: OrderedDict[Any, float] = OrderedDict()  # key -> last use (ms), oldest first (TTL only)
        self.old: list[tuple[int, Any]] = []  # heap of (K-th most recent use, key), stale entries too
        self.clock = 0

    def _drop(self, key):
        del self.uses[key]
        self.young.pop(key, None)
        self.last.pop(key, None)

    def expire(self, now):
        while self.ttl is not None and self.last and now - next(iter(self.last.values())) > self.ttl:
            self._drop(next(iter(self.last)))

    def _used_k_times(self, key, u):
        heapq.heappush(self.old, (u[0], key))
        if len(self.old) > 2 * len(self.uses) + 64:  # mostly stale: keep the live entries only
            self.old = [(v[0], x) for x, v in self.uses.items() if len(v) >= self.k]
            heapq.heapify(self.old)

    def victim(self):
        if self.young:
            return next(iter(self.young))
        while True:  # the oldest K-th use among the blocks used K times (no young block: all are)
            pos, key = self.old[0]
            u = self.uses.get(key)
            if u is not None and len(u) >= self.k and u[0] == pos:
                return key
            heapq.heappop(self.old)

    def insert(self, key, now):
        u = self.uses[key] = [self.clock]
        if self.k > 1:
            self.young[key] = True
        else:
            self._used_k_times(key, u)
        if self.ttl is not None:
            self.last[key] = now

    def access(self, key, now, parent):
        self.clock += 1
        if key in self.uses:
            u = self.uses[key] = (self.uses[key] + [self.clock])[-self.k :]
            if len(u) >= self.k:
                self.young.pop(key, None)
                self._used_k_times(key, u)
            if self.ttl is not None:
                self.last.move_to_end(key)
                self.last[key] = now
            return True
        if len(self.uses) >= self.cap:
            self._drop(self.victim())
        self.insert(key, now)
        return False


class Hybrid:
    """The eviction suite's hybrid: LRU-K eviction with LFU admission. Every block's count
    over the trace so far is kept; in a full cache a missing block is admitted only if its
    count (this lookup included) is higher than the LRU-K victim's."""

    count: Counter[Any]

    def __init__(self, capacity: int, k: int):
        self.lruk, self.count = LRUK(capacity, k), Counter()

    def expire(self, now):
        pass

    def access(self, key, now, parent):
        self.count[key] += 1
        c = self.lruk
        if key in c.uses or len(c.uses) < c.cap:
            return c.access(key, now, parent)
        c.clock += 1
        v = c.victim()
        if self.count[key] > self.count[v]:
            c._drop(v)
            c.insert(key, now)
        return False


class LeafLRU:
    """Leaf-first LRU: only a block no cached block depends on can go, the least recently
    used such leaf first. A block depends on its parent (the block before it in the request
    that inserted it) while that parent stays cached. The leaves wait in a heap by their
    last use (a block's use number); an entry whose block has been used again, has gained
    a child or has been dropped since is skipped when met."""

    kids: dict[Any, int]
    parent: dict[Any, tuple[Any, int] | None]
    born: dict[Any, int]

    def __init__(self, capacity: int, ttl_ms: float | None = None):
        self.cap, self.ttl = capacity, ttl_ms
        self.last: OrderedDict[Any, float] = OrderedDict()  # key -> last use (ms), least recently used first
        self.kids, self.parent, self.born = {}, {}, {}  # children cached; (parent, its birth) or None; insertion
        self.used: dict[Any, int] = {}  # key -> the use number of its last use
        self.leaves: list[tuple[int, Any]] = []  # heap of (last use, key) of leaves, stale entries too
        self.clock = 0

    def _leaf(self, key):
        heapq.heappush(self.leaves, (self.used[key], key))
        if len(self.leaves) > 2 * len(self.last) + 64:  # mostly stale: keep the live entries only
            self.leaves = [(self.used[k], k) for k in self.last if self.kids[k] == 0]
            heapq.heapify(self.leaves)

    def _drop(self, key):
        del self.last[key], self.kids[key], self.born[key], self.used[key]
        link = self.parent.pop(key)
        if link is not None and self.born.get(link[0]) == link[1]:
            self.kids[link[0]] -= 1
            if self.kids[link[0]] == 0:
                self._leaf(link[0])

    def expire(self, now):
        while self.ttl is not None and self.last and now - next(iter(self.last.values())) > self.ttl:
            self._drop(next(iter(self.last)))

    def victim(self):
        while True:  # the least recently used leaf
            use, key = heapq.heappop(self.leaves)
            if self.used.get(key) == use and self.kids[key] == 0:
                return key

    def access(self, key, now, parent):
        self.clock += 1
        if key in self.last:
            self.last.move_to_end(key)
            self.last[key], self.used[key] = now, self.clock
            if self.kids[key] == 0:
                self._leaf(key)
            return True
        if len(self.last) >= self.cap:
            self._drop(self.victim())
        linked = parent in self.last and parent != key
        self.parent[key] = (parent, self.born[parent]) if linked else None
        if linked:
            self.kids[parent] += 1
        self.last[key], self.kids[key], self.born[key], self.used[key] = now, 0, self.clock, self.clock
        self._leaf(key)
        return False


def make(policy: str, capacity: int | None, ttl_s: float | None = None, hybrid_k: int = 2):
    """The cache of `policy` (None when this module has no reference for it)."""
    ttl_ms = None if ttl_s is None else ttl_s * 1000.0
    if capacity is None:
        return Forever()
    if policy == "lru":
        return LRU(capacity, ttl_ms)
    if policy == "leaf-lru":
        return LeafLRU(capacity, ttl_ms)
    if policy.startswith("lru-") and policy[4:].isdigit():
        return LRUK(capacity, int(policy[4:]), ttl_ms)
    if policy == "lfu" and ttl_ms is None:
        return LFU(capacity)
    if policy == "hybrid" and ttl_ms is None:
        return Hybrid(capacity, hybrid_k)
    return None


class Nothing:
    """A tier of no capacity: it holds nothing."""

    def expire(self, now):
        pass

    def access(self, key, now, parent):
        return False


def replay(requests: list, block_size: int, caches: list, served: list | None = None) -> int:
    """Prompt tokens hit with the prefix rule: every block of every request is looked up in
    every cache (and then held by it); a request's hit is its leading run of blocks that
    some cache held, a block after the first miss counts as a miss. `served` (one count per
    cache) gets each hit's tokens on the first cache that held the block."""
    hit_tokens = 0
    for now, input_len, ids in requests:
        for c in caches:
            c.expire(now)
        run, parent = True, -1
        for j, key in enumerate(ids):
            held = [c.access(key, now, parent) for c in caches]
            if run and any(held):
                hit_tokens += block_tokens(input_len, j, block_size)
                if served is not None:
                    served[held.index(True)] += block_tokens(input_len, j, block_size)
            else:
                run = False
            parent = key
    return hit_tokens


def replay_routed(requests: list, block_size: int, caches: list) -> int:
    """Prompt tokens hit with the prefix rule when request i is served by caches[i % len]
    alone (per-instance caches, round robin)."""
    return sum(replay([r], block_size, [caches[i % len(caches)]]) for i, r in enumerate(requests))


def pool_rates(requests: list, p: dict, per_instance: int, total: int) -> dict[str, float] | None:
    """The shared pool of n x per_instance blocks and n caches of per_instance blocks (round
    robin), as % of the prompt tokens; None where a policy has no reference here."""
    n = p["pool_instances"]
    shared = make(p["gpu_policy"], n * per_instance)
    own = [make(p["gpu_policy"], per_instance) for _ in range(n)]
    if shared is None or None in own:
        return None
    return {
        "shared": 100.0 * replay(requests, p["block_size"], [shared]) / total,
        "round_robin": 100.0 * replay_routed(requests, p["block_size"], own) / total,
    }


def sizes(p: dict) -> tuple[int, int]:
    """(KV bytes per token, the GPU's KV capacity in tokens) of the stated model shape:
    2 (K, V) x layers x KV heads x head dim x bytes; the GPU's usable memory minus the
    weights, over the KV bytes per token."""
    kvb = 2 * p["model_layers"] * p["model_kv_heads"] * p["model_head_dim"] * p["kv_dtype_bytes"]
    free = p["gpu_memory_gib"] * GIB * p["gpu_memory_utilization"] - p["model_params_b"] * 1e9 * p["weight_dtype_bytes"]
    return kvb, int(max(0.0, free) // kvb)


def head_share(requests: list, fraction: float) -> float:
    """Share of block lookups that go to the ceil(fraction x distinct) most used blocks."""
    counts = Counter(key for _, _, ids in requests for key in ids)
    k = max(1, math.ceil(fraction * len(counts)))
    return sum(sorted(counts.values(), reverse=True)[:k]) / sum(counts.values())


def tier_caches(p: dict, kvb: int, block_size: int, ttls: bool = True, l3: str | None = None) -> list | None:
    """The three tiers' caches as the parameters size them (None: no reference for one)."""
    out = []
    for i, (gb, ttl, pol) in enumerate(zip(p["tier_gb"], p["tier_ttl_s"], p["tier_policies"])):
        cap = int(max(0.0, gb * GB) // kvb) // block_size
        pol = l3 if (l3 is not None and i == len(p["tier_gb"]) - 1) else pol
        c = Nothing() if cap < 1 else make(pol, cap, ttl if ttls else None)
        if c is None:
            return None
        out.append(c)
    return out


def _rate(requests: list, block_size: int, caches: list | None, total: int) -> float | None:
    return None if caches is None else 100.0 * replay(requests, block_size, caches) / total


def _served(requests: list, block_size: int, caches: list | None, total: int) -> tuple[float | None, list[int]]:
    """(the hit rate of the tiers `caches`, the prompt tokens each served first); (None, [])
    where one tier has no reference here."""
    if caches is None:
        return None, []
    by_tier = [0] * len(caches)
    return 100.0 * replay(requests, block_size, caches, by_tier) / total, by_tier


def curve(requests: list, p: dict, distinct: int, order: tuple, log) -> tuple[float | None, dict]:
    """At every simulated capacity (0 < blocks < distinct) the token hit rates of the
    policies of `order`: (% of those capacities where the rates increase strictly in that
    order (the curve's ordering, C18), {(policy, capacity in tokens): rate})."""
    bs, total = p["block_size"], sum(n for _, n, _ in requests)
    checked, held, rates = 0, 0, {}
    for cap_tok in dict.fromkeys(p["capacities_tokens"]):
        blocks = int(cap_tok // bs)
        if not 0 < blocks < distinct:
            continue
        row = [_rate(requests, bs, [c] if (c := make(n, blocks, None, p["hybrid_k"])) else None, total) for n in order]
        rates.update({(n, cap_tok): r for n, r in zip(order, row) if r is not None})
        if None in row:
            return None, rates
        checked += 1
        rated = cast("list[float]", row)  # no None: returned above
        held += all(a < b for a, b in zip(rated, rated[1:]))
        log(f"reference at {cap_tok:g} tokens: " + ", ".join(f"{n} {r:.2f}" for n, r in zip(order, row)))
    return (100.0 * held / checked if checked else 0.0), rates


def recount(path: Path, p: dict, order: tuple, label, log=print) -> dict[str, tuple[float, str]]:
    """{`reference.<metric>`: (value, what)} for every judged number this module can count,
    the curve's rates of the policies of `order` (`label` names a capacity as the curve's
    metrics do) and reference.seconds (the whole recount's wall time)."""
    t0 = time.perf_counter()
    requests = read_requests(path, p["max_requests"], p.get("trace_format", "auto"), p["block_size"])
    bs, total = p["block_size"], sum(n for _, n, _ in requests)
    kvb, gpu_tokens = sizes(p)
    distinct = len({key for _, _, ids in requests for key in ids})
    out: dict[str, tuple[float, str]] = {}

    def put(name: str, value: float | None, what: str) -> None:
        if value is not None:  # no reference for this configuration: the metric stays unmeasured
            out[f"reference.{name}"] = (value, what)

    mx = _rate(requests, bs, [Forever()], total)
    put("reuse.max.token_hit_pct", mx, "a set of the blocks seen before")
    gpu = make(p["gpu_policy"], gpu_tokens // bs) if gpu_tokens // bs < distinct else Forever()
    put(
        "reuse.gpu.token_hit_pct",
        _rate(requests, bs, [gpu] if gpu else None, total),
        f"{p['gpu_policy']} in an OrderedDict, {gpu_tokens // bs} blocks",
    )
    del gpu  # one cache held at a time (the memory bound above)
    pooled = pool_rates(requests, p, gpu_tokens // bs, total) if "pool_instances" in p else None
    if pooled is not None:
        put("pool.shared.token_hit_pct", pooled["shared"], f"{p['gpu_policy']} in a dict, one pool")
        put("pool.instances.round_robin.token_hit_pct", pooled["round_robin"], "a dict per instance, i mod n")
        put("pool.shared_gain_over_round_robin_pp", pooled["shared"] - pooled["round_robin"], "the two above")
    ordered, rates = curve(requests, p, distinct, order, log)
    put("curve.ordering_sizes_pct", ordered, f"{', '.join(order)} in dicts at every simulated capacity")
    for (name, cap_tok), r in rates.items():
        put(f"curve.{name}.at_{label(cap_tok)}.token_hit_pct", r, f"{name} in dicts")
    put("blocks.head_share_pct", 100.0 * head_share(requests, p["head_fraction"]), "a Counter of the block ids")
    base, by_tier = _served(requests, bs, tier_caches(p, kvb, bs), total)
    for k, tokens in enumerate(by_tier, 1):
        put(
            f"tiers.L{k}.served_token_pct",
            100.0 * tokens / total,
            f"prompt tokens the first of the tiers in dicts to hold them was L{k}",
        )
    no_ttl = _rate(requests, bs, tier_caches(p, kvb, bs, ttls=False), total)
    l3_lru = _rate(requests, bs, tier_caches(p, kvb, bs, l3="lru"), total)
    if base is not None and mx:
        put("tiers.base.of_max_pct", 100.0 * base / mx, "the three tiers in dicts / the set's maximum")
    if base is not None and no_ttl:
        put("tiers.ttl_kept_pct", 100.0 * base / no_ttl, "the tiers with / without TTLs, in dicts")
    if base is not None and l3_lru is not None:
        put("tiers.L3.lruk_gain_pp", base - l3_lru, "the tiers with L3 LRU-K / L3 LRU, in dicts")
    out["reference.seconds"] = (time.perf_counter() - t0, "the whole recount, on the whole trace")
    return out
