"""Mutations of the eviction suite: claims C18 (hit rates and long-tail retention of LRU, LFU
and the LRU-K/LFU hybrid, simulated and on real Redis) and C19 (the head's share of accesses).

The simulate case at the local profile's size takes about 20 s a repetition here, the trace
case about 1 s, the redis case about 10 s (plus the run's cluster start).
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

SIM = "harness/mechanisms/cache_policies/sim.py"
LRUK = "harness/mechanisms/cache_policies/lruk.py"  # the hybrid's loop (simulate.hybrid_hits calls it)
TRACES = "harness/mechanisms/cache_policies/traces.py"
CALIBRATED = "harness/experiments/eviction/calibrated_size.py"  # the simulate case at the calibrated size
TRACE_CASE = "harness/experiments/eviction/trace_case.py"
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
        claim="C18",
        kind="stand-in",
        what="the LRU-K/LFU hybrid replaced by plain LRU (libCacheSim's LRU under the hybrid's name)",
        edits=(
            Edit(
                SIM,
                '    if name == "hybrid":\n        return hybrid_hits(ids, capacity, hybrid_k)',
                '    if name == "hybrid":\n        return lib_hits("lru", ids, nxt, capacity)',
            ),
        ),
        run="eviction/simulate",
        checks=(HYBRID_HIT, HYBRID_TAIL),
        sets=SIM_SETS,
        fast=True,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/lfu-is-plain-lru",
        claim="C18",
        kind="stand-in",
        what="LFU replaced by plain LRU (libCacheSim's LRU class under LFU's name)",
        edits=(Edit(SIM, '    "lfu": ("LFU", {}),', '    "lfu": ("LRU", {}),'),),
        run="eviction/simulate",
        checks=(LFU_HIT, LFU_TAIL),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/hybrid-forgets-counts",
        claim="C18",
        kind="broken",
        what="the hybrid's simulator forgets an evicted key's access count (the LFU admission's history), "
        "so a returning key competes as new",
        edits=(
            Edit(
                LRUK,
                "                drop(victim)\n",
                "                drop(victim)\n                if count is not None:\n"
                "                    del count[victim]\n",
            ),
        ),
        run="eviction/simulate",
        checks=(HYBRID_HIT, HYBRID_TAIL),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/hit-counter-blinded",
        claim="C18",
        kind="blinded",
        what="the hit counter sees no hit: every policy's hit rate reads 0",
        edits=(Edit(TRACES, "    hr = 100.0 * hits.mean()\n", "    hr = 0.0 * hits.mean()\n"),),
        run="eviction/simulate",
        checks=(HYBRID_HIT, LFU_HIT),
        sets=SIM_SETS,
        fast=True,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/redis-lfu-is-lru",
        claim="C18",
        kind="stand-in",
        what="the redis-server of the allkeys-lfu run is configured with allkeys-lru (its label kept)",
        edits=(
            Edit(
                REPLAY,
                '        return {"maxmemory-policy": self.policy, **self.knobs}',
                '        return {"maxmemory-policy": self.policy.replace("lfu", "lru"), **self.knobs}',
            ),
        ),
        run="eviction/redis",
        checks=("eviction/redis redis.allkeys-lfu.hit_rate_pct",),
        sets=("redis.runs=[allkeys-lru,allkeys-lfu,allkeys-random]",),
        timeout_s=240,
    ),
    # issue 52: each stand-in quietly made weaker in code; its own instrument must see it
    Mutation(
        name="eviction/lru-standin-is-fifo",
        claim="C18",
        kind="weakened",
        what="the plain-LRU stand-in of LFU and the hybrid evicts first-in first-out (libCacheSim's FIFO under "
        "LRU's name): a weaker stand-in that hits less, so a policy beats it more easily",
        edits=(Edit(SIM, '    "lru": ("LRU", {}),', '    "lru": ("FIFO", {}),'),),
        run="eviction/simulate",
        checks=(LFU_HIT, LFU_TAIL, HYBRID_HIT, HYBRID_TAIL),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/lruk-standin-is-lru",
        claim="C18",
        kind="weakened",
        what="the hybrid's LRU-K stand-in quietly run with K=1 (plain LRU) whatever its parameter says",
        edits=(
            Edit(
                STANDIN,
                '    return simulate.lib_run_with("LRUK", {"k": int(k)}, ids, capacity)',
                '    return simulate.lib_run_with("LRUK", {"k": 1}, ids, capacity)',
            ),
        ),
        run="eviction/simulate",
        checks=(HYBRID_HIT,),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/lruk-standin-smaller",
        claim="C18",
        kind="weakened",
        what="the hybrid's LRU-K stand-in quietly run at 80% of the calibrated size (a smaller cache hits less, so "
        "the hybrid beats it more easily); its known-sequence instrument runs at a size of its own and still "
        "reads 100%, so only the size read back from the stand-in's cache (fact standin_capacity_ratio) shows it",
        edits=(
            Edit(
                CALIBRATED,
                "    hits, ran_at = standin.lruk_standin_run(ids, max(1, int(round(cap * "
                'p["standin_capacity_ratio"]))), k)',
                "    hits, ran_at = standin.lruk_standin_run(ids, max(1, int(round(0.8 * cap * "
                'p["standin_capacity_ratio"]))), k)',
            ),
        ),
        run="eviction/simulate",
        checks=(HYBRID_HIT,),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/redis-lru-standin-is-random",
        claim="C18",
        kind="weakened",
        what="the redis-server of the allkeys-lru stand-in is configured with allkeys-random (its label and "
        "maxmemory-samples kept)",
        edits=(
            Edit(
                REPLAY,
                '        return {"maxmemory-policy": self.policy, **self.knobs}',
                '        return {"maxmemory-policy": self.policy.replace("allkeys-lru", "allkeys-random"), '
                "**self.knobs}",
            ),
        ),
        run="eviction/redis",
        checks=("eviction/redis redis.allkeys-lfu.hit_rate_pct",),
        sets=("redis.runs=[allkeys-lru,allkeys-lfu,allkeys-random]",),
        timeout_s=240,
    ),
    Mutation(
        name="eviction/redis-policy-quietly-random",
        claim="C18",
        kind="blinded",
        what="the harness's setting of the policy quietly gives every allkeys-* redis-server allkeys-random (the "
        "runs keep their labels): Redis's LRU is close to random at replay speed, so only the policy read "
        "back from the servers shows that no server ran LRU or LFU",
        edits=(
            Edit(
                REPLAY,
                '        return {"maxmemory-policy": self.policy, **self.knobs}',
                '        return {"maxmemory-policy": "allkeys-random" if self.policy.startswith("allkeys-") '
                "else self.policy, **self.knobs}",
            ),
        ),
        run="eviction/redis",
        checks=("eviction/redis redis.allkeys-lru.hit_rate_pct", "eviction/redis redis.allkeys-lfu.hit_rate_pct"),
        sets=("redis.runs=[allkeys-lru,allkeys-lfu,allkeys-random]",),
        timeout_s=240,
    ),
    Mutation(
        name="eviction/trace-unskewed",
        claim="C19",
        kind="broken",
        what="the measured token trace replaced by uniform draws over its own tokens (the long tail gone)",
        edits=(
            Edit(TRACE_CASE, '    if not p["skew"]:  # the mechanism removed', "    if True:  # the mechanism removed"),
        ),
        run="eviction/trace",
        checks=("eviction/trace real.head_share_pct",),
        timeout_s=180,
    ),
    Mutation(
        name="eviction/head-is-least-frequent",
        claim="C19",
        kind="blinded",
        what="the head definition picks the least frequent tokens instead of the most frequent",
        edits=(
            Edit(
                TRACES,
                "    order = np.lexsort((uniq, -counts))  # by count descending, then id ascending",
                "    order = np.lexsort((uniq, counts))  # by count descending, then id ascending",
            ),
        ),
        run="eviction/trace",
        checks=("eviction/trace real.head_share_pct",),
        timeout_s=180,
    ),
]

# ---- dependent: the reference (mechanisms/cache_policies/reference.py) quietly made to ask the simulator (issue 52) ----
# reference.run() hands a policy's trace to simulate.py (libCacheSim) or to lruk.py's fast loop and
# returns their hits as the reference's: the reference always agrees. The ledger's references name
# harness.mechanisms.cache_policies.reference, independent of simulate.py, drivers.py, lruk.py and
# libcachesim: the runner's record of what the reference module reaches makes them `inconclusive`.
REFERENCE = "harness/mechanisms/cache_policies/reference.py"
_RUN = '    """Feed a trace to a reference policy object; one bool (hit) per request."""\n'
LRU_TAIL = "eviction/simulate sim.calibrated.lru.long_tail_pct"


def _asks(cls: str, call: str) -> str:
    return (
        _RUN + f'    if type(policy).__name__ == "{cls}":  # mutation: the simulator answers for the reference\n'
        "        import numpy as np\n"
        f"        {call}\n"
        "        return [bool(h) for h in hits]\n"
    )


MUTATIONS += [
    Mutation(
        name="eviction/reference-lru-asks-libcachesim",
        claim="C18",
        kind="dependent",
        what="the reference's LRU hands the trace to simulate.py (libCacheSim's LRU) and returns its hits",
        edits=(
            Edit(
                REFERENCE,
                _RUN,
                _asks(
                    "RefLRU",
                    "from harness.mechanisms.cache_policies import sim as simulate\n"
                    '        hits = simulate.policy_hits("lru", np.asarray(ids), '
                    "np.asarray(nxt), policy.cap)",
                ),
            ),
        ),
        run="eviction/simulate",
        checks=(LRU_TAIL,),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/reference-lfu-asks-libcachesim",
        claim="C18",
        kind="dependent",
        what="the reference's LFU hands the trace to simulate.py (libCacheSim's LFU) and returns its hits",
        edits=(
            Edit(
                REFERENCE,
                _RUN,
                _asks(
                    "RefLFU",
                    "from harness.mechanisms.cache_policies import sim as simulate\n"
                    '        hits = simulate.policy_hits("lfu", np.asarray(ids), '
                    "np.asarray(nxt), policy.cap)",
                ),
            ),
        ),
        run="eviction/simulate",
        checks=(LFU_HIT, LFU_TAIL),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="eviction/reference-hybrid-uses-fast-loop",
        claim="C18",
        kind="dependent",
        what="the reference's hybrid runs lruk.py's fast loop (lruk_hits with LFU admission), the code it checks "
        "(as before the reference moved to lruk_reference.py)",
        edits=(
            Edit(
                REFERENCE,
                _RUN,
                _asks(
                    "RefHybrid",
                    "from harness.mechanisms.cache_policies.lruk import lruk_hits\n"
                    "        hits = lruk_hits([int(x) for x in ids], policy.cap, "
                    "policy.k, admit_lfu=True)",
                ),
            ),
        ),
        run="eviction/simulate",
        checks=(HYBRID_HIT, HYBRID_TAIL),
        sets=SIM_SETS,
        timeout_s=240,
    ),
    # the reference.* numbers are computed in reference.calibrated_rates (the driver only stores
    # them): here that function takes every policy's hits from the simulator the driver uses
    Mutation(
        name="eviction/reference-rates-from-the-driver",
        claim="C18",
        kind="dependent",
        what="the reference's calibrated rates take every policy's hits from the driver's simulator "
        "(simulate_case.simulate.policy_hits: libCacheSim and lruk.py's loop) instead of the pure-Python policies",
        edits=(
            Edit(
                REFERENCE,
                "        hits = run(policy, ids, nxt)\n",
                "        from harness.experiments.eviction import simulate_case  # mutation: the simulator answers\n"
                "        import numpy as np\n"
                "        hits = simulate_case.simulate.policy_hits(name, np.asarray(ids), np.asarray(nxt), capacity, "
                "hybrid_k).tolist()\n",
            ),
        ),
        run="eviction/simulate",
        checks=(LRU_TAIL, LFU_HIT, LFU_TAIL, HYBRID_HIT, HYBRID_TAIL),
        sets=SIM_SETS,
        timeout_s=240,
    ),
]
