"""Not part of the normal run (its name matches no test file pattern, and it skips without
HARNESS_SIGTERM_TARGET): tests/system/test_make_test_sigterm.py runs `make test` on this file
alone and stops it with SIGTERM or SIGHUP while the test below holds what a test run starts: the
session cluster (six redis-server processes), a standalone redis-server and a child process of
the worker that cleans up when it is told to stop (as `make lab-sim-up` does)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

OUT = os.environ.get("HARNESS_SIGTERM_TARGET", "")
pytestmark = pytest.mark.skipif(not OUT, reason="run only by tests/system/test_make_test_sigterm.py")


def test_holds_a_cluster_a_server_and_a_child_until_the_run_is_stopped(cluster, redis_server, tmp_path_factory):
    server = redis_server()
    marker = Path(OUT) / "child-cleaned-up"
    child = subprocess.Popen(
        ["bash", "-c", f'trap "touch {marker}; kill \\$! 2>/dev/null; exit 143" TERM HUP INT; sleep 300 & wait']
    )
    info = {
        "worker": os.getpid(),
        "controller": os.getppid(),
        "cluster_ports": [n.port for n in cluster.nodes],
        "server_port": server.port,
        "child": child.pid,
        "basetemp": str(tmp_path_factory.getbasetemp()),  # every server's folder is in it
    }
    (Path(OUT) / "info.tmp").write_text(json.dumps(info))
    (Path(OUT) / "info.tmp").rename(Path(OUT) / "info.json")
    try:
        child.wait(timeout=120)  # until the run is stopped
        pytest.fail("the child ended before the run was stopped")
    finally:
        child.terminate()  # left alone only when nothing stopped the run (it cleans up and ends)
        child.wait(10)
