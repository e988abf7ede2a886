"""The measurements of the kv-trace suite on one trace, as metrics and series.

- summary: what the trace is (requests, blocks, tokens, duration, lengths that disagree);
- reuse (C1): the infinite-cache maximum and the hit rate at a real GPU's KV capacity,
  with the duplicated trace (instrument: a reuse known to be there, right after), the trace
  replayed twice (instrument: a reuse known to be there at any distance) and the trace with
  its sharing removed (mechanism off: no shared block, no reuse);
- curve: hit rate against capacity per policy, the source's ordering lru < lfu < hybrid
  (C18 on KV blocks), the ceiling (no policy above opt);
- head: the share of block lookups that go to the most frequent blocks (C19 on KV blocks),
  with a Zipf trace (instrument) and uniform draws (mechanism off).
"""

from __future__ import annotations

import math
import time
from typing import cast

import numpy as np

from harness.experiments.kv_trace.series import CURVE, HEAD_SWEEP
from harness.mechanisms.cache_policies import traces as ev
from harness.mechanisms.kv_blocks import policies, prefix
from harness.mechanisms.kv_blocks.policies import Stream
from harness.mechanisms.kv_blocks.prefix import infinite_hits, n_distinct
from harness.mechanisms.kv_blocks.trace import KVTrace, duplicated, replayed, unique_blocks
from harness.model.stored_run import Metric, Series

INFINITE = "infinite"  # the infinite cache: every block seen before is a hit


def pct(x: float, note: str = "", better: str | None = None) -> Metric:
    return Metric(100.0 * x, "%", better, note)


def summary(trace: KVTrace) -> dict[str, Metric]:
    dur = (trace.timestamps_ms[-1] - trace.timestamps_ms[0]) / 1000.0
    return {
        "trace.requests": Metric(trace.n_requests, "requests"),
        "trace.blocks": Metric(trace.n_blocks, "blocks", None, f"KV blocks of {trace.block_size} tokens"),
        "trace.distinct_blocks": Metric(n_distinct(trace), "blocks"),
        "trace.input_tokens": Metric(int(trace.input_len.sum()), "tokens"),
        "trace.mean_input_tokens": Metric(float(trace.input_len.mean()), "tokens"),
        "trace.mean_output_tokens": Metric(float(trace.output_len.mean()), "tokens"),
        "trace.duration_s": Metric(dur, "s", None, "last timestamp minus first"),
        "trace.length_mismatches": Metric(
            trace.n_mismatched,
            "requests",
            "lower",
            f"requests whose hash_ids count is not ceil(input_length / {trace.block_size})"
            + (f"; first lines {trace.mismatched_lines}" if trace.n_mismatched else ""),
        ),
    }


def rates_at(trace: KVTrace, stream: Stream, policy: str, capacity_blocks: int | None, **kw) -> prefix.Rates:
    """Prefix-rule rates of `policy` at `capacity_blocks` (None = the infinite cache)."""
    if capacity_blocks is None or capacity_blocks >= n_distinct(trace):
        return prefix.rates(trace, infinite_hits(trace))
    return prefix.rates(trace, policies.block_hits(stream, policy, capacity_blocks, **kw))


