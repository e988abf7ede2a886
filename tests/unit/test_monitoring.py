"""Prometheus telemetry: the pure parts on small inputs, then real runs with and without
a real Prometheus + redis_exporter + node exporter (ports 7650-7655 for the cluster,
7690-7697 for the stack, 7660-7665 for the run without Prometheus)."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from harness.base.paths import REPO_ROOT
from harness.infra import monitoring
from harness.infra.inventory import prometheus_url
from harness.model.driver_contract import Node, Target

MON_PORT = 7690
CLUSTER_PORT = 7650
NO_PROM_CLUSTER_PORT = 7660


def redis_suite(tmp_path: Path) -> str:
    """The committed redis-cluster suite, cut down to its redis-benchmark and memtier cases
    (other cases may be added by other experiments; these tests are about telemetry)."""
    spec = yaml.safe_load((REPO_ROOT / "harness" / "experiments" / "redis_cluster" / "suite.yaml").read_text())
    spec["cases"] = [c for c in spec["cases"] if c["driver"] in ("redis-cluster-benchmark", "redis-cluster-memtier")]
    names = {c["name"] for c in spec["cases"]}
    for prof in spec["profiles"].values():
        prof["params"] = {k: v for k, v in (prof.get("params") or {}).items() if k in names}
        prof["thresholds"] = [t for t in prof.get("thresholds") or [] if t["case"] in names]
    path = tmp_path / "redis-cluster.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def test_stack_ports_follow_the_base_port():
    assert monitoring.stack_ports(6, 7690) == {
        "prometheus": 7690,
        "redis_exporters": [7691, 7692, 7693, 7694, 7695, 7696],
        "node_exporter": 7697,
    }


def test_rendered_config_scrapes_every_node_with_its_label():
    text = monitoring.render_config(
        [
            {"exporter": "127.0.0.1:7691", "node": "127.0.0.1:7650"},
            {"exporter": "127.0.0.1:7692", "node": "127.0.0.1:7651"},
        ],
        [{"exporter": "127.0.0.1:7697", "host": "box"}],
        "127.0.0.1:7690",
    )
    cfg = yaml.safe_load(text)
    assert cfg["global"]["scrape_interval"] == "1s"
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"prometheus", "redis", "node"}
    redis = [(sc["targets"], sc["labels"]["node"]) for sc in jobs["redis"]["static_configs"]]
    assert redis == [(["127.0.0.1:7691"], "127.0.0.1:7650"), (["127.0.0.1:7692"], "127.0.0.1:7651")]
    assert jobs["node"]["static_configs"][0]["labels"] == {"host": "box"}


def test_matrix_to_series_names_offsets_and_drops_nan():
    result = [
        {"metric": {"node": "b:2"}, "values": [[100, "1.5"], [101, "NaN"], [102, "+Inf"], [103, "4"]]},
        {"metric": {"node": "a:1"}, "values": [[100.5, "2"]]},
        {"metric": {"node": "c:3"}, "values": [[100, "NaN"]]},
    ]
    out = monitoring.matrix_to_series(result, "node", t0=100)
    assert out == [{"name": "a:1", "points": [[0.5, 2.0]]}, {"name": "b:2", "points": [[0, 1.5], [3, 4.0]]}]


def test_series_stats_and_tables():
    from harness.publish import monitoring_view as view

    assert view.series_stats([[0, 1.0], [1, 3.0], [2, 2.0]]) == {"mean": 2.0, "peak": 3.0, "last": 2.0}
    assert view.series_stats([]) == {"mean": None, "peak": None, "last": None}
    series = {
        "ops": [{"name": "n:1", "points": [[0, 100.0], [1, 300.0]]}],
        "memory": [{"name": "n:1", "points": [[0, 1.5], [1, 2.5]]}],
        "clients": [],
        "evicted": [],
        "cpu": [{"name": "box", "points": [[0, 10.0], [1, 30.0]]}],
    }
    node_table, cpu_table = view.build_tables(series, {"n:1": "primary"})
    assert node_table.rows == [["n:1", "primary", 200.0, 300.0, 2.5, "-", "-"]]
    assert cpu_table.rows == [["box", 20.0, 30.0]]


def test_inventory_names_its_prometheus():
    assert prometheus_url(REPO_ROOT / "ansible" / "inventories" / "lab.yml") == "http://10.20.0.31:9090"
    assert prometheus_url(REPO_ROOT / "ansible" / "inventories" / "local.yml") is None


def _bin_without_prometheus(tmp_path: Path) -> str:
    """A PATH with the Redis tools but none of the monitoring tools."""
    b = tmp_path / "bin"
    b.mkdir()
    for tool in ("redis-server", "redis-cli", "redis-benchmark"):
        path = shutil.which(tool)
        if path:
            (b / tool).symlink_to(path)
    return str(b)


def test_monitor_without_prometheus_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _bin_without_prometheus(tmp_path))
    monkeypatch.setenv(monitoring.PORT_ENV, str(MON_PORT))
    target = Target("local", "cluster", [Node("127.0.0.1", CLUSTER_PORT, "primary")])
    mon = monitoring.Monitor.start(target, tmp_path, log=lambda m: None)
    out = mon.finish({"start": 0.0, "end": 1.0}, tmp_path)
    assert out["status"] == "unavailable"
    assert "prometheus" in out["reason"] and "apt-get install" in out["reason"]
    assert out["queries"] == []
    json.dumps(out)


def _need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed (apt-get install redis-server redis-tools "
            f"prometheus prometheus-redis-exporter prometheus-node-exporter)"
        )


def test_run_with_monitoring_shows_prometheus_series(tmp_path, monkeypatch):
    _need("redis-server", "redis-benchmark", "prometheus", "prometheus-redis-exporter", "prometheus-node-exporter")
    from harness.model.spec import select_suites
    from harness.run.runner import run_suites

    monkeypatch.setenv(monitoring.PORT_ENV, str(MON_PORT))
    suite_file = redis_suite(tmp_path)
    out = run_suites(
        [suite_file],
        repeat=1,
        overrides=["redis-benchmark.requests=20000"],
        base_port=CLUSTER_PORT,
        monitoring=True,
        results_dir=tmp_path / "results",
        log=lambda m: None,
    )
    man = json.loads((out.run_dir / "manifest.json").read_text())
    assert "monitoring" not in man, "the series go into the results, not the manifest"
    mon = json.loads((out.run_dir / "results.json").read_text())["monitoring"]
    assert mon["status"] == "ok", mon["reason"]
    charts = {q["title"].split(" (")[0]: q for q in mon["queries"]}
    ops = charts["Server-side ops/s per node"]["series"]
    nodes = {f"127.0.0.1:{CLUSTER_PORT + i}" for i in range(6)}
    assert {s["name"] for s in ops} == nodes
    # the run is about a second long; the chart covers at least MIN_CHART_WINDOW_S of it
    assert all(len(s["points"]) >= 2 for s in ops), (mon["reason"], {s["name"]: s["points"] for s in ops})
    # redis-benchmark sent 2 x 20000 requests: the primaries' ops/s must show it
    assert max(p[1] for s in ops for p in s["points"]) > 100
    assert {s["name"] for s in charts["Used memory per node"]["series"]} == nodes
    assert len(charts["Host CPU busy"]["series"]) == 1
    from harness.publish import monitoring_view as view

    assert len(view.blocks(mon)[-2].rows) == 6  # the per-node table
    assert (out.run_dir / "raw" / "monitoring" / "ops.json").exists()
    html = (out.run_dir / "report.html").read_text()
    section = html[html.index('id="monitoring"') :]
    assert "Server-side ops/s per node" in section and "<svg" in section and f"127.0.0.1:{CLUSTER_PORT}" in section
    assert not monitoring.stack_running(MON_PORT), "the run must stop the stack it started"
    # the JUnit file lists every threshold of the profile
    suite = select_suites([suite_file])[0]
    expected = {(f"redis-cluster.{t.case}", t.metric) for t in suite.profile("local").thresholds}
    root = ET.parse(out.run_dir / "junit.xml").getroot()
    got = [(tc.get("classname"), tc.get("name").split(" ")[0]) for tc in root.iter("testcase")]
    assert sorted(got) == sorted(expected)


def test_run_without_prometheus_still_works_and_says_why(tmp_path, monkeypatch):
    _need("redis-server", "redis-benchmark")
    from harness.run.runner import run_suites

    monkeypatch.setenv("PATH", _bin_without_prometheus(tmp_path) + os.pathsep + "/nonexistent")
    out = run_suites(
        [redis_suite(tmp_path)],
        repeat=1,
        overrides=["redis-benchmark.requests=5000"],
        base_port=NO_PROM_CLUSTER_PORT,
        monitoring=True,
        results_dir=tmp_path / "results",
        log=lambda m: None,
    )
    results = json.loads((out.run_dir / "results.json").read_text())
    assert results["monitoring"]["status"] == "unavailable"
    assert "prometheus-node-exporter not found on PATH" in results["monitoring"]["reason"]
    bench = [r for r in results["records"] if r["case"] == "redis-benchmark"]
    assert bench and bench[0]["status"] == "ok" and "GET.p99_ms" in bench[0]["metrics"]
    html = (out.run_dir / "report.html").read_text()
    assert "not found on PATH" in html[html.index('id="monitoring"') :]


def test_cluster_up_with_monitoring_and_down(tmp_path):
    """`harness cluster up --monitoring` leaves a scraping stack running; `down` stops it."""
    _need("redis-server", "prometheus", "prometheus-redis-exporter", "prometheus-node-exporter")
    import subprocess
    import sys
    import urllib.request

    env = {**os.environ, monitoring.PORT_ENV: "7680"}
    cmd = [sys.executable, "-m", "harness", "cluster"]
    try:
        up = subprocess.run(
            cmd + ["up", "--base-port", "7670", "--monitoring"], env=env, capture_output=True, text=True, timeout=120
        )
        assert up.returncode == 0, up.stderr
        assert "prometheus     http://127.0.0.1:7680" in up.stdout
        assert "redis_exporter 127.0.0.1:7681 -> 127.0.0.1:7670" in up.stdout
        assert monitoring.stack_running(7680)
        with urllib.request.urlopen("http://127.0.0.1:7680/api/v1/targets", timeout=5) as r:
            targets = json.load(r)["data"]["activeTargets"]
        assert sorted(t["labels"].get("node", "") for t in targets if t["labels"]["job"] == "redis") == [
            f"127.0.0.1:{7670 + i}" for i in range(6)
        ]
    finally:
        down = subprocess.run(
            cmd + ["down", "--base-port", "7670"], env=env, capture_output=True, text=True, timeout=60
        )
    assert down.returncode == 0, down.stderr
    assert "stopped 14 processes" in down.stdout  # 6 redis-server + 6 redis_exporter + node exporter + Prometheus
    assert not monitoring.stack_running(7680)
