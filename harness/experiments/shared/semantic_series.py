"""The series the semantic cache's TTFT stream writes (harness.experiments.shared.semantic_stream),
in the semantic-cache suite's ttft case and the serving suite's semantic-e2e case alike;
declared once, here (the semantic-cache suite's series.py names it among its own)."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

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
