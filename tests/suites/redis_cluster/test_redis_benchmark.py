"""redis-benchmark: the parser on recorded real output, the driver against a real cluster."""

from pathlib import Path

import pytest

from harness.experiments.redis_cluster import drivers as drv
from harness.infra.load_tools import redis_benchmark as rb
from harness.model.driver_contract import CaseContext, Node, Target
from tests import REPO, TESTS

FIX = TESTS / "fixtures" / "redis-benchmark"


def test_cluster_output_skips_the_node_list_and_keys_rows_by_title():
    rows = rb.parse_csv((FIX / "cluster_get_set.stdout").read_text())
    assert set(rows) == {"SET", "GET"}
    assert rows["GET"]["p99_latency_ms"] == pytest.approx(1.063)
    metrics, problems = rb.to_metrics(rows)
    assert not problems
    assert metrics["SET.rps"].value == pytest.approx(39920.16) and metrics["SET.rps"].better == "higher"
    assert metrics["GET.p95_ms"].unit == "ms"


def test_titles_with_spaces_are_kept_whole():
    text = (
        '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
        '"LPUSH (needed to benchmark LRANGE)","1000.0","1","1","1","1","1","1"\n'
        '"MSET (10 keys)","2000.0","1","1","1","1","1","1"\n'
    )
    rows = rb.parse_csv(text)
    assert set(rows) == {"LPUSH (needed to benchmark LRANGE)", "MSET (10 keys)"}


def test_old_two_column_form_and_warning_lines():
    rows = rb.parse_csv('WARNING: something\n"SET","1234.5"\n')
    assert rows == {"SET": {"rps": 1234.5}}


def test_moved_errors_leave_only_a_header_and_an_error_line():
    assert rb.parse_csv((FIX / "standalone_node_moved.stdout").read_text()) == {}
    assert rb.error_lines((FIX / "standalone_node_moved.stderr").read_text())[0].startswith("Error from server: MOVED")


def test_zero_rps_is_a_problem():
    metrics, problems = rb.to_metrics({"GET": {"rps": 0.0, "p99_latency_ms": 1.0}})
    assert problems and "no request completed" in problems[0]


def test_command_line():
    p = {k: v.default for k, v in drv.BENCHMARK_PARAMS.items()}
    cmd = rb.build_command(p, "127.0.0.1", 7000, True)
    assert cmd[:5] == ["redis-benchmark", "-h", "127.0.0.1", "-p", "7000"]
    assert "--cluster" in cmd and "--csv" in cmd and cmd[cmd.index("-t") + 1] == "get,set"


def _ctx(tmp_path, target, **params):
    p = {k: v.default for k, v in drv.BENCHMARK_PARAMS.items()}
    p.update(params)
    return CaseContext("s", "redis-benchmark", 1, "local", p, tmp_path, target, log=lambda m: None)


def test_driver_against_the_real_cluster_with_its_controls(cluster, tmp_path):
    out = drv.run_benchmark(_ctx(tmp_path, cluster, requests=5000, clients=10))
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    for cmd in ("GET", "SET"):
        assert m[f"{cmd}.rps"] > 0 and 0 < m[f"{cmd}.p50_ms"] <= m[f"{cmd}.p99_ms"]
        assert m[f"control.{cmd}.rps"] > 0 and m[f"control.{cmd}.p99_ms"] > 0  # 4x the clients, same cluster
    runs = out.series["runs"]
    assert set(zip(runs.column("run"), runs.column("clients"))) == {("measured", 10), ("control", 40)}
    # the load is served by every primary; with every key in one slot, by one
    assert m["cluster.primaries_serving"] == 3 and m["control.primaries_serving"] == 1
    assert out.facts == {"primaries_serving": 3}  # a measured condition of the case (C11 is no check)
    assert sorted(out.series["primaries"].column("role")) == ["primary"] * 3
    assert (tmp_path / "redis-benchmark-measured.stdout").read_text().startswith("Cluster has 3 master nodes")
    assert out.details["order"] == ["measured", "control"]
    assert "tables" not in out.details and "cluster.primaries" not in m  # the configuration is not a measurement
    params = dict(_ctx(tmp_path, cluster).params, requests=2000, clients=5, spread_control_requests=0)
    even = drv.run_benchmark(
        CaseContext("s", "redis-benchmark", 2, "local", params, tmp_path / "rep2", cluster, log=lambda m: None)
    )
    assert even.status == "ok" and even.details["order"] == ["control", "measured"]  # interleaved


def test_serving_counts_primaries_with_a_tenth_of_the_calls():
    before = {"a": 100, "b": 0, "c": 50}
    assert drv.serving(before, {"a": 400, "b": 300, "c": 350}) == (3, {"a": 300, "b": 300, "c": 300})
    assert drv.serving(before, {"a": 1000, "b": 20, "c": 50})[0] == 1
    assert drv.serving(before, before)[0] == 0


