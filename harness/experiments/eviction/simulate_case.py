"""eviction-simulate: every policy and the optimal bound across cache sizes on a token trace
(C18, simulated): the source-shaped table at table_fraction, the ordering lru < lfu < hybrid at
each size with the random control, the curves, requests/s per policy, and every policy at the
calibrated size (calibrated_size.py: the size, the references' numbers and the stand-ins)."""

from __future__ import annotations

import numpy as np

from harness.base.errors import BadInput
from harness.mechanisms.cache_policies import sim as simulate
from harness.mechanisms.cache_policies import traces
from harness.mechanisms.cache_policies.sim import ALL_POLICIES, CONTROL_POLICY, LIB_POLICIES
from harness.model.driver_contract import CaseContext, Metric, Param, Record
from harness.model.driver_helpers import write_csv

from .calibrated_size import REFERENCE_POLICIES, calibrated_capacity, reference_metrics, standin_facts, standin_metrics
from .common import HEAD_DEFINITION, TRACE_PARAMS, build_trace, check_trace, corpus_passes, percent
from .series import CURVES, ORDERING, RPS

ORDER = ("lru", "lfu", "hybrid")  # the source's ordering of hit rates: lru < lfu < "lru-lfu" (our hybrid)
HYBRID_DEFINITION = (
    "hybrid = LRU-K eviction with LFU admission: the victim is LRU-K's (objects with fewer than K "
    "accesses since insertion first, oldest insertion first; otherwise the oldest K-th most recent "
    "access); every key's access count over the trace so far is kept, also after eviction, and on a "
    "miss in a full cache the new object is admitted only if its count exceeds the victim's."
)

SIM_PARAMS = {
    **TRACE_PARAMS,
    "policies": Param(list, list(ALL_POLICIES), "policies to simulate (opt is always run)", ALL_POLICIES),
    "size_fractions": Param(
        list, [0.005, 0.01, 0.02, 0.05, 0.1, 0.2], "cache sizes as fractions of the distinct tokens", min=1e-6, max=1
    ),
    "table_fraction": Param(
        float, 0.05, "the cache size (fraction of distinct tokens) of the claim table and metrics", min=1e-6, max=1
    ),
    "ordering_fractions": Param(
        list,
        [0.01, 0.02, 0.05, 0.1, 0.2],
        "sizes (fractions of distinct tokens, each one of size_fractions) at which the "
        "ordering lru < lfu < hybrid is checked",
        min=1e-6,
        max=1,
    ),
    "hybrid_k": Param(int, 2, "K of the hybrid's LRU-K part", min=1),
    "rps_requests": Param(int, 1000000, "requests of the trace timed for requests/s per policy (0 = skip)", min=0),
    "calibrate_lru_hit_pct": Param(
        (float, type(None)),
        None,
        "also simulate every policy at the cache size where exact LRU first reaches this "
        "hit rate on the trace (the suite's copy of the source's LRU figure: the source "
        "gives no cache size); null: no such size",
        min=0.001,
        max=99.999,
    ),
    "as_random": Param(
        list,
        [],
        "policies simulated as seeded random eviction under their own names (the mechanism removed; for tests)",
        ALL_POLICIES,
    ),
    "standin_lruk_k": Param(
        int,
        2,
        "the hybrid's stand-in LRU-K (LRU-K eviction without the hybrid's LFU "
        "admission) at the calibrated size: its K (sim.calibrated.standin.lruk.*; the "
        "ledger fixes it at the hybrid's K)",
        min=2,
    ),
    "standin_capacity_ratio": Param(
        float,
        1.0,
        "the hybrid's stand-in LRU-K runs at this share of the calibrated "
        "size (the ledger fixes it at 1: the hybrid's own size); the case's "
        "fact of this name is the size libCacheSim's LRU-K cache reports it "
        "ran at over the calibrated size",
        min=0.01,
        max=1,
    ),
    "reference_at_calibrated": Param(
        bool,
        True,
        "also simulate lru, lfu and the hybrid at the calibrated size with "
        "the pure-Python references (reference.* metrics: the ledger's "
        "cross-check of the calibrated hit rates)",
    ),
}


