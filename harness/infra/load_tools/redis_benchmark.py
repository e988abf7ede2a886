"""redis-benchmark: build the command line, run it, parse its --csv output, validate."""

from __future__ import annotations

import csv
import io
import math

from harness.base.metrics_model import Metric
from harness.infra.process import tool_missing, where

INSTALL_HINT = "apt-get install redis-tools"

CSV_COLUMNS = {  # redis-benchmark 6.2+ column -> (metric suffix, unit, better)
    "rps": ("rps", "req/s", "higher"),
    "avg_latency_ms": ("avg_ms", "ms", "lower"),
    "min_latency_ms": ("min_ms", "ms", "lower"),
    "p50_latency_ms": ("p50_ms", "ms", "lower"),
    "p95_latency_ms": ("p95_ms", "ms", "lower"),
    "p99_latency_ms": ("p99_ms", "ms", "lower"),
    "max_latency_ms": ("max_ms", "ms", "lower"),
}
VALID_TESTS = (
    "ping_inline",
    "ping_mbulk",
    "set",
    "get",
    "incr",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "sadd",
    "hset",
    "spop",
    "zadd",
    "zpopmin",
    "lrange",
    "lrange_100",
    "lrange_300",
    "lrange_500",
    "lrange_600",
    "mset",
    "xadd",
)


def build_command(p: dict, host: str, port: int, cluster: bool, password: str | None = None) -> list[str]:
    cmd = [
        "redis-benchmark",
        "-h",
        host,
        "-p",
        str(port),
        "-t",
        ",".join(p["tests"]),
        "-c",
        str(p["clients"]),
        "-n",
        str(p["requests"]),
        "-d",
        str(p["data_size"]),
        "-P",
        str(p["pipeline"]),
        "--csv",
    ]
    if p["keyspace"]:
        cmd += ["-r", str(p["keyspace"])]
    if p["threads"]:
        cmd += ["--threads", str(p["threads"])]
    if cluster:
        cmd.append("--cluster")
    if password:  # redis-benchmark 7.0 reads no REDISCLI_AUTH: -a, redacted wherever it is kept
        cmd += ["-a", password]
    return cmd


def missing(target) -> str:
    """'' when redis-benchmark is where it will run (the inventory's load generator, or here)."""
    return tool_missing("redis-benchmark", target.loadgen, INSTALL_HINT)


def ran_on(target) -> str:
    """Which machine runs redis-benchmark for this target: for the record's details and the report."""
    return where(target.loadgen)


def parse_csv(text: str) -> dict[str, dict[str, float]]:
    """Rows of redis-benchmark --csv keyed by their whole title.

    Lines that are not CSV rows (cluster-mode node lists, WARNING lines) are ignored.
    Redis 6.0's header-less two-column form is read as test + rps.
    """
    rows: dict[str, dict[str, float]] = {}
    header = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith('"'):
            continue
        fields = next(csv.reader(io.StringIO(line)))
        if fields[0] == "test":
            header = fields
            continue
        cols = header or ["test", "rps"]
        if len(fields) != len(cols):
            continue
        row = {}
        for name, value in zip(cols[1:], fields[1:]):
            try:
                row[name] = float(value)
            except ValueError:
                row[name] = math.nan
        rows[fields[0]] = row
    return rows


SIMPLE_TITLES = {
    "GET",
    "SET",
    "INCR",
    "LPUSH",
    "RPUSH",
    "LPOP",
    "RPOP",
    "SADD",
    "HSET",
    "SPOP",
    "ZADD",
    "ZPOPMIN",
    "XADD",
    "PING_INLINE",
    "PING_MBULK",
}


def error_lines(stderr: str) -> list[str]:
    """Lines of stderr that report errors (e.g. 'Error from server: MOVED ...')."""
    return [
        line.strip()
        for line in stderr.splitlines()
        if line.strip().lower().startswith(("error", "err ")) or "Could not connect" in line
    ]


def to_metrics(rows: dict[str, dict[str, float]]) -> tuple[dict[str, Metric], list[str]]:
    """Metrics named TITLE.suffix, and the problems that make the run invalid."""
    metrics, problems = {}, []
    for title, row in rows.items():
        for col, value in row.items():
            if col not in CSV_COLUMNS:
                continue
            suffix, unit, better = CSV_COLUMNS[col]
            if not math.isfinite(value):
                problems.append(f"{title} {col} is not a number")
                continue
            if col == "rps" and value <= 0:
                problems.append(f"{title} rps is {value:g}: no request completed")
            metrics[f"{title}.{suffix}"] = Metric(value, unit, better)
    return metrics, problems
