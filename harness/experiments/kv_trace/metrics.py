"""The metrics the kv-trace drivers report (declared in drivers.py's `register(..., metrics=...)`):
the simulator's numbers on one KV-block trace with recount.py's references, and the cross-check."""

from harness.base.metrics_model import MetricDecl as M

# kv-trace-simulate: {policy} is one of kv_blocks.policies.ALL_POLICIES; {capacity} a curve capacity in
# tokens as analyses.label names it (10k, 3M, 1G, 3.16M)
SIMULATE = (
    # the trace
    M("trace.requests", "requests"),
    M("trace.blocks", "blocks"),
    M("trace.distinct_blocks", "blocks"),
    M("trace.input_tokens", "tokens"),
    M("trace.mean_input_tokens", "tokens"),
    M("trace.mean_output_tokens", "tokens"),
    M("trace.duration_s", "s"),
    M("trace.length_mismatches", "requests", "lower"),
    # reuse (C1): the infinite cache's maximum and the GPU's KV capacity, on the trace and on its
    # controls (dup: each request repeated at once; nosharing: every block id unique; replayed: twice)
    M("reuse.gpu.capacity_tokens", "tokens"),
    M("reuse.kv_bytes_per_token", "B"),
    M("reuse.{max|gpu}.{token|block}_hit_pct", "%"),
    M("reuse.block_lookups", "lookups"),
    M("reuse.gpu.share_of_max_pct", "%"),
    M("reuse.{dup|nosharing}.{max|gpu}.{token|block}_hit_pct", "%"),
    M("reuse.{dup|nosharing}.block_lookups", "lookups"),
    M("reuse.replayed.max.token_hit_pct", "%"),
    M("sessions.count", "sessions"),
    M("sessions.{max|gpu}.token_hit_p{50|90}_pct", "%"),
    M("sessions.{max|gpu}.with_hits_pct", "%"),
    M("pool.instances", "instances"),
    M("pool.capacity_tokens", "tokens"),
    M("pool.shared.token_hit_pct", "%", "higher"),
    M("pool.instances.{round_robin|affine}.token_hit_pct", "%", "higher"),
    M("pool.shared_gain_over_{round_robin|affine}_pp", "pp", "higher"),
    M("pool.one_instance.gap_pp", "pp", "lower"),
    M("pool.dup.shared_gain_over_round_robin_pp", "pp"),
    # hit rate against capacity per policy, the source's ordering (C18) and the ceiling (opt)
    M("curve.{lru|lfu|arc|s3fifo|lru-2|lru-3|leaf-lru|random|opt|hybrid}.at_{capacity}.token_hit_pct", "%", "higher"),
    M("curve.{lru|lfu|arc|s3fifo|lru-2|lru-3|leaf-lru|random|opt|hybrid}.at_{capacity}.share_of_max_pct", "%"),
    M("curve.{lru|lfu|arc|s3fifo|lru-2|lru-3|leaf-lru|random|opt|hybrid}.lookups_per_s", "lookups/s", "higher"),
    M("curve.ordering_sizes_pct", "% of sizes"),
    M("curve.ordering_random_sizes_pct", "% of sizes"),
    M("curve.ordering_known_sizes_pct", "% of sizes"),
    M("curve.opt_violations", "cases", "lower"),
    M("curve.opt_compared", "cases"),
    # head share of block lookups (C19), with its instrument (Zipf draws) and control (uniform draws)
    M("blocks.head_share_pct", "%"),
    M("blocks.uniform_head_share_pct", "%"),
    M("blocks.zipf_control.head_share_pct", "%"),
    M("blocks.zipf_control.expected_head_share_pct", "%"),
    # the source's tiers (C5, C17): each tier, and the bytes moved between them
    M("tiers.{L1|L2|L3}.capacity_tokens", "tokens"),
    M("tiers.{L1|L2|L3}.alone.token_hit_pct", "%"),
    M("tiers.{L1|L2|L3}.cumulative.{token|block}_hit_pct", "%"),
    M("tiers.{L1|L2|L3}.served_token_pct", "%"),
    M("tiers.{L1|L2|L3}.requests_served_pct", "%"),
    M("tiers.bytes.{L1_to_L2|L2_to_L3|L2_to_L1|L3_to_L1}_gb", "GB"),
    M("tiers.bytes.{L1_to_L2|L2_to_L3|L2_to_L1|L3_to_L1}_gb_per_s", "GB/s"),
    # ... all tiers together, as configured (base) and in each control (tier_metrics.CONTROL_NOTES)
    M("tiers.{base|no_ttl|short_ttl|l3_lru|l3_random_no_ttl|small|nosharing|nosharing_l3_lru}.token_hit_pct", "%"),
    M("tiers.{base|no_ttl|short_ttl|l3_lru|l3_random_no_ttl|small|nosharing|nosharing_l3_lru}.of_max_pct", "%"),
    M("tiers.L1L2.of_max_pct", "%"),
    M("tiers.ttl_kept_pct", "%"),
    M("tiers.short_ttl.kept_pct", "%"),
    M("tiers.L3.lruk_gain_pp", "pp"),
    M("tiers.L3.random_loss_pp", "pp"),
    M("tiers.nosharing.lruk_gain_pp", "pp"),
    # the judged numbers counted again by recount.py (the ordering's policies: drivers.ORDER)
    M("reference.reuse.{max|gpu}.token_hit_pct", "%"),
    M("reference.curve.ordering_sizes_pct", "% of sizes"),
    M("reference.curve.{lru|lfu|hybrid}.at_{capacity}.token_hit_pct", "%"),
    M("reference.blocks.head_share_pct", "%"),
    M("reference.tiers.base.of_max_pct", "%"),
    M("reference.tiers.{L1|L2|L3}.served_token_pct", "%"),
    M("tiers.served_max_gap_pp", "pp", "lower"),
    M("reference.tiers.ttl_kept_pct", "%"),
    M("reference.tiers.L3.lruk_gain_pp", "pp"),
    M("reference.pool.shared.token_hit_pct", "%"),
    M("reference.pool.instances.round_robin.token_hit_pct", "%"),
    M("reference.pool.shared_gain_over_round_robin_pp", "pp"),
    M("reference.seconds", "s"),
)

# kv-trace-crosscheck: every policy and the tiers against the scan-based references
CROSSCHECK = (
    M("crosscheck.mismatched_pairs", "pairs", "lower"),
    M("crosscheck.pairs", "pairs"),
    M("crosscheck.sample_requests", "requests"),
    M("crosscheck.sample_blocks", "blocks"),
)
