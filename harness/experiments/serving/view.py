"""The serving suite's view: prefix caching on and off on the trace slice, the engine's own
hit rate beside the simulator's prediction, the semantic cache's end-to-end TTFT, the
harness's client beside vLLM's own, the client's overhead and the schedule's lateness. Every
number is the median over repetitions (min-max beside it); claimed numbers come from the
ledger."""

from __future__ import annotations

from harness.experiments.serving.series import LOADGENS, POINTS, REQUESTS, SEMANTIC_VS_HASH
from harness.experiments.views import Block, Chart, Table, ViewContext, series_table, view

ARMS = (
    ("trace.on", "trace slice, prefix caching on"),
    ("trace.off", "trace slice, prefix caching off (mechanism off)"),
    ("instrument.on", "one long prefix repeated, caching on (instrument)"),
    ("instrument.off", "one long prefix repeated, caching off"),
    ("instrument.cold", "a long prefix of its own per request, caching on (nothing to reuse)"),
)
SEM_MODES = (
    ("no_cache", "no cache (the engine serves every request)"),
    ("hash_cache", "prompt-hash cache"),
    ("semantic_cache", "semantic cache (LSH)"),
    ("oracle_cache", "oracle cache (instrument)"),
)


def _cell(s):
    if s is None:
        return "-"
    return (s.median, s.min, s.max) if s.min != s.max else s.median


def _m(ctx: ViewContext, case: str, name: str):
    return _cell(ctx.metric(case, name))


def _prefix(ctx: ViewContext, case: str) -> list:
    rows = [
        [
            label,
            _m(ctx, case, f"{arm}.ttft_p50_ms"),
            _m(ctx, case, f"{arm}.ttft_p95_ms"),
            _m(ctx, case, f"{arm}.tpot_p50_ms"),
            _m(ctx, case, f"{arm}.engine_hit_pct"),
            _m(ctx, case, f"{arm}.error_pct"),
        ]
        for arm, label in ARMS
        if ctx.metric(case, f"{arm}.requests")
    ]
    blocks: list[Block] = [
        Table(
            "Prefix caching on and off: the Mooncake slice replayed to the engine",
            ["arm", "TTFT P50 (ms)", "TTFT P95 (ms)", "TPOT P50 (ms)", "engine hit rate (%)", "errors (%)"],
            rows,
            note="Arms in rotating order, one at a time; new prompt tokens every repetition. The "
            "engine's hit rate is its own: deltas of vllm:prefix_cache_hits_total over "
            "vllm:prefix_cache_queries_total ('-' where the server has no such counters).",
            case=case,
        )
    ]
    claimed = ctx.figure("C1", "reuse_below_pct")
    rows = [
        ["engine (measured, its /metrics)", _m(ctx, case, "trace.on.engine_hit_pct")],
        ["simulator at the engine's capacity (predicted)", _m(ctx, case, "trace.predicted_hit_pct")],
        ["simulator, infinite cache", _m(ctx, case, "trace.predicted_max_hit_pct")],
        ["engine minus simulator (pp)", _m(ctx, case, "trace.hit_gap_pp")],
        ["claimed (C1): reuse below (%)", "-" if claimed is None else claimed],
    ]
    blocks.append(
        Table(
            "The engine's prefix-cache hit rate beside the simulator's prediction (same engine blocks)",
            ["what", "token hit rate (%)"],
            rows,
            case=case,
            note="The simulator (kv-trace's predicted_hit_rate) replays the same engine blocks (an "
            "engine block is named by the hash id holding its last token) at the engine's "
            "capacity from vllm:cache_config_info. The suite's threshold is the tolerance. "
            + _which_is_off(ctx.metric(case, "trace.hit_gap_pp")),
        )
    )
    hosts = ctx.aggregate(case, LOADGENS, key=[LOADGENS["arm"], LOADGENS["load_generator"]])
    if hosts is not None:
        blocks.append(
            series_table(
                hosts,
                "The client on each load generator (the arms above merge every host's rows)",
                case,
                note="Requests dealt round-robin to the inventory's load generators, each "
                "at its scheduled time, from one shared start. Each host's own TTFT is its rows' "
                "percentile; the arms' percentiles above are over every host's rows merged "
                "(every request counted once), never an average of the hosts' percentiles.",
            )
        )
    chart = [
        {"name": label, "points": [[i, v] for i, v in enumerate(_ttfts(ctx, case, arm))]} for arm, label in ARMS[:2]
    ]
    if any(c["points"] for c in chart):
        blocks.append(
            Chart(
                "TTFT per request of the trace slice, caching on and off (first repetition)",
                chart,
                "request",
                "TTFT (ms)",
                "scatter",
                y_log=True,
                case=case,
            )
        )
    return blocks


