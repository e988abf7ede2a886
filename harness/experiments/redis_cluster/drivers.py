"""Drivers of the redis-cluster suite (source section 2.5): redis-benchmark and
memtier_benchmark against the target cluster, each with its control run interleaved; the
ACL case's driver (acl.py) is registered here too (every driver of the suite is in this file).

The tool wrappers (command line, parsing, validation) live in harness/infra/load_tools/; these
functions run them for one repetition and return metrics and series (the suite's view,
harness/experiments/redis_cluster/view.py, presents them).

Controls (the same benchmark under a condition known to differ, alternating order with
the measured run from one repetition to the next):
- redis-benchmark: `control_clients_factor` x the clients. A closed loop with k times the
  connections queues k times deeper at the server, so the percentiles must rise: this
  shows the instrument resolves a slower condition (its percentiles come from an HDR
  histogram printed to 1 us).
- spread: the same benchmark with every key under one `{tag}` (one hash slot, sent to the
  primary that owns it), so one primary serves everything: it shows that the count of
  primaries serving a run (INFO commandstats) can come out below the cluster's. The count of
  the measured run is a measured condition of the case (fact `primaries_serving`), not a
  claim check: on a cluster the harness created it restates the slot split it made (C11).
- memtier: one client on one thread instead of clients x threads: closed-loop throughput
  bounded by one round trip must fall well below the measured one.
"""

from __future__ import annotations

from harness.base.errors import BadInput
from harness.experiments.redis_cluster import acl, memtier_fleet, metrics
from harness.experiments.redis_cluster.series import BENCHMARK_RUNS, MEMTIER_RUNS, PRIMARIES
from harness.infra.load_tools import memtier, redis_benchmark
from harness.infra.load_tools.redis_benchmark import (
    SIMPLE_TITLES,
    VALID_TESTS,
    build_command,
    error_lines,
    parse_csv,
    to_metrics,
)
from harness.infra.process import run_tool, where
from harness.infra.redaction import command_line
from harness.model.driver_contract import CaseContext, Metric, Param, Record, Series, register

# redis-benchmark prints percentiles, not a histogram: several hosts' figures could not be
# pooled into one percentile, so it runs on the first load generator only (as the source's one command).
ONE_LOADGEN_NOTE = (
    "redis-benchmark ran on {host} only, of the inventory's {n} load generators: it prints "
    "percentiles, not a histogram, so several hosts' percentiles could not be pooled into one"
)
SERVING_SHARE = 0.10  # a primary "serves" a run when it executed at least this share of its GET/SET calls
SPREAD_KEY = "key:{spread-control}:__rand_int__"

# ---- redis-benchmark ------------------------------------------------------------------
BENCHMARK_PARAMS = {
    "tests": Param(list, ["get", "set"], "redis-benchmark -t: the tests to run", VALID_TESTS),
    "clients": Param(int, 50, "-c: parallel connections", min=1),
    "requests": Param(int, 100000, "-n: total requests per test", min=1),
    "data_size": Param(int, 3, "-d: SET/GET value size in bytes", min=1),
    "pipeline": Param(int, 1, "-P: requests per pipeline", min=1),
    "keyspace": Param(int, 100000, "-r: random keys from this range (0 = one key)", min=0),
    "threads": Param(int, 0, "--threads: client threads (0 = single-threaded client)", min=0),
    "timeout_s": Param(int, 600, "kill redis-benchmark after this many seconds", min=1),
    "control_clients_factor": Param(
        int, 4, "the control run: this many times the clients (0 = no control)", min=0, max=64
    ),
    "spread_control_requests": Param(int, 2000, "requests of the one-slot control run (0 = none)", min=0),
}


def _check_benchmark(where: str, p: dict) -> None:
    if not p["tests"]:
        raise BadInput(f"{where}.tests: name at least one test, e.g. [get, set]")


def _ping(ctx: CaseContext, node) -> str:
    import redis

    try:
        ctx.target.client(node, socket_timeout=3).ping()
    except redis.RedisError as e:
        return f"cannot reach Redis at {node.address} ({e}); is the cluster up?"
    return ""


def _slot_owner(ctx: CaseContext, key: str):
    """The target node that owns `key`'s hash slot."""
    client = ctx.target.cluster_client()
    try:
        owner = client.get_node_from_key(key)
    finally:
        client.close()
    return next(n for n in ctx.target.nodes if (n.host, n.port) == (owner.host, owner.port))


def get_set_calls(ctx: CaseContext) -> dict[str, int]:
    """GET + SET calls executed so far on each primary (INFO commandstats)."""
    out = {}
    for n in ctx.target.primaries:
        c = ctx.target.client(n, socket_timeout=5)
        try:
            st = c.info("commandstats")
        finally:
            c.close()
        out[n.address] = sum(int(st.get(f"cmdstat_{k}", {}).get("calls", 0)) for k in ("get", "set"))
    return out


