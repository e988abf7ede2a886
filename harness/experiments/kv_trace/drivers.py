"""Harness drivers of the kv-trace suite.

kv-trace-simulate    one KV-block trace: its summary, reuse at the maximum and at a GPU's KV
                     capacity (C1), hit rate against capacity per policy (C18's ordering on KV
                     blocks), the head share (C19 on KV blocks) and the source's three tiers
                     (C5, C17), each with its controls, and every judged number recounted by
                     recount.py (reference.<metric>), a path that shares no code with the simulator
kv-trace-crosscheck  every policy and the tiers against the scan-based references, request by
                     request, on a sample of whole sessions of the trace

Drivers measure; the view (harness/experiments/kv_trace/view.py) presents, and takes the
Mooncake paper's figures from the ledger (C1's figures), shown only for that trace.
"""

from __future__ import annotations

import json
from typing import cast

from harness.base.errors import BadInput
from harness.experiments.kv_trace import (
    analyses,
    crosscheck,
    metrics,
    per_session,
    pool,
    recount,
    shape,
    tier_metrics,
    tiers,
)
from harness.experiments.kv_trace.series import CURVE, HEAD_SWEEP, PAIRS
from harness.mechanisms.kv_blocks import policies
from harness.mechanisms.kv_blocks.policies import Stream
from harness.mechanisms.kv_blocks.trace import (
    DEFAULT_TRACE,
    FORMATS,
    KVTrace,
    load_trace,
    session_sample,
    unique_blocks,
)
from harness.model.driver_contract import (
    INPUT_FILE,
    CaseContext,
    Metric,
    Param,
    Record,
    input_path,
    register,
)
from harness.model.driver_helpers import write_csv

from .tiers import TierSpec

ORDER = ("lru", "lfu", "hybrid")  # the source's ordering (C18): lru < lfu < "lru-lfu" (the hybrid)
CONTROL_ORDER = ("lru", "lfu", "random")  # mechanism off: random eviction in the hybrid's place
KNOWN_ORDER = ("random", "opt")  # instrument: the floor below the ceiling, an ordering known to hold
DEFAULT_CAPACITIES = [
    10**4,
    3 * 10**4,
    10**5,
    3 * 10**5,
    10**6,
    3 * 10**6,
    10**7,
    3 * 10**7,
    5 * 10**7,
    10**8,
    3 * 10**8,
    10**9,
]
DEFAULT_POLICIES = [p for p in policies.ALL_POLICIES if p != "lru-2"]

TRACE_PARAMS = {
    "trace": Param(
        str,
        DEFAULT_TRACE,
        "a KV-block JSONL trace: Mooncake's format (timestamp in ms, input_length, output_length, "
        "hash_ids), Alibaba Bailian's (the same with the timestamp in seconds, chat_id, parent_chat_id), "
        "or multi-turn sessions (session, at_s, prompt, max_tokens); relative to the repository or absolute",
        kind=INPUT_FILE,
    ),
    "trace_format": Param(
        str,
        "auto",
        "mooncake, bailian, sessions, or auto (Bailian's where the first line has chat_id and parent_chat_id, "
        "sessions where it has session and prompt)",
        choices=FORMATS,
    ),
    "block_size": Param(
        int, 512, "tokens per KV block of the trace's hash_ids (512 for Mooncake's, 16 for Bailian's)", min=1
    ),
    "max_requests": Param(int, 0, "read only the first N requests (0 = the whole trace)", min=0),
    "seed": Param(int, 0, "seed of random eviction and the controls' draws; repetition r uses seed + r - 1", min=0),
}

