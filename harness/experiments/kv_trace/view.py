"""The kv-trace suite's view: the trace, reuse (C1) beside its controls, hit rate against
capacity per policy (log axis) with the infinite-cache maximum, what the Mooncake paper
states for its trace (from the ledger's C1 figures, labelled as the paper's and shown only
when the run's trace is that trace), one shared pool against per-instance caches, the ordering and head share on KV blocks (C18, C19),
the source's tiers with their controls (C5, C17), and the cross-check."""

from __future__ import annotations

from typing import cast

from harness.experiments.kv_trace.series import CURVE, HEAD_SWEEP, PAIRS, TIER_CONTROLS, TIERS
from harness.experiments.views import Chart, Table, ViewContext, points, series_table, view
from harness.model.stored_run import Series

POLICY_ORDER = ("opt", "leaf-lru", "lru", "arc", "s3fifo", "lfu", "lru-2", "lru-3", "hybrid", "random")


def _m(ctx: ViewContext, case: str, name: str):
    s = ctx.metric(case, name)
    if s is None:
        return "not measured"
    return s.median if s.min == s.max else (s.median, s.min, s.max)


def _n(ctx: ViewContext, case: str, name: str) -> str:
    """A metric's median for a sentence (3 significant figures)."""
    s = ctx.metric(case, name)
    return "not measured" if s is None else f"{s.median:.3g}"


def _facts(ctx: ViewContext, case: str) -> dict:
    recs = ctx.run.ok_records(ctx.suite, case)
    return recs[0].facts if recs else {}


def _summary(ctx: ViewContext, case: str) -> list:
    f = _facts(ctx, case)
    rows = [
        [label, _m(ctx, case, f"trace.{name}")]
        for label, name in (
            ("requests", "requests"),
            ("KV blocks", "blocks"),
            ("distinct blocks", "distinct_blocks"),
            ("prompt tokens", "input_tokens"),
            ("mean prompt tokens", "mean_input_tokens"),
            ("mean output tokens", "mean_output_tokens"),
            ("duration (s)", "duration_s"),
            ("requests whose block count disagrees with their length", "length_mismatches"),
        )
    ]
    note = (
        f"Trace {f.get('trace_file', '?')} (SHA-256 {str(f.get('trace_sha256', ''))[:16]}...), blocks of "
        f"{f.get('block_size', '?')} tokens. "
        + (
            "This is the Mooncake FAST'25 conversation trace (data/mooncake/README.md)."
            if f.get("trace_is_mooncake_conversation")
            else "A trace of the user's own (not the Mooncake release)."
        )
    )
    return [Table("The trace", ["what", "measured"], rows, note, case)]


def _reuse(ctx: ViewContext, case: str) -> list:
    cap = ctx.metric(case, "reuse.gpu.capacity_tokens")
    cap_txt = f"{cap.median:,.0f} tokens" if cap else "?"
    rows = [
        [
            "infinite cache (the maximum)",
            _m(ctx, case, "reuse.max.token_hit_pct"),
            _m(ctx, case, "reuse.max.block_hit_pct"),
            "every block seen before is a hit",
        ],
        [
            f"GPU KV capacity ({cap_txt})",
            _m(ctx, case, "reuse.gpu.token_hit_pct"),
            _m(ctx, case, "reuse.gpu.block_hit_pct"),
            "the prefix cache of one GPU",
        ],
        [
            "instrument: each request twice, infinite",
            _m(ctx, case, "reuse.dup.max.token_hit_pct"),
            _m(ctx, case, "reuse.dup.max.block_hit_pct"),
            "a reuse known to be there: at least 50%",
        ],
        [
            "instrument: each request twice, GPU",
            _m(ctx, case, "reuse.dup.gpu.token_hit_pct"),
            _m(ctx, case, "reuse.dup.gpu.block_hit_pct"),
            "at least 50%",
        ],
        [
            "mechanism off: sharing removed, infinite",
            _m(ctx, case, "reuse.nosharing.max.token_hit_pct"),
            _m(ctx, case, "reuse.nosharing.max.block_hit_pct"),
            "every block id unique: must be 0",
        ],
        [
            "mechanism off: sharing removed, GPU",
            _m(ctx, case, "reuse.nosharing.gpu.token_hit_pct"),
            _m(ctx, case, "reuse.nosharing.gpu.block_hit_pct"),
            "must be 0",
        ],
    ]
    recs = ctx.run.ok_records(ctx.suite, case)
    model = recs[0].details.get("model", "") if recs else ""
    claimed = ctx.figure("C1", "reuse_below_pct")
    note = f"Source claim C1: reuse 'generally below {claimed:g}%' (from the ledger). " if claimed is not None else ""
    note += f"GPU: {model}. One trace: the verdict rests on this one production workload."
    return [
        Table("KV-cache reuse on the trace (C1)", ["condition", "token hit %", "block hit %", "note"], rows, note, case)
    ]