def test_kept_commands_never_carry_the_password(cluster, tmp_path):
    from dataclasses import replace

    # a wrong password: redis-benchmark fails, and neither the details nor the raw files name it
    target = replace(cluster, password="s3cret-pw")
    out = drv.run_benchmark(
        _ctx(tmp_path, target, requests=100, clients=1, control_clients_factor=0, spread_control_requests=0)
    )
    assert out.status == "failed"
    kept = str(out.details) + out.reason + "".join(p.read_text(errors="replace") for p in tmp_path.iterdir())
    assert "s3cret-pw" not in kept


# ---- the ledger's checks on synthetic runs: conditions, controls, the check that can fail ----


def _verdicts(claim_id: str, manifest: dict, metrics: dict, params: dict | None = None) -> list:
    """The ledger's redis-cluster checks of a claim on a run that measured `manifest` (hosts,
    load generator) and ran the case with `params` (the clients really used)."""
    from tests.ledger_helpers import verdicts

    case = {"C12": "redis-benchmark", "C13": "memtier"}[claim_id]
    got = verdicts(claim_id, case, metrics, suite="redis-cluster", manifest=manifest, params=params)
    return list(got.values())


LOCAL_BENCH = {"clients": 50, "requests": 100000}
LAB_BENCH = {"clients": 200, "requests": 1000000}


def test_c12_locally_is_not_comparable_and_names_the_measured_hosts():
    from tests.ledger_helpers import HERE

    checks = _verdicts(
        "C12",
        HERE,
        {"GET.p99_ms": 1.6, "SET.p99_ms": 1.5, "control.GET.p99_ms": 5.0, "control.SET.p99_ms": 5.0},
        LOCAL_BENCH,
    )
    for cv in checks:
        assert str(cv.outcome) == "not comparable here"
        for part in (
            "redis_hosts: measured 1 (this machine), claim 6",
            "clients: measured 50, claim 200",
            "loadgen_separate: measured no (load generator on this machine), claim yes",
        ):
            assert part in cv.reason, cv.reason
    # the source's flags on this machine (what `--profile lab-a100` runs here): still one host
    checks = _verdicts("C12", HERE, {"GET.p99_ms": 7.0, "SET.p99_ms": 4.5}, LAB_BENCH)
    assert all("clients" not in cv.reason and "redis_hosts: measured 1" in cv.reason for cv in checks)
    # a one-host GPU box: six Redis processes on one host with the load generator
    one_box = {
        "gpu": {"present": True, "gpus": [{"name": "NVIDIA H200"}]},
        "target_nodes": {"nodes": [{"host": "gpu-box", "port": 7000 + i} for i in range(6)]},
        "loadgen": {"address": "gpu-box"},
    }
    cv = _verdicts("C12", one_box, {"GET.p99_ms": 0.9, "SET.p99_ms": 0.9}, LAB_BENCH)[0]
    assert str(cv.outcome) == "not comparable here" and "redis_hosts: measured 1 (gpu-box)" in cv.reason


def test_c12_on_the_measured_lab_reproduces_only_with_an_instrument_that_sees():
    from tests.ledger_helpers import LAB

    fast = {"GET.p99_ms": 0.9, "SET.p99_ms": 1.0}
    ok = _verdicts("C12", LAB, {**fast, "control.GET.p99_ms": 3.0, "control.SET.p99_ms": 3.5}, LAB_BENCH)
    assert [str(c.outcome) for c in ok] == ["reproduced", "reproduced"]
    # the instrument broken: the slower condition does not slow the measurement -> inconclusive
    flat = _verdicts("C12", LAB, {**fast, "control.GET.p99_ms": 0.95, "control.SET.p99_ms": 1.0}, LAB_BENCH)
    assert [str(c.outcome) for c in flat] == ["inconclusive", "inconclusive"]
    slow = _verdicts(
        "C12",
        LAB,
        {"GET.p99_ms": 1.5, "SET.p99_ms": 1.4, "control.GET.p99_ms": 6.0, "control.SET.p99_ms": 6.0},
        LAB_BENCH,
    )
    assert [str(c.outcome) for c in slow] == ["not reproduced", "not reproduced"]


def test_c13_checks_can_come_out_either_way():
    from tests.ledger_helpers import HERE, LAB

    lab = {"clients": 32, "threads": 8}
    assert (
        str(_verdicts("C13", LAB, {"Totals.ops_per_sec": 2.0e6, "control.Totals.ops_per_sec": 4.0e4}, lab)[0].outcome)
        == "reproduced"
    )
    assert (
        str(_verdicts("C13", LAB, {"Totals.ops_per_sec": 2.0e6, "control.Totals.ops_per_sec": 1.9e6}, lab)[0].outcome)
        == "inconclusive"
    )
    assert (
        str(_verdicts("C13", LAB, {"Totals.ops_per_sec": 6.0e4, "control.Totals.ops_per_sec": 1.0e4}, lab)[0].outcome)
        == "not reproduced"
    )
    assert (
        "clients: measured 10, claim 32"
        in _verdicts("C13", HERE, {"Totals.ops_per_sec": 6e4}, {"clients": 10, "threads": 2})[0].reason
    )


