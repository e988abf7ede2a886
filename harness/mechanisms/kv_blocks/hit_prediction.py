"""The simulator's prediction that a real engine's prefix cache is held to (the engine
suite replays a slice of a trace against a real engine and compares its measured
prefix-cache hit rate with this).

    from harness.mechanisms.kv_blocks.hit_prediction import predicted_hit_rate
    predicted_hit_rate(records, block_size=16, capacity_tokens=engine_kv_tokens, policy="leaf-lru")

`requests_slice` is a KVTrace, a path to a Mooncake-format JSONL file, or a list of
Mooncake records ({"timestamp", "input_length", "output_length", "hash_ids"}), replayed in
order. The result is the token-weighted hit rate with the prefix rule, a fraction in [0, 1]:
prompt tokens in each request's leading run of cached blocks over all prompt tokens (a
request's last, partial block counts its own tokens). `block_size` is the tokens per hash
id of the slice (after any rescaling the replay did). `policy` is one of policies.ALL_POLICIES:
"lru" (exact LRU, libCacheSim), "leaf-lru" (what vLLM's block manager and SGLang's radix
cache evict), "opt" (the ceiling), ...; `ttl_s` expires blocks idle longer than it (lru,
leaf-lru, lru-K). A capacity that holds every distinct block is an infinite cache.

What the simulator does not model (the comparison must allow for it): an engine that never
caches a request's last partial block or always recomputes the last prompt token, blocks
pinned by running requests, and preemption.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.base.errors import BadInput
from harness.mechanisms.kv_blocks import prefix
from harness.mechanisms.kv_blocks.policies import Stream, block_hits, check_policy
from harness.mechanisms.kv_blocks.trace import KVTrace, load_trace, records_trace


def as_trace(requests_slice, block_size: int) -> KVTrace:
    """A KVTrace from a KVTrace, a file path or Mooncake records (checked like a file)."""
    if isinstance(requests_slice, KVTrace):
        if requests_slice.block_size != block_size:
            raise BadInput(f"the trace has blocks of {requests_slice.block_size} tokens, not {block_size}")
        return requests_slice
    if isinstance(requests_slice, (str, Path)):
        return load_trace(requests_slice, block_size)
    return records_trace(list(requests_slice), block_size, name="requests_slice")


def predicted_rates(
    requests_slice, block_size: int, capacity_tokens: int, policy: str = "lru", ttl_s: float | None = None
) -> prefix.Rates:
    """Token- and block-weighted hit rates (and per-request hits) of the slice."""
    t = as_trace(requests_slice, block_size)
    blocks = int(capacity_tokens // block_size)
    check_policy("predicted_hit_rate", policy, max(blocks, 10), ttl_s)
    if blocks < 1:
        return prefix.rates(t, np.zeros(t.n_blocks, dtype=bool))
    if blocks >= prefix.n_distinct(t) and ttl_s is None:
        return prefix.rates(t, prefix.infinite_hits(t))

    check_policy("predicted_hit_rate", policy, blocks, ttl_s)
    return prefix.rates(t, block_hits(Stream(t), policy, blocks, ttl_s=ttl_s))


def predicted_hit_rate(
    requests_slice, block_size: int, capacity_tokens: int, policy: str = "lru", ttl_s: float | None = None
) -> float:
    """The token-weighted prefix-cache hit rate (0..1) the simulator predicts for the slice."""
    return float(predicted_rates(requests_slice, block_size, capacity_tokens, policy, ttl_s).token)