def serving(before: dict[str, int], after: dict[str, int]) -> tuple[int, dict[str, int]]:
    """How many primaries executed at least SERVING_SHARE of the run's GET/SET calls, and
    each primary's calls during the run."""
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    total = sum(delta.values())
    return (sum(v >= SERVING_SHARE * total for v in delta.values()) if total else 0), delta


def _benchmark_once(ctx: CaseContext, params: dict, name: str, one_slot: bool = False):
    """Run redis-benchmark once: (rows, metrics, problems, command shown). `one_slot`: every
    key under one {tag}, sent (without --cluster) to the primary that owns its slot."""
    node, cluster = ctx.target.entry, ctx.target.kind == "cluster"
    if one_slot:
        node, cluster = _slot_owner(ctx, SPREAD_KEY), False
    cmd = build_command(params, node.host, node.port, cluster, ctx.target.password)
    if one_slot:
        cmd = [a for a in cmd if a not in ("-t", ",".join(params["tests"]))] + ["GET", SPREAD_KEY]
    secrets = (ctx.target.password,)
    res = run_tool(cmd, ctx.raw_dir, name, params["timeout_s"], host=ctx.target.loadgen, secrets=secrets)
    if not res.ok:
        return None, {}, [res.failure("redis-benchmark")], command_line(cmd, secrets)
    rows = parse_csv(res.stdout)
    metrics, problems = to_metrics(rows)
    errors = error_lines(res.stderr)
    if errors:
        problems.append(f"{name}: error responses ({len(errors)} lines), first: {errors[0]}")
    return rows, metrics, problems, command_line(cmd, secrets)


def _add_rows(cols: dict, name: str, clients: int, rows: dict) -> None:
    """One run's CSV rows (one per test) into the runs series' columns."""
    for title, row in rows.items():
        cols["run"].append(name)
        cols["clients"].append(clients)
        cols["test"].append(title)
        for col, src in (
            ("rps", "rps"),
            ("p50_ms", "p50_latency_ms"),
            ("p95_ms", "p95_latency_ms"),
            ("p99_ms", "p99_latency_ms"),
            ("max_ms", "max_latency_ms"),
        ):
            cols[col].append(row.get(src))


def _spread_control(ctx: CaseContext, p: dict, metrics: dict, problems: list, commands: dict) -> str:
    """The one-slot run: how many primaries serve a benchmark whose keys all hash to one slot
    (into `metrics`); returns why it failed, or ''."""
    one = dict(p, requests=p["spread_control_requests"], clients=min(p["clients"], 10))
    before = get_set_calls(ctx)
    rows, _, probs, commands["spread-control"] = _benchmark_once(
        ctx, one, "redis-benchmark-spread-control", one_slot=True
    )
    if rows is None:
        return probs[0]
    problems += probs
    n_one, _ = serving(before, get_set_calls(ctx))
    metrics["control.primaries_serving"] = Metric(
        n_one, "primaries", None, f"the same benchmark with every key in one hash slot ({SPREAD_KEY})"
    )
    return ""


def _benchmark_details(ctx: CaseContext, commands: dict, order: list[str], ran_on: str) -> dict:
    topology = {
        "primaries": sum(n.role == "primary" for n in ctx.target.nodes),
        "replicas": sum(n.role == "replica" for n in ctx.target.nodes),
    }
    details = {"commands": commands, "topology": topology, "order": order, "ran_on": ran_on}
    if len(ctx.target.load_generators) > 1:
        details["one_load_generator"] = ONE_LOADGEN_NOTE.format(host=ran_on, n=len(ctx.target.load_generators))
    return details