def check_sim(where: str, p: dict) -> None:
    check_trace(where, p)
    fr = p["size_fractions"]
    if not fr or not all(isinstance(f, (int, float)) for f in fr):
        raise BadInput(f"{where}.size_fractions: a non-empty list of numbers in (0, 1]")
    for name in ("table_fraction",):
        if p[name] not in fr:
            raise BadInput(f"{where}.{name}: {p[name]} must be one of size_fractions {fr}")
    missing = [f for f in p["ordering_fractions"] if f not in fr]
    if missing or not p["ordering_fractions"]:
        raise BadInput(
            f"{where}.ordering_fractions: each must be one of size_fractions {fr}"
            + (f"; {missing[0]} is not" if missing else "")
        )
    if any(x not in p["policies"] for x in ORDER):
        raise BadInput(f"{where}.policies: must include {', '.join(ORDER)} (the source's ordering is checked)")


def ordering_holds(rates: dict[str, float], names: tuple[str, ...]) -> bool:
    """True when the hit rates of `names` increase strictly in that order."""
    vals = [rates[n] for n in names]
    return all(a < b for a, b in zip(vals, vals[1:]))


def _sweep(ctx: CaseContext, p: dict, ids, nxt, tail, caps: list[int], policies: list[str]) -> dict:
    """policy -> capacity -> (hit rate, long-tail retention) of every policy and the random control.
    A policy named in `as_random` is simulated as random eviction (the mechanism removed)."""

    res: dict[str, dict[int, tuple]] = {x: {} for x in policies + [CONTROL_POLICY]}
    for cap in dict.fromkeys(caps):
        for pol in res:
            run_as = CONTROL_POLICY if pol in p["as_random"] else pol
            hits, _ = simulate.timed_hits(run_as, ids, nxt, cap, p["hybrid_k"])
            res[pol][cap] = traces.hit_rates(hits, tail)
        ctx.log(f"size {cap}: " + ", ".join(f"{x} {res[x][cap][0]:.1f}" for x in res))
    return res


def _curves(res: dict, fractions: list, cap_of: dict) -> dict[str, list]:
    cols: dict[str, list] = {
        "policy": [],
        "size_fraction": [],
        "capacity": [],
        "hit_rate_pct": [],
        "long_tail_pct": [],
        "gap_to_opt_pp": [],
    }
    for x in res:
        for f in fractions:
            c = cap_of[f]
            for col, v in zip(cols, (x, f, c, res[x][c][0], res[x][c][1], res["opt"][c][0] - res[x][c][0])):
                cols[col].append(v)
    return cols


def _ordering(res: dict, fractions: list, cap_of: dict) -> dict[str, list]:
    control_order = ORDER[:-1] + (CONTROL_POLICY,)
    cols: dict[str, list] = {
        "size_fraction": [],
        "capacity": [],
        **{x: [] for x in ORDER},
        CONTROL_POLICY: [],
        "holds": [],
        "holds_with_random": [],
    }
    for f in fractions:
        rates = {x: res[x][cap_of[f]][0] for x in res}
        for col, v in (
            ("size_fraction", f),
            ("capacity", cap_of[f]),
            *((x, rates[x]) for x in ORDER),
            (CONTROL_POLICY, rates[CONTROL_POLICY]),
            ("holds", int(ordering_holds(rates, ORDER))),
            ("holds_with_random", int(ordering_holds(rates, control_order))),
        ):
            cols[col].append(v)
    return cols


