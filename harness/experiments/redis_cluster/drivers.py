"""Drivers of the redis-cluster suite (source section 2.5): redis-benchmark and
memtier_benchmark against the target cluster. The tool wrappers (command line, parsing,
validation) live in harness/tools/; these functions run them for one repetition."""

from __future__ import annotations

import re
import shutil

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput
from harness.process import run_tool
from harness.tools.memtier import NOT_FOUND, parse_files
from harness.tools.memtier import build_command as memtier_command
from harness.tools.redis_benchmark import SIMPLE_TITLES, VALID_TESTS, build_command, error_lines, parse_csv, to_metrics

# ---- redis-benchmark ------------------------------------------------------------------
BENCHMARK_PARAMS = {
    "tests": Param(list, ["get", "set"], "redis-benchmark -t: the tests to run", VALID_TESTS),
    "clients": Param(int, 50, "-c: parallel connections"),
    "requests": Param(int, 100000, "-n: total requests per test"),
    "data_size": Param(int, 3, "-d: SET/GET value size in bytes"),
    "pipeline": Param(int, 1, "-P: requests per pipeline"),
    "keyspace": Param(int, 100000, "-r: random keys from this range (0 = one key)"),
    "threads": Param(int, 0, "--threads: client threads (0 = single-threaded client)"),
    "timeout_s": Param(int, 600, "kill redis-benchmark after this many seconds"),
}


def _check_benchmark(where: str, p: dict) -> None:
    for k in ("clients", "requests", "data_size", "pipeline"):
        if p[k] < 1:
            raise BadInput(f"{where}.{k}: must be at least 1, got {p[k]}")
    if p["keyspace"] < 0 or p["threads"] < 0:
        raise BadInput(f"{where}: keyspace and threads must be >= 0")
    if not p["tests"]:
        raise BadInput(f"{where}.tests: name at least one test, e.g. [get, set]")


def _ping(ctx: CaseContext, node) -> str:
    import redis

    try:
        ctx.target.client(node, socket_timeout=3).ping()
    except redis.RedisError as e:
        return f"cannot reach Redis at {node.address} ({e}); is the cluster up?"
    return ""



@register("redis-cluster-benchmark", params=BENCHMARK_PARAMS, needs="cluster", check=_check_benchmark,
          description="redis-benchmark --csv against the target (with --cluster on a cluster)")
def run_benchmark(ctx: CaseContext) -> CaseOutcome:
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


# ---- memtier_benchmark ----------------------------------------------------------------
MEMTIER_PARAMS = {
    "clients": Param(int, 50, "--clients: connections per thread"),
    "threads": Param(int, 4, "--threads"),
    "ratio": Param(str, "1:1", "--ratio SET:GET"),
    "test_time": Param(int, 10, "--test-time seconds (0: use requests)"),
    "requests": Param(int, 0, "--requests per client (when test_time is 0)"),
    "key_maximum": Param(int, 100000, "--key-maximum"),
    "data_size": Param(int, 32, "--data-size bytes"),
    "pipeline": Param(int, 1, "--pipeline"),
    "key_pattern": Param(str, "R:R", "--key-pattern SET:GET"),
    "percentiles": Param(list, [50, 99, 99.9], "--print-percentiles"),
    "timeout_s": Param(int, 900, "kill memtier_benchmark after this many seconds"),
}


def _check_memtier(where: str, p: dict) -> None:
    if not re.fullmatch(r"\d+:\d+", p["ratio"]):
        raise BadInput(f"{where}.ratio: expected SET:GET such as 1:10, got {p['ratio']!r}")
    if (p["test_time"] > 0) == (p["requests"] > 0):
        raise BadInput(f"{where}: give exactly one of test_time or requests a positive value")
    for k in ("clients", "threads", "key_maximum", "data_size", "pipeline"):
        if p[k] < 1:
            raise BadInput(f"{where}.{k}: must be at least 1, got {p[k]}")


@register("redis-cluster-memtier", params=MEMTIER_PARAMS, needs="cluster", check=_check_memtier,
          description="memtier_benchmark with --json-out-file (and --cluster-mode on a cluster)")
def run_memtier(ctx: CaseContext) -> CaseOutcome:
    if not shutil.which("memtier_benchmark"):
        return CaseOutcome("skipped", f"{NOT_FOUND} (the Ansible loadgen role installs it on lab hosts)")
    node = ctx.target.entry
    json_path = ctx.raw_path("memtier.json")
    cmd = memtier_command(ctx.params, node.host, node.port, ctx.target.kind == "cluster",
                        str(json_path), ctx.target.password)
    ctx.log(f"memtier_benchmark --clients={ctx.params['clients']} --threads={ctx.params['threads']} --ratio={ctx.params['ratio']}")
    res = run_tool(cmd, ctx.raw_dir, "memtier", ctx.params["timeout_s"])
    if res.timed_out or res.returncode not in (0,):
        return CaseOutcome("failed", res.failure("memtier_benchmark"))
    if not json_path.exists():
        return CaseOutcome("invalid", "memtier_benchmark wrote no JSON file (see memtier.stderr)")
    parsed = parse_files(json_path.read_text(errors="replace"), res.stderr)
    details = {"command": " ".join(cmd), "section": parsed.chosen,
               "sections": {n: s.problems for n, s in parsed.sections.items()}}
    if not parsed.valid:
        return CaseOutcome("invalid", "; ".join(parsed.problems), parsed.metrics, details)
    return CaseOutcome("ok", metrics=parsed.metrics, details=details)