def _which_is_off(gap) -> str:
    if gap is None:
        return "No prediction beside it: the server has no vllm:cache_config_info or no prefix-cache counters."
    if abs(gap.median) < 0.05:
        return "The engine measured what the simulator predicted."
    side = "above" if gap.median > 0 else "below"
    return (
        f"The engine's own hit rate is {abs(gap.median):.1f} points {side} the simulator's (median over repetitions)."
    )


def _ttfts(ctx: ViewContext, case: str, arm: str) -> list:
    runs = ctx.series(case, arm.replace(".", "_"))
    if not runs:
        return []
    return [v for v in runs[0][1].columns[REQUESTS["ttft_ms"]] if v is not None]


def _semantic(ctx: ViewContext, case: str) -> list:
    rows = [
        [
            label,
            _m(ctx, case, f"{mode}.p50_ms"),
            _m(ctx, case, f"{mode}.p95_ms"),
            _m(ctx, case, f"{mode}.correct_hit_rate_pct") if mode != "no_cache" else "-",
            _m(ctx, case, f"{mode}.wrong_hits") if mode != "no_cache" else "-",
        ]
        for mode, label in SEM_MODES
    ]
    p95 = ctx.figure("C3", "p95_ms") or [None, None]
    note = (
        "Interleaved per query (rotating order); a miss's TTFT is the cache lookup plus the engine's first "
        "streamed token over HTTP; wrong hits are served by the engine. Claimed (C3): P95 "
        f"{p95[0]} ms with the hash cache, {p95[1]} ms with the semantic cache. Change of P95, semantic vs hash: "
        f"{_fmt(ctx.metric(case, 'ttft.p95_change_semantic_vs_hash_pct'))}%."
    )
    return [
        Table(
            "The semantic cache in front of the engine: time to first token end to end",
            ["mode", "TTFT P50 (ms)", "TTFT P95 (ms)", "correct hits (%)", "wrong hits"],
            rows,
            note,
            case,
        )
    ]


def _fmt(s) -> str:
    return "-" if s is None else f"{s.median:.3g}"


def _peer(ctx: ViewContext, case: str) -> list:
    rows = []
    for what, label in (
        ("ttft_p50", "TTFT P50"),
        ("ttft_p95", "TTFT P95"),
        ("tpot_p50", "TPOT P50"),
        ("tpot_p95", "TPOT P95"),
        ("itl_p50", "ITL P50"),
        ("e2e_p50", "end to end P50"),
    ):
        diff = ctx.metric(case, f"peer.{what}_diff_pct")
        rows.append(
            [label, _m(ctx, case, f"harness.{what}_ms"), _m(ctx, case, f"vllm.{what}_ms"), _cell(diff) if diff else "-"]
        )
    rows.append(
        [
            "TTFT P50, harness client made 150 ms late (instrument)",
            _m(ctx, case, "instrument.late.ttft_p50_ms"),
            _m(ctx, case, "vllm.ttft_p50_ms"),
            _m(ctx, case, "instrument.late.ttft_p50_diff_pct"),
        ]
    )
    agree = ctx.figure("I23", "agree_pct")
    return [
        Table(
            "The harness's client beside vLLM's benchmark client (same server, same requests)",
            ["measure", "harness (ms)", "vllm bench serve (ms)", "harness vs vLLM (%)"],
            rows,
            f"Rounds alternating (their order flips per repetition); the medians must agree within {agree}% "
            f"(ledger I23). {_late_client(ctx, case, agree)}",
            case,
        )
    ]


