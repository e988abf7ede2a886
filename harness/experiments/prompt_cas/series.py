"""The prompt-cas suite's series: declared once, with its columns' kinds and units, for the
driver that writes it and the view that reads it."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

# One row per update rule: what the writers were told against the final read-back, and what the
# readers saw. A mix-up count read is None where not every reader made enough reads (not measured).
# The exercise columns (acknowledged and conflicting writes, reads of new writes) show that the
# situations the zeros are about arose. Its note (writers, readers, pairs and seconds per rule) is
# given by the driver.
RULES = SeriesShape(
    "rules",
    (
        Column("rule", "text"),
        Column("attempts", "int"),
        Column("applied", "int"),
        Column("applied_pct", unit="%"),
        Column("lost_updates", "int"),
        Column("unjustified_refusals", "int"),
        Column("refused_but_applied", "int"),
        Column("mixups_read", "int"),
        Column("reads", "int"),
        Column("replica_mixups_read", "int"),
        Column("replica_reads", "int"),
        Column("canary_mixups_read", "int"),
        Column("canary_lost_updates", "int"),
        Column("reader_min_reads", "int"),
        Column("reader_min_replica_reads", "int"),
        Column("reader_errors", "int"),
        Column("acked_writes", "int"),
        Column("conflicting_writes", "int"),
        Column("reads_of_new_writes", "int"),
        Column("replica_reads_of_new_writes", "int"),
        Column("mixups_final", "int"),
        Column("replica_diverged_keys", "int"),
        Column("errors", "int"),
        Column("update_p50_ms", unit="ms"),
        Column("update_p99_ms", unit="ms"),
        Column("told_applied", "int"),
        Column("vv_lost_updates", "int"),
    ),
)
