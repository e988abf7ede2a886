"""The memtier wrapper on recorded real outputs (memtier is not installable here)."""

import os
import stat
import sys
from pathlib import Path

import pytest

from harness.experiments.redis_cluster import drivers as drv
from harness.infra.load_tools import memtier
from harness.model.driver_contract import CaseContext, Node, Target
from tests import REPO, TESTS

FIX = TESTS / "fixtures" / "memtier"


def load(name):
    return (FIX / f"{name}.json").read_text(), (FIX / f"{name}.stderr").read_text()


def test_healthy_cluster_run_is_valid_with_ops_and_percentiles():
    r = memtier.parse_files(*load("cluster_ratio1-1"))
    assert r.valid and r.chosen == "ALL STATS"
    assert r.metrics["Totals.ops_per_sec"].value == pytest.approx(59681.85)
    assert r.metrics["Totals.p50_ms"].value == pytest.approx(2.143)
    assert r.metrics["Totals.p99_ms"].value == pytest.approx(9.599)
    assert r.metrics["Totals.p99.9_ms"].value == pytest.approx(17.407)
    assert r.metrics["Gets.ops_per_sec"].value == pytest.approx(29908.61)


def test_totals_average_comes_from_accumulated_latency_not_the_rounded_field():
    r = memtier.parse_files(*load("cluster_ratio1-1"))
    # stdout says 2.51420; the JSON's 'Average Latency' of Totals says 2.0
    assert r.metrics["Totals.avg_ms"].value == pytest.approx(2.5142, abs=1e-3)


def test_run_count_layout_is_read_and_its_broken_aggregate_is_invalid():
    r = memtier.parse_files(*load("cluster_ratio1-10_runcount2"))
    assert set(r.sections) == {"BEST RUN RESULTS", "WORST RUN RESULTS", "AGGREGATED AVERAGE RESULTS (2 runs)"}
    assert r.chosen.startswith("AGGREGATED")
    # the best/worst sections report 0 ops/s and a negative duration
    assert any("Ops/sec" in p for p in r.sections["BEST RUN RESULTS"].problems)
    # the aggregate's Totals percentiles come from an empty histogram
    assert not r.valid
    assert any("empty histogram" in p for p in r.problems)
    # percentiles that are averages of per-run percentiles say so
    assert "not a percentile" in r.metrics["Gets.p99_ms"].note


def test_refused_run_is_invalid_despite_exit_code_zero():
    r = memtier.parse_files(*load("refused"))
    assert not r.valid
    text = " ".join(r.problems)
    assert "Count is 0" in text and "Connection refused" in text


def test_percentile_names():
    assert memtier.percentile_name("p50.00") == "p50"
    assert memtier.percentile_name("p99.90") == "p99.9"
    assert memtier.percentile_name("p99.999") == "p99.999"


def test_not_json_is_invalid():
    r = memtier.parse_files("{not json", "")
    assert not r.valid and "not valid JSON" in r.problems[0]


def test_command_always_adds_cluster_mode_on_a_cluster():
    p = drv.MEMTIER_PARAMS
    params = {k: v.default for k, v in p.items()}
    cmd = memtier.build_command(params, "127.0.0.1", 7000, True, "/tmp/x.json")
    assert "--cluster-mode" in cmd and "--run-count=1" in cmd and "--json-out-file=/tmp/x.json" in cmd
    assert "--cluster-mode" not in memtier.build_command(params, "127.0.0.1", 6379, False, "/tmp/x.json")


def _replayer(tmp_path: Path, name: str) -> Path:
    """A stand-in memtier_benchmark that replays one recorded real run (memtier is not
    packaged here): it copies the recorded JSON to --json-out-file and prints the
    recorded stdout and stderr, exiting 0 as the real tool did."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "memtier_benchmark"
    script.write_text(f"""#!{sys.executable}
import shutil, sys
out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--json-out-file=")][0]
shutil.copy({str(FIX / (name + ".json"))!r}, out)
sys.stdout.write(open({str(FIX / (name + ".stdout"))!r}).read())
sys.stderr.write(open({str(FIX / (name + ".stderr"))!r}).read())
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bindir


