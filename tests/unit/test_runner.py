"""End to end against the real test cluster: results folder, verdicts, report, JUnit,
rebuild from the folder alone."""

import json
import shutil

import pytest
import yaml

from harness.model import stored_run as results
from harness.model.manifest import Manifest
from harness.publish.render import render_report
from harness.run.runner import _Run, run_suites
from harness.verdict.analysis import analyze
from tests.conftest import TEST_CLUSTER_PORT

SUITE = {
    "name": "tiny-cluster",
    "description": "a small redis-benchmark run",
    "claim": {"section": "2.5", "text": "GET/SET P99 < 1.2 ms", "ids": ["C12"]},
    "target": "cluster",
    "cases": [
        {"name": "redis-benchmark", "driver": "redis-cluster-benchmark", "params": {"tests": ["get", "set"]}},
        {"name": "memtier", "driver": "redis-cluster-memtier"},
    ],
    "profiles": {
        "local": {
            "repetitions": 2,
            "params": {"redis-benchmark": {"requests": 4000, "clients": 10}},
            "thresholds": [
                {"case": "redis-benchmark", "metric": "GET.rps", "op": ">", "value": 1, "reason": "it ran"},
                {
                    "case": "redis-benchmark",
                    "metric": "SET.p99_ms",
                    "op": "<",
                    "value": 0.000001,
                    "reason": "impossible, to see a fail",
                },
                {
                    "case": "redis-benchmark",
                    "metric": "HSET.rps",
                    "op": ">",
                    "value": 1,
                    "reason": "never measured: missing",
                },
                {"case": "memtier", "metric": "Totals.ops_per_sec", "op": ">", "value": 1, "reason": "skipped here"},
            ],
        }
    },
}


@pytest.fixture(scope="module")
def run(cluster, tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    f = d / "tiny.yaml"
    f.write_text(yaml.safe_dump(SUITE))
    if shutil.which("memtier_benchmark"):
        pytest.skip("memtier_benchmark is installed here; this test expects it skipped")
    return run_suites(
        [str(f)], profile="local", results_dir=d / "results", base_port=TEST_CLUSTER_PORT, log=lambda m: None
    )


def test_results_folder_contract(run):
    d = run.run_dir
    man = json.loads((d / "manifest.json").read_text())
    for key in ("run_id", "profile", "git", "host", "tools", "packages", "gpu", "started", "ended", "servers"):
        assert key in man
    assert man["gpu"]["present"] is False and man["gpu"]["reason"]
    assert man["tools"]["redis-server"]["version"].startswith("Redis server")
    typed = Manifest.from_json(man)  # the runner wrote a Manifest: every key it wrote is a declared field
    assert typed.extra == {} and typed.to_json() == man and typed.suites == ("tiny-cluster",)
    assert typed.window["start"] <= typed.window["end"] <= typed.ended and set(typed.suite_wall_s) == {"tiny-cluster"}
    data = json.loads((d / "results.json").read_text())
    assert data["schema_version"] == results.SCHEMA_VERSION
    recs = data["records"]
    assert [(r["case"], r["repetition"], r["status"]) for r in recs] == [
        ("redis-benchmark", 1, "ok"),
        ("redis-benchmark", 2, "ok"),
        ("memtier", 1, "skipped"),
        ("memtier", 2, "skipped"),
    ]
    for f in recs[0]["raw_files"]:
        assert (d / f).exists()
    assert any(f.endswith("redis-benchmark-measured.stdout") for f in recs[0]["raw_files"])
    assert any("info-127.0.0.1-" in f for f in recs[0]["raw_files"])  # INFO of every node kept
    assert recs[0]["metrics"]["GET.rps"]["unit"] == "req/s"
    server = recs[0]["details"]["server_info"]
    assert len(server) == 6
    primaries = [s for s in server.values() if s["role"] == "primary"]
    # CONFIG RESETSTAT ran before the case: the counters are this case's alone
    # 4000 GETs measured + 4000 in the 4x-clients control + 2000 in the one-slot control, this case's alone
    assert sum(s["commandstats"].get("get", {}).get("calls", 0) for s in primaries) == 4000 + 4000 + 2000


def test_verdicts_and_exit_code(run):
    v = {t.metric: t.verdict for t in run.analysis.thresholds}
    assert v == {"GET.rps": "pass", "SET.p99_ms": "fail", "HSET.rps": "missing", "Totals.ops_per_sec": "skipped"}
    assert run.exit_code == 1
    m = run.analysis.metric("tiny-cluster", "redis-benchmark", "GET.p99_ms")
    assert len(m.values) == 2 and m.min <= m.median <= m.max


def test_report_and_junit_written_and_rebuildable(run):
    report = run.run_dir / "report.html"
    html = report.read_text()
    assert "GET/SET P99 &lt; 1.2 ms" in html  # the claim, escaped
    assert "memtier_benchmark not found" in html and "<svg" in html
    assert "Claims ledger" in html
    junit = (run.run_dir / "junit.xml").read_text()
    assert junit.count("<testcase") == 4 and junit.count("<failure") == 2 and junit.count("<skipped") == 1
    report.unlink()
    data = results.load_run(run.run_dir)
    assert render_report(data, analyze(data)).read_text().count("<table") == html.count("<table")


def test_schema_version_mismatch_says_what_to_do(run, tmp_path):
    copy = tmp_path / "old"
    shutil.copytree(run.run_dir, copy)
    data = json.loads((copy / "results.json").read_text())
    data["schema_version"] = 99
    (copy / "results.json").write_text(json.dumps(data))
    from harness.base.errors import BadInput

    with pytest.raises(BadInput, match="upgrade the harness"):
        results.load_run(copy)


def test_report_is_self_contained_and_escapes(run, tmp_path):
    data = results.load_run(run.run_dir)
    data.suites["tiny-cluster"].description = "<script>alert(1)</script>"
    html = render_report(data, analyze(data), out=tmp_path / "r.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html
    assert (
        "<script src" not in html
        and 'rel="stylesheet"' not in html
        and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    )


def test_report_opens_in_a_real_browser(run, tmp_path):
    import subprocess

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium not installed (apt-get install chromium)")
    p = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            f"file://{run.run_dir / 'report.html'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-500:]
    assert "Claims ledger" in p.stdout and "redis-benchmark" in p.stdout


def test_the_manifest_is_typed_while_the_run_writes_it(tmp_path):
    run = _Run(tmp_path, Manifest(run_id="r", suites=("kv",), started=1.0), {}, [], log=lambda m: None)
    # the serving engines' summary, as harness.infra.serving_engine.for_run keeps it during a run
    run.engine_facts.update(engines={"cached": {"managed": True}}, engines_start={"wall_s": 1.5})
    run.note(window={"start": 1.0}, suite_wall_s={"kv": 2.0})
    run.write_manifest()
    written = json.loads((tmp_path / "manifest.json").read_text())
    back = Manifest.from_json(written)
    assert back.extra == {} and back.engines == {"cached": {"managed": True}} and back.engines_start["wall_s"] == 1.5
    assert (back.window, back.suite_wall_s, written["suites"]) == ({"start": 1.0}, {"kv": 2.0}, ["kv"])
    with pytest.raises(TypeError, match="'window'"):
        run.note(window=[1.0])  # a field of the wrong type is refused when it is written, not when read
    with pytest.raises(TypeError, match="'ended'"):
        run.note(ended="later")
    with pytest.raises(TypeError):
        run.note(gone=1)  # only declared fields
