"""The metrics the kv-tiers drivers report (declared in drivers.py's `register(..., metrics=...)`):
the codecs' decode times and QPS, each tier's latency, and TTFT per tier and prompt length."""

from harness.base.metrics_model import MetricDecl as M

# kv-tiers-codecs: the codecs of common.CODECS (json, aligned64, aligned128, raw)
CODECS = (
    # at the sized chunk (the size whose JSON decode takes the source's time here)
    M("sized.elements", "float32 values"),
    M("sized.{json|aligned64|aligned128|raw}.decode_ms", "ms", "lower"),
    M("sized.{json|aligned64|aligned128|raw}.bytes", "B", "lower"),
    M("sized.{json|aligned128|raw}.store_fetch_qps", "ops/s", "higher"),
    M("sized.decode_speedup.aligned128_vs_json", "x", "higher"),
    M("qps_gain_pct.aligned128_vs_json", "%", "higher"),
    # the control: JSON measured in the aligned codec's place
    M("control.decode_speedup.json_vs_json", "x"),
    M("control.qps_gain_pct.json_vs_json", "%"),
    # the stand-in (raw bytes) and its instruments
    M("sized.decode_speedup.raw_vs_json", "x"),
    M("qps_gain_pct.raw_vs_json", "%"),
    M("sized.raw.bytes_per_value", "B", "lower"),
    M("chunk.decode_vs_copy.{aligned128|raw}", "x", "lower"),
    # whole 32-token chunks
    M("chunk.{json|aligned64|aligned128|raw}.decode_ms", "ms", "lower"),
    M("chunk.decode_speedup.aligned128_vs_json", "x", "higher"),
)

# kv-tiers-latency: tiers_case.MEASURES, at the 50th and 99th percentiles
LATENCY = (
    # fetches that deliver usable data, each tier in turn (and the 64-byte GET beside them)
    M("{L1.fetch_copy|L2.fetch_decode|L3.cold|L3.warm}.p{50|99}_us", "us", "lower"),
    M("L2.small_get.p{50|99}_us", "us", "lower"),
    # the tiered store's own lookups, by the tier that answered, and its writes
    M("{L1|L2|L3|miss}.p{50|99}_us", "us", "lower"),
    M("put.p{50|99}_us", "us", "lower"),
    M("hits.{L1|L2|L3|miss}", "lookups"),
    M("mismatches", "lookups", "lower"),
    M("lookups_compared", "lookups"),
    # write-behind from L2 to L3
    M("write_behind.batches", "batches"),
    M("write_behind.persisted", "entries"),
    M("write_behind.batch_ms", "ms", "lower"),
)

# kv-tiers-ttft: {tokens} is a prompt length of the `lengths` parameter
TTFT = (
    M("ttft_ms.{full|L1|L2|L3}.n{tokens}", "ms", "lower"),
    M("ttft_ratio.{L1|L2|L3}_over_full.n{tokens}", "x", "lower"),
    M("ttft_ratio.L2_over_full.max_ge512", "x", "lower"),
    M("breakeven_tokens.{L1|L2|L3}", "tokens", "lower"),
    M("first_token_mismatches", "prompts", "lower"),
    M("first_token_compared", "prompts"),
    M("wrong_tier_hits", "prompts", "lower"),
)