MAIN_PARAMS = {
    **TRACE_PARAMS,
    "policies": Param(list, DEFAULT_POLICIES, "policies of the capacity curve", policies.ALL_POLICIES),
    "capacities_tokens": Param(list, DEFAULT_CAPACITIES, "cache capacities of the curve, in tokens", min=1),
    "hybrid_k": Param(int, 2, "K of the hybrid's LRU-K part (the eviction suite's hybrid)", min=1),
    "head_fraction": Param(
        float, 0.01, "the head of C19: this fraction of the distinct blocks, most used first", min=1e-6, max=0.999999
    ),
    "head_sweep": Param(
        list, [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1], "head fractions shown in the sweep", min=1e-6, max=0.999999
    ),
    "gpu_policy": Param(
        str,
        "leaf-lru",
        "policy of the GPU's prefix cache for C1 (vLLM / SGLang evict leaves first)",
        policies.ALL_POLICIES,
    ),
    **shape.SHAPE_PARAMS,
    "pool_instances": Param(
        int,
        4,
        "serving instances for the shared pool against per-instance caches (each with the GPU's KV capacity)",
        min=2,
        max=64,
    ),
    "tier_gb": Param(list, [24, 128, 10000], "L1, L2, L3 capacities in GB (10^9 bytes) of KV", min=0),
    "tier_ttl_s": Param(list, [30, 300, 3600], "L1, L2, L3 TTLs in seconds (idle time; null = none)"),
    "tier_policies": Param(list, ["lru", "lru", "lru-3"], "L1, L2, L3 eviction: lru, leaf-lru or lru-K"),
    "tier_media": Param(
        list, ["GPU memory", "CPU memory", "L3 store (Redis / LMDB)"], "what each tier is, for the report"
    ),
    "short_ttl_divisor": Param(float, 10.0, "the instrument of the TTL check: TTLs divided by this", min=1.0),
    "small_divisor": Param(float, 100.0, "the instrument of the sizing check: capacities divided by this", min=1.0),
}


def _check_main(where: str, p: dict) -> None:
    for name in ("tier_gb", "tier_ttl_s", "tier_policies", "tier_media"):
        if len(p[name]) != 3:
            raise BadInput(f"{where}.{name}: give three values, for L1, L2 and L3 (got {len(p[name])})")
    for i, ttl in enumerate(p["tier_ttl_s"]):
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0):
            raise BadInput(f"{where}.tier_ttl_s[{i}]: a TTL is a positive number of seconds or null, got {ttl!r}")
    for i, pol in enumerate(p["tier_policies"]):
        if not (
            pol in ("lru", "leaf-lru")
            or (isinstance(pol, str) and pol.startswith("lru-") and pol[4:].isdigit() and int(pol[4:]) >= 1)
        ):
            raise BadInput(f"{where}.tier_policies[{i}]: {pol!r} is not lru, leaf-lru or lru-K (K >= 1)")
    missing = [x for x in (*ORDER, "random", "opt") if x not in p["policies"]]
    if missing:
        raise BadInput(f"{where}.policies: must include {missing[0]!r} (the ordering, its control and the ceiling)")
    if not p["capacities_tokens"]:
        raise BadInput(f"{where}.capacities_tokens: give at least one capacity")


def load(p: dict, ctx: CaseContext | None = None) -> KVTrace:
    t = load_trace(
        input_path(p["trace"]),
        p["block_size"],
        shown=p["trace"],
        max_requests=p["max_requests"],
        fmt=p["trace_format"],
    )
    if ctx is not None:
        ctx.log(
            f"{p['trace']}: {t.n_requests} requests, {t.n_blocks} blocks of {t.block_size} tokens"
            + (f", {t.n_mismatched} with lengths that disagree" if t.n_mismatched else "")
        )
    return t


def facts_of(t: KVTrace, p: dict) -> dict:
    return {
        "trace_file": p["trace"],
        "trace_sha256": t.sha256 or t.digest(),
        "trace_is_mooncake_conversation": t.is_mooncake_conversation,
        "trace_format": t.fmt,
        "block_size": t.block_size,
        "simulator": policies.engine_description(),
    }


def _tier_specs(p: dict, m: shape.ModelShape, bs: int):

    return [
        TierSpec(name, shape.blocks_of(m.tokens_in(gb * shape.GB), bs), ttl, pol)
        for name, gb, ttl, pol in zip(("L1", "L2", "L3"), p["tier_gb"], p["tier_ttl_s"], p["tier_policies"])
    ]


