"""Mutations of the kv-trace suite: claims C1 (reuse below 38%), C5 (the tiers' TTLs and L3's
LRU-K), C17 (the tiers' capacities hold the trace's reuse), C18 (lru < lfu < hybrid on KV
blocks) and C19 (the head's share of block lookups).

Every judged number of the prefix-cache case has an independent reference (recount.py,
`reference.<metric>`), so a simulator that counts wrong gives `inconclusive` even where its
wrong number would confirm the claim. The runs are cut to the checks they break: C1, C5,
C17 and C19 need no capacity curve (one capacity above the trace's distinct blocks, no
simulation); C18 keeps two capacities of the curve (10k and 3M tokens: the ordering holds
at the first and fails at the second). Each run reads, simulates and recounts the whole
Mooncake trace: 14-29 s a mutation here (up to 80 s while the 2 cores were shared with
other runs); unmutated at these sizes the verdicts are those of the full local run (C1 both
reproduced, C5 reproduced / not reproduced, C17 reproduced, C18 not reproduced, C19
direction reproduced; C18 without a curve is inconclusive: no simulated size to order).
"""

from __future__ import annotations

from dataclasses import replace

from tests.mutations.framework import Edit, Mutation

ANALYSES = "harness/experiments/kv_trace/analyses.py"
KV_PREFIX = "harness/mechanisms/kv_blocks/prefix.py"
DRIVERS = "harness/experiments/kv_trace/drivers.py"
SHAPE = "harness/experiments/kv_trace/shape.py"
TIERS = "harness/experiments/kv_trace/tiers.py"
TIER_METRICS = "harness/experiments/kv_trace/tier_metrics.py"
RUN = "kv-trace/prefix-cache"
C1_MAX = "kv-trace/prefix-cache reuse.max.token_hit_pct"
C1_GPU = "kv-trace/prefix-cache reuse.gpu.token_hit_pct"
C5_TTL = "kv-trace/prefix-cache tiers.ttl_kept_pct"
C5_LRUK = "kv-trace/prefix-cache tiers.L3.lruk_gain_pp"
C17 = "kv-trace/prefix-cache tiers.base.of_max_pct"
C18 = "kv-trace/prefix-cache curve.ordering_sizes_pct"
C19 = "kv-trace/prefix-cache blocks.head_share_pct"
POLICIES = "prefix-cache.policies=[lru,lfu,hybrid,random,opt]"
NO_CURVE = (POLICIES, "prefix-cache.capacities_tokens=[1000000000]")
SMALL_CURVE = (POLICIES, "prefix-cache.capacities_tokens=[10000,3000000]")

FORGETS_OLD = """    hits = np.ones(trace.n_blocks, dtype=bool)
    if trace.n_blocks:
        _, first = np.unique(trace.blocks, return_index=True)
        hits[first] = False
    return hits
"""
FORGETS_NEW = """    hits, prev = np.zeros(trace.n_blocks, dtype=bool), set()
    for i in range(trace.n_requests):
        cur = trace.blocks[trace.offsets[i]:trace.offsets[i + 1]].tolist()
        hits[trace.offsets[i]:trace.offsets[i + 1]] = [b in prev for b in cur]
        prev = set(cur)
    return hits
"""

