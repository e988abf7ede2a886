"""More mutations of the eviction suite (claim C18): one for each ledger check that the first
catalog (catalog_eviction.py) names no mutation for (issue 39, "done when": every check's row
names the mutations that break it)."""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

SIM = "harness/mechanisms/cache_policies/sim.py"
REPLAY = "harness/experiments/eviction/redis_replay.py"
# the policies of the source's ordering and the calibrated checks; random eviction (the control)
# is always simulated
SIM_SETS = ("simulate.policies=[lru,lfu,hybrid]",)

MUTATIONS = [
    Mutation(
        name="eviction/lru-is-fifo",
        claim="C18",
        kind="stand-in",
        what="LRU replaced by FIFO (libCacheSim's FIFO class under LRU's name): eviction by insertion order, "
        "no recency",
        edits=(Edit(SIM, '    "lru": ("LRU", {}),', '    "lru": ("FIFO", {}),'),),
        run="eviction/simulate",
        checks=("eviction/simulate sim.calibrated.lru.long_tail_pct",),
        sets=SIM_SETS,
        timeout_s=300,
    ),
    Mutation(
        name="eviction/hybrid-is-lfu",
        claim="C18",
        kind="stand-in",
        what="the LRU-K/LFU hybrid replaced by libCacheSim's plain LFU under the hybrid's name",
        edits=(
            Edit(
                SIM,
                "        return hybrid_hits(ids, capacity, hybrid_k)\n",
                '        return lib_hits("lfu", ids, nxt, capacity)  # mutation\n',
            ),
        ),
        run="eviction/simulate",
        checks=("eviction/simulate sim.ordering_sizes_pct",),
        sets=SIM_SETS,
        timeout_s=300,
    ),
    Mutation(
        name="eviction/redis-lru-is-random",
        claim="C18",
        kind="stand-in",
        what="the redis-server of the allkeys-lru run is configured with allkeys-random (its label kept)",
        edits=(
            Edit(
                REPLAY,
                '        return {"maxmemory-policy": self.policy, **self.knobs}',
                '        return {"maxmemory-policy": self.policy.replace("lru", "random"), **self.knobs}',
            ),
        ),
        run="eviction/redis",
        checks=("eviction/redis redis.allkeys-lru.hit_rate_pct",),
        sets=("redis.runs=[allkeys-lru,allkeys-random]",),
        timeout_s=300,
    ),
]
