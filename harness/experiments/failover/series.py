"""The failover suite's series: each declared once, with its columns' kinds and units, for the
drivers that write them and the view that reads them. Each run (variant or control) stores its
own, under `<run>.timeline` and `<run>.events`."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape

BIN = "per 100 ms"

# Writes by send time in 100 ms bins: acknowledged, failed (of those, timed out), failed and sent
# per slot-range group (`errors.<group>`, `sent.<group>`: the groups are the case's), and reads of
# acknowledged keys that found nothing or failed.
TIMELINE = SeriesShape(
    "timeline",
    (
        Column("t", unit="s"),
        Column("acked", "int", BIN),
        Column("errors", "int", BIN),
        Column("timeouts", "int", BIN),
        Column("errors.", "int", BIN, family=True),
        Column("sent.", "int", BIN, family=True),
        Column("reads_missing", "int", BIN),
        Column("read_errors", "int", BIN),
    ),
    "writes by send time, 100 ms bins; t = 0 at the fault",
)

# Role changes and events the watcher saw (PFAIL, FAIL, promotion, rejoin ...).
EVENTS = SeriesShape(
    "events", (Column("t", unit="s"), Column("node", "text"), Column("event", "text")), "t = 0 at the fault"
)