@register(
    "kv-trace-simulate",
    params=MAIN_PARAMS,
    check=_check_main,
    description="a KV-block trace: reuse (C1), hit rate vs capacity per policy (C18), head share (C19), "
    "the source's tiers (C5, C17), with controls",
    metrics=metrics.SIMULATE,
)
def run_trace(ctx: CaseContext) -> Record:

    p = ctx.params
    t = load(p, ctx)
    seed = p["seed"] + ctx.repetition - 1
    m = shape.ModelShape.from_params(p)
    st = Stream(t)
    metrics = analyses.summary(t)
    gpu_tokens = m.gpu_kv_tokens(p["gpu_memory_gib"], p["gpu_memory_utilization"])
    metrics["reuse.gpu.capacity_tokens"] = Metric(gpu_tokens, "tokens", None, m.describe())
    metrics["reuse.kv_bytes_per_token"] = Metric(m.kv_bytes_per_token, "B")
    gpu_blocks = shape.blocks_of(gpu_tokens, t.block_size)
    metrics.update(analyses.reuse(t, gpu_blocks, p["gpu_policy"]))
    metrics.update(pool.pool(t, p["pool_instances"], p["gpu_policy"], gpu_blocks))
    metrics.update(per_session.session_metrics(t, gpu_blocks, p["gpu_policy"]))
    ctx.log(
        f"reuse: maximum {metrics['reuse.max.token_hit_pct'].value:.1f}%, at the GPU's {gpu_tokens:,} tokens "
        f"{metrics['reuse.gpu.token_hit_pct'].value:.1f}% ({p['gpu_policy']})"
    )
    rows, rps = analyses.curve(
        t, st, list(dict.fromkeys(p["capacities_tokens"])), list(p["policies"]), seed, p["hybrid_k"], ctx.log
    )
    metrics.update(_curve_metrics(rows, rps, cast(float, metrics["trace.blocks"].value)))  # set from the trace
    head_m, head_s = analyses.head(t, p["head_fraction"], p["head_sweep"], seed)
    metrics.update(head_m)
    tier_m, tier_s, tier_details = _tiers(t, st, p, m)
    metrics.update(tier_m)
    metrics.update(_references(p, metrics, ctx.log))
    series = {CURVE.name: analyses.curve_series(rows), HEAD_SWEEP.name: head_s, **tier_s}
    write_csv(ctx.raw_path("capacity_curve.csv"), list(rows[0]), ([r[k] for k in rows[0]] for r in rows))
    details = {
        "trace": {
            "file": p["trace"],
            "name": t.name,
            "sha256": t.sha256,
            "digest": t.digest(),
            "mismatched_lines": t.mismatched_lines,
        },
        "model": m.describe(),
        "gpu_kv_tokens": gpu_tokens,
        "tiers": tier_details,
        "seed": seed,
        "opt_violations": analyses.opt_violations(rows),
    }
    ctx.raw_path("details.json").write_text(json.dumps(details, indent=1))
    return Record("ok", metrics=metrics, series=series, details=details, facts=facts_of(t, p))


def _references(p: dict, metrics: dict[str, Metric], log) -> dict[str, Metric]:
    """The judged numbers recounted by recount.py (a separate path that shares no code with
    the simulator) on the same trace, as `reference.<metric>` beside each metric."""
    out = {}
    for name, (value, what) in recount.recount(input_path(p["trace"]), p, ORDER, analyses.label, log).items():
        own = metrics.get(name[len("reference.") :])
        unit = own.unit if own else ("s" if name == "reference.seconds" else "")
        out[name] = Metric(value, unit, None, f"independent reference: {what}")
        if own is not None and own.value is not None and abs(own.value - value) > 1e-6:
            log(f"{name[len('reference.') :]}: the simulator gives {own.value:.6g}, the reference {value:.6g}")
    log(f"reference: {len(out) - 1} numbers recounted in {out['reference.seconds'].value:.1f} s")
    gaps = [
        abs(
            cast(float, metrics[f"tiers.{n}.served_token_pct"].value)
            - cast(float, out[f"reference.tiers.{n}.served_token_pct"].value)
        )
        for n in ("L1", "L2", "L3")
        if f"reference.tiers.{n}.served_token_pct" in out and metrics.get(f"tiers.{n}.served_token_pct") is not None
    ]
    if gaps:
        out["tiers.served_max_gap_pp"] = Metric(
            max(gaps),
            "pp",
            "lower",
            "per tier, the simulator's share of prompt tokens served against the recount's: the largest gap",
        )
    return out


