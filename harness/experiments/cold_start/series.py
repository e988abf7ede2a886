"""The cold-start suite's series: each declared once, with its columns' kinds and units, for the
drivers that write them and the view that reads them."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# cold-start-flush: one row per second of every run (flush, control, no-retry).
FLUSH_SECONDS = SeriesShape(
    "per_second",
    (
        Column("run", "text"),
        Column("second", "int"),
        Column("requests", "int", "req/s"),
        Column("hit_rate_pct", unit="%"),
        Column("store_queries", "int", "queries/s"),
        Column("cold_misses", "int", "misses/s"),
        Column("cold_attempts", unit="attempts/s"),
        Column("cold_store_queries", "int", "queries/s"),
        Column("cold_refused", "int", "reads/s"),
        Column("refused", "int", "reads/s"),
        Column("timeouts", "int", "queries/s"),
        Column("failed", "int", "reads/s"),
        Column("occupancy_pct", unit="%"),
        Column("offered_pct", unit="%"),
    ),
    "second 0 starts at the flush (the control: at the same point of the schedule)",
)

# cold-start-flush: the cold node's store queries per second after the flush, minus the control's.
EXCESS = SeriesShape(
    "excess",
    (
        Column("second", "int"),
        Column("flush_minus_control", "int", "queries/s"),
        Column("noretry_minus_control", "int", "queries/s"),
    ),
    "the cold node's store queries per second after the flush, minus the paired control's",
)

# cold-start-pool: one row per second of every run at every cluster size.
POOL_SECONDS = SeriesShape(
    "per_second",
    (
        Column("primaries", "int"),
        Column("cold_primaries", "int"),
        Column("run", "text"),
        Column("second", "int"),
        Column("requests", "int", "req/s"),
        Column("store_queries", "int", "queries/s"),
        Column("refused", "int", "reads/s"),
        Column("timeouts", "int", "queries/s"),
        Column("failed", "int", "reads/s"),
        Column("occupancy_pct", unit="%"),
        Column("offered_pct", unit="%"),
    ),
    "second 0 starts at the flush; pool occupancy is the mean over the second",
)

# cold-start-pool: the flush at one cluster size with pools of several sizes.
POOL_SWEEP = SeriesShape(
    "pool_sweep",
    (
        Column("primaries", "int"),
        Column("pool_size", "int"),
        Column("capacity_reads_per_s", unit="reads/s"),
        Column("peak_occupancy_pct", unit="%"),
        Column("refused", "int", "reads"),
    ),
    "the flush at one cluster size with pools of several sizes: the level of occupancy is the pool's, the "
    "source gives no pool size",
)
