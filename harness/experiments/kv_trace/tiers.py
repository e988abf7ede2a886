"""The source's three cache tiers on a KV-block trace (C5, C17).

Model (ours; the source describes the tiers, not their interplay):
- Inclusive, write-through: every use of a block is an access in every tier - it is
  looked up, then touched or inserted (the block is in GPU memory when the request runs,
  written through to L2 and, behind it, to L3). A tier is therefore its own cache of its
  capacity, TTL and policy on the whole block stream, and a use refreshes the block's
  recency and TTL in every tier that holds it: the TTLs are idle times (L1 30 s "same
  session", L2 5 min, L3 1 h).
- A block is served by the highest tier that holds it (L1, else L2, else L3); the prefix
  rule applies across the tiers: a request's hit is its leading run of blocks held by any
  tier.
- Bytes that move: a block served from L2 or L3 is copied to L1; every insertion into L2
  is a write from L1, every insertion into L3 a write behind from L2 (block tokens x KV
  bytes per token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.mechanisms.kv_blocks import policies, prefix
from harness.mechanisms.kv_blocks.policies import Stream

TIER_NAMES = ("L1", "L2", "L3")


@dataclass(frozen=True)
class TierSpec:
    name: str
    capacity_blocks: int
    ttl_s: float | None
    policy: str  # lru, leaf-lru or lru-K


def tier_hits(stream: Stream, spec: TierSpec) -> np.ndarray:
    """Per-block hits of one tier (this package's implementations, with or without TTL, so
    that a tier with and without its TTL differ only by the TTL; compiled when numba imports)."""
    ttl_ms = None if spec.ttl_s is None else spec.ttl_s * 1000.0
    if spec.capacity_blocks < 1:
        return np.zeros(stream.trace.n_blocks, dtype=bool)
    if spec.policy == "lru":
        return policies.lru(stream, spec.capacity_blocks, ttl_ms)
    if spec.policy == "leaf-lru":
        return policies.leaf_lru(stream, spec.capacity_blocks, ttl_ms)
    return policies.lruk(stream, spec.capacity_blocks, int(spec.policy[4:]), ttl_ms)


@dataclass
class TierResult:
    specs: tuple
    hits: list  # per tier: its own per-block hits
    served: np.ndarray  # per block: 0 = not a hit, k = served by tier k (prefix rule across tiers)
    alone: list  # per tier: prefix.Rates of the tier on its own
    cumulative: list  # per tier k: prefix.Rates of tiers 1..k together
    tokens: np.ndarray  # per block

    def served_tokens(self, k: int) -> int:
        return int(self.tokens[self.served == k].sum())

    def requests_served(self, trace, k: int) -> int:
        """Requests with at least one block served by tier k."""
        return int(len(np.unique(trace.block_request()[self.served == k])))

    def bytes_moved(self, kv_bytes_per_token: int) -> dict[str, float]:
        """Bytes between the tiers over the whole trace: copies up to L1 of the blocks served
        by a lower tier, and writes into each lower tier (its insertions) from the one above."""
        out, first = {}, self.specs[0].name
        for k in range(2, len(self.specs) + 1):
            out[f"{self.specs[k - 1].name}_to_{first}"] = (
                float(self.tokens[self.served == k].sum()) * kv_bytes_per_token
            )
        for k in range(1, len(self.specs)):
            moved = float(self.tokens[~self.hits[k]].sum()) * kv_bytes_per_token
            out[f"{self.specs[k - 1].name}_to_{self.specs[k].name}"] = moved
        return out


def compose(trace, hits: list) -> tuple[np.ndarray, list]:
    """Served tier per block and the cumulative rates, from each tier's own hits."""
    any_hit, cumulative = np.zeros(trace.n_blocks, dtype=bool), []
    for h in hits:
        any_hit = any_hit | h
        cumulative.append(prefix.rates(trace, any_hit))
    in_run = prefix.run_mask(cumulative[-1].runs, trace.offsets)
    served = np.zeros(trace.n_blocks, dtype=np.int8)
    for k in range(len(hits), 0, -1):  # the highest tier that holds the block wins
        served[in_run & hits[k - 1]] = k
    return served, cumulative


def simulate(stream: Stream, specs: list[TierSpec], hits: list | None = None) -> TierResult:
    """The tiers on a stream; `hits` reuses per-tier hits already simulated (None = run them)."""
    trace = stream.trace
    hits = hits if hits is not None else [tier_hits(stream, s) for s in specs]
    served, cumulative = compose(trace, hits)
    return TierResult(
        tuple(specs), hits, served, [prefix.rates(trace, h) for h in hits], cumulative, trace.block_tokens()
    )


def with_changes(specs: Sequence[TierSpec], k: int | None = None, **change) -> list[TierSpec]:
    """The specs with fields changed in tier k (every tier when k is None)."""
    return [TierSpec(**{**s.__dict__, **change}) if k is None or i == k else s for i, s in enumerate(specs)]


def variants(stream: Stream, specs: list[TierSpec], short_divisor: float, small_divisor: float) -> dict:
    """The tiers as configured and their controls, {name: TierResult}; per-tier hits are
    reused where a control leaves a tier unchanged."""
    base = simulate(stream, specs)
    no_ttl = simulate(stream, with_changes(specs, ttl_s=None))
    last = len(specs) - 1
    out = {"base": base, "no_ttl": no_ttl}
    lru_specs = with_changes(specs, last, policy="lru")
    out["l3_lru"] = simulate(stream, lru_specs, base.hits[:-1] + [tier_hits(stream, lru_specs[-1])])
    rnd = (
        policies.block_hits(stream, "random", specs[-1].capacity_blocks)
        if specs[-1].capacity_blocks
        else np.zeros(stream.trace.n_blocks, dtype=bool)
    )
    out["l3_random_no_ttl"] = simulate(
        stream, with_changes(no_ttl.specs, last, policy="random"), no_ttl.hits[:-1] + [rnd]
    )
    short = [
        TierSpec(s.name, s.capacity_blocks, None if s.ttl_s is None else s.ttl_s / short_divisor, s.policy)
        for s in specs
    ]
    out["short_ttl"] = simulate(stream, short)
    small = [TierSpec(s.name, max(1, int(s.capacity_blocks / small_divisor)), s.ttl_s, s.policy) for s in specs]
    out["small"] = simulate(stream, small)
    return out
