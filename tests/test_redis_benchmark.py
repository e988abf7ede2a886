"""redis-benchmark: the parser on recorded real output, the driver against a real cluster."""

from pathlib import Path

import pytest

from harness.drivers import CaseContext, Node, Target
from harness.experiments.redis_cluster import drivers as drv
from harness.tools import redis_benchmark as rb

FIX = Path(__file__).parent / "fixtures" / "redis-benchmark"


def test_cluster_output_skips_the_node_list_and_keys_rows_by_title():
    rows = rb.parse_csv((FIX / "cluster_get_set.stdout").read_text())
    assert set(rows) == {"SET", "GET"}
    assert rows["GET"]["p99_latency_ms"] == pytest.approx(1.063)
    metrics, problems = rb.to_metrics(rows)
    assert not problems
    assert metrics["SET.rps"].value == pytest.approx(39920.16) and metrics["SET.rps"].better == "higher"
    assert metrics["GET.p95_ms"].unit == "ms"


def test_titles_with_spaces_are_kept_whole():
    text = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
            '"LPUSH (needed to benchmark LRANGE)","1000.0","1","1","1","1","1","1"\n'
            '"MSET (10 keys)","2000.0","1","1","1","1","1","1"\n')
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


def test_driver_against_the_real_cluster(cluster, tmp_path):
    out = drv.run_benchmark(_ctx(tmp_path, cluster, requests=5000, clients=10))
    assert out.status == "ok", out.reason
    for cmd in ("GET", "SET"):
        assert out.metrics[f"{cmd}.rps"].value > 0
        assert 0 < out.metrics[f"{cmd}.p50_ms"].value <= out.metrics[f"{cmd}.p99_ms"].value
    assert (tmp_path / "redis-benchmark.stdout").read_text().startswith("Cluster has 3 master nodes")


def test_driver_fails_fast_when_nothing_listens(tmp_path):
    from tests.conftest import free_port

    out = drv.run_benchmark(_ctx(tmp_path, Target("t", "cluster", [Node("127.0.0.1", free_port(), "primary")])))
    assert out.status == "failed" and "cannot reach Redis" in out.reason