def _paper(ctx: ViewContext, case: str, curve: Series | None) -> list:
    f = ctx.figure
    ratio, local, near = (
        f("C1", "mooncake_cache_ratio_pct"),
        f("C1", "mooncake_fig9_local_tokens"),
        f("C1", "mooncake_fig9_near_max_tokens"),
    )
    below = f("C1", "mooncake_fig9_local_share_of_max_below_pct")
    if ratio is None or curve is None:
        return []
    if not _facts(ctx, case).get("trace_is_mooncake_conversation"):
        return [
            Table(
                "The Mooncake paper's figures",
                ["note"],
                [["Not shown: they describe the Mooncake conversation trace, and this run used another trace."]],
                "",
                case,
            )
        ]

    def share(cap, pol):
        for i, (p, c) in enumerate(zip(curve.column(CURVE["policy"]), curve.column(CURVE["capacity_tokens"]))):
            if p == pol and c == cap:
                return curve.columns[CURVE["share_of_max_pct"]][i]
        return "capacity not in the curve"

    rows = [
        [
            "Table 2: cache ratio",
            f"{ratio:g}%",
            _m(ctx, case, "reuse.max.token_hit_pct"),
            "measured: the infinite cache's token hit rate",
        ]
    ]
    for cap, stated in ((local, f"less than {below:g}% of the maximum"), (near, "nearly the maximum")):
        if cap is not None:
            for pol in ("lru", "leaf-lru", "opt"):
                rows.append(
                    [
                        f"Figure 9: a {cap / 1e6:g}M-token cache",
                        stated,
                        share(cap, pol),
                        f"measured: {pol}, % of the maximum",
                    ]
                )
    return [
        Table(
            "What the Mooncake paper states for this trace (the paper's figures, not measured here)",
            ["paper", "stated by the paper", "measured here", "what is measured"],
            rows,
            "Figures from Qin et al., FAST 2025 (the ledger's C1 figures); Figure 9 plots the theoretical "
            "hit rate against capacity counting only the order of requests.",
            case,
        )
    ]


