"""The metrics the eviction drivers report (declared in drivers.py's `register(..., metrics=...)`):
the token trace's head share, the simulated policies, their cross-check and the Redis replays."""

from harness.base.metrics_model import MetricDecl as M

# eviction-trace: real = the tokenized text, zipf = synthetic Zipf draws (the `trace` parameter)
TRACE = (
    M("{real|zipf}.zipf_exponent", ""),
    M("{real|zipf}.zipf_exponent_lsq", ""),
    M("{real|zipf}.distinct_tokens", "tokens"),
    M("real.corpus_passes", "passes"),
    # the head (C19) at head_fraction, and the sweep: head{100 x fraction}, e.g. head0.5, head10
    M("{real|zipf}.head_size", "tokens"),
    M("{real|zipf}.head_share_pct", "%"),
    M("{real|zipf}.head{percent}_share_pct", "%"),
    # its control (uniform draws over the same tokens) and instrument (a Zipf trace)
    M("{real|zipf}.uniform_head_share_pct", "%"),
    M("{real|zipf}.zipf_control.head_share_pct", "%"),
    M("{real|zipf}.zipf_control.expected_head_share_pct", "%"),
)

# eviction-simulate: sim = the real token trace, zipf = the synthetic one; the policies are
# cache_policies.sim.ALL_POLICIES, and random (seeded random eviction) is the control beside them
SIMULATE = (
    # at the claim table's size (table_fraction)
    M("{sim|zipf}.capacity_objects", "tokens"),
    M("{sim|zipf}.head_share_pct", "%"),
    M("sim.corpus_passes", "passes"),
    M("{sim|zipf}.{lru|lfu|lru-2|lru-3|lru-5|arc|s3fifo|wtinylfu|hybrid|opt|random}.hit_rate_pct", "%", "higher"),
    M("{sim|zipf}.{lru|lfu|lru-2|lru-3|lru-5|arc|s3fifo|wtinylfu|hybrid|opt|random}.long_tail_pct", "%", "higher"),
    M("{sim|zipf}.{lru|lfu|lru-2|lru-3|lru-5|arc|s3fifo|wtinylfu|hybrid|opt|random}.gap_to_opt_pp", "pp", "lower"),
    M("{sim|zipf}.{lru|lfu|lru-2|lru-3|lru-5|arc|s3fifo|wtinylfu|hybrid|opt}.rps", "req/s", "higher"),
    # the source's ordering lru < lfu < hybrid (C18), its control, and the optimal bound
    M("{sim|zipf}.ordering_sizes_pct", "% of sizes", "higher"),
    M("{sim|zipf}.ordering_random_sizes_pct", "% of sizes"),
    M("{sim|zipf}.opt_violations", "cases", "lower"),
    M("{sim|zipf}.opt_compared", "cases"),
    # at the size where exact LRU first hits calibrate_lru_hit_pct
    M("{sim|zipf}.calibrated.capacity_objects", "tokens"),
    M("{sim|zipf}.calibrated.size_fraction_pct", "% of distinct"),
    M(
        "{sim|zipf}.calibrated.{lru|lfu|lru-2|lru-3|lru-5|arc|s3fifo|wtinylfu|hybrid|opt|random}.hit_rate_pct",
        "%",
        "higher",
    ),
    M(
        "{sim|zipf}.calibrated.{lru|lfu|lru-2|lru-3|lru-5|arc|s3fifo|wtinylfu|hybrid|opt|random}.long_tail_pct",
        "%",
        "higher",
    ),
    # ... the hybrid's LRU-K stand-in there, and the stand-ins' known-sequence instruments
    M("{sim|zipf}.calibrated.standin.lruk.hit_rate_pct", "%", "higher"),
    M("{sim|zipf}.calibrated.standin.lruk.long_tail_pct", "%", "higher"),
    M("{sim|zipf}.calibrated.standin.lruk.capacity_objects", "tokens"),
    M("{sim|zipf}.standin.{lru|lruk}.known_sequence_agree_pct", "% of requests"),
    # ... and the pure-Python references of the source's policies there (drivers.REFERENCE_POLICIES)
    M("reference.{sim|zipf}.calibrated.{lru|lfu|hybrid}.hit_rate_pct", "%", "higher"),
    M("reference.{sim|zipf}.calibrated.{lru|lfu|hybrid}.long_tail_pct", "%", "higher"),
)

# eviction-crosscheck: each simulated policy (and libCacheSim's Belady, the shipped W-TinyLFU)
CROSSCHECK = (
    M("crosscheck.mismatched_pairs", "pairs", "lower"),
    M("crosscheck.pairs", "pairs"),
    M(
        "crosscheck.{lru|lfu|lru-2|lru-3|lru-5|arc|s3fifo|wtinylfu|hybrid|opt|belady-lib|wtinylfu-shipped}"
        ".differing_requests",
        "requests",
        "lower",
    ),
)

# eviction-redis and eviction-redis-cluster: a replayed configuration is named by its Redis
# maxmemory-policy (redis_replay.REAL_POLICIES), then by its knobs that differ from Redis's
# defaults, {knobs} (RunSpec.label: allkeys-lru.s10, allkeys-lfu.dt0.lf0)
POLICY = "{allkeys-lru|allkeys-lfu|allkeys-random|volatile-lru|volatile-lfu|volatile-ttl|volatile-random|noeviction}"
PER_RUN = (  # (metric, unit, better) of every configuration
    ("hit_rate_pct", "%", "higher"),
    ("long_tail_pct", "%", "higher"),
    ("rps", "req/s", "higher"),
    ("keys_held", "keys", None),
    ("evicted_keys", "keys", None),
    ("refused_sets", "requests", None),
    ("idle_time_max_s", "s", None),
    ("gap_to_exact_lru_pp", "pp", None),
    ("gap_to_exact_lfu_pp", "pp", None),
)


def _runs(pre: str, policy: str, per_run: tuple) -> tuple[M, ...]:
    """`{pre}.<policy>.<metric>` and `{pre}.<policy>.{knobs}.<metric>` of each metric of `per_run`."""
    return tuple(
        M(f"{pre}.{run}.{name}", unit, better)
        for name, unit, better in per_run
        for run in (policy, policy + ".{knobs}")
    )


REDIS = (
    *_runs("redis", POLICY, PER_RUN),
    # the replay client's own count of hits (the reference of INFO's)
    *_runs("reference.redis", POLICY, (("hit_rate_pct", "%", "higher"),)),
    # the size where exact LRU first hits calibrate_lru_hit_pct
    M("redis.calibrated.capacity_objects", "keys"),
    # the LRU stand-in's recency probe (the allkeys-lru run, maxmemory-samples = standin_lru_samples)
    *_runs("redis", "allkeys-lru", (("known_recency_kept_pct", "%", None), ("known_recency_idle_kept_pct", "%", None))),
)

REDIS_CLUSTER = (
    *_runs("cluster", POLICY, PER_RUN),
    *_runs("reference.cluster", POLICY, (("hit_rate_pct", "%", "higher"),)),
    M("cluster.calibrated.capacity_objects", "keys"),
)
