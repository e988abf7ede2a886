"""Mutations of the cold-start suite: claims C8 (a cold node's store load grows ~1.8x per
second) and C9 (the store pool's occupancy after a flush in a 10-primary cluster).

C8's checks need the source's 20-primary cluster with a cold node serving 15% of the keys:
on the local 3-primary target they are `not comparable here` and its mutations are skipped
with that reason. C9's occupancy check runs at one size (10 primaries + 10 replicas, no pool
sweep): about 40-50 s here.
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

STORE = "harness/experiments/cold_start/store.py"
TRAFFIC = "harness/experiments/cold_start/traffic.py"
DRIVERS = "harness/experiments/cold_start/drivers.py"
GROWTH = (
    "cold-start/flush-one-primary cold_node.excess_growth_per_s",
    "cold-start/flush-one-primary cold_node.excess_attempts_growth_per_s",
)
OCCUPANCY = ("cold-start/pool-by-cluster-size p10.pool.peak_occupancy_pct",)
P10_ONLY = ("pool-by-cluster-size.primaries=[10]", "pool-by-cluster-size.pool_sweep=[]")

MUTATIONS = [
    Mutation(
        name="cold-start/retry-policy-ignored",
        claim="C8",
        kind="broken",
        what="the store reader makes one attempt whatever the retry policy says (the retries the growth is "
        "blamed on never happen)",
        edits=(Edit(STORE, "        for attempt in range(1 + self.retries):", "        for attempt in range(1):"),),
        run="cold-start/flush-one-primary",
        checks=GROWTH,
        timeout_s=300,
    ),
    Mutation(
        name="cold-start/attempts-counted-as-misses",
        claim="C8",
        kind="blinded",
        what="the per-second store attempts of the cold node's misses count each miss once, its retries unseen",
        edits=(
            Edit(
                DRIVERS,
                '"cold_attempts": counting.weighted_per_second([(r[0], r[4]) for r in cold_miss]',
                '"cold_attempts": counting.weighted_per_second([(r[0], 1) for r in cold_miss]',
            ),
        ),
        run="cold-start/flush-one-primary",
        checks=GROWTH[1:],
        timeout_s=300,
    ),
    Mutation(
        name="cold-start/busy-ends-at-acquire",
        claim="C9",
        kind="blinded",
        what="the pool logs a connection's busy interval as ending when it was acquired: the occupancy meter "
        "sees no connection-time at all",
        edits=(
            Edit(
                STORE,
                '                log.add("busy", (t_got, time.monotonic()))',
                '                log.add("busy", (t_got, t_got))',
            ),
        ),
        run="cold-start/pool-by-cluster-size",
        checks=OCCUPANCY,
        sets=P10_ONLY,
        fast=True,
        timeout_s=400,
    ),
    Mutation(
        name="cold-start/cache-aside-never-fills",
        claim="C9",
        kind="broken",
        what="the cache-aside client serves the store's value but never SETs it: every request keeps missing, "
        "flushed or not",
        edits=(Edit(TRAFFIC, "                await c.set(name, value, ex=ttl_s)", "                pass"),),
        run="cold-start/pool-by-cluster-size",
        checks=OCCUPANCY,
        sets=P10_ONLY,
        timeout_s=400,
    ),
]
