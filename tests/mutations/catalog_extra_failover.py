"""More mutations of the failover suite (claim C11b): one for the ledger check that the first
catalog (catalog_failover.py) names no mutation for (issue 39, "done when": every check's row
names the mutations that break it).

The partition case cuts a host's link on the simulated lab (network namespaces, infra/lab-sim):
where the lab is not up the case is skipped with the reason (the mutation with it). With the
lab up it ran here in about 40 s (plain and no-cut, one cut each).
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

PARTITION = "harness/experiments/failover/partition.py"

MUTATIONS = [
    Mutation(
        name="failover/partition-role-probe-says-replica",
        claim="C11b",
        kind="broken",
        what="the probe after the heal calls the cut-off primary a replica whatever role it reports (the role "
        "not compared); the check has no instrument by design, so its mechanism-off run (link left up) "
        "must catch it as not attributable",
        edits=(
            Edit(
                PARTITION,
                (
                    '                1 if c.info("replication").get("role") == "slave" else 0,\n'
                    '                "bool",\n'
                    '                note="the cut-off primary after the heal",\n'
                ),
                '                1 if c.info("replication").get("role") else 0, "bool", note="the cut-off primary after the heal"\n',
            ),
        ),
        run="failover/partition",
        checks=("failover/partition plain.old_primary_is_replica",),
        sets=("partition.variants=[plain]", "partition.controls=[no-cut]"),
        timeout_s=600,
    ),
]
