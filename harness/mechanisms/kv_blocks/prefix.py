"""The prefix rule and the two weightings of a hit rate.

A policy is simulated on the flat block stream (every block of every request, in order:
a lookup that inserts or touches the block). The prefix rule is applied to the hit
accounting: a request's hit is the leading run of its blocks that were in the cache; a
cached block after the first missing one cannot be used (its KV depends on the missing
block's), so it counts as a miss although the policy touched it.

- block-weighted hit rate: hit blocks / blocks;
- token-weighted hit rate: hit tokens / prompt tokens, a block holding block_size tokens
  (the request's last block the remainder).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.mechanisms.kv_blocks.trace import KVTrace


def infinite_hits(trace: KVTrace) -> np.ndarray:
    """Per block: seen before (the hit of a cache that never evicts)."""
    hits = np.ones(trace.n_blocks, dtype=bool)
    if trace.n_blocks:
        _, first = np.unique(trace.blocks, return_index=True)
        hits[first] = False
    return hits


def n_distinct(trace: KVTrace) -> int:
    return int(len(np.unique(trace.blocks)))


def leading_runs(block_hits: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per request: how many of its first blocks were hits, up to its first miss."""
    block_hits = np.asarray(block_hits, dtype=bool)
    n = len(offsets) - 1
    runs = np.zeros(n, dtype=np.int64)
    lens = np.diff(offsets)
    nonempty = np.nonzero(lens > 0)[0]
    if len(nonempty) == 0:
        return runs
    big = np.iinfo(np.int64).max
    miss_at = np.where(block_hits, big, np.arange(len(block_hits), dtype=np.int64))
    first_miss = np.minimum.reduceat(miss_at, offsets[:-1][nonempty])
    end = offsets[1:][nonempty]
    runs[nonempty] = np.minimum(first_miss, end) - offsets[:-1][nonempty]
    return runs


def run_mask(runs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per block: True when it lies inside its request's leading hit run."""
    lens = np.diff(offsets)
    depth = np.arange(offsets[-1]) - np.repeat(offsets[:-1], lens)
    return depth < np.repeat(runs, lens)


@dataclass
class Rates:
    """Hit rates of one simulation with the prefix rule (fractions, 0..1)."""

    token: float
    block: float
    raw_block: float  # block hits before the prefix rule (what the policy itself saw)
    runs: np.ndarray  # per request: leading hit blocks
    hit_tokens: np.ndarray  # per request


def rates(trace: KVTrace, block_hits: np.ndarray, tokens: np.ndarray | None = None) -> Rates:
    """The prefix-rule hit rates of per-block hits on `trace`."""
    block_hits = np.asarray(block_hits, dtype=bool)
    if len(block_hits) != trace.n_blocks:
        raise ValueError(f"{len(block_hits)} hits for {trace.n_blocks} blocks")
    runs = leading_runs(block_hits, trace.offsets)
    if tokens is None:  # blocks hold block_size tokens each, the last the rest: a run's are min(input, run x size)
        per_req = np.minimum(trace.input_len, runs * trace.block_size)
    else:
        in_run = run_mask(runs, trace.offsets)
        per_req = np.bincount(trace.block_request()[in_run], weights=tokens[in_run], minlength=trace.n_requests).astype(
            np.int64
        )
    total_tok = int(trace.input_len.sum())
    nb = max(trace.n_blocks, 1)
    return Rates(per_req.sum() / total_tok if total_tok else 0.0, runs.sum() / nb, block_hits.sum() / nb, runs, per_req)