def _rps(ctx: CaseContext, p: dict, policies: list[str]) -> dict[str, float]:

    if not p["rps_requests"]:
        return {}
    big = build_trace(p, ctx.repetition, p["rps_requests"])
    bnxt = traces.next_access(big.ids)
    bcap = simulate.capacities(big.n_distinct, [p["table_fraction"]])[0]
    path = simulate.write_oracle_general(ctx.raw_path("rps_trace.oracleGeneral.bin"), big.ids, bnxt)
    rps = {}
    for pol in policies:
        if pol in LIB_POLICIES:
            _, r = simulate.lib_process_trace(pol, path, bcap)
        else:
            _, dt = simulate.timed_hits(pol, big.ids, bnxt, bcap, p["hybrid_k"])
            r = len(big.ids) / dt
        rps[pol] = r
    path.unlink()  # 24 bytes per request; regenerated from the seed when needed
    ctx.log("requests/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in rps.items()))
    return rps


def _calibrated_metrics(ctx: CaseContext, p: dict, ids, nxt, tail, policies: list[str], pre: str) -> dict:
    cap = calibrated_capacity(ids, p["calibrate_lru_hit_pct"])
    if cap is None:
        return {}
    res = _sweep(ctx, p, ids, nxt, tail, [cap], policies)
    why = (
        f"at the cache size where exact LRU first hits {p['calibrate_lru_hit_pct']:g}% of this trace (the "
        f"suite's copy of the source's LRU figure; the source gives no cache size): {cap} tokens"
    )
    m = {
        f"{pre}.calibrated.capacity_objects": Metric(cap, "tokens", None, why),
        f"{pre}.calibrated.size_fraction_pct": Metric(100.0 * cap / len(np.unique(ids)), "% of distinct", None, why),
    }
    for x in res:
        hr, lt = res[x][cap]
        note = ("the control: seeded random eviction, same trace and size; " if x == CONTROL_POLICY else "") + why
        m[f"{pre}.calibrated.{x}.hit_rate_pct"] = percent(hr, note)
        m[f"{pre}.calibrated.{x}.long_tail_pct"] = percent(lt, note)
    m.update(reference_metrics(ctx, p, ids, nxt, tail, cap, [x for x in REFERENCE_POLICIES if x in res], pre))
    m.update(standin_metrics(p, ids, tail, cap, pre, why))
    return m


def _table_metrics(p: dict, res: dict, table_cap: int, rps: dict, pre: str) -> dict[str, Metric]:
    m: dict[str, Metric] = {}
    for x in res:
        hr, lt = res[x][table_cap]
        note = "the control: seeded random eviction, same trace and size" if x == CONTROL_POLICY else ""
        m[f"{pre}.{x}.hit_rate_pct"] = percent(hr, note)
        m[f"{pre}.{x}.long_tail_pct"] = percent(lt, note)
        m[f"{pre}.{x}.gap_to_opt_pp"] = Metric(res["opt"][table_cap][0] - hr, "pp", "lower")
        if x in rps:
            impl = "libCacheSim C loop (process_trace)" if x in LIB_POLICIES else "pure Python (this package)"
            m[f"{pre}.{x}.rps"] = Metric(rps[x], "req/s", "higher", f"{p['rps_requests']} requests, {impl}")
    return m


def _ordering_metrics(p: dict, ord_cols: dict, pre: str) -> dict[str, Metric]:
    n_ord = len(ord_cols["holds"])
    held = [f for f, h in zip(ord_cols["size_fraction"], ord_cols["holds"]) if h]
    sizes = ", ".join(f"{100 * f:g}%" for f in p["ordering_fractions"])
    where = ", ".join(f"{100 * f:g}%" for f in held) or "none"
    return {
        f"{pre}.ordering_sizes_pct": Metric(
            100.0 * sum(ord_cols["holds"]) / n_ord,
            "% of sizes",
            "higher",
            f"sizes ({sizes} of distinct tokens) where hit rates order lru < lfu < hybrid; held at: {where}",
        ),
        f"{pre}.ordering_random_sizes_pct": Metric(
            100.0 * sum(ord_cols["holds_with_random"]) / n_ord,
            "% of sizes",
            None,
            "the control: the same sizes with the hybrid replaced by random eviction (lru < lfu < random)",
        ),
    }


def run_simulate(ctx: CaseContext) -> Record:

    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    ids, nxt = trace.ids, traces.next_access(trace.ids)
    head = traces.head_ids(ids, p["head_fraction"])
    tail = traces.tail_mask(ids, head)
    nd = trace.n_distinct
    fractions = list(dict.fromkeys(p["size_fractions"]))
    cap_of = {f: simulate.capacities(nd, [f])[0] for f in fractions}
    table_cap = cap_of[p["table_fraction"]]
    policies = [x for x in ALL_POLICIES if x in p["policies"] or x == "opt"]
    ctx.log(
        f"{trace.name}: {len(ids)} requests, {nd} distinct, head {len(head)} tokens; "
        f"sizes {sorted(set(cap_of.values()))}"
    )
    res = _sweep(ctx, p, ids, nxt, tail, list(cap_of.values()), policies)
    violations = [(x, c) for x in policies for c in res[x] if res[x][c][0] > res["opt"][c][0] + 1e-9]
    curve_cols = _curves(res, fractions, cap_of)
    write_csv(ctx.raw_path("miss_ratio_curves.csv"), list(curve_cols), zip(*curve_cols.values()))
    ord_cols = _ordering(res, p["ordering_fractions"], cap_of)
    rps = _rps(ctx, p, policies)
    pre = "sim" if p["trace"] == "real" else "zipf"
    m = _table_metrics(p, res, table_cap, rps, pre)
    m.update(_ordering_metrics(p, ord_cols, pre))
    m.update(_calibrated_metrics(ctx, p, ids, nxt, tail, policies, pre))
    m[f"{pre}.opt_violations"] = Metric(len(violations), "cases", "lower", "policy x size where a policy beat OPT")
    m[f"{pre}.opt_compared"] = Metric(
        sum(len(res[x]) for x in policies if x != "opt" and x in res),
        "cases",
        None,
        "policy x size cases compared with OPT (the denominator of opt_violations)",
    )
    m[f"{pre}.capacity_objects"] = Metric(table_cap, "tokens")
    facts = standin_facts(m, pre)
    m[f"{pre}.head_share_pct"] = Metric(100.0 * (1 - tail.mean()), "%")
    passes = corpus_passes(trace)
    if passes is not None:
        m[f"{pre}.corpus_passes"] = Metric(passes, "passes", None, "trace requests / tokens in the corpus")
    series = {
        CURVES.name: CURVES.make(curve_cols),
        ORDERING.name: ORDERING.make(ord_cols),
    }
    if rps:
        series[RPS.name] = RPS.make(
            {
                "policy": list(rps),
                "rps": list(rps.values()),
                "implementation": [
                    "libCacheSim process_trace (C)" if k in LIB_POLICIES else "pure Python" for k in rps
                ],
            },
            f"{p['rps_requests']} requests, cache {100 * p['table_fraction']:g}% of distinct",
        )
    details = {
        "trace": {
            "name": trace.name,
            "requests": len(ids),
            "distinct": nd,
            "seed": trace.seed,
            "digest": trace.digest(),
            "head_size": int(len(head)),
            "meta": trace.meta,
        },
        "capacities": cap_of,
        "table_capacity": table_cap,
        "violations": violations,
        "hybrid_definition": HYBRID_DEFINITION,
        "head_definition": HEAD_DEFINITION,
        "hybrid_k": p["hybrid_k"],
        "as_random": list(p["as_random"]),
    }
    if violations:
        return Record(
            "failed",
            f"{len(violations)} policy/size pairs beat the optimal bound, e.g. {violations[0]}",
            m,
            details,
            series,
            facts,
        )
    return Record("ok", metrics=m, details=details, series=series, facts=facts)
