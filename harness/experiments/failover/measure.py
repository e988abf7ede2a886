"""Metrics and series of one failover run (shared by the kill and partition cases)."""

from __future__ import annotations

from harness.experiments.failover import lost_writes
from harness.experiments.failover.client import History
from harness.experiments.failover.series import EVENTS, TIMELINE
from harness.model.driver_helpers import write_csv
from harness.model.stored_run import Metric, Series


def loss_metrics(prefix: str, writes: list[lost_writes.Write], final: dict, need_replicas: int) -> dict[str, Metric]:
    v = lost_writes.classify(writes, final, need_replicas)
    acked_how = f"answered OK and WAIT reached >= {need_replicas} replica(s)" if need_replicas else "answered OK"
    m = {
        f"{prefix}.acked": Metric(v.acknowledged, "writes", note=f"acknowledged: {acked_how}"),
        f"{prefix}.lost_acked": Metric(
            v.counts[lost_writes.LOST], "writes", "lower", "acknowledged, then gone from the healed cluster"
        ),
        f"{prefix}.lost_acked_pct": Metric(v.lost_pct, "%", "lower"),
        f"{prefix}.overwritten": Metric(v.counts[lost_writes.OVERWRITTEN], "writes"),
        f"{prefix}.unacked_present": Metric(
            v.unacknowledged_present, "writes", note="failed or unconfirmed writes that landed anyway"
        ),
    }
    if need_replicas:
        m[f"{prefix}.unreplicated"] = Metric(
            sum(1 for w in writes if w.ok and not w.acknowledged(need_replicas)),
            "writes",
            note="answered OK but WAIT reached no replica in time",
        )
    return m


def outage_metrics(
    prefix: str, writes: list[lost_writes.Write], t_fault: float, end: float, groups: dict[str, str]
) -> dict[str, Metric]:
    """Per slot-range group (label -> metric name part): client-side outage after the fault,
    error rate, and the share acknowledged in the last second of the run."""
    m: dict[str, Metric] = {}
    for g, name in groups.items():
        o = lost_writes.outage(writes, t_fault, g)
        m[f"{prefix}.{name}.outage_s"] = Metric(
            o.window, "s", "lower", "first failed write to the last one, after the fault"
        )
        m[f"{prefix}.{name}.recovered_s"] = Metric(
            o.recovered, "s", "lower", "fault to the first acknowledged write after which none failed"
        )
        m[f"{prefix}.{name}.error_pct"] = Metric(o.error_pct, "%", "lower", "failed writes after the fault")
        m[f"{prefix}.{name}.sent"] = Metric(
            o.sent, "writes", None, "writes sent to the range after the fault (what error_pct is out of)"
        )
    last = [w for w in writes if w.sent >= end - 1.0]
    m[f"{prefix}.served_at_end_pct"] = Metric(
        100.0 * sum(w.ok for w in last) / len(last) if last else None,
        "%",
        "higher",
        "writes answered OK in the last second of the run, all slots",
    )
    return m


def timeline(
    writes: list[lost_writes.Write],
    reads: list[tuple],
    t_fault: float,
    start: float,
    end: float,
    groups: list[str],
    need_replicas: int,
    width: float = 0.1,
) -> Series:
    cols = lost_writes.bins(writes, t_fault, start, end, width, need_replicas, groups)
    n = len(cols["t"])
    missing, read_err = [0] * n, [0] * n
    for t, _, what in reads:
        k = int((t - t_fault - start) // width)
        if 0 <= k < n and what != "hit":
            (missing if what == "missing" else read_err)[k] += 1
    cols["reads_missing"], cols["read_errors"] = missing, read_err
    return TIMELINE.make(cols)


def events_series(events: list[tuple[float, str, str]], t_fault: float) -> Series:
    ev = sorted(events)
    return EVENTS.make(
        {"t": [round(t - t_fault, 3) for t, _, _ in ev], "node": [a for _, a, _ in ev], "event": [e for _, _, e in ev]}
    )


def write_history(path, hist: History, t0: float) -> None:
    write_csv(
        path,
        ["client", "seq", "key", "value", "sent_s", "done_s", "ok", "replicas", "error", "group"],
        (
            [
                w.client,
                w.seq,
                w.key,
                w.value,
                round(w.sent - t0, 4),
                round(w.done - t0, 4),
                int(w.ok),
                "" if w.replicas is None else w.replicas,
                w.error,
                w.group,
            ]
            for w in hist.writes
        ),
    )
