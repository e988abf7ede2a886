"""The redis-cluster suite's series: each declared once, with its columns' kinds and units, for
the drivers that write them and the view that reads them. memtier's `histograms` series is
built in the infra layer and declared there (harness.infra.load_tools.memtier.HISTOGRAMS),
named here too so that this file lists every series of the suite. The redis-benchmark and
memtier cases each store a series called `runs`, of different columns: two shapes."""

from __future__ import annotations

from harness.base.metrics_model import Column, SeriesShape
from harness.infra.load_tools import memtier

# redis-benchmark: one row per run (measured, control) and test (GET, SET ...).
BENCHMARK_RUNS = SeriesShape(
    "runs",
    (
        Column("run", "text"),
        Column("clients", "int"),
        Column("test", "text"),
        Column("rps", unit="req/s"),
        Column("p50_ms", unit="ms"),
        Column("p95_ms", unit="ms"),
        Column("p99_ms", unit="ms"),
        Column("max_ms", unit="ms"),
    ),
)

# The GET/SET calls each primary executed during the measured redis-benchmark run.
PRIMARIES = SeriesShape("primaries", (Column("node", "text"), Column("role", "text"), Column("get_set_calls", "int")))

# memtier_benchmark: one row per run (measured, control).
MEMTIER_RUNS = SeriesShape(
    "runs",
    (
        Column("run", "text"),
        Column("connections", "int"),
        Column("ops_per_sec", unit="ops/s"),
        Column("p50_ms", unit="ms"),
        Column("p99_ms", unit="ms"),
    ),
)

# memtier on several load generators: each host's own figures. Its percentile columns
# (`p50_ms`, `p99.9_ms` ...) are the case's `percentiles` parameter: a family.
LOADGEN_PERCENTILE = Column("p", unit="ms", family=True)
LOADGENS = SeriesShape(
    "loadgens",
    (
        Column("load_generator", "text"),
        Column("start_s", unit="s"),
        Column("finish_s", unit="s"),
        Column("requests", "int"),
        Column("ops_per_sec", unit="ops/s"),
        LOADGEN_PERCENTILE,
    ),
    "each load generator's own window, requests, throughput and percentiles (from its own histogram); the "
    "merged figures are the case's metrics",
)

# The ACL case: the reply of every probe under every rule.
PROBE_REPLIES = SeriesShape(
    "probes",
    (
        Column("rule", "text"),
        Column("probe", "text"),
        Column("kind", "text"),
        Column("reply", "text"),
        Column("node_saw", "text"),
    ),
    "node_saw: whether the owning node's own INFO commandstats counted the probe",
)

# memtier's HDR histograms per run and kind: built by the infra layer, declared there.
HISTOGRAMS = memtier.HISTOGRAMS