def reuse(trace: KVTrace, gpu_blocks: int, policy: str) -> dict[str, Metric]:
    """C1: reuse at the infinite-cache maximum and at the GPU's KV capacity, with controls."""
    out: dict[str, Metric] = {}
    variants = (
        ("", trace, ""),
        (
            "dup.",
            duplicated(trace),
            "instrument: every request followed at once by a copy of itself; the copy must hit all its blocks, "
            "so at least 50%",
        ),
        (
            "nosharing.",
            unique_blocks(trace),
            "mechanism off: every block id made unique (no request shares a block with another); must be 0",
        ),
    )
    for pre, tr, note in variants:
        st = Stream(tr)
        mx = rates_at(tr, st, policy, None)
        gpu = rates_at(tr, st, policy, gpu_blocks)
        out[f"reuse.{pre}max.token_hit_pct"] = pct(mx.token, note or "an infinite cache: every block seen before hits")
        out[f"reuse.{pre}max.block_hit_pct"] = pct(mx.block, note)
        out[f"reuse.{pre}gpu.token_hit_pct"] = pct(gpu.token, note or f"{policy} with the GPU's KV capacity")
        out[f"reuse.{pre}gpu.block_hit_pct"] = pct(gpu.block, note)
        out[f"reuse.{pre}block_lookups"] = Metric(
            tr.n_blocks, "lookups", None, "block lookups replayed (the denominator of this variant's hit rates)"
        )
    twice = replayed(trace)
    out["reuse.replayed.max.token_hit_pct"] = pct(
        rates_at(twice, Stream(twice), policy, None).token,
        "instrument: the whole trace followed by a second pass of itself; an infinite cache hits every block of the "
        "second pass, however long ago it was used, so at least 50%",
    )
    out["reuse.gpu.share_of_max_pct"] = Metric(  # the rates are pct()'s: never None
        100.0 * cast(float, out["reuse.gpu.token_hit_pct"].value) / out["reuse.max.token_hit_pct"].value
        if out["reuse.max.token_hit_pct"].value
        else 0.0,
        "%",
        None,
        "token hit rate at the GPU / the maximum",
    )
    return out