def _late_client(ctx: ViewContext, case: str, agree) -> str:
    """Which client is late, when the medians do not agree (the larger figure is the later one)."""
    out = []
    for what, label in (("ttft_p50", "TTFT"), ("tpot_p50", "TPOT")):
        d = ctx.metric(case, f"peer.{what}_diff_pct")
        if d is None or agree is None or abs(d.median) <= agree:
            continue
        late = "the harness's client" if d.median > 0 else "vLLM's client"
        out.append(f"{label}: {late} measured {abs(d.median):.1f}% later")
    return "; ".join(out) + "." if out else ""


def _overhead(ctx: ViewContext) -> list:
    rows = []
    for case, prefixes in (("prefix-cache", [a for a, _ in ARMS]), ("client-vs-vllm", ["harness"])):
        for pre in prefixes:
            if ctx.metric(case, f"{pre}.requests") is None:
                continue
            rows.append(
                [
                    f"{case} / {pre}",
                    _m(ctx, case, f"{pre}.client_send_p50_ms"),
                    _m(ctx, case, f"{pre}.client_send_p95_ms"),
                    _m(ctx, case, f"{pre}.client_parse_us_per_chunk"),
                    _m(ctx, case, f"{pre}.late_pct"),
                    _m(ctx, case, f"{pre}.late_p95_ms"),
                ]
            )
    if not rows:
        return []
    return [
        Table(
            "The streaming client's own overhead and the schedule's lateness",
            [
                "run",
                "dispatch to body sent P50 (ms)",
                "P95 (ms)",
                "parse per chunk (us)",
                "late (% > 10 ms)",
                "lateness P95 (ms)",
            ],
            rows,
            "Open loop: a request is dispatched at its scheduled time whatever is still in flight; lateness is "
            "dispatch time minus scheduled time, on the client's 2 shared cores.",
        )
    ]


SWEEP_ARMS = (
    ("prefix.on", "prefix caching on"),
    ("prefix.off", "prefix caching off (mechanism off)"),
    ("instrument.on", "one long prefix repeated, caching on (instrument)"),
    ("instrument.off", "one long prefix repeated, caching off"),
    ("semantic.on", "semantic cache in front"),
    ("semantic.hash", "prompt-hash cache in front"),
    ("semantic.off", "no cache in front (mechanism off)"),
    ("semantic.oracle", "oracle cache in front (instrument)"),
)


def _sweep_charts(pts: dict, case: str, unit: str, slo: str) -> list:
    """TTFT P95 and goodput against load, a line per arm with its knee marked."""
    arm_, level, saturated, invalid = (POINTS[c] for c in ("arm", "level", "saturated", "invalid"))
    blocks: list = []
    for y, title, label in (
        (POINTS["ttft_p95_ms"], "TTFT P95 against load", "TTFT P95 (ms)"),
        (POINTS["goodput_rps"], "Goodput (requests meeting the SLO per second) against load", "goodput (req/s)"),
    ):
        series = []
        for arm, name in SWEEP_ARMS:
            idx = [i for i, a in enumerate(pts[arm_]) if a == arm and pts[y][i] is not None]
            if idx:
                series.append({"name": name, "points": [[pts[level][i], pts[y][i]] for i in idx]})
                knee = next((i for i in idx if pts[saturated][i] and not pts[invalid][i]), None)
                if knee is not None:
                    series.append({"name": f"{name}: knee", "points": [[pts[level][knee], pts[y][knee]]]})
        if series:
            blocks.append(
                Chart(
                    f"Load sweep: {title} (first repetition)",
                    series,
                    f"load ({unit})",
                    label,
                    kind="line",
                    case=case,
                    note=f"SLO: {slo}. A knee point is the first load at which "
                    "the server no longer kept up; the sweep ran one point past it.",
                )
            )
    return blocks