def test_c11_is_out_of_the_ledger_with_the_reason():
    """Counting the topology the harness built restates the slot split it made: C11 has no
    check, it says why, and points at what measures what the replicas are for."""
    from harness.model.stored_run import Metric, Record, RunData
    from harness.verdict.analysis import Outcome, analyze
    from tests.ledger_helpers import ledger, verdicts

    suites, claims = ledger()
    c11 = next(c for c in claims if c.id == "C11")
    assert not c11.checks and "restates the slot split the harness made" in c11.not_measurable
    assert "C11a" in c11.not_measurable and "primaries_serving" in c11.not_measurable
    assert not any(chk.metric.endswith("primaries_serving") for c in claims for chk in c.checks)
    srun = suites["redis-cluster"].as_run("local", 1, {c.name: {} for c in suites["redis-cluster"].cases})
    rec = Record(
        suite="redis-cluster",
        case="redis-benchmark",
        repetition=1,
        metrics={"cluster.primaries_serving": Metric(1, "")},
    )
    verdict = next(
        c for c in analyze(RunData(Path("."), {}, [rec], {"redis-cluster": srun}, claims)).claims if c.id == "C11"
    )
    assert verdict.outcome is Outcome.NOT_MEASURABLE  # whatever the count: no verdict hangs on it
    assert verdicts("C12", "redis-benchmark", {}, suite="redis-cluster")  # C12 still judged on that case


def test_lab_profile_is_the_source_verbatim_and_fails_on_skips():
    from harness.model.yaml_fields import load_yaml

    lab = load_yaml(REPO / "harness" / "experiments" / "redis_cluster" / "suite.yaml")["profiles"]["lab-a100"]
    assert lab["skipped_fails"] is True
    assert (
        lab["params"]["redis-benchmark"]["clients"] == 200 and lab["params"]["redis-benchmark"]["requests"] == 1000000
    )
    assert (lab["params"]["memtier"]["clients"], lab["params"]["memtier"]["threads"]) == (32, 8)
    assert lab["conditions"]["redis_benchmark_clients"] == 200 and lab["conditions"]["memtier_threads"] == 8


def test_driver_fails_fast_when_nothing_listens(tmp_path):
    from tests.conftest import free_port

    out = drv.run_benchmark(_ctx(tmp_path, Target("t", "cluster", [Node("127.0.0.1", free_port(), "primary")])))
    assert out.status == "failed" and "cannot reach Redis" in out.reason


def test_view_aggregates_runs_and_takes_the_claim_from_the_ledger(tmp_path):
    from harness.experiments import views
    from harness.model.ledger import Claim
    from harness.model.spec import Case, SuiteClaim, SuiteRun
    from harness.model.stored_run import Record, RunData, Series
    from harness.verdict.analysis import analyze

    def rec(rep, p99):
        runs = Series(
            {
                "run": ["measured", "measured", "control", "control"],
                "clients": [50, 50, 200, 200],
                "test": ["SET", "GET", "SET", "GET"],
                "rps": [1e4] * 4,
                "p50_ms": [1.0] * 4,
                "p95_ms": [2.0] * 4,
                "p99_ms": [p99, p99, 4 * p99, 4 * p99],
                "max_ms": [9.0] * 4,
            }
        )
        return Record(suite="redis-cluster", case="redis-benchmark", repetition=rep, series={"runs": runs})

    suite = SuiteRun(
        "redis-cluster",
        "",
        SuiteClaim("2.5", "t"),
        "cluster",
        "local",
        "",
        2,
        [Case("redis-benchmark", "redis-cluster-benchmark")],
        [],
    )
    claims = [Claim("C12", "2.5", "t", [], figures={"p99_ms": 1.2, "clients": 200})]
    run = RunData(tmp_path, {}, [rec(1, 1.0), rec(2, 3.0)], {"redis-cluster": suite}, claims)
    table, chart = views.build(run, analyze(run), "redis-cluster")
    assert table.rows[0][:3] == ["measured", 50, "SET"] and (2.0, 1.0, 3.0) in table.rows[0]  # median (min-max)
    assert "P99 < 1.2 ms (C12) at 200 clients" in table.note
    assert [s["name"] for s in chart.series] == ["measured (50 clients)", "control (200 clients)", "claimed (C12, lab)"]
