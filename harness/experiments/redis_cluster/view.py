"""The redis-cluster suite's view: redis-benchmark and memtier runs (measured beside their
controls), the primaries that served the load, and the ACL probes, aggregated across
repetitions. Claimed numbers come from the ledger (C12, C13 figures)."""

from __future__ import annotations

from harness.base import stats
from harness.experiments.redis_cluster.series import (
    BENCHMARK_RUNS,
    LOADGEN_PERCENTILE,
    LOADGENS,
    MEMTIER_RUNS,
    PRIMARIES,
    PROBE_REPLIES,
)
from harness.experiments.views import Chart, Table, ViewContext, series_table, view
from harness.infra.load_tools.memtier import HISTOGRAMS, pooled_percentiles

POOLED_QS = (50, 99, 99.9)


def _benchmark(ctx: ViewContext) -> list:
    case = "redis-benchmark"
    blocks: list = []
    run_, test, clients, p99 = (BENCHMARK_RUNS[c] for c in ("run", "test", "clients", "p99_ms"))
    runs = ctx.aggregate(case, BENCHMARK_RUNS, key=[run_, test])
    if runs is not None:
        claimed = ctx.figure("C12", "p99_ms")
        one = next(
            (
                r.details["one_load_generator"]
                for r in ctx.run.ok_records(ctx.suite, case)
                if isinstance(r.details.get("one_load_generator"), str)
            ),
            "",
        )
        blocks.append(
            series_table(
                runs,
                "redis-benchmark: measured and control runs (median over repetitions, min-max)",
                case,
                note="The control is the same benchmark with more clients, run alternately before and after the "
                "measured run: a closed loop queues deeper, so its percentiles must be higher. "
                + (
                    f"The source claims GET/SET P99 < {claimed:g} ms (C12) at "
                    f"{ctx.figure('C12', 'clients'):g} clients on its lab hosts."
                    if claimed is not None
                    else ""
                )
                + (f" {one[0].upper()}{one[1:]}." if one else ""),
            )
        )
        series = []
        lo, hi = runs.columns.get(f"{p99}.min"), runs.columns.get(f"{p99}.max")
        for run in dict.fromkeys(runs.column(run_)):
            idx = [i for i, r in enumerate(runs.column(run_)) if r == run and runs.column(p99)[i] is not None]
            pts = [
                [f"{runs.column(test)[i]} P99", runs.column(p99)[i]] + ([lo[i], hi[i]] if lo and hi else [])
                for i in idx
            ]
            if idx:
                series.append({"name": f"{run} ({runs.column(clients)[idx[0]]:g} clients)", "points": pts})
        if claimed is not None:
            series.append(
                {
                    "name": "claimed (C12, lab)",
                    "points": [[f"{t} P99", claimed] for t in dict.fromkeys(runs.column(test))],
                }
            )
        blocks.append(Chart("redis-benchmark P99 by run", series, "", "P99 latency (ms)", kind="bar", case=case))
    primaries = ctx.aggregate(case, PRIMARIES, key=PRIMARIES["node"])
    if primaries is not None:
        blocks.append(
            series_table(
                primaries,
                "GET/SET calls each primary executed during the measured run",
                case,
                note="INFO commandstats before and after the measured run; a primary serves the "
                "run when it executed at least 10% of its calls (C11).",
            )
        )
    return blocks


def _memtier(ctx: ViewContext) -> list:
    case = "memtier"
    runs = ctx.aggregate(case, MEMTIER_RUNS, key=MEMTIER_RUNS["run"])
    if runs is None:
        return _pooled(ctx)
    claimed = ctx.figure("C13", "ops_per_sec")
    note = "The control is one client on one thread, run alternately before and after the measured run."
    if claimed is not None:
        note += f" The source claims > {claimed:,.0f} ops/s (C13) on its lab hosts."
    return (
        [series_table(runs, "memtier_benchmark: measured and control runs", case, note=note)]
        + _loadgens(ctx)
        + _pooled(ctx)
    )


