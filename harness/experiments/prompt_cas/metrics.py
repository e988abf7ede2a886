"""The metrics the prompt-cas driver reports: per update rule what the writers' histories, the readers
and the read-back observed (drivers.rule_metrics), the mechanism's own numbers, the counters' instrument."""

from harness.base.metrics_model import MetricDecl as M

RULE = "{plain|atomic|as-written|incremented|equal}"  # drivers.MODES

RULES = (
    # updates: the writers' histories against the final read-back
    M(RULE + ".attempts", "updates"),
    M(RULE + ".acked_writes", "updates"),
    M(RULE + ".refused_writes", "updates"),
    M(RULE + ".conflicting_writes", "updates"),
    M(RULE + ".conflicts_refused", "updates"),
    M(RULE + ".applied_pct", "%", "higher"),
    M(RULE + ".lost_updates", "updates", "lower"),
    M(RULE + ".unjustified_refusals", "updates", "lower"),
    M(RULE + ".refused_but_applied", "updates", "lower"),
    M(RULE + ".errors", "updates", "lower"),
    M(RULE + ".update_p50_ms", "ms", "lower"),
    M(RULE + ".update_p99_ms", "ms", "lower"),
    # pairs read on the primaries and (READONLY) on the replicas, checked for mix-ups
    M(RULE + ".reads", "reads"),
    M(RULE + ".replica_reads", "reads"),
    M(RULE + ".reads_of_new_writes", "reads"),
    M(RULE + ".replica_reads_of_new_writes", "reads"),
    M(RULE + ".mixups_read", "reads", "lower"),
    M(RULE + ".replica_mixups_read", "reads", "lower"),
    M(RULE + ".reader_min_reads", "reads", "higher"),
    M(RULE + ".reader_min_replica_reads", "reads", "higher"),
    M(RULE + ".reader_errors", "readers", "lower"),
    M(RULE + ".replica_connections_not_replica", "connections", "lower"),
    # the pairs read back after the rule, on the primaries and on every replica
    M(RULE + ".foreign_final_keys", "keys", "lower"),
    M(RULE + ".mixups_final", "keys", "lower"),
    M(RULE + ".replica_mixups_final", "keys", "lower"),
    M(RULE + ".replica_diverged_keys", "keys", "lower"),
    M(RULE + ".replica_copies_read_back", "keys"),
    # the canary pair (mixed on purpose, one write lost on purpose): what the checks must see
    M(RULE + ".canary_reads", "reads"),
    M(RULE + ".canary_replica_reads", "reads"),
    M(RULE + ".canary_mixups_read", "reads"),
    M(RULE + ".canary_replica_mixups_read", "reads"),
    M(RULE + ".canary_lost_updates", "updates"),
    M(RULE + ".canary_unjustified_refusals", "updates"),
    M(RULE + ".canary_refused_but_applied", "updates"),
    # the mechanism's own bookkeeping, shown and never judged
    M("mechanism." + RULE + ".told_applied_pct", "%"),
    M("mechanism." + RULE + ".vv_lost_updates", "updates"),
    # the exercise counters' instrument: known histories each counts right (known.COUNTERS), and all of them
    M(
        "instrument.{conflicting_writes|conflicts_refused|reads_of_new_writes|replica_reads_of_new_writes"
        "|acked_writes|refused_writes}_known_pct",
        "%",
        "higher",
    ),
    M("instrument.exercise_counters_known_pct", "%", "higher"),
)
