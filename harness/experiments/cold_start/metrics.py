"""The metrics the cold-start drivers report: the runs' health, the warm-up, and the store load after
the flush in each run (flush, control, no-retry) or at each cluster size and pool size."""

from harness.base.metrics_model import MetricDecl as M

PAIRED = "{control|noretry}."  # the flush's paired runs (no flush; the flush with the retry policy off)
SIZE = "p{primaries}."  # the flush at one cluster size (POOL_PARAMS primaries)
CONTROL_SIZE = "control.p{primaries}."  # its no-flush control

FLUSH = (
    # the open-loop schedule and the cluster's errors, all runs
    M("requests", "requests"),
    M("errors", "requests", "lower"),
    M("late_pct", "%", "lower"),
    M("late_max_ms", "ms", "lower"),
    # the warm-up before the flush
    M("warm.seconds", "s"),
    M("warm.steady", ""),
    M("warm.measured_spread_pp", "pp"),
    # the instrument: the empty cluster's first second of the warm-up (every request a miss)
    M("warmup.attempts_per_miss", "x"),
    M("warmup.refused_first_s", "reads"),
    M("warmup.occupancy_first_s_pct", "%"),
    M("warmup.offered_first_s_pct", "%"),
    # after the flush: the flushed run
    M("cold_node.store_qps.{before|first_s|peak}", "queries/s"),
    M("cold_node.misses.{before|first_s}", "misses/s"),
    M("cold_node.attempts_per_miss", "x"),
    M("cold_node.store_attempts", "attempts"),
    M("store.timeouts", "reads"),
    M("store.failed_reads", "reads"),
    M("pool.peak_occupancy_pct", "%"),
    # ... and the same in its paired runs
    M(PAIRED + "cold_node.store_qps.{before|first_s|peak}", "queries/s"),
    M(PAIRED + "cold_node.misses.{before|first_s}", "misses/s"),
    M(PAIRED + "cold_node.attempts_per_miss", "x"),
    M(PAIRED + "cold_node.store_attempts", "attempts"),
    M(PAIRED + "store.timeouts", "reads"),
    M(PAIRED + "store.failed_reads", "reads"),
    M(PAIRED + "pool.peak_occupancy_pct", "%"),
    # the cold node's store queries and attempts, flush minus control (and no-retry minus control)
    M("cold_node.excess_first_s", "queries/s"),
    M("cold_node.excess_growth_per_s", "x/s"),
    M("cold_node.excess_queries", "queries"),
    M("noretry.cold_node.excess_growth_per_s", "x/s"),
    M("noretry.cold_node.excess_queries", "queries"),
    M("cold_node.excess_attempts_first_s", "attempts/s"),
    M("cold_node.excess_attempts_growth_per_s", "x/s"),
    M("noretry.cold_node.excess_attempts_first_s", "attempts/s"),
    M("noretry.cold_node.excess_attempts_growth_per_s", "x/s"),
)

POOL = (
    # the open-loop schedule and the cluster's errors, all runs at every size
    M("requests", "requests"),
    M("errors", "requests", "lower"),
    M("late_pct", "%", "lower"),
    M("late_max_ms", "ms", "lower"),
    # per cluster size, the flushed run: its warm-up and the empty cluster's first second
    M(SIZE + "warm.seconds", "s"),
    M(SIZE + "warm.steady", ""),
    M(SIZE + "warm.measured_spread_pp", "pp"),
    M(SIZE + "warmup.attempts_per_miss", "x"),
    M(SIZE + "warmup.refused_first_s", "reads"),
    M(SIZE + "warmup.occupancy_first_s_pct", "%"),
    M(SIZE + "warmup.offered_first_s_pct", "%"),
    # ... the pool and the store after the flush
    M(SIZE + "pool.peak_occupancy_pct", "%"),
    M(SIZE + "pool.peak_offered_pct", "%"),
    M(SIZE + "pool.refused", "reads"),
    M(SIZE + "store_qps.peak", "queries/s"),
    M(SIZE + "store.failed_reads", "reads"),
    # ... the same in its no-flush control
    M(CONTROL_SIZE + "pool.peak_occupancy_pct", "%"),
    M(CONTROL_SIZE + "pool.peak_offered_pct", "%"),
    M(CONTROL_SIZE + "pool.refused", "reads"),
    M(CONTROL_SIZE + "store_qps.peak", "queries/s"),
    M(CONTROL_SIZE + "store.failed_reads", "reads"),
    # ... and the flush again with each other pool size of pool_sweep (at sweep_primaries)
    M(SIZE + "pool{connections}.peak_occupancy_pct", "%"),
    M(SIZE + "pool{connections}.peak_offered_pct", "%"),
    M(SIZE + "pool{connections}.refused", "reads"),
)
