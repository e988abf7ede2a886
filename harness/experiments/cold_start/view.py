"""The cold-start suite's view: per-second store load around the flush, flush minus its paired
no-flush control beside the source's series (C8), and pool occupancy and refusals by cluster
size beside the source's figures (C9). Everything is aggregated across repetitions (median,
with min-max)."""

from __future__ import annotations

from harness.experiments.cold_start.series import EXCESS, FLUSH_SECONDS, POOL_SECONDS, POOL_SWEEP
from harness.experiments.views import Chart, Table, points, series_table, view

FLUSH = "flush-one-primary"
POOL = "pool-by-cluster-size"
RUNS = ("flush", "control", "no-retry")


def _summary(ms):
    """A metric as a (median, min, max) cell, or the median alone, or 'missing'."""
    if ms is None:
        return "missing"
    return (ms.median, ms.min, ms.max) if ms.min != ms.max else ms.median


def _flush_blocks(ctx) -> list:
    blocks: list = []
    second, flush_minus, noretry_minus = (EXCESS[c] for c in ("second", "flush_minus_control", "noretry_minus_control"))
    excess = ctx.aggregate(FLUSH, EXCESS, key=second)
    claimed = ctx.figure("C8", "cold_node_store_qps") or []
    if excess is not None:
        cols = excess.columns
        seconds = cols[second]
        rows = []
        for i, s in enumerate(seconds):
            rows.append(
                [
                    s + 1,
                    _cell(cols, flush_minus, i),
                    _cell(cols, noretry_minus, i),
                    claimed[s] if s < len(claimed) else "-",
                ]
            )
        growth = ctx.metric(FLUSH, "cold_node.excess_growth_per_s")
        growth_nr = ctx.metric(FLUSH, "noretry.cold_node.excess_growth_per_s")
        blocks.append(
            Table(
                "The cold node's store queries per second after the flush, minus the paired no-flush control",
                [
                    "second after the flush",
                    "flush - control (queries/s)",
                    "retry off: flush - control (queries/s)",
                    "source's series (QPS)",
                ],
                rows,
                note=(
                    "Median (min-max) over repetitions. Growth per second of flush - control: "
                    f"{_fmt(growth)}; with the retry policy off: {_fmt(growth_nr)}. The source's column is its "
                    "claimed series (the ledger's C8 figures), a model rather than a measurement; the measured "
                    "node holds a third of a 3-primary cluster's slots, the source's a 15% share of 20 nodes (the "
                    "ledger compares the case's measured facts cluster_primaries and cold_node_share_pct)."
                ),
                case=FLUSH,
            )
        )
        chart = [
            {"name": "flush - control", "points": points(excess, second, flush_minus)},
            {"name": "retry off: flush - control", "points": points(excess, second, noretry_minus)},
        ]
        for line in chart:
            line["points"] = [[p[0] + 1, *p[1:]] for p in line["points"]]
        if claimed:
            chart.append({"name": "source's series", "points": [[i + 1, v] for i, v in enumerate(claimed)]})
        blocks.append(
            Chart(
                "Cold node: store queries per second above the control, beside the source's series",
                chart,
                "seconds after the flush",
                "queries/s",
                note="log scale; seconds with no excess (<= 0) have no point on it",
                y_log=True,
                case=FLUSH,
            )
        )
    per = ctx.aggregate(FLUSH, FLUSH_SECONDS, key=[FLUSH_SECONDS["run"], FLUSH_SECONDS["second"]])
    if per is not None:
        lines = []
        for run in RUNS:
            idx = [i for i, r in enumerate(per.columns[FLUSH_SECONDS["run"]]) if r == run]
            if idx:
                sub = per.take(idx)
                lines.append(
                    {"name": run, "points": points(sub, FLUSH_SECONDS["second"], FLUSH_SECONDS["cold_store_queries"])}
                )
        blocks.append(
            Chart(
                "Cold node's store queries per second, each run (flush at 0; the control is not flushed)",
                lines,
                "seconds since the flush point",
                "queries/s",
                case=FLUSH,
            )
        )
        blocks.append(series_table(per, "Per second, each run (second 0 starts at the flush point)", FLUSH))
    warm = [ctx.metric(FLUSH, n) for n in ("warm.seconds", "warm.steady", "warm.measured_spread_pp")]
    if any(w is not None for w in warm):
        blocks.append(
            Table(
                "Warm-up before the flush",
                ["warm-up (s)", "steady (1) or capped (0)", "measured hit-rate spread in the steady window (pp)"],
                [[_summary(w) for w in warm]],
                case=FLUSH,
            )
        )
    return blocks


