"""Issue 53, points 4-6, through real `harness` processes: results folders that crashed the
readers (a verdicts.json of the right format with an unusual claim id, a list where text
belongs, deep nesting, a link, a file too large; a manifest or ledger of the wrong types;
path names over 255 bytes), report links that are not a relative path or https, and the
machine's load recorded with each case and named when a threshold fails under it.

Every refusal is one `error:` line and exit 2: never a traceback, never exit 1 (what
`compare` gives for a regression and CI reads as one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.base.metrics_model import MetricDecl
from harness.model import driver_contract
from harness.model.driver_contract import Metric, Record
from harness.verdict import verdicts_json
from tests import REPO
from tests.stored_runs import write_run
from tests.system.test_hostile import assert_one_line, cli
from tests.unit.test_verdicts import _run


def harness(*args, timeout: int = 120) -> tuple[int, str, str]:
    """The command line as a real process: (exit code, stdout, stderr)."""
    p = subprocess.run(
        [sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def two_runs(tmp_path):
    """Two runs of a ledger of two claims, published (each has its verdicts.json)."""
    old, new = _run(tmp_path / "runs", 1, 1.2), _run(tmp_path / "runs", 2, 2.0)
    for d in (old, new):
        assert cli("report", d)[0] == 0
    return old, new


def _edit_verdicts(run_dir: Path, edit) -> None:
    doc = json.loads((run_dir / "verdicts.json").read_text())
    edit(doc)
    (run_dir / "verdicts.json").write_text(json.dumps(doc))


def _set(path: list, value):
    def edit(doc):
        d = doc
        for p in path[:-1]:
            d = d[p]
        d[path[-1]] = value

    return edit


VERDICTS = {  # name: (edit of the newer run's verdicts.json, a word of the one line)
    "a claim id of 5000 digits": (_set(["claims", 0, "id"], "9" * 5000), "claim id"),
    "a claim id with a newline": (_set(["claims", 0, "id"], "C1\nerror: forged"), "claim id"),
    "a claim id that is a list": (_set(["claims", 0, "id"], ["C1"]), "claim id is a list"),
    "a verdict that is a list": (_set(["claims", 0, "verdict"], ["reproduced"]), "verdict is a list"),
    "a check's metric that is a list": (_set(["claims", 0, "checks", 0, "metric"], ["get.p99_ms"]), "metric is a list"),
    "a check's case that is an object": (_set(["claims", 0, "checks", 0, "case"], {"a": 1}), "case is a dict"),
    "checks that are text": (_set(["claims", 0, "checks"], "abc"), "checks is a str"),
    "holds that is text": (_set(["claims", 0, "holds"], "yes"), "holds is a str"),
    "a claim listed twice": (lambda doc: doc["claims"].append(dict(doc["claims"][0])), "listed twice"),
}


@pytest.mark.parametrize("name", list(VERDICTS))
def test_compare_of_an_edited_verdicts_json_is_one_line_and_exit_2(two_runs, name):
    old, new = two_runs
    edit, needle = VERDICTS[name]
    _edit_verdicts(new, edit)
    line = assert_one_line(harness("compare", old, new), (2,), needle)
    assert "verdicts.json" in line and "harness report" in line  # the file and the fix
    line = assert_one_line(harness("report", old, "--baseline", new), (2,), needle)  # the baseline's


@pytest.mark.parametrize("where", ["the whole file", "inside a claim"])
def test_a_deeply_nested_verdicts_json_is_one_line_and_exit_2(two_runs, where):
    old, new = two_runs
    deep = "[" * 100_000 + "]" * 100_000
    text = (
        deep
        if where == "the whole file"
        else ('{"format": "harness-verdicts", "version": 1, "claims": [' + deep + "]}")
    )
    (new / "verdicts.json").write_text(text)
    assert_one_line(harness("compare", old, new), (2,), "not valid JSON (RecursionError)")


def test_a_verdicts_json_too_large_or_a_link_is_refused_unread(two_runs, tmp_path):
    old, new = two_runs
    (new / "verdicts.json").unlink()
    with open(new / "verdicts.json", "wb") as f:
        f.truncate(verdicts_json.MAX_BYTES + 1)  # sparse: costs no disk
    assert_one_line(harness("compare", old, new), (2,), "too large")
    (new / "verdicts.json").unlink()
    (tmp_path / "elsewhere.json").write_text((old / "verdicts.json").read_text())
    (new / "verdicts.json").symlink_to(tmp_path / "elsewhere.json")
    assert_one_line(harness("compare", old, new), (2,), "is a link")


def test_a_verdicts_json_of_another_version_is_still_computed_again(two_runs):
    """Not an error: a folder written before (or after) this format has its verdicts
    computed from its results.json, and compare says so."""
    old, new = two_runs
    _edit_verdicts(new, _set(["version"], 99))
    code, out, err = harness("compare", old, new, "--allow-mismatch")
    assert code == 1 and "Traceback" not in err, err  # T1 regressed: 1.2 ms -> 2.0 ms
    assert "computed now from its results.json" in out


RESULTS = {  # an edit of results.json's ledger that the analysis would trip on
    "a band of text": (lambda c: c["checks"][0].update(band=[["x"], 2.0]), "band"),
    "a control's operator a list": (lambda c: c["checks"][0]["controls"][0].update(op=["x"]), "control"),
    "a control's operator a number": (lambda c: c["checks"][0]["controls"][0].update(op=7), "control"),
    "a claim id of 5000 digits": (lambda c: c.update(id="9" * 5000), "claim id"),
}


@pytest.mark.parametrize("name", list(RESULTS))
def test_a_ledger_of_the_wrong_types_in_results_json_is_one_line_and_exit_2(two_runs, name):
    old, new = two_runs
    edit, needle = RESULTS[name]
    data = json.loads((new / "results.json").read_text())
    edit(data["claims"][0])
    (new / "results.json").write_text(json.dumps(data))
    (new / "verdicts.json").unlink()
    for cmd in (("compare", old, new), ("report", new), ("measurements", new), ("report", old, "--baseline", new)):
        line = assert_one_line(harness(*cmd), (2,), needle)
        assert "results.json" in line


def test_a_tool_version_that_is_a_list_compares(tmp_path):
    a, b = (write_run(tmp_path / "runs", i, {"get.rps": [1.0, 2.0, 3.0]}) for i in (1, 2))
    man = json.loads((b / "manifest.json").read_text())
    man["tools"]["redis-server"] = {"version": ["x"]}
    (b / "manifest.json").write_text(json.dumps(man))
    code, out, err = harness("compare", a, b, "--allow-mismatch")
    assert code == 0 and "Traceback" not in err, err


def test_the_ledger_order_takes_any_claim_id():
    doc = {
        "claims": [
            {"id": "9" * 5000, "verdict": "reproduced", "holds": True, "checks": []},
            {"id": "C²", "verdict": "reproduced", "holds": True, "checks": []},
        ]
    }
    assert [c["id"] for c in verdicts_json.changes({"claims": []}, doc)] == ["9" * 5000, "C²"]


# ---- path names over 255 bytes -----------------------------------------------------------
def _long(tmp_path: Path) -> Path:
    return tmp_path / ("a" * 300)


def _commands(tmp_path: Path) -> dict:
    a, b = (write_run(tmp_path / "runs", i, {"get.rps": [1.0, 2.0, 3.0]}) for i in (1, 2))
    long = _long(tmp_path)
    return {
        "report": ("report", long),
        "report --baseline": ("report", b, "--baseline", long),
        "compare BASELINE": ("compare", long, b),
        "compare RUN_DIR": ("compare", a, long),
        "compare --output": ("compare", a, b, "--output", long),
        "history": ("history", long),
        "history --out": ("history", tmp_path / "runs", "--out", long),
        "measurements": ("measurements", long),
        "measurements --write": ("measurements", b, "--write", long),
        "run --results-dir": ("run", "eviction/trace", "--repeat", "1", "--results-dir", long),
        "run --set CASE.trace": ("run", "--dry-run", "kv-trace/prefix-cache", "--set", f"prefix-cache.trace={long}"),
    }


@pytest.mark.parametrize(
    "name",
    [
        "report",
        "report --baseline",
        "compare BASELINE",
        "compare RUN_DIR",
        "compare --output",
        "history",
        "history --out",
        "measurements",
        "measurements --write",
        "run --results-dir",
        "run --set CASE.trace",
    ],
)
def test_a_path_name_over_255_bytes_is_one_line_and_exit_2(tmp_path, name):
    line = assert_one_line(harness(*_commands(tmp_path)[name], timeout=300), (2,))
    assert "a" * 20 in line and ("255 bytes" in line or "too long" in line.lower()), line


# ---- point 5: report --history ------------------------------------------------------------
@pytest.mark.parametrize(
    "location",
    [
        "java\tscript:alert(1)",
        "java\nscript:alert(1)",
        "//evil.example/h.html",
        "http://evil.example/h.html",
        "javascript:alert(1)",
        "\\\\evil.example\\h",
        " javascript:alert(1)",
        "data:text/html,x",
        "/etc/history.html",
        "https://",
    ],
)
def test_report_history_takes_a_relative_path_or_https_only(tmp_path, location):
    run = write_run(tmp_path / "runs", 1, {"get.rps": [1.0, 2.0, 3.0]})
    line = assert_one_line(harness("report", run, "--history", location), (2,), "--history")
    assert "relative path" in line and "https" in line
    assert not (run / "report.html").exists()  # refused before anything is written


@pytest.mark.parametrize("location", ["history.html", "../history/history.html", "https://ci.example/h/history.html"])
def test_report_history_links_a_relative_path_or_https(tmp_path, location):
    run = write_run(tmp_path / "runs", 1, {"get.rps": [1.0, 2.0, 3.0]})
    code, out, err = harness("report", run, "--history", location)
    assert code == 0, err
    assert f'href="{location}#' in (run / "report.html").read_text()


# ---- point 6: the machine's load ---------------------------------------------------------
@driver_contract.register("test-hostile-load", metrics=(MetricDecl("p99_ms", "ms", "lower"),), params={})
def _quick(ctx):
    return Record(metrics={"p99_ms": Metric(5.0, "ms", "lower")})


def test_a_run_records_the_machine_load_of_each_case_and_the_report_shows_it(tmp_path):
    spec = tmp_path / "load.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "hostile-load",
                "description": "d",
                "claim": {"section": "0", "text": "t"},
                "target": "none",
                "cases": [{"name": "quick", "driver": "test-hostile-load", "params": {}}],
                "profiles": {
                    "local": {
                        "repetitions": 2,
                        "thresholds": [
                            {"case": "quick", "metric": "p99_ms", "op": "<=", "value": 1.0, "unit": "ms", "reason": "r"}
                        ],
                    }
                },
            }
        )
    )
    from harness.base import machine_load  # issue 53

    code, out, err = cli("run", spec, "--results-dir", tmp_path / "r")
    assert code == 1, err  # 5 ms against <= 1 ms: the threshold fails, whatever the load
    run_dir = next((tmp_path / "r").iterdir())
    records = json.loads((run_dir / "results.json").read_text())["records"]
    for r in records:
        m = r["machine_load"]
        assert set(m) == {"load1_start", "load1_end", "cores", "steal_pct"} and m["cores"] == os.cpu_count()
        assert 0 <= m["load1_start"]
        assert m["steal_pct"] is None or 0 <= m["steal_pct"] <= 100  # None: the case took under a jiffy
    html = (run_dir / "report.html").read_text()
    assert "Machine load during the cases: load average (1 min)" in html and "CPU steal up to" in html
    loaded = any(machine_load.is_loaded(r["machine_load"]) for r in records)
    assert ("the machine was loaded" in err) == loaded  # the exit line names it exactly when it was


def test_a_threshold_failed_on_a_loaded_machine_says_so_and_stays_failed(tmp_path):
    """Records stored with a load above the cores (and, in another run, a steal of 12%): the
    failure line of the report, JUnit and `harness run`'s exit reason names the load; the
    verdict is the measured one. A quiet machine's failure says nothing of it, and an older
    folder (no machine_load) reads as before."""
    from harness.base import machine_load  # issue 53

    for i, load in enumerate(
        (
            {"load1_start": 9.5, "load1_end": 9.0, "cores": 2, "steal_pct": 0.0},
            {"load1_start": 0.2, "load1_end": 0.3, "cores": 2, "steal_pct": 12.0},
            {"load1_start": 0.2, "load1_end": 0.3, "cores": 2, "steal_pct": 0.1},
            None,
        )
    ):
        d = write_run(tmp_path / f"runs{i}", i, {"get.rps": [10.0, 11.0, 12.0]})  # the threshold is >= 50000
        data = json.loads((d / "results.json").read_text())
        for r in data["records"]:
            if load is None:
                r.pop("machine_load", None)
            else:
                r["machine_load"] = load
        (d / "results.json").write_text(json.dumps(data))
        code, out, err = harness("report", d)
        assert code == 0, err
        junit = (d / "junit.xml").read_text()
        doc = json.loads((d / "verdicts.json").read_text())
        t = next(t for t in doc["thresholds"] if t["metric"] == "get.rps")
        assert t["verdict"] == "fail"
        loaded = load is not None and machine_load.is_loaded(load)
        assert ("the machine was loaded" in t["detail"]) == loaded
        assert ("the machine was loaded" in junit) == loaded
        assert ("the machine was loaded" in doc["exit_reason"]) == loaded
        html = (d / "report.html").read_text()
        assert ("Machine load during the cases" in html) == (load is not None)
        if i == 1:
            assert "CPU steal up to 12%" in t["detail"]


def test_a_record_with_a_machine_load_of_the_wrong_type_is_one_line(tmp_path):
    d = write_run(tmp_path / "runs", 1, {"get.rps": [1.0, 2.0, 3.0]})
    data = json.loads((d / "results.json").read_text())
    data["records"][0]["machine_load"] = {"load1_start": ["x"]}
    (d / "results.json").write_text(json.dumps(data))
    assert_one_line(harness("report", d), (2,), "machine_load")
