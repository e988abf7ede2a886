"""The command line's contract: one clear line and exit 2 or 3 for bad input or a broken
environment, never a traceback."""

import os
import socket
import subprocess
import sys

import yaml

from tests import REPO


def harness(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO, env=e, timeout=timeout
    )


def assert_one_line(p, code, needle):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    err = [line for line in p.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(err) == 1 and needle in err[0], p.stderr


def test_validate_all_shipped_specs():
    p = harness("validate")
    assert p.returncode == 0, p.stderr
    assert "redis_cluster/suite.yaml: ok (redis-cluster)" in p.stdout


def test_misspelt_field_exit_2(tmp_path):
    d = yaml.safe_load((REPO / "harness" / "experiments" / "redis_cluster" / "suite.yaml").read_text())
    d["cases"][0]["parameters"] = d["cases"][0].pop("params")
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(d))
    assert_one_line(harness("validate", str(f)), 2, "unknown field 'parameters' (did you mean 'params'?)")


def test_unknown_profile_exit_2(tmp_path):
    p = harness("run", "redis-cluster", "--profile", "lab-a10", "--results-dir", str(tmp_path))
    assert_one_line(p, 2, "has no profile 'lab-a10' (did you mean 'lab-a100'?)")
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_unknown_suite_and_bad_override_exit_2(tmp_path):
    assert_one_line(harness("run", "redis-clster", "--results-dir", str(tmp_path)), 2, "no suite named 'redis-clster'")
    assert_one_line(
        harness("run", "redis-cluster", "--set", "redis-benchmark.clients=many", "--results-dir", str(tmp_path)),
        2,
        "expected int, got str",
    )


def test_report_of_a_folder_that_is_not_a_run_exit_2(tmp_path):
    assert_one_line(harness("report", str(tmp_path)), 2, "manifest.json is missing")


def test_busy_port_exit_3(tmp_path):
    s = socket.socket()
    for port in range(7950, 7999):  # low enough to leave room for the bus ports (+10000)
        try:
            s.bind(("127.0.0.1", port))
            break
        except OSError:
            continue
    s.listen()
    try:
        p = harness("cluster", "up", "--base-port", str(port))
        assert_one_line(p, 3, f"port {port} on 127.0.0.1 is busy")
    finally:
        s.close()


def test_missing_redis_server_exit_3(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    p = harness("cluster", "up", "--base-port", "7900", env={"PATH": str(bindir)})
    assert_one_line(p, 3, "redis-server not found on PATH; install it with: apt-get install")
