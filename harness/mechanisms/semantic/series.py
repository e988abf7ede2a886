"""The series and the metrics the semantic cache's TTFT stream writes
(harness.mechanisms.semantic.stream), in the semantic-cache suite's ttft case and the
serving suite's semantic-e2e case alike; declared once, here (each suite's series.py and
metrics.py name them among their own)."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape
from harness.base.metrics_model import MetricDecl as M

# TTFT per request and mode (the modes interleaved per request).
REQUESTS = SeriesShape(
    "requests",
    (
        Column("request", "int"),
        Column("position", "int"),
        Column("mode", "text"),
        Column("ttft_ms", unit="ms"),
        Column("outcome", "text"),
    ),
)

# What stream.outcome_of reports: TTFT per mode, the cached modes' hits, and C3's P95
# change semantic vs hash with its bootstrap interval and floor, its control and its instrument.
_CACHED = "{hash_cache|semantic_cache|oracle_cache}"
TTFT_METRICS = (
    M("{no_cache|hash_cache|semantic_cache|oracle_cache}.p{50|95|99}_ms", "ms", "lower"),
    M(_CACHED + ".correct_hit_rate_pct", "%", "higher"),
    M(_CACHED + ".wrong_hits", "requests", "lower"),
    M(_CACHED + ".net_hit_rate_pct", "%", "higher"),
    M(_CACHED + ".p95_floor_ms", "ms"),
    M("ttft.radius", "bits"),
    M("ttft.p95_change_semantic_vs_hash_pct", "%", "lower"),
    M("ttft.p95_change_semantic_vs_hash_ci_{low|high}_pct", "%"),
    M("ttft.p95_floor_change_semantic_vs_hash_pct", "%"),
    M("control.p95_change_no_cache_vs_hash_pct", "%", "lower"),
    M("instrument.p95_change_oracle_vs_no_cache_pct", "%", "lower"),
)
