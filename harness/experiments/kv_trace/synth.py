"""Seeded synthetic traces in the Mooncake format, as large as wanted (10M requests, about
240M block lookups, in seconds: every step is a numpy array operation).

The shape follows the Mooncake FAST'25 conversation trace (data/mooncake), measured on it:
- every request starts with one block all requests share (the system prompt);
- 61% of requests open a conversation, the others are its next turns: the number of turns
  of a conversation is geometric with mean 1 / 0.613;
- an opening request has lognormal(2.34, 1.21) blocks (median 10, mean 21; at least 2, at
  most 250, 128k tokens of 512-token blocks);
- a next turn keeps every block of the turn before but its last (a partial block whose
  tokens the next turn extends, so its hash differs) and adds ceil(lognormal(0.6, 1.4))
  blocks (median 2, mean about 5): the real follow-ups keep 21 blocks on average and add 7;
- conversations open at uniform times over n_requests / rate_per_s seconds (3.4 requests/s,
  Mooncake's rate), and the turns of one are lognormal(4.81, 1.07) seconds apart (median
  123 s, 90th percentile 483 s, as in the trace).

Block ids: 0 is the shared block; a conversation's blocks at depth 1, 2, ... come from its own
range of ids (equal ids mean the same conversation and depth, so the same prefix, as hash ids
do), and each request's last block has an id of its own. The ids are exactly 0..n-1 (int32),
so the simulator's dense mapping is the identity.
"""

from __future__ import annotations

import numpy as np

from harness.mechanisms.kv_blocks.trace import KVTrace

MAX_BLOCKS = 250  # 128k tokens of 512-token blocks (the longest Mooncake request has 247)
MOONCAKE_RATE = 12031 / 3537.0  # requests/s of the conversation trace
P_OPEN = 0.613  # share of requests that open a conversation
FIRST_BLOCKS = (2.34, 1.21)  # lognormal mean and sigma of an opening request's blocks
ADDED_BLOCKS = (0.6, 1.4)  # lognormal mean and sigma of the blocks a next turn adds (rounded up)
TURN_GAP_S = (4.81, 1.07)  # lognormal mean and sigma of the seconds between two turns


def _turns(n_requests: int, rng) -> np.ndarray:
    """Turns per conversation, summing to n_requests."""
    counts = rng.geometric(P_OPEN, size=int(n_requests * P_OPEN * 1.1) + 16)
    while counts.sum() < n_requests:
        counts = np.concatenate([counts, rng.geometric(P_OPEN, size=len(counts) // 4 + 16)])
    end = int(np.searchsorted(np.cumsum(counts), n_requests))
    counts = counts[: end + 1].copy()
    counts[-1] -= int(counts.sum()) - n_requests
    return counts[counts > 0]


def _lengths(counts: np.ndarray, rng) -> np.ndarray:
    """Blocks of every request, conversation by conversation, turn by turn."""
    n, starts = int(counts.sum()), np.concatenate([[0], np.cumsum(counts)[:-1]])
    first = np.rint(rng.lognormal(*FIRST_BLOCKS, size=len(counts)))
    grow = np.ceil(rng.lognormal(*ADDED_BLOCKS, size=n)) - 1  # a next turn drops one block, adds these
    grow[starts] = 0
    cum = np.cumsum(grow)
    cum -= np.repeat(cum[starts], counts)
    return np.clip(np.repeat(first, counts) + cum, 2, MAX_BLOCKS).astype(np.int64)


def synthetic_trace(
    n_requests: int, seed: int = 0, rate_per_s: float = MOONCAKE_RATE, block_size: int = 512, name: str | None = None
) -> KVTrace:
    """A Mooncake-shaped trace of n_requests requests (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    counts = _turns(n_requests, rng)
    conv = np.repeat(np.arange(len(counts)), counts)
    lens = _lengths(counts, rng)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    gaps = rng.lognormal(*TURN_GAP_S, size=n_requests)
    gaps[starts] = 0
    since_open = np.cumsum(gaps)
    since_open -= np.repeat(since_open[starts], counts)
    opened = rng.uniform(0, n_requests / rate_per_s, size=len(counts))
    times_ms = ((np.repeat(opened, counts) + since_open) * 1000).astype(np.int64)
    order = np.argsort(times_ms, kind="stable")  # turns of one conversation stay in order
    chain = np.zeros(len(counts), np.int64)  # depths 1..L-2 of a conversation: its own range of ids
    chain[1:] = np.cumsum(np.maximum(lens[starts + counts - 1] - 2, 0))[:-1]
    n_chain = int(np.maximum(lens[starts + counts - 1] - 2, 0).sum())
    lens, conv, times_ms = lens[order], conv[order], times_ms[order]
    offsets = np.zeros(n_requests + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    dt = np.int32 if 1 + n_chain + n_requests < 2**31 and total < 2**31 else np.int64
    blocks = np.repeat((chain[conv] - offsets[:-1]).astype(dt), lens)  # + position: chain + depth
    for lo in range(0, total, 1 << 25):  # in chunks: no second full-size temporary
        hi = min(total, lo + (1 << 25))
        blocks[lo:hi] += np.arange(lo, hi, dtype=dt)
    blocks[offsets[:-1]] = 0  # the shared first block
    blocks[offsets[1:] - 1] = (1 + n_chain + np.arange(n_requests)).astype(dt)  # each request's own last block
    tokens = (lens - 1) * block_size + rng.integers(1, block_size + 1, size=n_requests)
    out_tokens = np.clip(np.rint(rng.lognormal(5.7, 0.9, size=n_requests)), 1, 8192).astype(np.int64)
    return KVTrace(
        name or f"synthetic Mooncake-shaped trace ({n_requests} requests, seed {seed})",
        block_size,
        times_ms - times_ms[0],
        tokens,
        out_tokens,
        offsets,
        blocks,
    )


def write_jsonl(trace: KVTrace, path) -> None:
    """The trace as Mooncake JSON Lines (timestamp, input_length, output_length, hash_ids)."""
    with open(path, "w") as f:
        for i in range(trace.n_requests):
            ids = trace.blocks[trace.offsets[i] : trace.offsets[i + 1]].tolist()
            f.write(
                f'{{"timestamp": {int(trace.timestamps_ms[i])}, "input_length": {int(trace.input_len[i])}, '
                f'"output_length": {int(trace.output_len[i])}, "hash_ids": {ids}}}\n'
            )
