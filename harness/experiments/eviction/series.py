"""The eviction suite's series: each declared once, with its columns' kinds and units, for the
drivers that write them and the view that reads them."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# eviction-trace: the 20 most frequent tokens (its note is the head's definition, given by the driver).
TOP_TOKENS = SeriesShape(
    "top_tokens",
    (Column("rank", "int"), Column("token", "text"), Column("count", "int"), Column("share_pct", unit="%")),
)

# eviction-trace: requests per rank at about 40 log-spaced ranks, and the fitted Zipf law's.
RANK_FREQUENCY = SeriesShape("rank_frequency", (Column("rank", "int"), Column("requests", "int"), Column("zipf_fit")))

# eviction-trace: the head's share of requests at each head size, and on the uniform control.
HEAD_SWEEP = SeriesShape(
    "head_sweep",
    (
        Column("head_fraction"),
        Column("head_size", "int"),
        Column("share_pct", unit="%"),
        Column("uniform_share_pct", unit="%"),
    ),
    "the source does not say which tokens are high-frequency: the head size is swept",
)

# eviction-simulate: one row per policy and cache size.
CURVES = SeriesShape(
    "curves",
    (
        Column("policy", "text"),
        Column("size_fraction"),
        Column("capacity", "int"),
        Column("hit_rate_pct", unit="%"),
        Column("long_tail_pct", unit="%"),
        Column("gap_to_opt_pp", unit="pp"),
    ),
)

# eviction-simulate: the source's ordering (lru < lfu < hybrid) and its random control, per cache
# size; the policy columns are drivers.ORDER and simulate.CONTROL_POLICY.
ORDERING = SeriesShape(
    "ordering",
    (
        Column("size_fraction"),
        Column("capacity", "int"),
        Column("lru", unit="%"),
        Column("lfu", unit="%"),
        Column("hybrid", unit="%"),
        Column("random", unit="%"),
        Column("holds", "int"),
        Column("holds_with_random", "int"),
    ),
)

# eviction-simulate: requests per second of each policy (its note names the trace and size).
RPS = SeriesShape("rps", (Column("policy", "text"), Column("rps", unit="req/s"), Column("implementation", "text")))

# eviction-crosscheck: each implementation against its pure-Python reference, per cache size.
PAIRS = SeriesShape(
    "pairs",
    (
        Column("implementation", "text"),
        Column("reference", "text"),
        Column("capacity", "int"),
        Column("hits", "int"),
        Column("reference_hits", "int"),
        Column("differing_requests", "int"),
        Column("first_difference", "int"),
        Column("verdict", "text"),
    ),
)

# eviction-redis / eviction-redis-cluster: one row per configuration replayed on real Redis (its
# note, how maxmemory was sized and what the columns mean, is given by the driver).
RUNS = SeriesShape(
    "runs",
    (
        Column("configuration", "text"),
        Column("maxmemory_bytes", unit="B"),
        Column("bytes_per_key"),
        Column("target_keys"),
        Column("keys_held"),
        Column("hit_pct_info", unit="%"),
        Column("hit_pct_client", unit="%"),
        Column("long_tail_pct", unit="%"),
        Column("evicted", "int"),
        Column("refused_sets", "int"),
        Column("max_idle_s", unit="s"),
        Column("exact_lru_pct", unit="%"),
        Column("exact_lfu_pct", unit="%"),
        Column("opt_pct", unit="%"),
    ),
)
