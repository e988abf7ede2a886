"""`harness history`: ten stored runs with a known injected step give a page with the step
on the right metric and no step elsewhere; the page renders in headless Chromium."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.publish.history_page import write_history
from harness.publish.render import CSP
from harness.verdict.display import esc
from harness.verdict.metric_history import anchor, build_history, find_runs, load_runs
from tests import REPO
from tests.stored_runs import write_run, write_series


@pytest.fixture(scope="module")
def ten_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hist")
    # get.p99_ms gets 30% worse from the 7th run on; everything else is noise around its level
    write_series(root, 10, step_metric="get.p99_ms", step_at=6, step=0.30, seed=7)
    return root


def test_step_found_on_the_right_metric_only(ten_runs):
    data = build_history(load_runs(find_runs(ten_runs)))
    assert [r["index"] for r in data["runs"]] == list(range(1, 11))
    steps = {m["metric"]: m["steps"] for m in data["metrics"]}
    assert set(steps) == {"get.rps", "get.p99_ms", "set.rps"}
    assert [(s["run"], s["kind"]) for s in steps["get.p99_ms"]] == [(7, "regression")]
    assert steps["get.p99_ms"][0]["change"] == pytest.approx(0.30, abs=0.05)
    assert steps["get.rps"] == [] and steps["set.rps"] == []
    rps = next(m for m in data["metrics"] if m["metric"] == "get.rps")
    assert len(rps["thresholds"]) == 10 and rps["thresholds"][0]["value"] == 50000
    assert all(p["min"] <= p["median"] <= p["max"] for p in rps["points"])


def test_history_command_writes_a_self_contained_page_and_json(ten_runs, tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "harness", "history", str(ten_runs), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "history.html").read_text()
    data = json.loads((tmp_path / "history.json").read_text())
    assert (
        f'content="{esc(CSP)}"' in html
        and "<script" not in html
        and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    )
    a = anchor("kv", "bench", "get.p99_ms")
    assert f'id="{a}"' in html and f'href="#{a}"' in html  # the steps table links to the chart
    assert html.count("<svg") == 3
    assert [m["metric"] for m in data["metrics"] if m["steps"]] == ["get.p99_ms"]
    # annotations: date, revision, profile, host
    assert data["runs"][0]["revision"] and data["runs"][0]["profile"] == "local" and "cores" in data["runs"][0]["host"]


@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium is not installed (make setup-test installs it)")
def test_history_page_renders_its_charts_in_headless_chromium(ten_runs, tmp_path):
    html, _ = write_history(ten_runs, tmp_path)
    p = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    dom = p.stdout
    assert p.returncode == 0 and "</html>" in dom, p.stderr[-2000:]
    assert dom.count("<svg") == 3 and dom.count("<polyline") >= 3  # charts parsed, lines drawn
    assert "step: regression" in dom


def test_hostile_names_are_escaped_and_empty_roots_refused(tmp_path):
    write_run(tmp_path, 0, {"<script>alert(1)</script>": [1.0, 1.1, 1.0]}, case="a\"b'<c>")
    html, _ = write_history(tmp_path, tmp_path / "out")
    text = html.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "harness", "history", str(empty)], capture_output=True, text=True, cwd=REPO
    )
    assert p.returncode == 2 and "holds no results folders" in p.stderr and "Traceback" not in p.stderr


def _step(name_start: str) -> str:
    import yaml

    wf = yaml.safe_load((REPO / ".github" / "workflows" / "nightly.yml").read_text())
    return next(s for s in wf["jobs"]["local"]["steps"] if str(s.get("name", "")).startswith(name_start))


def test_nightly_keeps_its_history_compares_pooled_and_publishes_the_page(tmp_path):
    import yaml

    wf = yaml.safe_load((REPO / ".github" / "workflows" / "nightly.yml").read_text())
    assert int(wf["env"]["HISTORY_RUNS"]) >= 30 and wf["env"]["POOL_RUNS"] == "7"
    assert "--format markdown" in _step("Compare")["run"] and "GITHUB_STEP_SUMMARY" in _step("Compare")["run"]
    assert "results/*/history.html" in _step("Keep the report")["with"]["path"]
    assert _step("Save the history")["with"]["path"] == "history"
    # run the step that adds tonight to the history, with 3 kept instead of 30
    dirs = write_series(tmp_path / "results", 5, seed=2)
    hist = tmp_path / "history"
    hist.mkdir()
    for d in dirs[:4]:
        shutil.copytree(d, hist / d.name)
    venv = Path(sys.prefix)  # the step calls .venv/bin/harness: the one of this interpreter
    if not (venv / "bin" / "harness").exists():
        pytest.skip(f"no harness entry point in {venv}/bin (install the project into a venv: make setup)")
    (tmp_path / ".venv").symlink_to(venv)
    script = _step("Add tonight")["run"].replace("${{ steps.run.outputs.dir }}", str(dirs[-1]))
    p = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HISTORY_RUNS": "3"},
    )
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in hist.iterdir()) == [d.name for d in dirs[-3:]]
    assert (dirs[-1] / "history.html").exists()
    report = (dirs[-1] / "report.html").read_text()
    assert f'href="history.html#{anchor("kv", "bench", "get.rps")}"' in report  # the threshold row links to it


def test_report_history_location_must_be_a_path_or_http_url(ten_runs):
    run = find_runs(ten_runs)[0]
    p = subprocess.run(
        [sys.executable, "-m", "harness", "report", str(run), "--history", "javascript:alert(1)"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 2 and "give a relative path" in p.stderr and "Traceback" not in p.stderr


def test_runs_table_names_the_parameters_that_changed(tmp_path):
    for i in range(4):
        write_run(
            tmp_path, i, {"get.rps": [100.0, 100.0, 100.0]}, params={"data_size": 3 if i < 2 else 16384, "clients": 50}
        )
    html = write_history(tmp_path, tmp_path / "out")[0].read_text()
    assert "parameters that changed" in html
    assert html.count("kv/bench data_size=3") == 2 and html.count("kv/bench data_size=16384") == 2
    assert "clients=" not in html  # the same in every run: not an annotation


def test_lab_nightly_step_compares_pooled_keeps_history_and_renders(tmp_path):
    import yaml

    wf = yaml.safe_load((REPO / ".github" / "workflows" / "nightly.yml").read_text())
    step = next(s for s in wf["jobs"]["lab"]["steps"] if str(s.get("name", "")).startswith("Compare"))
    venv = Path(sys.prefix)
    if not (venv / "bin" / "harness").exists():
        pytest.skip(f"no harness entry point in {venv}/bin (install the project into a venv: make setup)")
    (tmp_path / ".venv").symlink_to(venv)
    dirs = write_series(tmp_path / "results", 5, step_metric="get.rps", step=-0.2, last_only=True, seed=4)
    hist = tmp_path / "hist"
    hist.mkdir()
    for d in dirs[:4]:
        shutil.copytree(d, hist / d.name)
    out, summary = tmp_path / "out.txt", tmp_path / "summary.md"
    script = step["run"].replace("${{ steps.run.outputs.dir }}", str(dirs[-1]))
    p = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "HISTORY": str(hist),
            "HISTORY_RUNS": "4",
            "POOL_RUNS": "7",
            "GITHUB_OUTPUT": str(out),
            "GITHUB_STEP_SUMMARY": str(summary),
        },
    )
    assert p.returncode == 0, p.stderr
    assert "rc=1" in out.read_text()  # the injected 20% drop is a regression: the job's last step fails on it
    assert "### 1 regression(s)" in summary.read_text() and "get.rps" in summary.read_text()
    assert sorted(x.name for x in hist.iterdir()) == [d.name for d in dirs[1:]]
    assert (dirs[-1] / "history.html").exists() and 'href="history.html#' in (dirs[-1] / "report.html").read_text()


def test_one_profile_per_history(tmp_path):
    for i in range(3):
        write_run(tmp_path, i, {"get.rps": [100.0, 100.0, 100.0]}, profile="lab-a100" if i == 1 else "local")
    data = json.loads(write_history(tmp_path, tmp_path / "a")[1].read_text())
    assert [r["profile"] for r in data["runs"]] == ["local", "local"]  # the newest run's profile
    data = json.loads(write_history(tmp_path, tmp_path / "b", profile="lab-a100")[1].read_text())
    assert [r["profile"] for r in data["runs"]] == ["lab-a100"]
    p = subprocess.run(
        [sys.executable, "-m", "harness", "history", str(tmp_path), "--profile", "nope"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 2 and "no run of profile 'nope'" in p.stderr
