"""The semantic-cache suite's series: each declared once, with its columns' kinds and units, for
the drivers that write them (keys_case.py, gptcache_report.py, perf_case.py, ttft_case.py,
memory_case.py, entity_case.py) and the view that reads them. A note that names the run's data
or parameters is given where the series is made."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# ---- semantic (keys_case.py) ---------------------------------------------------------------

# The key schemes on the test split: one row per scheme, only correct hits count.
KEY_SCHEMES = SeriesShape(
    "schemes",
    (
        Column("scheme", "text"),
        Column("setting", "text"),
        Column("queries", "int"),
        Column("hits", "int"),
        Column("correct", "int"),
        Column("wrong", "int"),
        Column("must_miss_hits", "int"),
        Column("correct_hit_rate_pct", unit="%"),
        Column("wrong_hit_rate_pct", unit="%"),
        Column("precision_pct", unit="%"),
        Column("recall_pct", unit="%"),
    ),
)

# A calibration sweep's columns after its setting: each setting's calibration and test rows
# (stored without units).
SWEEP = (
    Column("split", "text"),
    Column("correct_hit_rate_pct"),
    Column("wrong_hit_rate_pct"),
    Column("precision_pct"),
    Column("recall_pct"),
    Column("f1"),
)

LSH_SWEEP = SeriesShape("lsh_sweep", (Column("radius", "int"), *SWEEP))
# The stand-in (SimHash of character n-grams) through the same radius calibration.
CHARSIM_SWEEP = SeriesShape("charsim_sweep", (Column("radius", "int"), *SWEEP))
NN_SWEEP = SeriesShape("nn_sweep", (Column("threshold"), *SWEEP))

# C7: each token stream's measured H and r, and the threshold the formula computes from them.
C7_STREAMS = SeriesShape(
    "c7_streams",
    (
        Column("stream", "text"),
        Column("tokens", "int"),
        Column("entropy_bits", unit="bits"),
        Column("lag1_r"),
        Column("threshold"),
    ),
)

# C7: correct and wrong hits of exact cosine NN at the dynamic, static and strict thresholds.
C7_LOSS = SeriesShape(
    "c7_loss", (Column("threshold"), Column("kind", "text"), Column("correct_hits", "int"), Column("wrong_hits", "int"))
)

# A pairs dataset: pair-level decisions per scheme and setting.
PAIRS = SeriesShape(
    "pairs",
    (
        Column("scheme", "text"),
        Column("setting", "text"),
        Column("pairs", "int"),
        Column("tp", "int"),
        Column("fp", "int"),
        Column("fn", "int"),
        Column("tn", "int"),
        Column("hit_rate_pct"),
        Column("precision_pct"),
        Column("recall_pct"),
        Column("f1"),
    ),
)

# A GPTCache-format dataset: GPTCache's own protocol at three thresholds.
GPTCACHE_PROTOCOL = SeriesShape(
    "gptcache_protocol",
    (
        Column("cosine_threshold"),
        Column("gptcache_threshold"),
        Column("correct", "int"),
        Column("wrong", "int"),
        Column("miss", "int"),
    ),
    "every origin inserted, every paraphrase asked (no query must miss); GPTCache's score threshold t is about "
    "cosine >= 2t - 1",
)

# ---- gptcache (gptcache_report.py) ---------------------------------------------------------

GPTCACHE_SWEEP = SeriesShape("gptcache_sweep", (Column("threshold"), *SWEEP))

# GPTCache beside the harness, one row per subject. Counts come from metrics (floats); the
# columns without a unit are stored with an empty one (COMPARISON_NO_UNIT).
COMPARISON = SeriesShape(
    "comparison",
    (
        Column("subject", "text"),
        Column("correct_hits"),
        Column("wrong_hits"),
        Column("precision_pct", unit="%"),
        Column("recall_pct", unit="%"),
        Column("lookup_p50_ms", unit="ms"),
        Column("lookup_p95_ms", unit="ms"),
        Column("embed_p50_ms", unit="ms"),
        Column("embed_p95_ms", unit="ms"),
        Column("search_p50_ms", unit="ms"),
        Column("search_p95_ms", unit="ms"),
        Column("store_p50_ms", unit="ms"),
        Column("store_p95_ms", unit="ms"),
        Column("gptcache_p50_over_this"),
    ),
)
COMPARISON_NO_UNIT = {c.name: "" for c in COMPARISON.columns if not c.unit}

# The int8 arm beside FP32 (and the instrument): decisions, answers, precision and recall.
INT8_AGREEMENT = SeriesShape(
    "int8_agreement",
    (
        Column("arm", "text"),
        Column("threshold"),
        Column("correct_hits"),
        Column("wrong_hits"),
        Column("precision_pct", unit="%"),
        Column("recall_pct", unit="%"),
        Column("same_decision_pct", unit="%"),
        Column("same_answer_pct", unit="%"),
    ),
)

# Queries per second of every subject under concurrent clients.
CONCURRENT = SeriesShape(
    "concurrent",
    (
        Column("subject", "text"),
        Column("clients", "int"),
        Column("queries", "int"),
        Column("queries_per_s", unit="queries/s"),
        Column("over_gptcache", unit="x"),
    ),
)

# ---- embed-perf, ttft, memory, entity-keys --------------------------------------------------

# Embedding throughput per pass, the two paths alternating.
ROUNDS = SeriesShape("rounds", (Column("round", "int"), Column("path", "text"), Column("texts_per_s", unit="texts/s")))

# TTFT per request and mode (the modes interleaved per request): declared with the stream that
# writes it, among the mechanisms (the serving suite's semantic-e2e case writes it too).
from harness.mechanisms.semantic.series import REQUESTS  # noqa: E402,F401

# Memory peak per serving mode, each in a fresh process.
MEMORY_MODES = SeriesShape(
    "modes",
    (
        Column("mode", "text"),
        Column("order", "int"),
        Column("rss_peak_mb", unit="MiB"),
        Column("ru_maxrss_mb", unit="MiB"),
        Column("gpu_peak_mb", unit="MiB"),
        Column("model_served", "int"),
        Column("correct_hits", "int"),
        Column("wrong_hits", "int"),
    ),
)

# Section 3.3 key schemes through Redis (stored as `schemes`, like the semantic case's).
ENTITY_SCHEMES = SeriesShape(
    "schemes",
    (
        Column("key", "text"),
        Column("queries", "int"),
        Column("hits", "int"),
        Column("correct", "int"),
        Column("wrong", "int"),
        Column("correct_hit_rate_pct", unit="%"),
        Column("precision_pct", unit="%"),
        Column("recall_pct", unit="%"),
    ),
)

# Batching on the real dispatcher: one row per arm and round.
BATCHING = SeriesShape(
    "batching",
    (
        Column("arm", "text"),
        Column("round", "int"),
        Column("requests", "int"),
        Column("batches", "int"),
        Column("requests_per_batch"),
        Column("added_mean_ms", unit="ms"),
        Column("added_p95_ms", unit="ms"),
        Column("worker_wait_mean_ms", unit="ms"),
        Column("end_to_end_mean_ms", unit="ms"),
    ),
)
