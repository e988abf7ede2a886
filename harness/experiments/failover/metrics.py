"""The metrics the failover drivers report, per variant or control of a run: acknowledged writes
lost, outage per slot range, failover times, the cluster after the run (measure.py, scenario.py)."""

from harness.base.metrics_model import MetricDecl as M

# kill.py's variants and controls (VARIANTS, CONTROLS)
KILL = "{plain|wait|min-replicas|no-kill|no-replicas|no-nodes-conf}"
# the arms that end with a whole 3 + 3 cluster (no-replicas runs on a 3 + 0 one) and those that
# restart the killed node (no-kill kills nothing, no-replicas' node comes back as an empty primary)
KILL_WHOLE = "{plain|wait|min-replicas|no-kill|no-nodes-conf}"
KILL_REJOIN = "{plain|wait|min-replicas|no-nodes-conf}"
# partition.py's variants and control
CUT = "{plain|min-replicas|no-cut}"

PRIMARY_KILLED = (
    # acknowledged writes, classified after the heal (measure.loss_metrics)
    M(KILL + ".writes", "writes"),
    M(KILL + ".acked", "writes"),
    M(KILL + ".lost_acked", "writes", "lower"),
    M(KILL + ".lost_acked_pct", "%", "lower"),
    M(KILL + ".overwritten", "writes"),
    M(KILL + ".unacked_present", "writes"),
    M("wait.unreplicated", "writes"),
    # client-side outage per slot range after the kill (measure.outage_metrics)
    M(KILL + ".{killed_range|other_ranges}.outage_s", "s", "lower"),
    M(KILL + ".{killed_range|other_ranges}.recovered_s", "s", "lower"),
    M(KILL + ".{killed_range|other_ranges}.error_pct", "%", "lower"),
    M(KILL + ".{killed_range|other_ranges}.sent", "writes"),
    M(KILL + ".served_at_end_pct", "%", "higher"),
    # the kill to PFAIL, FAIL and the promotion in the other nodes' views
    M(KILL + ".pfail_s", "s", "lower"),
    M(KILL + ".fail_s", "s", "lower"),
    M(KILL + ".promoted_s", "s", "lower"),
    # the traffic itself
    M(KILL + ".late_pct", "%", "lower"),
    M(KILL + ".reads_missing", "reads", "lower"),
    # the cluster after the run, and the killed node restarted
    M(KILL_WHOLE + ".healthy_after", "bool", "higher"),
    M(KILL + ".slot_views_agree", "bool", "higher"),
    M(KILL_REJOIN + ".rejoined_as_replica", "bool", "higher"),
    M(KILL_REJOIN + ".rejoin_s", "s", "lower"),
)

PARTITION = (
    # acknowledged writes, classified after the heal: all of them, and the cut-off side's writer's
    M(CUT + ".writes", "writes"),
    M(CUT + ".acked", "writes"),
    M(CUT + ".lost_acked", "writes", "lower"),
    M(CUT + ".lost_acked_pct", "%", "lower"),
    M(CUT + ".overwritten", "writes"),
    M(CUT + ".unacked_present", "writes"),
    M(CUT + ".minority.acked", "writes"),
    M(CUT + ".minority.lost_acked", "writes", "lower"),
    M(CUT + ".minority.acked_during_cut", "writes"),
    M(CUT + ".minority.accepting_s", "s", "lower"),
    # client-side outage per slot range after the cut (measure.outage_metrics)
    M(CUT + ".{cut_range|other_ranges}.outage_s", "s", "lower"),
    M(CUT + ".{cut_range|other_ranges}.recovered_s", "s", "lower"),
    M(CUT + ".{cut_range|other_ranges}.error_pct", "%", "lower"),
    M(CUT + ".{cut_range|other_ranges}.sent", "writes"),
    M(CUT + ".served_at_end_pct", "%", "higher"),
    # the cut to PFAIL, FAIL and the promotion in the other nodes' views
    M(CUT + ".pfail_s", "s", "lower"),
    M(CUT + ".fail_s", "s", "lower"),
    M(CUT + ".promoted_s", "s", "lower"),
    # the traffic itself
    M(CUT + ".late_pct", "%", "lower"),
    M(CUT + ".reads_missing", "reads", "lower"),
    # the cluster after the heal
    M(CUT + ".healthy_after", "bool", "higher"),
    M(CUT + ".slot_views_agree", "bool", "higher"),
    M(CUT + ".old_primary_is_replica", "bool"),
)
