"""The engine-hotload suite's view: cold-start phases, first requests per prewarm mode
against steady state, hot swaps beside restarts, refused swaps and signed loads, all
aggregated across repetitions; claimed numbers from the ledger (C14)."""

from __future__ import annotations

from typing import cast

from harness.experiments.engine_hotload.series import (
    ACTIONS,
    COLD_STARTS,
    LATENCY_WINDOWS,
    LOAD_ATTEMPTS,
    MEMORY,
    STEADY,
    SWAP_ATTEMPTS,
)
from harness.experiments.views import Chart, Series, Table, ViewContext, points, series_table, view
from harness.verdict.analysis import MetricSummary

PHASES = ("read_ms", "verify_ms", "deserialize_ms", "context_ms", "first_infer_ms", "total_ms")
MODES = (
    ("cold", "no prewarm (control)"),
    ("profile0", "source's prewarm: profile 0, one enqueue"),
    ("prewarmed", "every profile and shape bucket"),
)


def _range(s):
    """A MetricSummary as a (median, min, max) cell; '-' when not measured."""
    if s is None:
        return "-"
    return (s.median, s.min, s.max) if s.min != s.max else s.median


def _cold_start(ctx: ViewContext, case: str) -> list:
    rows = [[ph.removesuffix("_ms"), _range(ctx.metric(case, ph))] for ph in PHASES]
    if all(r[1] == "-" for r in rows):
        return []
    bars = [[r[0], r[1][0] if isinstance(r[1], tuple) else r[1]] for r in rows[:-1] if r[1] != "-"]
    return [
        Table(
            "Cold start in a fresh process, by phase (ms; median over repetitions, min-max)",
            ["phase", "ms"],
            rows,
            case=case,
        ),
        Chart("Cold start split (median)", [{"name": "median", "points": bars}], "phase", "ms", kind="bar", case=case),
    ]


def _prewarm(ctx: ViewContext, case: str) -> list:
    steady = ctx.aggregate(case, STEADY, key=STEADY["bucket"])
    if steady is None:
        return []
    buckets = steady.column(STEADY["bucket"])
    claimed = ctx.figure("C14", "first_over_p99")
    rows = []
    for b in buckets:
        rows.append(
            [b, _range(ctx.metric(case, f"{b}.p50_ms")), _range(ctx.metric(case, f"{b}.p99_ms"))]
            + [_range(ctx.metric(case, f"{b}.{m}_first_ms")) for m, _ in MODES]
        )
    blocks: list[Table | Chart] = [
        Table(
            "First request per shape bucket by prewarm mode, against steady state (ms)",
            ["bucket", "steady p50", "steady p99"] + [f"first: {what}" for _, what in MODES],
            rows,
            note="Each engine in a fresh process, the three modes interleaved; medians over engines and "
            "repetitions (min-max over repetitions). The first request after load is at a shape the "
            "source's profile-0 enqueue did not run.",
            case=case,
        )
    ]
    claim_rows = []
    for m, what in MODES:
        claim_rows.append(
            [
                what,
                _range(ctx.metric(case, f"{m}.first_ms")),
                _range(ctx.metric(case, f"{m}.first_over_p50")),
                _range(ctx.metric(case, f"{m}.first_over_p99")),
                f"<= {claimed:g}" if claimed is not None and m != "cold" else "-",
            ]
        )
    blocks.append(
        Table(
            "Claimed vs measured: first-request penalty (source 3.1)",
            ["prewarm", "very first request ms", "worst first / p50", "worst first / p99", "claimed first / p99"],
            claim_rows,
            note="'No first-request penalty' read as: the first request no slower than the steady p99. "
            "The control (no prewarm) must show a penalty for the check to count.",
            case=case,
        )
    )
    series = []
    for m, what in MODES:
        pts = [
            [b, cast(MetricSummary, ctx.metric(case, f"{b}.{m}_first_ms")).median]  # not None: the filter below
            for b in buckets
            if ctx.metric(case, f"{b}.{m}_first_ms") is not None
        ]
        series.append({"name": f"first: {what}", "points": pts})
    series.append({"name": "steady p50", "points": points(steady, STEADY["bucket"], STEADY["p50_ms"])})
    blocks.append(Chart("First request vs steady state per bucket", series, "bucket", "ms", kind="bar", case=case))
    return blocks


