"""The engine-hotload suite's series: each declared once, with its columns' kinds and units, for
the drivers that write them (cases.py, hot_swap_case.py, incompatible_swap_case.py, signed_load.py) and the view that reads
them."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# Cold start: one row per fresh process, its phases (the note names the backend and the bucket).
COLD_STARTS = SeriesShape(
    "cold_starts",
    (
        Column("cold start", "int"),
        Column("read_ms", unit="ms"),
        Column("verify_ms", unit="ms"),
        Column("deserialize_ms", unit="ms"),
        Column("context_ms", unit="ms"),
        Column("first_infer_ms", unit="ms"),
        Column("total_ms", unit="ms"),
    ),
)

# Prewarm: every first request of every fresh engine, per prewarm mode.
FIRST_REQUESTS = SeriesShape(
    "first_requests",
    (
        Column("engine", "int"),
        Column("mode", "text"),
        Column("position", "int"),
        Column("bucket", "text"),
        Column("ms", unit="ms"),
    ),
    "each engine in a fresh process; position 1 is the engine's very first request",
)

# Prewarm: the steady state per shape bucket, pooled over every engine.
STEADY = SeriesShape(
    "steady",
    (Column("bucket", "text"), Column("n", "int"), Column("p50_ms", unit="ms"), Column("p99_ms", unit="ms")),
    "pooled over every fresh engine after its first requests",
)

# Prewarm: each prewarm inference (profile, bucket) of every engine.
PREWARM = SeriesShape(
    "prewarm",
    (
        Column("engine", "int"),
        Column("mode", "text"),
        Column("profile", "int"),
        Column("bucket", "text"),
        Column("ms", unit="ms"),
    ),
)

# Hot swap: the request stream's latency per time window.
LATENCY_WINDOWS = SeriesShape(
    "latency_windows",
    (
        Column("t_s", unit="s"),
        Column("requests", "int"),
        Column("p50_ms", unit="ms"),
        Column("max_ms", unit="ms"),
        Column("failed", "int"),
    ),
)

# Hot swap: one row per action (swap or restart), its phases as the mechanism reported them
# (stored without units) and its window as the driver took it.
ACTIONS = SeriesShape(
    "actions",
    (
        Column("kind", "text"),
        Column("old", "text"),
        Column("new", "text"),
        Column("t_start_s", unit="s"),
        Column("t_switch_s", unit="s"),
        Column("t_released_s", unit="s"),
        Column("load_ms"),
        Column("check_ms"),
        Column("prewarm_ms"),
        Column("switch_wait_ms"),
        Column("switch_ms"),
        Column("drain_ms"),
        Column("to_serving_ms"),
        Column("call_ms"),
        Column("no_engine_ms"),
        Column("inflight_at_switch", "int"),
        Column("rss_extra_mib", unit="MiB"),
    ),
)

# Hot swap: process (and GPU) memory over the stream, thinned to about 400 samples.
MEMORY = SeriesShape("memory", (Column("t_s", unit="s"), Column("rss_mib", unit="MiB"), Column("gpu_mib", unit="MiB")))

# Incompatible swaps: each attempt, the check on and then off (the control). Stored as
# `attempts`, like the signed loads' (the view tells them apart by the `variant` column).
SWAP_ATTEMPTS = SeriesShape(
    "attempts",
    (
        Column("variant", "text"),
        Column("check", "text"),
        Column("expected", "text"),
        Column("outcome", "text"),
        Column("serves_as_before", "flag"),
        Column("message", "text"),
    ),
    "small ONNX models built with onnx.helper next to the served MiniLM; the check runs after loading aside and "
    "before any prewarm or switch, under a request stream",
)

# Signed loads: each load, verification on and then off (the control).
LOAD_ATTEMPTS = SeriesShape(
    "attempts",
    (
        Column("case", "text"),
        Column("verification", "text"),
        Column("expected", "text"),
        Column("outcome", "text"),
        Column("deserialized", "int"),
        Column("message", "text"),
    ),
    "Ed25519 keys made for the run (private keys in a temporary folder, deleted); public keys, manifests and "
    "signatures are kept in raw/. The check hashes the bytes that were read, and those bytes are what ONNX Runtime "
    "receives.",
)