@register(
    "redis-cluster-benchmark",
    params=BENCHMARK_PARAMS,
    needs="cluster",
    check=_check_benchmark,
    metrics=metrics.BENCHMARK,
    description="redis-benchmark --csv against the target (with --cluster on a cluster), with its controls",
)
def run_benchmark(ctx: CaseContext) -> Record:
    absent = redis_benchmark.missing(ctx.target)  # here, or on the inventory's load generator
    if absent:
        return Record("skipped", absent)
    p = ctx.params
    reachable = _ping(ctx, ctx.target.entry)
    if reachable:  # redis-benchmark retries a refused connection until it is killed
        return Record("failed", reachable)
    cluster = ctx.target.kind == "cluster"
    runs = [("measured", p)]
    if p["control_clients_factor"]:
        runs.append(("control", dict(p, clients=p["clients"] * p["control_clients_factor"])))
    if ctx.repetition % 2 == 0:  # interleaved: the order alternates between repetitions
        runs.reverse()
    metrics: dict[str, Metric] = {}
    problems: list[str] = []
    commands: dict[str, str] = {}
    ran_on = redis_benchmark.ran_on(ctx.target)  # the inventory's load generator over SSH, or this machine
    cols: dict[str, list] = {c.name: [] for c in BENCHMARK_RUNS.columns}
    calls: dict[str, int] = {}
    for name, params in runs:
        ctx.log(
            f"redis-benchmark ({name}) -t {','.join(params['tests'])} -c {params['clients']} -n {params['requests']}"
        )
        before = get_set_calls(ctx) if cluster and name == "measured" else {}
        rows, m, probs, commands[name] = _benchmark_once(ctx, params, f"redis-benchmark-{name}")
        if rows is None:
            return Record("failed", probs[0], metrics, {"commands": commands, "ran_on": ran_on})
        if name == "measured":
            asked = {t.upper() for t in params["tests"]} & SIMPLE_TITLES
            missing = sorted(asked - set(rows))
            if missing:
                probs.append(f"no CSV row for {', '.join(missing)}")
            if cluster:
                n_serving, calls = serving(before, get_set_calls(ctx))
                metrics["cluster.primaries_serving"] = Metric(
                    n_serving,
                    "primaries",
                    "higher",
                    f"primaries that executed at least {SERVING_SHARE:.0%} of the run's GET/SET calls",
                )
        problems += probs
        prefix = "" if name == "measured" else "control."
        metrics.update({prefix + k: v for k, v in m.items()})
        _add_rows(cols, name, params["clients"], rows)
    if cluster and p["spread_control_requests"]:
        failed = _spread_control(ctx, p, metrics, problems, commands)
        if failed:
            return Record("failed", failed, metrics, {"commands": commands, "ran_on": ran_on})
    series = {BENCHMARK_RUNS.name: BENCHMARK_RUNS.make(cols)}
    if calls:
        roles = {n.address: n.role or "" for n in ctx.target.nodes}
        series[PRIMARIES.name] = PRIMARIES.make(
            {"node": list(calls), "role": [roles.get(k, "") for k in calls], "get_set_calls": list(calls.values())}
        )
    details = _benchmark_details(ctx, commands, [n for n, _ in runs], ran_on)
    # measured conditions: how many primaries really served the measured run (a check's
    # `conditions` can require the load spread over the claimed topology)
    n_primaries = metrics["cluster.primaries_serving"].value
    facts = {"primaries_serving": int(n_primaries)} if calls and n_primaries is not None else {}
    if problems:
        return Record("invalid", "; ".join(problems), metrics, details, series, facts)
    return Record("ok", metrics=metrics, details=details, series=series, facts=facts)


# ---- memtier_benchmark ----------------------------------------------------------------
MEMTIER_PARAMS = {
    "clients": Param(int, 50, "--clients: connections per thread", min=1),
    "threads": Param(int, 4, "--threads", min=1),
    "ratio": Param(str, "1:1", "--ratio SET:GET"),
    "test_time": Param(int, 10, "--test-time seconds (0: use requests)", min=0),
    "requests": Param(int, 0, "--requests per client (when test_time is 0)", min=0),
    "key_maximum": Param(int, 100000, "--key-maximum", min=1),
    "data_size": Param(int, 32, "--data-size bytes", min=1),
    "pipeline": Param(int, 1, "--pipeline", min=1),
    "key_pattern": Param(str, "R:R", "--key-pattern SET:GET"),
    "percentiles": Param(list, [50, 99, 99.9], "--print-percentiles", min=0, max=100),
    "timeout_s": Param(int, 900, "kill memtier_benchmark after this many seconds", min=1),
    "control": Param(bool, True, "also run the control: one client on one thread, interleaved"),
    "min_overlap_share": Param(
        float,
        0.9,
        "several load generators: their common window must last at least "
        "this share of the longest one's, else the repetition is invalid",
        min=0,
        max=1,
    ),
}


def _check_memtier(where: str, p: dict) -> None:
    import re

    if not re.fullmatch(r"\d+:\d+", p["ratio"]):
        raise BadInput(f"{where}.ratio: expected SET:GET such as 1:10, got {p['ratio']!r}")
    if (p["test_time"] > 0) == (p["requests"] > 0):
        raise BadInput(f"{where}: give exactly one of test_time or requests a positive value")


