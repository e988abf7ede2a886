"""Time to first token of a prompt whose prefix KV is found in L1, L2, L3, or nowhere.

For a prompt of N tokens the reusable prefix is the longest whole-chunk prefix that
leaves at least `min_suffix` tokens to compute: P = floor((N - min_suffix) / C) * C.

- full prefill: one forward pass over all N tokens; the first token is the argmax of the
  last position's logits. The prefix chunks stored in the tiers are cut from the first
  full prefill's cache (untimed; causal attention makes the prefix KV independent of
  the tokens after it).
- from tier T: every prefix chunk is looked up through the store with the tiers set so
  that T is the highest tier holding them (L1: all in L1; L2: L1 emptied; L3: L1 emptied
  and the keys deleted from L2), decoded, moved to the model's device, concatenated into
  a DynamicCache, and the N - P suffix tokens are run on top of it. TTFT = lookups +
  decode + cache assembly + the suffix forward pass. The first token must equal the full
  prefill's (counted as a mismatch otherwise).

Setting the tiers up before a measurement is not timed. The variants run round robin
(full, L1, L2, L3, full, L1, ...) so that a change of load on a shared host hits all alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from statistics import median

from harness.experiments.kv_tiers import extract

TIER_ORDER = ("L1", "L2", "L3")


@dataclass
class TtftPoint:
    tokens: int
    prefix_tokens: int
    chunks: int
    full_s: list[float] = field(default_factory=list)
    tier_s: dict[str, list[float]] = field(default_factory=dict)
    fetch_s: dict[str, list[float]] = field(default_factory=dict)  # lookups + decode + assembly
    mismatches: int = 0
    wrong_tier: int = 0

    def full_ms(self) -> float:
        return median(self.full_s) * 1e3

    def tier_ms(self, tier: str) -> float:
        return median(self.tier_s[tier]) * 1e3

    def fetch_ms(self, tier: str) -> float:
        return median(self.fetch_s[tier]) * 1e3


def prefix_tokens(n: int, chunk_tokens: int, min_suffix: int) -> int:
    """Longest whole-chunk prefix of an n-token prompt leaving at least min_suffix tokens."""
    return max(0, (n - min_suffix) // chunk_tokens) * chunk_tokens


def prepare_tier(store, keys: list[str], tier: str, originals: dict, payloads: dict) -> None:
    """Make `tier` the highest tier that holds `keys` (untimed)."""
    if tier == "L1":
        for k in keys:
            if k not in store.l1:
                store.l1.put(k, originals[k])
        return
    for k in keys:
        store.l1.delete(k)
    if tier == "L2":
        for k in keys:
            store.l2.put(k, payloads[k])
    elif tier == "L3":
        store.l2.delete(*keys)
    else:
        raise ValueError(tier)


def restore_and_continue(model, store, keys: list[str], suffix: list[int], tier: str):
    """(first token id, fetch seconds, hit tiers) from the prefix KV in the store."""
    t0 = time.perf_counter()
    tensors, tiers = [], set()
    for k in keys:
        t, hit = store.get(k)
        tiers.add(hit)
        if t is None:
            raise RuntimeError(f"prefix chunk {k[:12]} not found in any tier (expected {tier})")
        tensors.append(t if t.device == model.device else t.to(model.device))
    cache = extract.assemble_cache(tensors, model.config)
    fetch = time.perf_counter() - t0
    logits = extract.continue_from(model, cache, suffix)
    return int(logits.argmax()), fetch, tiers


def measure_point(
    model, store, ids: list[int], chunk_tokens: int, min_suffix: int, repeats: int, tiers=TIER_ORDER, log=print
) -> TtftPoint:
    n = len(ids)
    p = prefix_tokens(n, chunk_tokens, min_suffix)
    keys = extract.chunk_keys(ids[:p], chunk_tokens)
    point = TtftPoint(n, p, len(keys))
    for tier in tiers:
        point.tier_s[tier], point.fetch_s[tier] = [], []
    ref, originals, payloads = None, {}, {}
    for rep in range(repeats):  # round robin, so that load changes hit every variant alike
        t0 = time.perf_counter()
        logits, cache = extract.prefill(model, ids)
        tok = int(logits.argmax())
        point.full_s.append(time.perf_counter() - t0)
        if rep == 0:
            ref = tok
            if not keys:
                continue
            # Populate (untimed): the prefix's chunks of this prefill, written through the
            # store (causal attention: the prefix KV does not depend on later tokens).
            for c in extract.split_chunks(cache, ids[:p], chunk_tokens):
                originals[c.key] = c.tensor
                payloads[c.key] = store.codec.encode(c.tensor)
                store.put(c.key, originals[c.key])
            store.flush()
        del cache
        for tier in tiers if keys else ():
            prepare_tier(store, keys, tier, originals, payloads)
            t0 = time.perf_counter()
            tok, fetch, hit = restore_and_continue(model, store, keys, ids[p:], tier)
            point.tier_s[tier].append(time.perf_counter() - t0)
            point.fetch_s[tier].append(fetch)
            point.mismatches += tok != ref
            point.wrong_tier += hit != {tier}
    if not keys:
        return point
    log(
        f"{n} tokens (prefix {p}): full {point.full_ms():.0f} ms, "
        + ", ".join(f"{t} {point.tier_ms(t):.0f} ms" for t in tiers)
    )
    return point


def breakeven(points: list[TtftPoint], tier: str) -> int | None:
    """Smallest measured prompt length from which on the tier beats full prefill at every
    longer measured length too; None when it never does."""
    best = None
    for pt in sorted(points, key=lambda p: p.tokens, reverse=True):
        if tier in pt.tier_s and pt.tier_ms(tier) < pt.full_ms():
            best = pt.tokens
        else:
            break
    return best
