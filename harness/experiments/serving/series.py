"""The serving suite's series: each declared once, with its columns' kinds and units, for the
drivers that write them and the view that reads them."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# One row per request of an arm (stored under the arm's name, `prefix_on`, `harness` ...).
REQUESTS = SeriesShape(
    "requests",
    (
        Column("arm", "text"),
        Column("index", "int"),
        Column("status", "text"),
        Column("ttft_ms", unit="ms"),
        Column("tpot_ms", unit="ms"),
        Column("e2e_ms", unit="ms"),
        Column("prompt_tokens", "int"),
        Column("late_ms", unit="ms"),
    ),
)

# vLLM's own benchmark client, per request (client-vs-vllm).
PEER_REQUESTS = SeriesShape(
    "vllm",
    (Column("arm", "text"), Column("ttft_ms", unit="ms"), Column("tpot_ms", unit="ms"), Column("prompt_tokens", "int")),
    "vLLM's benchmark client, per request",
)

# Each load generator's own requests (prefix-cache against an inventory with several).
LOADGENS = SeriesShape(
    "loadgens",
    (
        Column("arm", "text"),
        Column("load_generator", "text"),
        Column("requests", "int"),
        Column("ok", "int"),
        Column("ttft_p50_ms", unit="ms"),
        Column("ttft_p95_ms", unit="ms"),
    ),
    "each load generator's own requests; the arm's metrics are over every host's rows merged",
)

# The sweep: one row per point of every arm. `level` is in req/s (open loop) or users (closed).
POINTS = SeriesShape(
    "points",
    (
        Column("arm", "text"),
        Column("level"),
        Column("offered_rps", unit="req/s"),
        Column("sent_rps", unit="req/s"),
        Column("completed_rps", unit="req/s"),
        Column("goodput_rps", unit="req/s"),
        Column("met_pct", unit="%"),
        Column("late_p95_ms", unit="ms"),
        Column("ttft_p50_ms", unit="ms"),
        Column("ttft_p95_ms", unit="ms"),
        Column("tpot_p95_ms", unit="ms"),
        Column("ttft_growth_x"),
        Column("requests", "int"),
        Column("invalid", "text"),
        Column("saturated", "text"),
        Column("slo_held", "flag"),
        Column("engine_hit_pct", unit="%"),
        Column("hit_tokens_per_s", unit="tokens/s"),
        Column("errors", "int"),
        Column("cache_hit_pct", unit="%"),
        Column("wrong_hits", "int", unit="requests"),
        Column("cache_saved_tokens_per_s", unit="tokens/s"),
    ),
    "one row per point of every arm",
)

# C3 against the curve: the semantic cache's P95 against the hash cache's, per load.
SEMANTIC_VS_HASH = SeriesShape(
    "semantic_vs_hash",
    (
        Column("level"),
        Column("semantic_p95_ms", unit="ms"),
        Column("hash_p95_ms", unit="ms"),
        Column("change_pct", unit="%"),
    ),
    "C3 against the curve: TTFT P95, semantic cache against the hash cache, at every load both ran steadily "
    "(valid, not saturated, no request failed)",
)
