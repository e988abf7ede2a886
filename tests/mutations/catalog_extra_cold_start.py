"""More mutations of the cold-start suite (claim C9): one for the ledger check that the first
catalog (catalog_cold_start.py) names no mutation for (issue 39, "done when": every check's
row names the mutations that break it).

p20.pool.peak_offered_pct needs a measured 20-primary cluster (measured_20_primaries): on the
local target its verdict is `not comparable here` and the mutation is skipped; it is judged
on the lab.
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

TRAFFIC = "harness/experiments/cold_start/traffic.py"

MUTATIONS = [
    Mutation(
        name="cold-start/flush-flushes-nothing",
        claim="C9",
        kind="broken",
        what="the flush of the chosen primaries counts the keys and deletes nothing (FLUSHALL replaced by DBSIZE): "
        "the cluster stays warm and the pool is never asked for more than its warm share "
        "(judged on the lab: the check needs 20 primaries)",
        edits=(
            Edit(
                TRAFFIC,
                "            c.flushall()\n",
                "            c.dbsize()  # mutation: the keys counted, nothing flushed\n",
            ),
        ),
        run="cold-start/pool-by-cluster-size",
        checks=("cold-start/pool-by-cluster-size p20.pool.peak_offered_pct",),
        sets=("pool-by-cluster-size.pool_sweep=[]",),
        timeout_s=600,
    ),
]