def _curve_metrics(rows: list[dict], rps: dict, n_blocks: float) -> dict[str, Metric]:
    held, n = analyses.ordering(rows, ORDER)
    held_r, n_r = analyses.ordering(rows, CONTROL_ORDER)
    held_k, n_k = analyses.ordering(rows, KNOWN_ORDER)
    m = {
        "curve.ordering_sizes_pct": Metric(
            100.0 * held / n if n else 0.0,
            "% of sizes",
            None,
            f"simulated capacities where token hit rates order lru < lfu < hybrid ({held} of {n})",
        ),
        "curve.ordering_random_sizes_pct": Metric(
            100.0 * held_r / n_r if n_r else 0.0,
            "% of sizes",
            None,
            "the same with random eviction in the hybrid's place",
        ),
        "curve.ordering_known_sizes_pct": Metric(
            100.0 * held_k / n_k if n_k else 0.0,
            "% of sizes",
            None,
            "the same measure on an ordering known to hold: random eviction "
            "(the floor) below Belady's MIN (the ceiling)",
        ),
        "curve.opt_violations": Metric(
            len(analyses.opt_violations(rows)),
            "cases",
            "lower",
            "policy x capacity where a policy's block hit rate beats opt's",
        ),
        "curve.opt_compared": Metric(
            analyses.opt_compared(rows),
            "cases",
            None,
            "policy x capacity cases compared with opt (the denominator of opt_violations)",
        ),
    }
    for r in rows:
        if r["policy"] != analyses.INFINITE:
            key = f"curve.{r['policy']}.at_{analyses.label(r['capacity_tokens'])}"
            m[f"{key}.token_hit_pct"] = Metric(r["token_hit_pct"], "%", "higher")
            m[f"{key}.share_of_max_pct"] = Metric(r["share_of_max_pct"], "%", None, "of the infinite cache's")
    how = policies.engine_description()
    for name, v in rps.items():
        m[f"curve.{name}.lookups_per_s"] = Metric(
            v, "lookups/s", "higher", f"block lookups per second of the simulation (prefix rule included): {how}"
        )
    return m


def _tiers(t: KVTrace, st, p: dict, m: shape.ModelShape):

    specs = _tier_specs(p, m, t.block_size)
    res = tiers.variants(st, specs, p["short_ttl_divisor"], p["small_divisor"])
    nos = Stream(unique_blocks(t))
    res["nosharing"] = tiers.simulate(nos, specs)
    lru_specs = tiers.with_changes(specs, len(specs) - 1, policy="lru")
    res["nosharing_l3_lru"] = tiers.simulate(
        nos, lru_specs, res["nosharing"].hits[:-1] + [tiers.tier_hits(nos, lru_specs[-1])]
    )
    max_token = analyses.prefix.rates(t, analyses.infinite_hits(t)).token
    metrics = tier_metrics.tier_metrics(t, res, max_token, m.kv_bytes_per_token, p["tier_gb"])
    series = tier_metrics.tier_series(t, res, m.kv_bytes_per_token, p["tier_gb"], p["tier_media"])
    details = [
        {"tier": s.name, "capacity_blocks": s.capacity_blocks, "ttl_s": s.ttl_s, "policy": s.policy} for s in specs
    ]
    return metrics, series, details


# ---- kv-trace-crosscheck ------------------------------------------------------------------

CROSS_PARAMS = {
    **TRACE_PARAMS,
    "session_fraction": Param(
        float, 0.02, "the sample: this fraction of the trace's sessions (whole conversations)", min=1e-6, max=1.0
    ),
    "capacities_blocks": Param(list, [24, 160], "cache capacities in blocks", min=10),
    "ttl_s": Param(float, 60.0, "TTL of the TTL policies' check, in seconds", min=0.001),
    "policies": Param(list, list(policies.ALL_POLICIES), "policies to check", policies.ALL_POLICIES),
}
CROSS_COLUMNS = [c.name for c in PAIRS.columns]


@register(
    "kv-trace-crosscheck",
    params=CROSS_PARAMS,
    description="every policy and the tiers against scan-based references, request by request",
    metrics=metrics.CROSSCHECK,
)
def run_crosscheck(ctx: CaseContext) -> Record:

    p = ctx.params
    full = load(p, ctx)
    t = session_sample(full, p["session_fraction"], p["seed"] + ctx.repetition - 1)
    ctx.log(f"sample: {t.n_requests} requests, {t.n_blocks} blocks")
    rows = crosscheck.compare_all(t, p["policies"], p["capacities_blocks"], p["ttl_s"], p["seed"])
    write_csv(ctx.raw_path("crosscheck.csv"), CROSS_COLUMNS, ([r[c] for c in CROSS_COLUMNS] for r in rows))
    bad = sum(r["verdict"] != "match" for r in rows)
    m = {
        "crosscheck.mismatched_pairs": Metric(
            bad, "pairs", "lower", "policy x capacity (x TTL) pairs whose per-request hits differ from the reference"
        ),
        "crosscheck.pairs": Metric(len(rows), "pairs"),
        "crosscheck.sample_requests": Metric(t.n_requests, "requests"),
        "crosscheck.sample_blocks": Metric(t.n_blocks, "blocks"),
    }
    return Record(
        "ok",
        metrics=m,
        series={PAIRS.name: PAIRS.rows(rows)},
        details={"sample": t.name, "digest": t.digest()},
        facts=facts_of(full, p),
    )
