"""redis-benchmark: build the command line, run it, parse its --csv output, validate."""

from __future__ import annotations

import csv
import io
import math
import shutil

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput
from harness.process import run_tool

CSV_COLUMNS = {  # redis-benchmark 6.2+ column -> (metric suffix, unit, better)
    "rps": ("rps", "req/s", "higher"),
    "avg_latency_ms": ("avg_ms", "ms", "lower"),
    "min_latency_ms": ("min_ms", "ms", "lower"),
    "p50_latency_ms": ("p50_ms", "ms", "lower"),
    "p95_latency_ms": ("p95_ms", "ms", "lower"),
    "p99_latency_ms": ("p99_ms", "ms", "lower"),
    "max_latency_ms": ("max_ms", "ms", "lower"),
}
VALID_TESTS = ("ping_inline", "ping_mbulk", "set", "get", "incr", "lpush", "rpush", "lpop", "rpop",
               "sadd", "hset", "spop", "zadd", "zpopmin", "lrange", "lrange_100", "lrange_300",
               "lrange_500", "lrange_600", "mset", "xadd")

PARAMS = {
    "tests": Param(list, ["get", "set"], "redis-benchmark -t: the tests to run", VALID_TESTS),
    "clients": Param(int, 50, "-c: parallel connections"),
    "requests": Param(int, 100000, "-n: total requests per test"),
    "data_size": Param(int, 3, "-d: SET/GET value size in bytes"),
    "pipeline": Param(int, 1, "-P: requests per pipeline"),
    "keyspace": Param(int, 100000, "-r: random keys from this range (0 = one key)"),
    "threads": Param(int, 0, "--threads: client threads (0 = single-threaded client)"),
    "timeout_s": Param(int, 600, "kill redis-benchmark after this many seconds"),
}


def _check(where: str, p: dict) -> None:
    for k in ("clients", "requests", "data_size", "pipeline"):
        if p[k] < 1:
            raise BadInput(f"{where}.{k}: must be at least 1, got {p[k]}")
    if p["keyspace"] < 0 or p["threads"] < 0:
        raise BadInput(f"{where}: keyspace and threads must be >= 0")
    if not p["tests"]:
        raise BadInput(f"{where}.tests: name at least one test, e.g. [get, set]")


def build_command(p: dict, host: str, port: int, cluster: bool, password: str | None = None) -> list[str]:
    cmd = ["redis-benchmark", "-h", host, "-p", str(port), "-t", ",".join(p["tests"]),
           "-c", str(p["clients"]), "-n", str(p["requests"]), "-d", str(p["data_size"]),
           "-P", str(p["pipeline"]), "--csv"]
    if p["keyspace"]:
        cmd += ["-r", str(p["keyspace"])]
    if p["threads"]:
        cmd += ["--threads", str(p["threads"])]
    if cluster:
        cmd.append("--cluster")
    if password:
        cmd += ["-a", password]
    return cmd


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


SIMPLE_TITLES = {"GET", "SET", "INCR", "LPUSH", "RPUSH", "LPOP", "RPOP", "SADD", "HSET", "SPOP",
                 "ZADD", "ZPOPMIN", "XADD", "PING_INLINE", "PING_MBULK"}


def error_lines(stderr: str) -> list[str]:
    """Lines of stderr that report errors (e.g. 'Error from server: MOVED ...')."""
    return [l.strip() for l in stderr.splitlines() if l.strip().lower().startswith(("error", "err "))
            or "Could not connect" in l]


def _ping(ctx: CaseContext, node) -> str:
    import redis

    try:
        ctx.target.client(node, socket_timeout=3).ping()
    except redis.RedisError as e:
        return f"cannot reach Redis at {node.address} ({e}); is the cluster up?"
    return ""


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


@register("redis-benchmark", params=PARAMS, needs="cluster", check=_check,
          description="redis-benchmark --csv against the target (with --cluster on a cluster)")
def run(ctx: CaseContext) -> CaseOutcome:
    if not shutil.which("redis-benchmark"):
        return CaseOutcome("skipped", "redis-benchmark not found (apt-get install redis-tools)")
    node = ctx.target.entry
    reachable = _ping(ctx, node)
    if reachable:  # redis-benchmark retries a refused connection until it is killed
        return CaseOutcome("failed", reachable)
    cmd = build_command(ctx.params, node.host, node.port, ctx.target.kind == "cluster", ctx.target.password)
    ctx.log(f"redis-benchmark -t {','.join(ctx.params['tests'])} -c {ctx.params['clients']} -n {ctx.params['requests']}")
    res = run_tool(cmd, ctx.raw_dir, "redis-benchmark", ctx.params["timeout_s"])
    if not res.ok:
        return CaseOutcome("failed", res.failure("redis-benchmark"))
    rows = parse_csv(res.stdout)
    metrics, problems = to_metrics(rows)
    asked = {t.upper() for t in ctx.params["tests"]} & SIMPLE_TITLES
    missing = sorted(asked - set(rows))
    if missing:
        problems.append(f"no CSV row for {', '.join(missing)}")
    errors = error_lines(res.stderr)
    if errors:
        problems.append(f"error responses ({len(errors)} lines), first: {errors[0]}")
    if ctx.target.kind == "cluster":  # the topology the numbers were measured on
        roles = [n.role for n in ctx.target.nodes]
        metrics["cluster.primaries"] = Metric(roles.count("primary"), "nodes")
        metrics["cluster.replicas"] = Metric(roles.count("replica"), "nodes")
    if problems:
        return CaseOutcome("invalid", "; ".join(problems), metrics)
    return CaseOutcome("ok", metrics=metrics, details={"command": " ".join(cmd), "rows": rows})
