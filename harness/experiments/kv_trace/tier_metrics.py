"""Metrics and series of the tiers (C5, C17) from tiers.variants()."""

from __future__ import annotations

from harness.experiments.kv_trace.series import TIER_CONTROLS, TIERS
from harness.model.stored_run import Metric, Series

from .tiers import TierResult

CONTROL_NOTES = {
    "base": "the source's tiers: capacities, TTLs and L3 LRU-K as configured",
    "no_ttl": "the same tiers without TTLs (what the TTLs cost)",
    "short_ttl": "the TTLs divided by short_ttl_divisor (instrument: the hit rate can see a TTL)",
    "l3_lru": "L3 with plain LRU instead of LRU-K (same TTL)",
    "l3_random_no_ttl": "L3 with random eviction, no TTLs anywhere (instrument: the L3 policy matters at this size)",
    "small": "every tier at capacity / small_divisor (instrument: the hit rate can see capacity)",
    "nosharing": "the trace with its sharing removed: every block id unique (mechanism off: no reuse, must be 0)",
    "nosharing_l3_lru": "sharing removed, L3 with plain LRU (mechanism off of the LRU-K gain)",
}


def _pct(x: float, note: str = "") -> Metric:
    return Metric(100.0 * x, "%", None, note)


def tier_metrics(trace, res: dict[str, TierResult], max_token: float, kv_bytes: int, gb: list) -> dict[str, Metric]:
    base = res["base"]
    tot_tok = float(trace.input_len.sum())
    dur = max((trace.timestamps_ms[-1] - trace.timestamps_ms[0]) / 1000.0, 1e-9)
    m: dict[str, Metric] = {}
    for k, spec in enumerate(base.specs, 1):
        n = spec.name
        m[f"tiers.{n}.capacity_tokens"] = Metric(
            spec.capacity_blocks * trace.block_size,
            "tokens",
            None,
            f"{gb[k - 1]:g} GB / {kv_bytes:,} B per token, whole blocks",
        )
        m[f"tiers.{n}.alone.token_hit_pct"] = _pct(base.alone[k - 1].token, f"{n} on its own, prefix rule")
        m[f"tiers.{n}.cumulative.token_hit_pct"] = _pct(base.cumulative[k - 1].token, f"tiers L1..{n} together")
        m[f"tiers.{n}.cumulative.block_hit_pct"] = _pct(base.cumulative[k - 1].block)
        m[f"tiers.{n}.served_token_pct"] = Metric(
            100.0 * base.served_tokens(k) / tot_tok, "%", None, f"prompt tokens served from {n}"
        )
        m[f"tiers.{n}.requests_served_pct"] = Metric(
            100.0 * base.requests_served(trace, k) / trace.n_requests,
            "%",
            None,
            f"requests with at least one block from {n}",
        )
    for name, v in base.bytes_moved(kv_bytes).items():
        m[f"tiers.bytes.{name}_gb"] = Metric(v / 1e9, "GB", None, "over the whole trace")
        m[f"tiers.bytes.{name}_gb_per_s"] = Metric(v / 1e9 / dur, "GB/s", None, "average over the trace's duration")
    for name, r in res.items():
        m[f"tiers.{name}.token_hit_pct"] = _pct(r.cumulative[-1].token, CONTROL_NOTES.get(name, ""))
        m[f"tiers.{name}.of_max_pct"] = Metric(
            100.0 * r.cumulative[-1].token / max_token if max_token else 0.0,
            "%",
            None,
            "all tiers' token hit rate / the infinite cache's",
        )
    m["tiers.L1L2.of_max_pct"] = Metric(
        100.0 * base.cumulative[-2].token / max_token if max_token else 0.0,
        "%",
        None,
        "L3 removed: L1 and L2 alone / the infinite cache's",
    )
    m["tiers.ttl_kept_pct"] = _ratio(base, res["no_ttl"], "hit rate with the TTLs / without them")
    m["tiers.short_ttl.kept_pct"] = _ratio(res["short_ttl"], res["no_ttl"], "with shortened TTLs / without TTLs")
    m["tiers.L3.lruk_gain_pp"] = Metric(
        100.0 * (base.cumulative[-1].token - res["l3_lru"].cumulative[-1].token),
        "pp",
        None,
        "all tiers with L3 LRU-K minus with L3 LRU",
    )
    m["tiers.L3.random_loss_pp"] = Metric(
        100.0 * (res["no_ttl"].cumulative[-1].token - res["l3_random_no_ttl"].cumulative[-1].token),
        "pp",
        None,
        "no TTLs: L3 LRU-K minus L3 random eviction",
    )
    if "nosharing_l3_lru" in res:
        m["tiers.nosharing.lruk_gain_pp"] = Metric(
            100.0 * (res["nosharing"].cumulative[-1].token - res["nosharing_l3_lru"].cumulative[-1].token),
            "pp",
            None,
            "sharing removed: L3 LRU-K minus L3 LRU (no reuse, no gain)",
        )
    return m


def _ratio(a: TierResult, b: TierResult, note: str) -> Metric:
    ta, tb = a.cumulative[-1].token, b.cumulative[-1].token
    return Metric(100.0 * ta / tb if tb else 0.0, "%", None, note)


def tier_series(trace, res: dict[str, TierResult], kv_bytes: int, gb: list, media: list) -> dict[str, Series]:
    base = res["base"]
    tot_tok = float(trace.input_len.sum())
    moved = base.bytes_moved(kv_bytes)
    cols: dict[str, list] = {c.name: [] for c in TIERS.columns}
    for k, s in enumerate(base.specs, 1):
        gb_in = moved.get(f"{base.specs[k - 2].name}_to_{s.name}", 0.0) / 1e9 if k > 1 else None
        gb_up = moved.get(f"{s.name}_to_{base.specs[0].name}", 0.0) / 1e9 if k > 1 else None
        for c, v in zip(
            cols,
            (
                s.name,
                media[k - 1],
                gb[k - 1],
                s.capacity_blocks * trace.block_size,
                s.ttl_s,
                s.policy,
                100 * base.alone[k - 1].token,
                100 * base.cumulative[k - 1].token,
                100 * base.served_tokens(k) / tot_tok,
                100 * base.requests_served(trace, k) / trace.n_requests,
                gb_in,
                gb_up,
            ),
        ):
            cols[c].append(v)
    ctl: dict[str, list] = {c.name: [] for c in TIER_CONTROLS.columns}
    for name, r in res.items():
        for c, v in zip(
            ctl, (name, CONTROL_NOTES.get(name, ""), 100 * r.cumulative[-1].token, 100 * r.cumulative[-1].block)
        ):
            ctl[c].append(v)
    return {TIERS.name: TIERS.make(cols), TIER_CONTROLS.name: TIER_CONTROLS.make(ctl)}