def _hot_swap(ctx: ViewContext, case: str) -> list:
    acts = ctx.aggregate(case, ACTIONS)
    if acts is None:
        return []
    blocks: list[Table | Chart] = [
        series_table(
            acts,
            "Hot swaps and restarts (the control) in the request stream",
            case,
            note=acts.note + ". Row k is the k-th action of each repetition (median, min-max).",
        )
    ]
    fig = ctx.figure("C14", "swap_memory_over_engine")
    failed, ctrl = ctx.metric(case, "failed_requests"), ctx.metric(case, "control.failed_requests")
    mem = ctx.metric(case, "gpu_peak_extra_over_engine") or ctx.metric(case, "rss_peak_extra_over_engine")
    rows = [
        ["failed requests, hot swaps", "0", _range(failed)],
        ["failed requests, restarts (control)", "-", _range(ctrl)],
        ["swap, start to serving the new engine (ms)", "not stated", _range(ctx.metric(case, "swap.to_serving_ms"))],
        ["lock held to switch (ms)", "not stated", _range(ctx.metric(case, "swap.switch_ms"))],
        [
            "memory during a swap / engine size"
            + ("" if ctx.metric(case, "gpu_peak_extra_over_engine") else " (process RSS, no GPU)"),
            f">= {fig:g}x in total (extra <= {fig - 1:g}x)" if fig is not None else "-",
            (1 + mem.median) if mem else "-",
        ],
    ]
    blocks.append(Table("Claimed vs measured: hot swap (source 3.1)", ["what", "claimed", "measured"], rows, case=case))
    t_s = LATENCY_WINDOWS["t_s"]
    win = ctx.aggregate(case, LATENCY_WINDOWS, key=t_s)
    if win is not None:
        blocks.append(
            Chart(
                "Request latency over time around the swaps (median over repetitions)",
                [
                    {"name": "p50 per window", "points": points(win, t_s, LATENCY_WINDOWS["p50_ms"])},
                    {"name": "max per window", "points": points(win, t_s, LATENCY_WINDOWS["max_ms"])},
                    {"name": "failed per window", "points": points(win, t_s, LATENCY_WINDOWS["failed"])},
                ],
                "time (s)",
                "ms / failed requests",
                case=case,
            )
        )
    memory = ctx.aggregate(case, MEMORY)
    if memory is not None:
        series = [{"name": "process RSS MiB", "points": points(memory, MEMORY["t_s"], MEMORY["rss_mib"])}]
        if any(v is not None for v in memory.column(MEMORY["gpu_mib"])):
            series.append({"name": "GPU used MiB", "points": points(memory, MEMORY["t_s"], MEMORY["gpu_mib"])})
        blocks.append(Chart("Memory around the swaps", series, "time (s)", "MiB", note=memory.note, case=case))
    return blocks


@view("engine-hotload")
def engine_hotload(ctx: ViewContext) -> list:
    blocks: list = []
    for case in ctx.case_names():
        names = ctx.series_names(case)
        if COLD_STARTS.name in names:
            blocks += _cold_start(ctx, case)
        if STEADY.name in names:
            blocks += _prewarm(ctx, case)
        if ACTIONS.name in names:
            blocks += _hot_swap(ctx, case)
        if SWAP_ATTEMPTS.name in names:  # the incompatible swaps' or the signed loads' (the same name)
            swaps = SWAP_ATTEMPTS["variant"] in ctx.series(case, SWAP_ATTEMPTS)[0][1].columns
            shape, key = (SWAP_ATTEMPTS, ("variant", "check")) if swaps else (LOAD_ATTEMPTS, ("case", "verification"))
            att = ctx.aggregate(case, shape, key=[shape[k] for k in key])
            title = (
                "Swap attempts to models with other IO tensors (check on, then off as the control)"
                if swaps
                else "Verified loads and refusals (verification on, then off as the control)"
            )
            # not None: the series exists (its first run was read above), and aggregate is None only without runs
            blocks.append(series_table(cast(Series, att), title, case))
    return blocks