def label(tokens: float) -> str:
    """3000000 -> '3M', 10000 -> '10k', 1e9 -> '1G' (metric names)."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if tokens >= div:
            v = tokens / div
            return f"{v:g}{suffix}" if v == round(v, 3) else f"{v:.3g}{suffix}"
    return f"{tokens:g}"


def curve(
    trace: KVTrace, stream: Stream, capacities: list[int], names: list[str], seed: int = 0, hybrid_k: int = 2, log=print
) -> tuple[list[dict], dict[str, float]]:
    """Rows (policy, capacity, rates) of every policy at every capacity in tokens, and
    block lookups per second per policy (simulated capacities only)."""
    distinct = n_distinct(trace)
    inf = prefix.rates(trace, infinite_hits(trace))
    t0 = time.perf_counter()
    policies.prepare(stream, names)
    log(f"simulator: {policies.engine_description()}, prepared in {time.perf_counter() - t0:.2f} s")
    spent: dict[str, float]
    looked: dict[str, int]
    rows, spent, looked = [], {}, {}
    for cap_tok in capacities:
        blocks = int(cap_tok // trace.block_size)
        for name in names:
            simulated = 0 < blocks < distinct
            if simulated:
                t0 = time.perf_counter()
                r = prefix.rates(trace, policies.block_hits(stream, name, blocks, seed=seed, hybrid_k=hybrid_k))
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
                looked[name] = looked.get(name, 0) + trace.n_blocks
            else:
                r = inf if blocks >= distinct else prefix.rates(trace, np.zeros(trace.n_blocks, dtype=bool))
            rows.append(
                {
                    "policy": name,
                    "capacity_tokens": int(cap_tok),
                    "capacity_blocks": blocks,
                    "token_hit_pct": 100 * r.token,
                    "block_hit_pct": 100 * r.block,
                    "raw_block_hit_pct": 100 * r.raw_block,
                    "share_of_max_pct": 100 * r.token / inf.token if inf.token else 0.0,
                    "simulated": int(simulated),
                }
            )
        log(
            f"capacity {label(cap_tok)} tokens: "
            + ", ".join(f"{row['policy']} {row['token_hit_pct']:.1f}" for row in rows[-len(names) :])
        )
    for cap_tok in capacities:
        rows.append(
            {
                "policy": INFINITE,
                "capacity_tokens": int(cap_tok),
                "capacity_blocks": int(cap_tok // trace.block_size),
                "token_hit_pct": 100 * inf.token,
                "block_hit_pct": 100 * inf.block,
                "raw_block_hit_pct": 100 * inf.raw_block,
                "share_of_max_pct": 100.0,
                "simulated": 0,
            }
        )
    rps = {n: looked[n] / spent[n] for n in spent if spent[n] > 0}
    return rows, rps


def ordering(rows: list[dict], names: tuple[str, ...]) -> tuple[int, int]:
    """(sizes where the token hit rates of `names` increase strictly in that order, sizes
    checked): the simulated capacities (a cache that never evicts ties every policy)."""
    by: dict = {}
    for r in rows:
        if r["simulated"]:
            by.setdefault(r["capacity_tokens"], {})[r["policy"]] = r["token_hit_pct"]
    sizes = [c for c, d in by.items() if all(n in d for n in names)]
    held = sum(all(by[c][a] < by[c][b] for a, b in zip(names, names[1:])) for c in sizes)
    return held, len(sizes)


def opt_violations(rows: list[dict]) -> list[tuple]:
    """(policy, capacity) where a policy's block hit rate beats opt's (the ceiling)."""
    opt = {r["capacity_tokens"]: r["block_hit_pct"] for r in rows if r["policy"] == "opt"}
    return [
        (r["policy"], r["capacity_tokens"])
        for r in rows
        if r["policy"] != INFINITE
        and r["capacity_tokens"] in opt
        and r["block_hit_pct"] > opt[r["capacity_tokens"]] + 1e-9
    ]


def opt_compared(rows: list[dict]) -> int:
    """(policy, capacity) cases compared with opt at a simulated capacity (the denominator of
    opt_violations: above the trace's distinct blocks every policy is the infinite cache, and
    comparing those is no evidence)."""
    opt = {r["capacity_tokens"] for r in rows if r["policy"] == "opt" and r["simulated"]}
    return sum(1 for r in rows if r["policy"] not in (INFINITE, "opt") and r["capacity_tokens"] in opt)


def curve_series(rows: list[dict]) -> Series:
    return CURVE.rows(rows)


def head(trace: KVTrace, fraction: float, sweep: list[float], seed: int) -> tuple[dict[str, Metric], Series]:
    """C19 on KV blocks: the share of block lookups to the top `fraction` of distinct blocks."""

    ids = trace.blocks
    share = ev.head_share(ids, ev.head_ids(ids, fraction))
    nd = n_distinct(trace)
    rng = np.random.default_rng(seed)
    uniform = rng.choice(np.unique(ids), size=len(ids))
    z = ev.zipf_trace(len(ids), nd, 1.0, seed).ids
    # the head is a fraction of the keys the draws saw (fewer than nd when lookups ~ keys)
    k = max(1, math.ceil(fraction * len(np.unique(z))))
    expected = float(ev.zipf_probabilities(nd, 1.0)[:k].sum())
    m = {
        "blocks.head_share_pct": pct(share, f"block lookups to the top {100 * fraction:g}% of distinct blocks"),
        "blocks.uniform_head_share_pct": pct(
            ev.head_share(uniform, ev.head_ids(uniform, fraction)),
            "mechanism off: uniform draws over the same blocks, as many lookups",
        ),
        "blocks.zipf_control.head_share_pct": pct(
            ev.head_share(z, ev.head_ids(z, fraction)), "instrument: Zipf(1) draws over as many keys, as many lookups"
        ),
        "blocks.zipf_control.expected_head_share_pct": pct(
            expected, "the Zipf(1) law's share of its most probable keys, as many as the draws' head holds"
        ),
    }
    rows: dict[str, list[float]] = {"head_fraction": [], "head_blocks": [], "share_pct": []}
    for f in sweep:
        h = ev.head_ids(ids, f)
        rows["head_fraction"].append(f)
        rows["head_blocks"].append(len(h))
        rows["share_pct"].append(100 * ev.head_share(ids, h))
    return m, HEAD_SWEEP.make(rows)
