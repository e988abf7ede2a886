"""One shared KV pool against per-instance caches of equal total capacity (what Mooncake's
disaggregated KVCache pool is built on: every instance reads every other's cached blocks).

N serving instances, each with a cache of C blocks (the GPU's KV capacity), the trace's
requests spread over them:
- shared: one cache of N x C blocks sees every request (the pool);
- instances.round_robin: N caches of C blocks, request i on instance i mod N (a router that
  knows nothing of the caches);
- instances.affine: the same N caches, every request of a conversation on one instance
  (conversations dealt out in order of first appearance): the best a router can do without
  moving KV between instances.
A conversation is the trace's own (a Bailian trace's chat) or, for a Mooncake trace, the
requests that share their second block (the key `session_sample` uses).

Controls, measured in the same run:
- one instance: the pool and a single instance are the same cache, so their gap must be 0
  (the split and the combination of the rates add nothing of their own);
- the duplicated trace (each request followed at once by a copy of itself, which round robin
  sends to the next instance): the pool hits every copy, an instance that did not serve the
  original does not, so the pool's gain over round robin must be large there.
"""

from __future__ import annotations

import numpy as np

from harness.base.metrics_model import Metric
from harness.mechanisms.kv_blocks.policies import Stream
from harness.mechanisms.kv_blocks.trace import KVTrace, duplicated, subset

from .analyses import rates_at

ROUTES = ("round_robin", "affine")


def conversations(trace: KVTrace) -> np.ndarray:
    """Each request's conversation key."""
    if trace.sessions is not None:
        return trace.sessions
    lens, first = trace.lengths, trace.offsets[:-1]
    last = max(trace.n_blocks - 1, 0)
    return np.where(
        lens > 1,
        trace.blocks[np.minimum(first + 1, last)],
        np.where(lens > 0, trace.blocks[np.minimum(first, last)], -1),
    )


def route(trace: KVTrace, n: int, how: str) -> np.ndarray:
    """The instance (0..n-1) of every request."""
    if how == "round_robin":
        return np.arange(trace.n_requests) % n
    _, first_seen, inverse = np.unique(conversations(trace), return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first_seen))  # conversations numbered by first appearance
    return order[inverse] % n


def hit_tokens(trace: KVTrace, policy: str, capacity_blocks: int) -> int:
    """Prompt tokens hit (prefix rule) by one cache of `capacity_blocks` serving `trace`."""
    return int(rates_at(trace, Stream(trace), policy, capacity_blocks).hit_tokens.sum())


def split_rate(trace: KVTrace, where: np.ndarray, n: int, policy: str, capacity_blocks: int) -> float:
    """Token hit rate (0..1) of n caches of `capacity_blocks`, request i served by where[i]."""
    hit = 0
    for k in range(n):
        idx = np.nonzero(where == k)[0]
        if len(idx):
            hit += hit_tokens(subset(trace, idx, f"{trace.name} (instance {k + 1} of {n})"), policy, capacity_blocks)
    return hit / int(trace.input_len.sum())


def rates(trace: KVTrace, n: int, policy: str, capacity_blocks: int) -> dict[str, float]:
    """{'shared', 'round_robin', 'affine'}: token hit rates (0..1) at equal total capacity."""
    out = {"shared": hit_tokens(trace, policy, n * capacity_blocks) / int(trace.input_len.sum())}
    for how in ROUTES:
        out[how] = split_rate(trace, route(trace, n, how), n, policy, capacity_blocks)
    return out


def pool(trace: KVTrace, n: int, policy: str, capacity_blocks: int) -> dict[str, Metric]:
    """The pool's metrics and its two controls."""
    r = rates(trace, n, policy, capacity_blocks)
    tokens = n * capacity_blocks * trace.block_size
    at = f"{n} instances of {capacity_blocks:,} blocks ({policy}), {tokens:,} tokens in all"
    m = {
        "pool.instances": Metric(n, "instances", None, "serving instances the requests are spread over"),
        "pool.capacity_tokens": Metric(tokens, "tokens", None, "the total capacity, pool and instances alike"),
        "pool.shared.token_hit_pct": Metric(100 * r["shared"], "%", "higher", f"one pool of the {at}"),
    }
    for how in ROUTES:
        m[f"pool.instances.{how}.token_hit_pct"] = Metric(
            100 * r[how], "%", "higher", f"{at}, each its own cache, requests routed {how.replace('_', ' ')}"
        )
        m[f"pool.shared_gain_over_{how}_pp"] = Metric(
            100 * (r["shared"] - r[how]), "pp", "higher", f"the pool over per-instance caches routed {how}"
        )
    one = rates(trace, 1, policy, n * capacity_blocks)
    m["pool.one_instance.gap_pp"] = Metric(
        100 * abs(one["shared"] - one["round_robin"]),
        "pp",
        "lower",
        "control: one instance holding the whole capacity is the pool itself; its gap must be 0",
    )
    dup = duplicated(trace)
    d = {"shared": hit_tokens(dup, policy, n * capacity_blocks) / int(dup.input_len.sum())}
    d["round_robin"] = split_rate(dup, route(dup, n, "round_robin"), n, policy, capacity_blocks)
    m["pool.dup.shared_gain_over_round_robin_pp"] = Metric(
        100 * (d["shared"] - d["round_robin"]),
        "pp",
        None,
        "instrument: each request followed by a copy of itself on the next instance; the pool hits every copy",
    )
    return m