def _loadgens(ctx: ViewContext) -> list:
    """Several load generators: each one's own figures (median over repetitions) and, last,
    the case's figures, which come from all of them together."""
    case = "memtier"
    host = LOADGENS["load_generator"]
    hosts = ctx.aggregate(case, LOADGENS, key=host)
    if hosts is None:
        return []
    table = series_table(hosts, "memtier_benchmark on each load generator, and all of them merged", case)
    count = ctx.metric(case, "loadgens.count")
    merged: list[str | float | tuple[float, float, float]] = []
    for col in (c for c in hosts.columns if not c.endswith((".min", ".max"))):  # the table's columns, in order
        metric = "Totals." + col if col == LOADGENS["ops_per_sec"] or LOADGEN_PERCENTILE.holds(col) else ""
        m = ctx.metric(case, metric) if metric else None
        if col == host:
            merged.append(f"all {count.median:g} merged" if count else "all merged")
        else:
            merged.append("" if m is None else (m.median, m.min, m.max) if m.min != m.max else m.median)
    table.rows.append(merged)
    share = ctx.metric(case, "loadgens.overlap_share")
    table.note = (
        "Each load generator ran its own memtier_benchmark with its own share of the keys, started "
        "together (start and finish in seconds from the first start, by each host's clock). The merged "
        "row is what the claims are judged on: throughput is every host's operations in the window "
        "they all ran in, summed; percentiles come from their HDR histograms added together (every "
        "request counted once), never from averaging the hosts' own percentiles."
        + (f" They ran together for a median {share.median:.0%} of the longest one's window." if share else "")
    )
    return [table]


def _pooled_row(kind: str, rows: list[dict]) -> list | None:
    """[kind, repetitions, requests, (median, min, max) of the runs' own percentile per q,
    the percentile of the pooled requests per q]; None when the histograms do not merge."""
    try:
        pooled, n = pooled_percentiles([r[HISTOGRAMS["histogram"]] for r in rows], POOLED_QS)
    except ValueError:
        return None
    if not pooled:
        return None
    row: list = [kind, len(rows), n]
    for q in POOLED_QS:
        col = HISTOGRAMS[f"p{q:g}_ms"]
        vals = [r[col] for r in rows if r.get(col) is not None]
        row.append((stats.median(vals), min(vals), max(vals)) if len(vals) > 1 else (vals[0] if vals else None))
    return row + [pooled[q] for q in POOLED_QS]


def _pooled(ctx: ViewContext) -> list:
    """memtier's HDR histograms of every repetition merged (the driver's `histograms` series):
    every request counted once, beside the median of the per-repetition percentiles."""
    case = "memtier"
    groups: dict[str, dict[str, list[dict]]] = {}
    for _, s in ctx.series(case, HISTOGRAMS):
        for i in range(len(s)):
            row = {c: s.columns[c][i] for c in s.columns}
            groups.setdefault(row[HISTOGRAMS["run"]], {}).setdefault(row[HISTOGRAMS["kind"]], []).append(row)
    cols = (
        ["rows", "repetitions", "requests"]
        + [f"P{q:g} median of runs (ms)" for q in POOLED_QS]
        + [f"P{q:g} pooled (ms)" for q in POOLED_QS]
    )
    blocks = []
    for run, kinds in groups.items():
        rows = [r for r in (_pooled_row(kind, rs) for kind, rs in kinds.items()) if r]
        if rows:
            blocks.append(
                Table(
                    f"memtier ({run}): latency percentiles, pooled over repetitions",
                    cols,
                    rows,
                    note="pooled: memtier's HDR histograms of every repetition merged (every request "
                    "counted once); median of runs: the median (min-max) of each repetition's own "
                    "percentile",
                    case=case,
                )
            )
    return blocks


def _acl(ctx: ViewContext) -> list:
    case = "acl"
    rule, probe, kind, reply = (PROBE_REPLIES[c] for c in ("rule", "probe", "kind", "reply"))
    probes = ctx.aggregate(case, PROBE_REPLIES, key=[rule, probe])
    if probes is None:
        return []
    rules = list(dict.fromkeys(probes.column(rule)))
    by = {(r, p): answer for r, p, answer in zip(probes.column(rule), probes.column(probe), probes.column(reply))}
    kinds = dict(zip(probes.column(probe), probes.column(kind)))
    rows = [[p, kinds[p]] + [by.get((r, p), "-") for r in rules] for p in dict.fromkeys(probes.column(probe))]
    return [
        Table(
            "ACL probes as the trt-infer user, per rule",
            ["probe", "kind"] + rules,
            rows,
            note="source = the rule as written ('~cache:* +get +hgetall -@all'); fixed = the working order "
            "('-@all +get +hgetall ~cache:*'); read-all = '-@all +@read ~*', the control that shows a "
            "refusal check can fail. Only a NOPERM reply counts as refused; 'ok (ACL DRYRUN...)' means "
            "the rule grants a destructive command, which is then not sent. Rules apply left to right.",
            case=case,
        )
    ]


@view("redis-cluster")
def redis_cluster(ctx: ViewContext) -> list:
    return _benchmark(ctx) + _memtier(ctx) + _acl(ctx)