def _sweep(ctx: ViewContext, case: str) -> list:
    """Latency and goodput against load per arm (first repetition's points, the knee marked),
    the highest load at the SLO per arm and what each cache buys (medians over repetitions)."""
    runs = ctx.series(case, POINTS)
    if not runs:
        return []
    unit = "req/s" if (ctx.run.ok_records(ctx.suite, case)[0].details or {}).get("mode", "open") == "open" else "users"
    slo = (ctx.run.ok_records(ctx.suite, case)[0].details or {}).get("slo", "")
    blocks = _sweep_charts(runs[0][1].columns, case, unit, slo)
    rows = [
        [
            name,
            _m(ctx, case, f"{arm}.max_at_slo"),
            _m(ctx, case, f"{arm}.slo_failed_at")
            if ctx.metric(case, f"{arm}.slo_failed_at")
            else "held at every load tried",
            _m(ctx, case, f"{arm}.knee"),
            _m(ctx, case, f"{arm}.invalid_points"),
        ]
        for arm, name in SWEEP_ARMS
        if ctx.metric(case, f"{arm}.points")
    ]
    blocks.append(
        Table(
            "Load sweep: the highest load at the SLO per arm",
            ["arm", f"highest at the SLO ({unit})", f"SLO failed at ({unit})", f"knee ({unit})", "invalid points"],
            rows,
            case=case,
            note=f"SLO: {slo}. The highest load at which it held, and held at every valid point below "
            "it; where it held at every load tried, the capacity is at least the top load and a "
            "capacity gain over such an arm is not computed. A point is invalid when the load sent "
            "was not the load configured (its reason is in the points table).",
        )
    )
    hit = {"semantic": "cache_hit_pct"}
    buys = [
        [
            cache,
            _m(ctx, case, f"{cache}.on.{hit.get(cache, 'engine_hit_pct')}"),
            _m(ctx, case, f"{cache}.ttft_p95_change_pct"),
            _m(ctx, case, f"{cache}.capacity_gain_x"),
            _m(ctx, case, f"{cache}.prefill_tokens_saved_per_s"),
        ]
        for cache in ("prefix", "instrument", "semantic")
        if ctx.metric(case, f"{cache}.on.points")
    ]
    if buys:
        blocks.append(
            Table(
                "What the hit rate buys",
                [
                    "cache",
                    "hit rate (%)",
                    "TTFT P95 change at equal load (%)",
                    "capacity at the SLO (x, on over off)",
                    "prefill tokens saved (tokens/s)",
                ],
                buys,
                case=case,
                note="Hit rate: the engine's own prefix-cache counters for prefix caching; the "
                "semantic cache's correct hits (answers checked against the dataset's labels) for "
                "the cache in front of the engine, whose saved tokens are its hits times the mean "
                "prompt the engine served.",
            )
        )
    versus = ctx.aggregate(case, SEMANTIC_VS_HASH, key=SEMANTIC_VS_HASH["level"])
    if versus is not None:
        blocks.append(
            series_table(
                versus,
                "C3 against the curve: TTFT P95, semantic cache against the hash cache, "
                "at every load both ran steadily",
                case,
                note="Steadily: valid, not saturated, every request completed. The ledger judges "
                "C3 on the P95 over every measured request of the loads where all the "
                "semantic arms ran steadily (semantic.vs_hash.ttft_p95_change_pct): one "
                "load's P95 of a dozen requests is nearly its slowest one.",
            )
        )
    agg = ctx.aggregate(case, POINTS, key=[POINTS["arm"], POINTS["level"]])
    if agg is not None:
        blocks.append(series_table(agg, "Load sweep: every point (median over repetitions)", case))
    return blocks


@view("serving")
def serving(ctx: ViewContext) -> list:
    blocks: list = []
    names = ctx.case_names()
    if "prefix-cache" in names:
        blocks += _prefix(ctx, "prefix-cache")
    if "semantic-e2e" in names:
        blocks += _semantic(ctx, "semantic-e2e")
    if "client-vs-vllm" in names:
        blocks += _peer(ctx, "client-vs-vllm")
    if "sweep" in names:
        blocks += _sweep(ctx, "sweep")
    return blocks + _overhead(ctx)
