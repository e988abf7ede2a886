"""A run that refuses a running cluster never stops it; one base port, one run (issue 25,
class 2). Real 6-node clusters on this test's ports (HARNESS_TEST_CLUSTER_PORT + 10 and
up, so never the session cluster's), real `harness run` processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.base.metrics_model import MetricDecl
from harness.infra.cluster import LocalCluster, PortLock
from harness.infra.redis_server import pid_alive
from harness.model import driver_contract
from harness.model.driver_contract import Metric, Record
from tests import REPO
from tests.conftest import TEST_CLUSTER_PORT, _need_redis
from tests.system.test_hostile import assert_one_line, cli

UNHEALTHY, HELD, TOGETHER = TEST_CLUSTER_PORT + 10, TEST_CLUSTER_PORT + 20, TEST_CLUSTER_PORT + 30


@driver_contract.register("test-hostile-ping", metrics=(MetricDecl("primaries", "nodes"),), needs="cluster", params={})
def _ping(ctx):
    """PING every primary of the target (the case a refused run never gets to)."""
    for n in ctx.target.primaries:
        ctx.target.client(n, socket_timeout=3).ping()
    return Record(metrics={"primaries": Metric(float(len(ctx.target.primaries)), "nodes")})


SPEC = {
    "name": "hostile-cluster",
    "description": "one PING per primary",
    "claim": {"section": "0", "text": "t"},
    "target": "cluster",
    "cases": [{"name": "ping", "driver": "test-hostile-ping", "params": {}}],
    "profiles": {"local": {"repetitions": 1}},
}
ENTRY = "import tests.system.test_hostile_cluster; from harness.cli import main; main()"


@pytest.fixture
def spec_file(tmp_path):
    _need_redis()
    p = tmp_path / "hostile-cluster.yaml"
    p.write_text(yaml.safe_dump(SPEC))
    return p


def redis_on(base: int) -> list[int]:
    """pids of redis-server processes listening on base..base+5 (from their command lines'
    config files, which name the port)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "redis-server" in cmd and any(f"node-{p}" in cmd for p in range(base, base + 6)):
            out.append(int(d.name))
    return out


def test_a_refused_start_leaves_the_unhealthy_cluster_running(spec_file, tmp_path):
    c = LocalCluster(base_port=UNHEALTHY)
    c.up()
    try:
        replica = next(n for n in c.nodes() if n.role == "replica")
        c.kill_node(replica.port)
        assert c.health_problem() is not None
        alive = [p.pid for p in c.processes if p.pid]
        assert len(alive) == 5
        code, out, err = cli("run", spec_file, "--base-port", UNHEALTHY, "--results-dir", tmp_path / "r")
        line = assert_one_line((code, out, err), (3,), "already running")
        assert "not healthy" in line and "left as it is" in line
        assert "stopped the local cluster" not in err
        assert all(pid_alive(p) for p in alive), "the user's cluster was stopped by a run that refused it"
        assert c.state_file.exists()
        # the same through `cluster up`
        assert_one_line(cli("cluster", "up", "--base-port", UNHEALTHY), (3,), "already running")
        assert all(pid_alive(p) for p in alive)
    finally:
        c.down()
    assert redis_on(UNHEALTHY) == []


def _holder(ports_base: int) -> subprocess.Popen:
    """Another harness process holding the ports of a cluster on `ports_base`."""
    code = (
        "import sys, time; from harness.infra.cluster import LocalCluster; "
        f"c = LocalCluster(base_port={ports_base}); c.lock.acquire(); print('held', flush=True); time.sleep(120)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.mark.parametrize("offset", [0, 3, -5])
def test_ports_in_use_by_another_run_are_refused_up_front(spec_file, tmp_path, offset):
    """The same base port, or one whose nodes overlap: refused before anything starts or stops."""
    holder = _holder(HELD)
    try:
        t0 = time.monotonic()
        line = assert_one_line(
            cli("run", spec_file, "--base-port", HELD + offset, "--results-dir", tmp_path / "r"),
            (3,),
            "in use by another harness process",
        )
        assert f"pid {holder.pid}" in line and "nothing was started or stopped" in line
        assert time.monotonic() - t0 < 30
        assert redis_on(HELD + offset) == [] and not LocalCluster(base_port=HELD + offset).state_file.exists()
        assert_one_line(cli("cluster", "up", "--base-port", HELD + offset), (3,), "in use by another harness process")
    finally:
        holder.kill()
        holder.wait()
    lock = PortLock("127.0.0.1", [HELD]).acquire()  # the kernel let go of a killed holder's lock
    lock.release()


def test_two_runs_started_together_on_one_base_port(spec_file, tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                ENTRY,
                "run",
                str(spec_file),
                "--base-port",
                str(TOGETHER),
                "--results-dir",
                str(tmp_path / f"r{i}"),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    t0 = time.monotonic()
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            results.append((p.returncode, out, err, time.monotonic() - t0))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(30)
    codes = sorted(r[0] for r in results)
    assert codes in ([0, 0], [0, 3]), [(r[0], r[2][-800:]) for r in results]
    for code, out, err, took in results:
        assert "Traceback" not in err, err[-2000:]
        if code == 3:
            assert "in use by another harness process" in err.strip().splitlines()[-1]
            assert took < 60, f"the refused run waited {took:.0f} s"
        else:
            run_dir = Path(out.split("results: ")[1].split()[0])
            rec = json.loads((run_dir / "results.json").read_text())["records"]
            assert [r["status"] for r in rec] == ["ok"], rec
    assert redis_on(TOGETHER) == []