MUTATIONS = [
    # ---- C1 -----------------------------------------------------------------------------
    Mutation(
        name="kv-trace/simulator-forgets",
        claim="C1",
        kind="broken",
        what="the prefix-cache simulator's infinite cache remembers only the previous request (reuse 37.4% -> "
        "about 4.3%, which an upper bound of 38% would take as confirmation)",
        edits=(Edit(KV_PREFIX, FORGETS_OLD, FORGETS_NEW),),
        run=RUN,
        checks=(C1_MAX,),
        sets=NO_CURVE,
        fast=True,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/gpu-ignores-utilization",
        claim="C1",
        kind="broken",
        what="the GPU's KV capacity computed from all of its memory, not the engine's share of it "
        "(gpu_memory_utilization ignored: 1,040 blocks instead of 912)",
        edits=(
            Edit(
                SHAPE,
                "        free = gpu_memory_gib * GIB * utilization - self.weight_bytes\n",
                "        free = gpu_memory_gib * GIB - self.weight_bytes\n",
            ),
        ),
        run=RUN,
        checks=(C1_GPU,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/duplicate-instrument-blinded",
        claim="C1",
        kind="blinded",
        what="the duplicated trace's copies get block ids of their own, so the instrument's known reuse is not "
        "there to be seen",
        edits=(Edit(ANALYSES, "            duplicated(trace),\n", "            unique_blocks(duplicated(trace)),\n"),),
        run=RUN,
        checks=(C1_MAX, C1_GPU),
        sets=NO_CURVE,
        fast=True,
        timeout_s=300,
    ),
    # ---- C5 -----------------------------------------------------------------------------
    Mutation(
        name="kv-trace/tier-ttls-never-expire",
        claim="C5",
        kind="broken",
        what="the tiers turn a TTL's seconds into milliseconds with x 10^6 instead of x 10^3: no block ever "
        "expires within the trace's hour, so the TTLs look free",
        edits=(
            Edit(
                TIERS,
                "    ttl_ms = None if spec.ttl_s is None else spec.ttl_s * 1000.0\n",
                "    ttl_ms = None if spec.ttl_s is None else spec.ttl_s * 1000000.0\n",
            ),
        ),
        run=RUN,
        checks=(C5_TTL,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/short-ttl-instrument-blinded",
        claim="C5",
        kind="blinded",
        what="the instrument's shortened TTLs are not shortened (the divisor ignored)",
        edits=(Edit(TIERS, "None if s.ttl_s is None else s.ttl_s / short_divisor", "s.ttl_s"),),
        run=RUN,
        checks=(C5_TTL,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/l3-lruk-is-lru",
        claim="C5",
        kind="stand-in",
        what="L3's LRU-K simulated as plain LRU (the tier keeps its lru-3 name)",
        edits=(
            Edit(
                TIERS,
                "    return policies.lruk(stream, spec.capacity_blocks, int(spec.policy[4:]), ttl_ms)\n",
                "    return policies.lru(stream, spec.capacity_blocks, ttl_ms)\n",
            ),
        ),
        run=RUN,
        checks=(C5_LRUK,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/lruk-gain-against-random",
        claim="C5",
        kind="broken",
        what="L3's LRU-K gain measured against L3 random eviction instead of L3 LRU (3.8 pp instead of 0.01 pp)",
        edits=(
            Edit(
                TIER_METRICS,
                '        100.0 * (base.cumulative[-1].token - res["l3_lru"].cumulative[-1].token),\n',
                '        100.0 * (base.cumulative[-1].token - res["l3_random_no_ttl"].cumulative[-1].token),\n',
            ),
        ),
        run=RUN,
        checks=(C5_LRUK,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    # ---- C17 ----------------------------------------------------------------------------
    Mutation(
        name="kv-trace/tiers-sized-10x",
        claim="C17",
        kind="broken",
        what="every tier sized ten times larger than its GB hold (a bytes/tokens slip)",
        edits=(
            Edit(
                DRIVERS,
                "shape.blocks_of(m.tokens_in(gb * shape.GB), bs)",
                "shape.blocks_of(m.tokens_in(10 * gb * shape.GB), bs)",
            ),
        ),
        run=RUN,
        checks=(C17,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/small-tiers-instrument-blinded",
        claim="C17",
        kind="blinded",
        what="the instrument's tiers at 1/100 of their capacity keep their full capacity",
        edits=(Edit(TIERS, "max(1, int(s.capacity_blocks / small_divisor))", "s.capacity_blocks"),),
        run=RUN,
        checks=(C17,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    # ---- C18 ----------------------------------------------------------------------------
    Mutation(
        name="kv-trace/ordering-any-pair",
        claim="C18",
        kind="broken",
        what="the ordering counts a capacity as ordered when any neighbouring pair is in order, not all",
        edits=(Edit(ANALYSES, "    held = sum(all(by[c][a] < by[c][b]", "    held = sum(any(by[c][a] < by[c][b]"),),
        run=RUN,
        checks=(C18,),
        sets=SMALL_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/ordering-blinded",
        claim="C18",
        kind="blinded",
        what="the ordering measure never sees an ordering (held is always 0)",
        edits=(Edit(ANALYSES, "    held = sum(all(by[c][a] < by[c][b]", "    held = 0 * sum(all(by[c][a] < by[c][b]"),),
        run=RUN,
        checks=(C18,),
        sets=SMALL_CURVE,
        timeout_s=300,
    ),
    # ---- C19 ----------------------------------------------------------------------------
    Mutation(
        name="kv-trace/head-too-wide",
        claim="C19",
        kind="broken",
        what="the head measured as the top 8% of distinct blocks instead of the stated 1% (30.1% of lookups: "
        "inside the claimed band)",
        edits=(
            Edit(
                ANALYSES,
                "    share = ev.head_share(ids, ev.head_ids(ids, fraction))\n",
                "    share = ev.head_share(ids, ev.head_ids(ids, 8 * fraction))\n",
            ),
        ),
        run=RUN,
        checks=(C19,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/zipf-instrument-blinded",
        claim="C19",
        kind="blinded",
        what="the Zipf(1) instrument draws uniformly: its head share is far from the law's",
        edits=(Edit(ANALYSES, "    z = ev.zipf_trace(len(ids), nd, 1.0, seed).ids\n", "    z = uniform\n"),),
        run=RUN,
        checks=(C19,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
]

# ---- dependent: the reference (recount.py) quietly made to ask the simulator (issue 52) ------
# Each edit makes recount.py import the simulator's modules and return the simulator's own
# number as the reference, so the two always agree. The ledger's reference names
# harness.experiments.kv_trace.recount, independent of the simulator's modules: the runner's
# record of what the reference module reaches makes the check `inconclusive`.
RECOUNT = "harness/experiments/kv_trace/recount.py"
_LOAD = (
    "    from harness.experiments.kv_trace import analyses as _sim  # mutation: the simulator's count\n"
    "    from harness.mechanisms.kv_blocks import trace as _tr  # mutation: the simulator's reading\n"
    '    _t = _tr.load_trace(path, bs, max_requests=p["max_requests"])\n'
)

MUTATIONS += [
    Mutation(
        name="kv-trace/recount-max-asks-simulator",
        claim="C1",
        kind="dependent",
        what="the recount's maximum reuse is the simulator's own (analyses.infinite_hits and prefix.rates on the "
        "simulator's reading of the trace): the reference always agrees",
        edits=(
            Edit(
                RECOUNT,
                "    mx = _rate(requests, bs, [Forever()], total)\n",
                _LOAD + "    mx = 100.0 * _sim.prefix.rates(_t, _sim.infinite_hits(_t)).token\n",
            ),
        ),
        run=RUN,
        checks=(C1_MAX,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/recount-gpu-asks-simulator",
        claim="C1",
        kind="dependent",
        what="the recount's reuse at the GPU's capacity is the simulator's own (shape.py's sizing, policies.py's "
        "leaf-first LRU, prefix.py's rule): the reference always agrees",
        edits=(
            Edit(
                RECOUNT,
                (
                    "    put(\n"
                    '        "reuse.gpu.token_hit_pct",\n'
                    "        _rate(requests, bs, [gpu] if gpu else None, total),\n"
                ),
                "    from harness.experiments.kv_trace import shape as _shape  # mutation: the simulator's sizing\n"
                + _LOAD
                + '    _b = _shape.blocks_of(_shape.ModelShape.from_params(p).gpu_kv_tokens(p["gpu_memory_gib"], '
                'p["gpu_memory_utilization"]), bs)\n'
                '    put("reuse.gpu.token_hit_pct", 100.0 * _sim.rates_at(_t, _sim.policies.Stream(_t), '
                'p["gpu_policy"], _b).token,\n',
            ),
        ),
        run=RUN,
        checks=(C1_GPU,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/recount-ordering-asks-simulator",
        claim="C18",
        kind="dependent",
        what="the recount's ordering is the simulator's own (analyses.curve with libCacheSim's LRU and LFU and the "
        "hybrid's loop, analyses.ordering): the reference always agrees",
        edits=(
            Edit(
                RECOUNT,
                "    ordered, rates = curve(requests, p, distinct, order, log)\n",
                "    ordered, rates = curve(requests, p, distinct, order, log)\n"
                + _LOAD
                + '    _rows, _ = _sim.curve(_t, _sim.policies.Stream(_t), list(dict.fromkeys(p["capacities_tokens"])), '
                'list(order), p["seed"], p["hybrid_k"], log)\n'
                "    _held, _n = _sim.ordering(_rows, order)\n"
                "    ordered = 100.0 * _held / _n if _n else 0.0\n",
            ),
        ),
        run=RUN,
        checks=(C18,),
        sets=SMALL_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/recount-head-asks-simulator",
        claim="C19",
        kind="dependent",
        what="the recount's head share is the simulator's own (analyses.head over the eviction suite's head "
        "definition): the reference always agrees",
        edits=(
            Edit(
                RECOUNT,
                '    put("blocks.head_share_pct", 100.0 * head_share(requests, p["head_fraction"]), '
                '"a Counter of the block ids")\n',
                _LOAD + '    put("blocks.head_share_pct", _sim.head(_t, p["head_fraction"], p["head_sweep"], '
                'p["seed"])[0]["blocks.head_share_pct"].value, "a Counter of the block ids")\n',
            ),
        ),
        run=RUN,
        checks=(C19,),
        sets=NO_CURVE,
        timeout_s=300,
    ),
    Mutation(
        name="kv-trace/recount-tiers-ask-simulator",
        claim="C5",
        kind="dependent",
        what="the recount's tiers are the simulator's own (the driver's tiers: tiers.py, policies.py's LRU and "
        "LRU-K, tier_metrics.py): the three tier references always agree (C5's two checks and C17's)",
        edits=(
            Edit(
                RECOUNT,
                "    if base is not None and mx:\n",
                "    from harness.experiments.kv_trace import drivers as _drv, shape as _shape  # mutation\n"
                "    from harness.mechanisms.kv_blocks import trace as _tr  # mutation\n"
                '    _t = _tr.load_trace(path, bs, max_requests=p["max_requests"])\n'
                "    _tm = _drv._tiers(_t, _drv.Stream(_t), p, _shape.ModelShape.from_params(p))[0]\n"
                '    for _name in ("tiers.base.of_max_pct", "tiers.ttl_kept_pct", "tiers.L3.lruk_gain_pp"):\n'
                '        put(_name, _tm[_name].value, "the simulator\'s own tiers")\n'
                "    base = None\n"
                "    if base is not None and mx:\n",
            ),
        ),
        run=RUN,
        checks=(C5_TTL, C5_LRUK),
        sets=NO_CURVE,
        timeout_s=300,
    ),
]
# C17's tier reference is the same recount code: the same edit, judged on C17's check
MUTATIONS.append(replace(MUTATIONS[-1], name="kv-trace/recount-base-tier-asks-simulator", claim="C17", checks=(C17,)))