@register(
    "redis-cluster-memtier",
    params=MEMTIER_PARAMS,
    needs="cluster",
    check=_check_memtier,
    metrics=metrics.MEMTIER,
    description="memtier_benchmark with --json-out-file (and --cluster-mode on a cluster), with its control; "
    "on every load generator of the inventory at once, their histograms merged",
)
def run_memtier(ctx: CaseContext) -> Record:
    absent = next(filter(None, (memtier.missing_on(h) for h in ctx.target.load_generators)), "")
    if absent:  # here, or on a load generator of the inventory
        return Record("skipped", absent)
    p = ctx.params
    runs = [("memtier", p)]
    if p["control"]:
        runs.append(("memtier-control", dict(p, clients=1, threads=1)))
    if ctx.repetition % 2 == 0:
        runs.reverse()
    fleet = len(ctx.target.load_generators) > 1
    out = _MemtierRun(ctx, ran_on=", ".join(where(h) for h in ctx.target.load_generators))
    for name, params in runs:
        ctx.log(
            f"memtier_benchmark ({name}) --clients={params['clients']} --threads={params['threads']} "
            f"--ratio={params['ratio']}"
            + (f" on {len(ctx.target.load_generators)} load generators" if fleet and name == "memtier" else "")
        )
        failed = out.fleet(params, name) if fleet and name == "memtier" else out.single(params, name)
        if failed:
            return failed
    return out.outcome()


class _MemtierRun:
    """What the memtier case gathers over its runs (measured and control)."""

    def __init__(self, ctx: CaseContext, ran_on: str):
        self.ctx = ctx
        self.metrics: dict[str, Metric] = {}
        self.details: dict = {"commands": {}, "sections": {}, "ran_on": ran_on}
        self.cols: dict[str, list] = {c.name: [] for c in MEMTIER_RUNS.columns}
        self.hdr = memtier.histogram_columns()
        self.series: dict[str, Series] = {}
        self.invalid: list[str] = []

    def single(self, params: dict, name: str) -> Record | None:
        """One memtier process (on the first load generator, or here)."""
        once = memtier_fleet.run_once(self.ctx, params, name, self.ctx.target.loadgen)
        parsed, self.details["commands"][name] = once.parsed, once.shown
        if parsed is None:
            return Record(
                "failed" if "no JSON" not in once.failure else "invalid", once.failure, self.metrics, self.details
            )
        self.details["sections"][name] = {
            "chosen": parsed.chosen,
            "problems": {n: s.problems for n, s in parsed.sections.items()},
        }
        if not parsed.valid:
            self.invalid.append(f"{name}: " + "; ".join(parsed.problems))
        prefix = "" if name == "memtier" else "control."
        self.metrics.update({prefix + k: v for k, v in parsed.metrics.items()})
        self._row(name, params, parsed.metrics)
        memtier.histogram_rows(self.hdr, self.cols["run"][-1], parsed.histograms)
        return None

    def fleet(self, params: dict, name: str) -> Record | None:
        """One memtier process on every load generator at once, judged as one load."""
        got = memtier_fleet.run_fleet(self.ctx, params, name)
        self.details["commands"].update(got.commands)
        self.details["clocks"] = got.clocks
        if got.replayed:
            self.details["replayed"] = got.replayed
        if got.failure:
            return Record("failed", got.failure, self.metrics, self.details)
        for r in got.runs:
            self.details["sections"][f"{name} on {r.host}"] = {
                "chosen": r.result.chosen,
                "problems": {n: s.problems for n, s in r.result.sections.items()},
            }
        metrics, series, problems = memtier_fleet.judge(got.runs, params["percentiles"], params["min_overlap_share"])
        self.invalid += [f"{name}: {p}" for p in problems]
        self.metrics.update(metrics)
        self.series.update({k: v for k, v in series.items() if k != memtier.HISTOGRAMS.name})
        self._row(name, dict(params, clients=params["clients"] * len(got.runs)), metrics)
        if memtier.HISTOGRAMS.name in series:
            hist = series[memtier.HISTOGRAMS.name].columns
            for col in self.hdr:
                self.hdr[col] += hist[col]
        return None

    def _row(self, name: str, params: dict, metrics: dict[str, Metric]) -> None:
        self.cols["run"].append("measured" if name == "memtier" else "control")
        self.cols["connections"].append(params["clients"] * params["threads"])
        for col, metric in (
            ("ops_per_sec", "Totals.ops_per_sec"),
            ("p50_ms", "Totals.p50_ms"),
            ("p99_ms", "Totals.p99_ms"),
        ):
            m = metrics.get(metric)
            self.cols[col].append(m.value if m else None)

    def outcome(self) -> Record:
        series = {MEMTIER_RUNS.name: MEMTIER_RUNS.make(self.cols), **memtier.histogram_series(self.hdr), **self.series}
        if self.invalid:
            return Record("invalid", "; ".join(self.invalid), self.metrics, self.details, series)
        return Record("ok", metrics=self.metrics, details=self.details, series=series)


@register(
    "redis-cluster-acl",
    params=acl.PARAMS,
    needs="cluster",
    check=acl._check,
    metrics=metrics.ACL,
    description="the source's read-only inference user from ACL rules, probed with NOPERM counted on the cluster",
)
def acl_rules(ctx: CaseContext) -> Record:
    return acl.run(ctx)