@pytest.mark.parametrize("name,status", [("cluster_ratio1-1", "ok"), ("refused", "invalid")])
def test_driver_replaying_recorded_runs(tmp_path, monkeypatch, name, status):
    monkeypatch.setenv("PATH", f"{_replayer(tmp_path, name)}{os.pathsep}{os.environ['PATH']}")
    params = {k: v.default for k, v in drv.MEMTIER_PARAMS.items()}
    ctx = CaseContext(
        "s",
        "memtier",
        1,
        "local",
        params,
        tmp_path / "raw",
        Target("t", "cluster", [Node("127.0.0.1", 7000, "primary")]),
        log=lambda m: None,
    )
    out = drv.run_memtier(ctx)
    assert out.status == status
    assert (tmp_path / "raw" / "memtier.json").exists() and (tmp_path / "raw" / "memtier.stderr").exists()
    if status == "ok":
        assert out.metrics["Totals.ops_per_sec"].value > 0
        # the control ran beside it (one client on one thread); the replay gives it the same
        # recorded numbers, so the ledger's control (below half the measured) would not hold
        assert out.metrics["control.Totals.ops_per_sec"].value == out.metrics["Totals.ops_per_sec"].value
        runs = out.series["runs"]
        assert list(zip(runs.column("run"), runs.column("connections"))) == [("measured", 200), ("control", 1)]
        assert (tmp_path / "raw" / "memtier-control.json").exists()
    else:
        assert "Count is 0" in out.reason


def test_driver_skips_without_memtier(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    params = {k: v.default for k, v in drv.MEMTIER_PARAMS.items()}
    ctx = CaseContext(
        "s",
        "memtier",
        1,
        "local",
        params,
        tmp_path / "raw",
        Target("t", "cluster", [Node("127.0.0.1", 7000, "primary")]),
        log=lambda m: None,
    )
    out = drv.run_memtier(ctx)
    assert out.status == "skipped" and out.reason.startswith("memtier_benchmark not found")


def test_lab_run_without_memtier_fails_because_of_the_skip_unless_skips_are_allowed(tmp_path):
    """lab-a100 has skipped_fails: a lab run whose load generator lacks memtier must not end
    green (exit 3), and ends 0 with --allow-skipped when nothing else failed. One case
    (redis-cluster/memtier) on a local cluster at HARNESS_TEST_CLUSTER_PORT + 40."""
    import subprocess

    from tests.conftest import TEST_CLUSTER_PORT

    path = os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "memtier_benchmark").exists()
    )
    env = dict(os.environ, PATH=path, NO_COLOR="1")
    harness = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "redis-cluster/memtier",
        "--profile",
        "lab-a100",
        "--base-port",
        str(TEST_CLUSTER_PORT + 40),
    ]
    strict = subprocess.run(
        harness + ["--results-dir", str(tmp_path / "a")], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    assert strict.returncode == 3, strict.stdout[-2000:] + strict.stderr[-2000:]
    assert "skipped cases fail this profile" in strict.stdout + strict.stderr
    assert "memtier_benchmark not found" in strict.stdout + strict.stderr
    allowed = subprocess.run(
        harness + ["--results-dir", str(tmp_path / "b"), "--allow-skipped"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert allowed.returncode == 0, allowed.stdout[-2000:] + allowed.stderr[-2000:]


def test_kept_commands_and_json_never_carry_the_password(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_replayer(tmp_path, 'cluster_ratio1-1')}{os.pathsep}{os.environ['PATH']}")
    params = dict({k: v.default for k, v in drv.MEMTIER_PARAMS.items()}, control=False)
    target = Target("t", "cluster", [Node("127.0.0.1", 7000, "primary")], password="s3cret-pw")
    out = drv.run_memtier(CaseContext("s", "memtier", 1, "local", params, tmp_path / "raw", target, log=lambda m: None))
    assert out.status == "ok" and "--authenticate=" in out.details["commands"]["memtier"]
    kept = str(out.details) + "".join(p.read_text(errors="replace") for p in (tmp_path / "raw").iterdir())
    assert "s3cret-pw" not in kept
