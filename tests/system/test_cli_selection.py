"""The command line people reach for: one case (`harness run SUITE/CASE`, `-k`), a plan
that starts nothing (`--dry-run`), JSON for `list` and `cluster status`, shell completion,
environment variables in --help, progress with an estimate of the time left."""

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from harness.base import progress
from tests import REPO

PORT = int(os.environ.get("HARNESS_TEST_SELECTION_PORT", "7860"))  # this file's ports: PORT .. PORT + 25


def harness(*args, env=None, timeout=300):
    e = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO, env=e, timeout=timeout
    )


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_run_one_case(tmp_path):
    p = harness("run", "redis-cluster/acl", "--base-port", str(PORT), "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = next(tmp_path.iterdir())
    res = json.loads((run_dir / "results.json").read_text())
    assert {r["case"] for r in res["records"]} == {"acl"}
    assert [c["name"] for c in res["suites"]["redis-cluster"]["cases"]] == ["acl"]
    assert {t["case"] for t in res["suites"]["redis-cluster"]["thresholds"]} == {"acl"}  # no other case "missing"
    assert "about" in p.stderr and "left]" in p.stderr  # progress with an estimate
    assert "\033[" not in p.stderr  # not a terminal: no colour
    assert not any(listening(PORT + i) for i in range(6))  # the cluster it started is gone


@pytest.mark.skipif(
    shutil.which("memtier_benchmark") is not None,
    reason="needs a case that is skipped here: memtier_benchmark is installed",
)
def test_a_skipped_cases_repetitions_count_as_done_and_the_estimate_waits_for_a_measured_one(tmp_path):
    """memtier is skipped (not installed) in its first repetition: its other two count as
    done, so the next line is [4/6]; nothing measured yet, so no estimate; then acl's own."""
    p = harness(
        "run", "redis-cluster/memtier", "redis-cluster/acl", "--base-port", str(PORT), "--results-dir", str(tmp_path)
    )
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("[")]
    assert [ln.split(",")[0] for ln in lines] == ["[1/6", "[4/6", "[5/6", "[6/6"], lines
    assert lines[1].endswith("estimating the time left] redis-cluster / acl / repetition 1/3"), lines
    assert "about" in lines[2] and "left]" in lines[2]


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path):
    port = PORT + 10
    p = harness(
        "run",
        "redis-cluster",
        "-k",
        "acl",
        "--dry-run",
        "--base-port",
        str(port),
        "--results-dir",
        str(tmp_path / "r"),
        "--set",
        "acl.username=reader2",
    )
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "plan: 1 suite(s), 3 case repetition(s), profile local" in out
    assert f"127.0.0.1:{port}-{port + 5}" in out and "username=reader2" in out
    assert "- acl [redis-cluster-acl]" in out and "redis-benchmark" not in out.split("redis-cluster:")[1]
    assert out.strip().endswith("dry run: nothing was started")
    assert not (tmp_path / "r").exists() and not any(listening(port + i) for i in range(6))


def test_selection_errors_are_one_line_exit_2(tmp_path):
    p = harness("run", "redis-cluster/acll", "--dry-run")
    assert p.returncode == 2 and "has no case 'acll' (did you mean 'acl'?)" in p.stderr and "Traceback" not in p.stderr
    p = harness("run", "redis-cluster", "-k", "no-such-case", "--dry-run")
    assert p.returncode == 2 and "selects no case" in p.stderr


def test_list_json_and_help_and_completion():
    p = harness("list", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    rc = next(s for s in data["suites"] if s["name"] == "redis-cluster")
    assert "acl" in [c["name"] for c in rc["cases"]] and "local" in rc["profiles"]
    assert any(d["name"] == "redis-cluster-acl" for d in data["drivers"])
    h = harness("--help").stdout + harness("run", "--help").stdout
    assert "NO_COLOR" in h and "HARNESS_MONITORING_PORT" in h and "REDIS_CLUSTER_PASSWORD" in h
    env = {"_HARNESS_COMPLETE": "bash_complete", "COMP_WORDS": "harness run redis-cluster/a", "COMP_CWORD": "2"}
    p = harness(env=env)
    assert "plain,redis-cluster/acl" in p.stdout.splitlines()
    env = {"_HARNESS_COMPLETE": "bash_complete", "COMP_WORDS": "harness run --profile lab", "COMP_CWORD": "3"}
    assert "plain,lab-a100" in harness(env=env).stdout.splitlines()


def test_cluster_status_exits_non_zero_when_down():
    port = PORT + 20
    p = harness("cluster", "status", "--base-port", str(port), "--json")
    assert p.returncode == 3, p.stdout + p.stderr
    st = json.loads(p.stdout)
    assert st["healthy"] is False and st["running"] is False and "down" in st["health"]
    p = harness("cluster", "status", "--base-port", str(port))
    assert p.returncode == 3 and "down" in p.stdout


@pytest.mark.parametrize(
    "done,total,elapsed,left,expected",
    [
        (0, 10, 0.0, None, "[1/10, 0 s, estimating the time left]"),
        (2, 10, 30.0, 120.0, "[3/10, 30 s, about 2 min 00 s left]"),
        (9, 10, 3600.0, 400.0, "[10/10, 1 h 00 min, about 6 min 40 s left]"),
        (3, 10, 5.0, None, "[4/10, 5 s, estimating the time left]"),  # only skips so far: no estimate
    ],
)
def test_progress_lines(done, total, elapsed, left, expected):
    assert progress.progress(done, total, elapsed, left) == expected


def test_time_left_takes_each_cases_own_mean():
    """A case already started is estimated at its own repetitions' mean, one not started at
    the mean of every finished repetition; a case with nothing left adds nothing."""
    finished = {"eviction/trace": [1.0, 1.0], "serving/prefix-cache": [60.0]}
    remaining = {"eviction/trace": 0, "serving/prefix-cache": 1, "serving/peer": 2}
    assert progress.time_left(finished, remaining) == pytest.approx(60 + 2 * 62 / 3)
    assert progress.time_left({}, {"eviction/trace": 3}) is None


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert progress.colour("failed", "failed", Tty()) == "\033[31mfailed\033[0m"
    monkeypatch.setenv("TERM", "dumb")
    assert progress.colour("failed", "failed", Tty()) == "failed"
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    assert progress.colour("failed", "failed", Tty()) == "failed"


def test_cluster_status_of_a_healthy_cluster_exits_0(cluster):
    port = min(n.port for n in cluster.nodes)
    p = harness("cluster", "status", "--base-port", str(port), "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    st = json.loads(p.stdout)
    assert st["healthy"] is True and st["health"] == "ok"


def test_split_names_whole_suite_beside_one_of_its_cases():
    from harness.run.selection import split_names

    assert split_names(["redis-cluster/acl", "redis-cluster/memtier"]) == (
        ["redis-cluster"],
        {"redis-cluster": ["acl", "memtier"]},
    )
    assert split_names(["redis-cluster", "redis-cluster/acl"]) == (["redis-cluster"], {})
    assert split_names(["redis-cluster/acl", "redis-cluster"]) == (["redis-cluster"], {})
    assert split_names(["redis-cluster", "redis-cluster"]) == (["redis-cluster", "redis-cluster"], {})  # refused later
    assert split_names(["harness/experiments/redis_cluster/suite.yaml"]) == (
        ["harness/experiments/redis_cluster/suite.yaml"],
        {},
    )