def _curve(ctx: ViewContext, case: str) -> tuple[list, Series | None]:
    policy, capacity, token_hit = CURVE["policy"], CURVE["capacity_tokens"], CURVE["token_hit_pct"]
    agg = ctx.aggregate(case, CURVE, key=[policy, capacity])
    if agg is None:
        return [], None
    pols = list(dict.fromkeys(agg.column(policy)))
    pols = [p for p in POLICY_ORDER if p in pols] + [p for p in pols if p not in POLICY_ORDER]
    blocks: list = []
    ratio = ctx.figure("C1", "mooncake_cache_ratio_pct")
    mooncake = _facts(ctx, case).get("trace_is_mooncake_conversation")
    for value, title in ((token_hit, "token-weighted"), (CURVE["block_hit_pct"], "block-weighted")):
        series = []
        for pol in pols:
            sub = agg.take([i for i, x in enumerate(agg.column(policy)) if x == pol])
            series.append(
                {"name": "maximum (infinite)" if pol == "infinite" else pol, "points": points(sub, capacity, value)}
            )
        if ratio is not None and mooncake and value == token_hit:
            caps = sorted(set(agg.column(capacity)))
            series.append({"name": f"paper T2, stated {ratio:g}%", "points": [[caps[0], ratio], [caps[-1], ratio]]})
        blocks.append(
            Chart(
                f"Prefix-cache hit rate against capacity ({title})",
                series,
                "capacity (tokens)",
                f"{title} hit rate %",
                x_log=True,
                case=case,
                note="prefix rule: a request's hit is the leading run of its blocks found in the cache"
                + (
                    "; 'paper T2': the Mooncake paper's Table 2 cache ratio for this trace, a figure "
                    "of the paper (the ledger's C1 figures), not a measurement"
                    if ratio is not None and mooncake and value == token_hit
                    else ""
                ),
            )
        )
    caps = list(dict.fromkeys(agg.column(capacity)))
    rows = []
    for pol in pols:
        by = {c: v for p, c, v in zip(agg.column(policy), agg.column(capacity), agg.column(token_hit)) if p == pol}
        rows.append([pol] + [by.get(c, "-") for c in caps])
    blocks.append(
        Table(
            "Token hit rate % by capacity (tokens) and policy",
            ["policy"] + [f"{c:,.0f}" for c in caps],
            rows,
            agg.note,
            case,
        )
    )
    rps = [[k.split(".")[1], _m(ctx, case, k)] for k in _metric_names(ctx, case) if k.endswith(".lookups_per_s")]
    if rps:
        how = _facts(ctx, case).get("simulator")
        blocks.append(
            Table(
                "Block lookups per second of the simulation",
                ["policy", "lookups/s"],
                rps,
                f"simulator: {how}" if how else "",
                case,
            )
        )
    return blocks, agg


def _pool(ctx: ViewContext, case: str) -> list:
    """One shared pool against per-instance caches of the same total capacity."""
    if ctx.metric(case, "pool.shared.token_hit_pct") is None:
        return []
    rows = [
        [
            "one shared pool",
            _m(ctx, case, "pool.shared.token_hit_pct"),
            "",
            _m(ctx, case, "reference.pool.shared.token_hit_pct"),
        ],
        [
            "per-instance caches, round robin",
            _m(ctx, case, "pool.instances.round_robin.token_hit_pct"),
            _m(ctx, case, "pool.shared_gain_over_round_robin_pp"),
            _m(ctx, case, "reference.pool.instances.round_robin.token_hit_pct"),
        ],
        [
            "per-instance caches, a conversation on one instance",
            _m(ctx, case, "pool.instances.affine.token_hit_pct"),
            _m(ctx, case, "pool.shared_gain_over_affine_pp"),
            "",
        ],
    ]
    note = (
        f"{_n(ctx, case, 'pool.instances')} instances, {_n(ctx, case, 'pool.capacity_tokens')} tokens of KV in all "
        f"(each instance the GPU's KV capacity). Controls: one instance holding it all is the pool itself (gap "
        f"{_n(ctx, case, 'pool.one_instance.gap_pp')} points, must be 0); each request followed by a copy of itself "
        f"on the next instance (the pool's gain over round robin {_n(ctx, case, 'pool.dup.shared_gain_over_round_robin_pp')} "
        f"points: a gain known to be there). The reference column is the independent recount."
    )
    return [
        Table(
            "One shared KV pool against per-instance caches (equal total capacity)",
            ["caches", "token hit %", "the pool's gain (points)", "reference token hit %"],
            rows,
            note,
            case,
        )
    ]


def _sessions(ctx: ViewContext, case: str) -> list:
    """How the reuse is spread over the trace's conversations."""
    if ctx.metric(case, "sessions.count") is None:
        return []
    rows = [
        [
            label,
            _m(ctx, case, f"sessions.{where}.token_hit_p50_pct"),
            _m(ctx, case, f"sessions.{where}.token_hit_p90_pct"),
            _m(ctx, case, f"sessions.{where}.with_hits_pct"),
        ]
        for label, where in (("infinite cache (the maximum)", "max"), ("GPU KV capacity", "gpu"))
    ]
    note = (
        f"{_n(ctx, case, 'sessions.count')} conversations: the trace's own where it names them (a Bailian chat, "
        f"a sessions file's session), else the requests that share their second block."
    )
    return [
        Table(
            "Reuse per conversation",
            ["cache", "median session's token hit %", "90th percentile %", "sessions with a hit %"],
            rows,
            note,
            case,
        )
    ]


