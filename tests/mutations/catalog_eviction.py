"""Mutations of the eviction suite: claims C18 (hit rates and long-tail retention of LRU, LFU
and the LRU-K/LFU hybrid, simulated and on real Redis) and C19 (the head's share of accesses).

The simulate case at the local profile's size takes about 20 s a repetition here, the trace
case about 1 s, the redis case about 10 s (plus the run's cluster start).
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

SIM = "harness/experiments/eviction/simulate.py"
LRUK = "harness/experiments/lruk.py"  # the hybrid's loop (simulate.hybrid_hits calls it)
TRACES = "harness/experiments/eviction/traces.py"
DRIVERS = "harness/experiments/eviction/drivers.py"
REPLAY = "harness/experiments/eviction/redis_replay.py"
STANDIN = "harness/experiments/eviction/standin.py"
HYBRID_HIT = "eviction/simulate sim.calibrated.hybrid.hit_rate_pct"
HYBRID_TAIL = "eviction/simulate sim.calibrated.hybrid.long_tail_pct"
LFU_HIT = "eviction/simulate sim.calibrated.lfu.hit_rate_pct"
LFU_TAIL = "eviction/simulate sim.calibrated.lfu.long_tail_pct"
# the sweep's sizes cut to the calibrated one's neighbourhood and no requests/s timing: the
# calibrated checks are what these mutations break
SIM_SETS = ("simulate.policies=[lru,lfu,lru-2,hybrid]",)

MUTATIONS = [
    Mutation(
        name="eviction/hybrid-is-plain-lru",
        claim="C18", kind="stand-in",
        what="the LRU-K/LFU hybrid replaced by plain LRU (libCacheSim's LRU under the hybrid's name)",
        edits=(Edit(SIM, '    if name == "hybrid":\n        return hybrid_hits(ids, capacity, hybrid_k)',
                    '    if name == "hybrid":\n        return lib_hits("lru", ids, nxt, capacity)'),),
        run="eviction/simulate", checks=(HYBRID_HIT, HYBRID_TAIL), sets=SIM_SETS, fast=True, timeout_s=240),
    Mutation(
        name="eviction/lfu-is-plain-lru",
        claim="C18", kind="stand-in",
        what="LFU replaced by plain LRU (libCacheSim's LRU class under LFU's name)",
        edits=(Edit(SIM, '    "lfu": ("LFU", {}),', '    "lfu": ("LRU", {}),'),),
        run="eviction/simulate", checks=(LFU_HIT, LFU_TAIL), sets=SIM_SETS, timeout_s=240),
    Mutation(
        name="eviction/hybrid-forgets-counts",
        claim="C18", kind="broken",
        what="the hybrid's simulator forgets an evicted key's access count (the LFU admission's history), "
             "so a returning key competes as new",
        edits=(Edit(LRUK, "                drop(victim)\n",
                    "                drop(victim)\n                if count is not None:\n"
                    "                    del count[victim]\n"),),
        run="eviction/simulate", checks=(HYBRID_HIT, HYBRID_TAIL), sets=SIM_SETS, timeout_s=240),
    Mutation(
        name="eviction/hit-counter-blinded",
        claim="C18", kind="blinded",
        what="the hit counter sees no hit: every policy's hit rate reads 0",
        edits=(Edit(TRACES, "    hr = 100.0 * hits.mean()\n", "    hr = 0.0 * hits.mean()\n"),),
        run="eviction/simulate", checks=(HYBRID_HIT, LFU_HIT), sets=SIM_SETS, fast=True, timeout_s=240),
    Mutation(
        name="eviction/redis-lfu-is-lru",
        claim="C18", kind="stand-in",
        what="the redis-server of the allkeys-lfu run is configured with allkeys-lru (its label kept)",
        edits=(Edit(REPLAY, '        return {"maxmemory-policy": self.policy, **self.knobs}',
                    '        return {"maxmemory-policy": self.policy.replace("lfu", "lru"), **self.knobs}'),),
        run="eviction/redis", checks=("eviction/redis redis.allkeys-lfu.hit_rate_pct",),
        sets=("redis.runs=[allkeys-lru,allkeys-lfu,allkeys-random]",), timeout_s=240),
    # issue 52: each stand-in quietly made weaker in code; its own instrument must see it
    Mutation(
        name="eviction/lru-standin-is-fifo",
        claim="C18", kind="weakened",
        what="the plain-LRU stand-in of LFU and the hybrid evicts first-in first-out (libCacheSim's FIFO under "
             "LRU's name): a weaker stand-in that hits less, so a policy beats it more easily",
        edits=(Edit(SIM, '    "lru": ("LRU", {}),', '    "lru": ("FIFO", {}),'),),
        run="eviction/simulate", checks=(LFU_HIT, LFU_TAIL, HYBRID_HIT, HYBRID_TAIL), sets=SIM_SETS, timeout_s=240),
    Mutation(
        name="eviction/lruk-standin-is-lru",
        claim="C18", kind="weakened",
        what="the hybrid's LRU-K stand-in quietly run with K=1 (plain LRU) whatever its parameter says",
        edits=(Edit(STANDIN, '    return simulate.lib_hits_with("LRUK", {"k": int(k)}, ids, capacity)',
                    '    return simulate.lib_hits_with("LRUK", {"k": 1}, ids, capacity)'),),
        run="eviction/simulate", checks=(HYBRID_HIT,), sets=SIM_SETS, timeout_s=240),
    Mutation(
        name="eviction/redis-lru-standin-is-random",
        claim="C18", kind="weakened",
        what="the redis-server of the allkeys-lru stand-in is configured with allkeys-random (its label and "
             "maxmemory-samples kept)",
        edits=(Edit(REPLAY, '        return {"maxmemory-policy": self.policy, **self.knobs}',
                    '        return {"maxmemory-policy": self.policy.replace("allkeys-lru", "allkeys-random"), '
                    '**self.knobs}'),),
        run="eviction/redis", checks=("eviction/redis redis.allkeys-lfu.hit_rate_pct",),
        sets=("redis.runs=[allkeys-lru,allkeys-lfu,allkeys-random]",), timeout_s=240),
    Mutation(
        name="eviction/redis-policy-quietly-random",
        claim="C18", kind="blinded",
        what="the harness's setting of the policy quietly gives every allkeys-* redis-server allkeys-random (the "
             "runs keep their labels): Redis's LRU is close to random at replay speed, so only the policy read "
             "back from the servers shows that no server ran LRU or LFU",
        edits=(Edit(REPLAY, '        return {"maxmemory-policy": self.policy, **self.knobs}',
                    '        return {"maxmemory-policy": "allkeys-random" if self.policy.startswith("allkeys-") '
                    'else self.policy, **self.knobs}'),),
        run="eviction/redis", checks=("eviction/redis redis.allkeys-lru.hit_rate_pct",
                                      "eviction/redis redis.allkeys-lfu.hit_rate_pct"),
        sets=("redis.runs=[allkeys-lru,allkeys-lfu,allkeys-random]",), timeout_s=240),
    Mutation(
        name="eviction/trace-unskewed",
        claim="C19", kind="broken",
        what="the measured token trace replaced by uniform draws over its own tokens (the long tail gone)",
        edits=(Edit(DRIVERS, '    if not p["skew"]:  # the mechanism removed',
                    '    if True:  # the mechanism removed'),),
        run="eviction/trace", checks=("eviction/trace real.head_share_pct",), timeout_s=180),
    Mutation(
        name="eviction/head-is-least-frequent",
        claim="C19", kind="blinded",
        what="the head definition picks the least frequent tokens instead of the most frequent",
        edits=(Edit(TRACES, "    order = np.lexsort((uniq, -counts))  # by count descending, then id ascending",
                    "    order = np.lexsort((uniq, counts))  # by count descending, then id ascending"),),
        run="eviction/trace", checks=("eviction/trace real.head_share_pct",), timeout_s=180),
]
