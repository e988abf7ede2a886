"""`harness compare`: a pooled baseline (median of the last N runs), the max(factor, CV)
rule, unstable baselines, sides that cannot be compared, and the output formats."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import BadInput
from harness.model.stored_run import load_run
from harness.verdict.analysis import MetricSummary, analyze
from harness.verdict.baseline import baseline_of, check_sides, compare_baseline, compare_dirs
from tests import REPO
from tests.stored_runs import METRICS, noisy_values, write_run, write_series


def harness(*args):
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    """Eight nights under one root: seven like each other, the eighth with get.rps 20% lower."""
    root = tmp_path_factory.mktemp("nightly")
    dirs = write_series(root, 8, step_metric="get.rps", step=-0.20, last_only=True, seed=3)
    return root, dirs


def test_pooled_baseline_flags_the_injected_regression_and_nothing_else(nightly):
    root, dirs = nightly
    c = compare_dirs(root, dirs[-1])
    assert "median of the last 7 run(s)" in c.baseline
    status = {r["metric"]: r["status"] for r in c.rows}
    assert status == {"get.rps": "regression", "get.p99_ms": "no change", "set.rps": "no change"}
    assert c.rows[0]["metric"] == "get.rps" and c.exit_code == 1  # regressions first
    assert c.rows[0]["baseline_runs"] == 7 and c.rows[0]["change_value"] == pytest.approx(-0.20, abs=0.03)
    p = harness("compare", str(root), str(dirs[-1]), "--format", "markdown", "--only-changed")
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("### 1 regression(s), 0 improvement(s)")
    assert "get.rps" in p.stdout and "set.rps" not in p.stdout  # --only-changed


def test_the_same_night_against_its_pool_is_not_a_regression(nightly):
    root, dirs = nightly
    p = harness("compare", str(root), str(dirs[-2]), "--format", "json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["counts"]["regression"] == 0 and out["exit_code"] == 0
    assert "last 6 run(s)" in out["baseline"]  # only runs before it


def test_no_metric_in_common_exits_2(tmp_path):
    a = write_run(tmp_path, 1, {"get.rps": [1.0, 1.0, 1.0]})
    b = write_run(tmp_path, 2, {"set.rps": [1.0, 1.0, 1.0]})
    p = harness("compare", str(a), str(b))
    assert p.returncode == 2 and "no metric in common" in p.stderr and "Traceback" not in p.stderr


def test_a_different_profile_or_version_exits_2_unless_allowed(tmp_path):
    vals = {"get.rps": [100.0, 101.0, 99.0]}
    a = write_run(tmp_path, 1, vals)
    b = write_run(tmp_path, 2, vals, profile="lab-a100")
    p = harness("compare", str(a), str(b))
    assert p.returncode == 2 and "profile: baseline local, this run lab-a100" in p.stderr
    p = harness("compare", str(a), str(b), "--allow-mismatch")
    assert p.returncode == 0 and "warning: compared anyway" in p.stderr
    c = write_run(tmp_path, 3, vals, man_extra={"packages": {"redis": "0.0.1", "numpy": "1.0"}})
    with pytest.raises(BadInput, match="redis: baseline .*, this run 0.0.1"):
        compare_dirs(a, c)


def test_a_different_workload_is_not_compared(tmp_path):
    vals = {"set.rps": [100.0, 101.0, 99.0]}
    a = write_run(tmp_path, 1, vals, params={"data_size": 3, "clients": 50})
    b = write_run(tmp_path, 2, {"set.rps": [40.0, 41.0, 39.0]}, params={"data_size": 16384, "clients": 50})
    p = harness("compare", str(a), str(b))
    assert p.returncode == 2, p.stdout
    assert "parameters of kv/bench differ (data_size: baseline 3, this run 16384)" in p.stderr
    c = compare_dirs(a, b, allow_mismatch=True)  # allowed: compared, and the warning says why
    assert c.rows[0]["status"] == "regression" and "data_size" in c.warnings[0]


def test_pool_leaves_out_runs_of_another_profile_and_names_them(tmp_path):
    rnd = random.Random(5)
    for i in range(4):
        write_run(
            tmp_path,
            i,
            {k: noisy_values(v[0], rnd) for k, v in METRICS.items()},
            profile="lab-a100" if i == 1 else "local",
        )
    c = compare_dirs(tmp_path, tmp_path / sorted(p.name for p in tmp_path.iterdir())[-1])
    assert "last 2 run(s)" in c.baseline and len(c.left_out) == 1 and "profile" in c.left_out[0]


def _pooled(medians: list[float]) -> dict:
    """A pooled baseline of one metric: the per-run medians of len(medians) runs."""
    return {("kv", "bench", "m"): MetricSummary.of("kv", "bench", "m", "ms", "lower", medians, runs=len(medians))}


def test_a_baseline_is_the_analysis_summary_of_what_it_pools():
    runs = [analyze(load_run_of({"m": [v, v + 2.0, v - 2.0]})) for v in (100.0, 104.0, 90.0)]
    one = baseline_of(runs[:1])[("kv", "bench", "m")]
    assert one is runs[0].metric("kv", "bench", "m") and one.runs == 1  # one run: its own repetitions
    pooled = baseline_of(runs)[("kv", "bench", "m")]
    assert isinstance(pooled, MetricSummary) and pooled.runs == 3 and pooled.values == [100.0, 104.0, 90.0]
    assert (pooled.median, pooled.min, pooled.max, pooled.unit) == (100.0, 90.0, 104.0, "ms")
    assert pooled.cv == pytest.approx(0.0736, abs=1e-4) and one.cv == pytest.approx(0.02)


def test_factor_is_raised_to_the_baselines_variation_and_unstable_is_never_a_regression():
    new = analyze(load_run_of({"m": [115.0, 116.0, 114.0]}))
    steady = _pooled([100.0, 101.0, 99.0, 100.0])
    assert compare_baseline(steady, new)[0]["status"] == "regression"  # +15% > max(5%, 0.8%)
    wobbly = _pooled([100.0, 92.0, 108.0, 100.0])
    row = compare_baseline(wobbly, new)[0]  # CV 6.5%: the limit is 6.5%, 15% is past it and clear of 92..108
    assert row["status"] == "regression" and row["limit"] == "6.5%"
    unstable = _pooled([100.0, 80.0, 112.0, 100.0])
    row = compare_baseline(unstable, new)[0]
    assert row["status"] == "unstable" and not row["regression"] and "not judged" in row["assessment"]
    far = analyze(load_run_of({"m": [150.0, 151.0, 149.0]}))  # still unstable, and it says the run is outside
    row = compare_baseline(unstable, far)[0]
    assert row["status"] == "unstable" and "+50%, outside the baseline's whole range" in row["assessment"]


def test_missing_and_new_metrics_are_listed(tmp_path):
    a = analyze(load_run(write_run(tmp_path, 1, {"get.rps": [1.0] * 3, "gone": [2.0] * 3})))
    b = analyze(load_run(write_run(tmp_path, 2, {"get.rps": [1.0] * 3, "fresh": [2.0] * 3})))
    st = {r["metric"]: r["status"] for r in compare_baseline(baseline_of([a]), b)}
    assert st == {"get.rps": "no change", "gone": "missing", "fresh": "new"}


def test_check_sides_names_each_difference():
    f = {"profile": "local", "host": "h", "versions": {"redis": "5"}, "constraints": "x"}
    assert check_sides([f], dict(f)) == []
    g = {**f, "host": "other", "versions": {"redis": "6"}, "constraints": "y"}
    diff = check_sides([f], g)
    assert [d.split(":")[0] for d in diff] == ["host", "redis", "constraints file"]


def load_run_of(values):
    from harness.model.stored_run import Metric, Record, RunData
    from tests.stored_runs import suite_run

    recs = [
        Record(
            suite="kv",
            case="bench",
            repetition=i + 1,
            metrics={k: Metric(v[i], "ms", "lower") for k, v in values.items()},
        )
        for i in range(3)
    ]
    return RunData(Path("."), {}, recs, {"kv": suite_run()}, [])


def test_the_manifest_records_the_pins_and_says_which_installed_version_differs(tmp_path):
    from harness.infra.machine_facts import collect_constraints

    good = collect_constraints()
    assert good["sha256"] and good["differs_count"] == 0, good["differs"]  # this .venv is what constraints.txt pins
    f = tmp_path / "constraints.txt"
    f.write_text("# pins\nclick==0.0.1\nno-such-package-xyz==1.0\n")
    bad = collect_constraints(f)
    assert bad["differs"]["click"].endswith("pinned 0.0.1") and bad["differs"]["no-such-package-xyz"].startswith(
        "installed nothing"
    )
    assert bad["sha256"] != good["sha256"]


def test_monitoring_without_its_client_is_one_line_and_starts_nothing(tmp_path):
    shim = tmp_path / "shim" / "prometheus_api_client"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path / "shim")}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "redis-cluster/acl",
            "--monitoring",
            "--results-dir",
            str(tmp_path / "r"),
            "--base-port",
            "7875",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert p.returncode == 3 and "needs the prometheus-api-client package" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "r").exists()


def test_the_report_says_whether_the_run_was_installed_as_pinned(tmp_path):
    from harness.publish.render import render_html

    d = write_run(
        tmp_path,
        1,
        {"get.rps": [1.0, 1.0, 1.0]},
        man_extra={
            "constraints": {
                "file": "constraints.txt",
                "sha256": "ab" * 32,
                "differs": {"numpy": "installed 9.9, pinned 2.4.6"},
                "differs_count": 1,
            }
        },
    )
    run = load_run(d)
    html = render_html(run, analyze(run))
    assert "Pinned versions" in html and "1 not as pinned: numpy installed 9.9, pinned 2.4.6" in html
