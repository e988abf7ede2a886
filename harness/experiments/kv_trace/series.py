"""The kv-trace suite's series: each declared once, with its columns' kinds and units, for the
drivers that write them and the view that reads them."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# Hit rate against capacity: one row per policy and capacity, the infinite cache's rows last.
CURVE = SeriesShape(
    "curve",
    (
        Column("policy", "text"),
        Column("capacity_tokens", "int", "tokens"),
        Column("capacity_blocks", "int", "blocks"),
        Column("token_hit_pct", unit="%"),
        Column("block_hit_pct", unit="%"),
        Column("raw_block_hit_pct", unit="%"),
        Column("share_of_max_pct", unit="%"),
        Column("simulated", "int"),
    ),
    "token_hit_pct / block_hit_pct: with the prefix rule; raw_block_hit_pct: blocks the policy found, "
    "also after a gap; share_of_max_pct: token hit rate / the infinite cache's; simulated = 0: no "
    "simulation needed (the cache holds every distinct block, or no block)",
)

# C19 on KV blocks: the head share at every head size of the sweep.
HEAD_SWEEP = SeriesShape(
    "head_sweep",
    (Column("head_fraction"), Column("head_blocks", "int", "blocks"), Column("share_pct", unit="%")),
    "share of block lookups to the most frequent head_fraction of distinct blocks",
)

# The source's three tiers (C5, C17), one row per tier.
TIERS = SeriesShape(
    "tiers",
    (
        Column("tier", "text"),
        Column("medium", "text"),
        Column("capacity_gb", unit="GB"),
        Column("capacity_tokens", "int", "tokens"),
        Column("ttl_s", unit="s"),
        Column("policy", "text"),
        Column("alone_hit_pct", unit="%"),
        Column("cumulative_hit_pct", unit="%"),
        Column("served_token_pct", unit="%"),
        Column("requests_served_pct", unit="%"),
        Column("gb_in", unit="GB"),
        Column("gb_up_to_L1", unit="GB"),
    ),
    "token-weighted, prefix rule across tiers; gb_in: written into the tier from the one above; gb_up_to_L1: "
    "copied up to L1 for the hits it served",
)

# The tiers beside their controls: one row per variant.
TIER_CONTROLS = SeriesShape(
    "tier_controls",
    (
        Column("variant", "text"),
        Column("what", "text"),
        Column("token_hit_pct", unit="%"),
        Column("block_hit_pct", unit="%"),
    ),
    "all tiers together (cumulative at L3), token- and block-weighted",
)

# The cross-check: one row per policy x capacity (x TTL), and one for the tiers, whose
# capacity_blocks and ttl_s name the three tiers' figures as text ("24/160/640").
PAIRS = SeriesShape(
    "pairs",
    (
        Column("policy", "text"),
        Column("capacity_blocks", "value"),
        Column("ttl_s", "value"),
        Column("hits", "int"),
        Column("reference_hits", "int"),
        Column("differing_blocks", "int"),
        Column("differing_requests", "int"),
        Column("first_differing_request", "int"),
        Column("verdict", "text"),
    ),
)
