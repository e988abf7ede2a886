"""The failover suite's drivers (the runs: kill.py and partition.py, on scenario.py's skeleton)."""

from __future__ import annotations

from harness.experiments.failover import kill, metrics, partition
from harness.model.driver_contract import CaseContext, Record, register


@register(
    "failover-primary-killed",
    params=kill.PARAMS,
    needs="cluster",
    check=kill.check,
    metrics=metrics.PRIMARY_KILLED,
    description="kill -9 of one primary of the case's own 3 + 3 cluster under writers: failover times, "
    "outage, lost acknowledged writes, rejoin",
)
def primary_killed(ctx: CaseContext) -> Record:
    return kill.run(ctx)


@register(
    "failover-partition",
    params=partition.PARAMS,
    needs="cluster",
    check=partition.check,
    metrics=metrics.PARTITION,
    description="one primary's simulated host cut off (link down) with a writer on its side, then healed: "
    "acknowledged-then-lost writes, how long the minority accepted them",
)
def partitioned(ctx: CaseContext) -> Record:
    return partition.run(ctx)
