"""The failover suite's view: per case a table of every run (failover times, outage, rejoin),
the per-variant table of lost acknowledged writes, and a timeline chart per run
(acknowledged writes and errors per 100 ms, role changes in its note and table), all
aggregated across repetitions (median, min-max)."""

from __future__ import annotations

from harness.experiments.failover.series import EVENTS, TIMELINE
from harness.experiments.views import Chart, Table, ViewContext, points, series_table, view

WHAT = {
    "plain": "SET",
    "wait": "SET + WAIT 1 (acknowledged only when a replica confirmed)",
    "min-replicas": "SET, min-replicas-to-write 1 on every node",
    "no-kill": "control: the same schedule, nothing killed",
    "no-replicas": "control: the same kill on 3 primaries without replicas",
    "no-nodes-conf": "control: the kill, restarted without its nodes.conf",
    "no-cut": "control: the same schedule, the link left up",
}
ORDER = list(WHAT)


def _cell(ctx: ViewContext, case: str, name: str):
    m = ctx.metric(case, name)
    if m is None or not m.values:
        return "-"
    return (m.median, m.min, m.max) if m.min != m.max else m.median


def _runs(ctx: ViewContext, case: str) -> list[str]:
    tail = f".{TIMELINE.name}"
    names = [n[: -len(tail)] for n in ctx.series_names(case) if n.endswith(tail)]
    return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


@view("failover")
def failover(ctx: ViewContext) -> list:
    blocks: list = []
    for case in ctx.case_names():
        runs = _runs(ctx, case)
        if not runs:
            continue
        partition = any(ctx.metric(case, f"{r}.minority.acked") is not None for r in runs)
        fault, rng = ("cut", "cut_range") if partition else ("kill", "killed_range")
        cols = [
            "run",
            "what",
            f"PFAIL (s after {fault})",
            "FAIL (s)",
            "replica promoted (s)",
            f"{fault} range: writes OK again for good (s)",
            f"{fault} range: outage (s)",
            f"{fault} range: failed writes (%)",
            "other ranges: failed writes (%)",
            "served in the last second (%)",
        ]
        keys = [
            "pfail_s",
            "fail_s",
            "promoted_s",
            f"{rng}.recovered_s",
            f"{rng}.outage_s",
            f"{rng}.error_pct",
            "other_ranges.error_pct",
            "served_at_end_pct",
        ]
        if not partition:
            cols += ["restarted node rejoined as replica", "rejoin (s)"]
            keys += ["rejoined_as_replica", "rejoin_s"]
        else:
            cols += ["old primary is a replica after the heal"]
            keys += ["old_primary_is_replica"]
        cols += ["slot views agree after", "healthy after"]
        keys += ["slot_views_agree", "healthy_after"]
        rows = [[r, WHAT.get(r, "")] + [_cell(ctx, case, f"{r}.{k}") for k in keys] for r in runs]
        blocks.append(
            Table(
                f"{'Partition' if partition else 'Primary killed'}: failover as the nodes and the clients saw it",
                cols,
                rows,
                "PFAIL/FAIL: first time another node's CLUSTER NODES showed the failed primary as fail? / fail; "
                "promoted: its replica calling itself primary; writes OK again for good: the first acknowledged "
                "write of the range after which none failed ('-': not within the run). Times in seconds from the "
                "fault; median over repetitions (min-max).",
                case,
            )
        )
        lcols = ["run", "what", "acknowledged", "lost", "lost (%)", "overwritten", "failed but present"]
        lkeys = ["acked", "lost_acked", "lost_acked_pct", "overwritten", "unacked_present"]
        if any(ctx.metric(case, f"{r}.unreplicated") is not None for r in runs):
            lcols.append("OK but WAIT reached no replica")
            lkeys.append("unreplicated")
        if partition:
            lcols += [
                "cut-off side: acknowledged during the cut",
                "cut-off side: lost",
                "cut-off side kept acknowledging (s)",
            ]
            lkeys += ["minority.acked_during_cut", "minority.lost_acked", "minority.accepting_s"]
        lrows = [[r, WHAT.get(r, "")] + [_cell(ctx, case, f"{r}.{k}") for k in lkeys] for r in runs]
        blocks.append(
            Table(
                "Acknowledged writes lost, per variant",
                lcols,
                lrows,
                "Every key read back from the healed cluster; an acknowledged write is present, overwritten (by a write "
                "that does not precede it) or lost. WAIT variant: acknowledged only when WAIT reported a replica.",
                case,
            )
        )
        for r in runs:
            blocks += _timeline(ctx, case, r, fault, rng)
    return blocks


def _timeline(ctx: ViewContext, case: str, run: str, fault: str, rng: str) -> list:
    t = TIMELINE["t"]
    tl = ctx.aggregate(case, f"{run}.{TIMELINE.name}", key=t)
    if tl is None:
        return []
    group = "cut" if rng == "cut_range" else "killed"
    series = [{"name": "writes acknowledged", "points": points(tl, t, TIMELINE["acked"])}]
    for col, name in (
        (TIMELINE[f"errors.{group}"], f"errors, {fault} range"),
        (TIMELINE["errors.others"], "errors, other ranges"),
        (TIMELINE["timeouts"], "timeouts (of the errors)"),
    ):
        if col in tl.columns:
            series.append({"name": name, "points": points(tl, t, col)})
    series.append({"name": "reads of acknowledged keys: missing", "points": points(tl, t, TIMELINE["reads_missing"])})
    ev = ctx.aggregate(case, f"{run}.{EVENTS.name}", key=EVENTS["event"])
    events = ""
    out: list = []
    if ev is not None and len(ev):
        events = "; ".join(
            f"{e} {s:.2f} s" for e, s in zip(ev.column(EVENTS["event"]), ev.column(EVENTS["t"])) if s is not None
        )
        out.append(series_table(ev, f"{run}: role changes and events (s after the {fault})", case))
    chart = Chart(
        f"{run}: writes per 100 ms around the {fault} ({WHAT.get(run, run)})",
        series,
        f"seconds since the {fault}",
        "writes per 100 ms",
        note=f"Role changes and events: {events or 'none'}. Median over repetitions (min-max).",
        case=case,
    )
    return [chart] + out
