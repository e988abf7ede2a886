"""The kv-tiers suite's series: each declared once, with its columns' kinds and units, for the
drivers that write them and the view that reads them."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# One row per codec and scope (the sized chunk, the whole 32-token chunk); the note names the
# sized chunk's target and the machine, so the driver gives it.
CODEC_SERIES = SeriesShape(
    "codecs",
    (
        Column("codec", "text"),
        Column("scope", "text"),
        Column("elements", "int"),
        Column("bytes", "int", unit="B"),
        Column("encode_ms", unit="ms"),
        Column("decode_ms", unit="ms"),
        Column("store_fetch_qps", unit="ops/s"),
    ),
)

# One row per measure that was sampled: its tier, what is timed, and the percentiles.
TIER_SERIES = SeriesShape(
    "tiers",
    (
        Column("measure", "text"),
        Column("tier", "text"),
        Column("what", "text"),
        Column("n", "int"),
        Column("p50_us", unit="us"),
        Column("p99_us", unit="us"),
    ),
)

# One row per prompt length: full prefill and the prefix KV restored from each tier.
TTFT_SERIES = SeriesShape(
    "ttft",
    (
        Column("tokens", "int"),
        Column("prefix_tokens", "int"),
        Column("chunks", "int"),
        Column("full_ms", unit="ms"),
        Column("L1_ms", unit="ms"),
        Column("L2_ms", unit="ms"),
        Column("L3_ms", unit="ms"),
        Column("L1_fetch_ms", unit="ms"),
        Column("L2_fetch_ms", unit="ms"),
        Column("L3_fetch_ms", unit="ms"),
    ),
)