def _cell(cols: dict, c: str, i: int):
    """Row i of an aggregated column as (median, min, max), or the value when they agree."""
    lo, hi = cols.get(c + ".min"), cols.get(c + ".max")
    v = cols[c][i]
    return (v, lo[i], hi[i]) if lo and hi and lo[i] != hi[i] else v


def _fmt(ms) -> str:
    if ms is None:
        return "missing"
    if ms.min == ms.max:
        return f"{ms.median:.2f}x"
    return f"{ms.median:.2f}x ({ms.min:.2f}-{ms.max:.2f})"


def _pool_blocks(ctx) -> list:
    per = ctx.aggregate(POOL, POOL_SECONDS, key=[POOL_SECONDS[c] for c in ("primaries", "run", "second")])
    if per is None:
        return []
    sizes = sorted({int(n) for n in per.columns[POOL_SECONDS["primaries"]]})
    nodes = ctx.figure("C9", "nodes") or []
    claimed_occ = dict(zip(nodes, ctx.figure("C9", "pool_occupancy_pct") or []))
    claimed_qps = dict(zip(nodes, ctx.figure("C9", "store_qps") or []))
    rows = []
    for n in sizes:
        m = {
            (pre, k): ctx.metric(POOL, f"{pre}p{n}.{k}")
            for pre in ("", "control.")
            for k in ("pool.peak_occupancy_pct", "pool.refused", "store_qps.peak")
        }
        rows.append(
            [
                n,
                _summary(m[("", "pool.peak_occupancy_pct")]),
                _summary(m[("control.", "pool.peak_occupancy_pct")]),
                _summary(m[("", "pool.refused")]),
                _summary(m[("control.", "pool.refused")]),
                _summary(m[("", "store_qps.peak")]),
                claimed_occ.get(n, "-"),
                claimed_qps.get(n, "-"),
            ]
        )
    for n in nodes:
        if n not in sizes:
            rows.append(
                [
                    n,
                    "not run",
                    "not run",
                    "not run",
                    "not run",
                    "not run",
                    claimed_occ.get(n, "-"),
                    claimed_qps.get(n, "-"),
                ]
            )
    blocks: list = [
        Table(
            "Store pool with half the primaries cold, by cluster size (after the flush)",
            [
                "primaries",
                "peak pool occupancy, flush (%)",
                "no-flush control (%)",
                "refused reads, flush",
                "refused, control",
                "peak store queries/s, flush",
                "source: pool (%)",
                "source: store QPS",
            ],
            rows,
            note=(
                "Median (min-max) over the repetitions that measured the size. Occupancy: the highest per-second "
                "mean of connections in use over the pool size. The source's columns are the ledger's C9 "
                "figures (C8's series times the node count; the largest is 'over' its value); the source gives "
                "no pool size."
            ),
            case=POOL,
        )
    ]
    lines = []
    for run in ("flush", "control"):
        pts = []
        for n in sizes:
            ms = ctx.metric(POOL, f"{'control.' if run == 'control' else ''}p{n}.pool.peak_occupancy_pct")
            if ms is not None:
                pts.append([n, ms.median, ms.min, ms.max])
        lines.append({"name": run, "points": pts})
    if claimed_occ:
        lines.append({"name": "source", "points": [[n, v] for n, v in claimed_occ.items()]})
    blocks.append(
        Chart(
            "Peak store pool occupancy by cluster size",
            lines,
            "primaries",
            "pool occupancy (%)",
            kind="scatter",
            case=POOL,
        )
    )
    sweep = ctx.aggregate(POOL, POOL_SWEEP, key=[POOL_SWEEP["primaries"], POOL_SWEEP["pool_size"]])
    if sweep is not None:
        blocks.append(
            series_table(
                sweep,
                "The flush with pools of several sizes (the source gives none)",
                POOL,
                sweep.note + ". Peak occupancy and refused reads after the flush; the ledger "
                "judges C9 at the profile's pool_size.",
            )
        )
    blocks.append(series_table(per, "Per second, each cluster size and run (second 0 starts at the flush point)", POOL))
    return blocks


@view("cold-start")
def cold_start(ctx) -> list:
    return _flush_blocks(ctx) + _pool_blocks(ctx)