def _metric_names(ctx: ViewContext, case: str) -> list[str]:
    names: list[str] = []
    for r in ctx.run.ok_records(ctx.suite, case):
        names += [n for n in r.metrics if n not in names]
    return names


def _eviction_claims(ctx: ViewContext, case: str) -> list:
    head_share = ctx.figure("C19", "head_share_pct")
    rows = [
        [
            "ordering lru < lfu < hybrid (C18)",
            "at every size",
            _m(ctx, case, "curve.ordering_sizes_pct"),
            f"instrument, random in the hybrid's place: {_n(ctx, case, 'curve.ordering_random_sizes_pct')}",
        ],
        [
            "head share of the most used blocks (C19, head: head_fraction of the distinct blocks)",
            f"about {head_share:g}%" if head_share is not None else "-",
            _m(ctx, case, "blocks.head_share_pct"),
            f"Zipf(1) instrument {_n(ctx, case, 'blocks.zipf_control.head_share_pct')} (law: "
            f"{_n(ctx, case, 'blocks.zipf_control.expected_head_share_pct')}); uniform (mechanism off) "
            f"{_n(ctx, case, 'blocks.uniform_head_share_pct')}",
        ],
    ]
    blocks = [
        Table(
            "The source's eviction claims on KV-block lookups",
            ["claim", "source", "measured", "controls"],
            rows,
            "ordering: % of the simulated capacities where it holds; the eviction suite measures the same on token ids",
            case,
        )
    ]
    sweep = ctx.aggregate(case, HEAD_SWEEP, key=HEAD_SWEEP["head_fraction"])
    if sweep is not None:
        blocks.append(series_table(sweep, "Head share by head size (KV blocks)", case))
    return blocks


def _tiers(ctx: ViewContext, case: str) -> list:
    blocks = []
    t = ctx.aggregate(case, TIERS, key=TIERS["tier"])
    if t is not None:
        blocks.append(
            series_table(
                t,
                "The source's tiers on the trace (C5, C17)",
                case,
                t.note + ". Model: inclusive, write-through; every use of a block is an access in "
                "every tier; the highest tier holding a block serves it.",
            )
        )
    c = ctx.aggregate(case, TIER_CONTROLS, key=TIER_CONTROLS["variant"])
    if c is not None:
        blocks.append(
            series_table(
                c,
                "The tiers beside their controls",
                case,
                f"TTLs kept {_n(ctx, case, 'tiers.ttl_kept_pct')}% of the no-TTL hit rate; L3 "
                f"LRU-K vs LRU: {_n(ctx, case, 'tiers.L3.lruk_gain_pp')} pp; all tiers reach "
                f"{_n(ctx, case, 'tiers.base.of_max_pct')}% of the maximum, L1+L2 alone "
                f"{_n(ctx, case, 'tiers.L1L2.of_max_pct')}%.",
            )
        )
    return blocks


@view("kv-trace")
def kv_trace(ctx: ViewContext) -> list:
    blocks: list = []
    for case in ctx.case_names():
        names = ctx.series_names(case)
        if CURVE.name in names:
            curve_blocks, agg = _curve(ctx, case)
            blocks += (
                _summary(ctx, case)
                + _reuse(ctx, case)
                + _sessions(ctx, case)
                + _pool(ctx, case)
                + _paper(ctx, case, agg)
                + curve_blocks
            )
            blocks += _eviction_claims(ctx, case) + _tiers(ctx, case)
        elif PAIRS.name in names:
            pairs = cast(Series, ctx.aggregate(case, PAIRS))  # not None: PAIRS is one of the case's series_names
            blocks.append(
                series_table(
                    pairs,
                    "Cross-check against the scan-based references (request by request)",
                    case,
                    "match: the same per-block hits and per-request leading runs",
                )
            )
    return blocks
