"""The typed run model: series check themselves, views aggregate across repetitions,
an older results folder (schema 1, recorded with the harness before the change) still
loads and renders, and an isolated case runs in its own process."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from harness.base.metrics_model import MetricDecl
from harness.experiments import views
from harness.model import driver_contract
from harness.model.driver_contract import CaseContext, Metric, Param, Series, register
from harness.model.spec import SuiteRun
from harness.model.stored_run import Record, RunData, load_run, write_results
from harness.publish.render import render_report
from harness.verdict.analysis import Verdict, analyze
from tests import TESTS

V1 = TESTS / "fixtures" / "results-v1" / "run"


def test_series_check_themselves():
    with pytest.raises(ValueError, match="differ in length"):
        Series({"a": [1, 2], "b": [1]})
    with pytest.raises(ValueError, match="not a number"):
        Series({"a": [object()]})
    s = Series({"x": [1, 2], "y": [float("nan"), 3.5]}, {"y": "ms"})
    assert s.columns["y"] == [None, 3.5] and s.rows() == [[1, None], [2, 3.5]]
    assert Series.from_json(json.loads(json.dumps(s.to_json()))) == s


def test_a_drivers_outcome_is_the_record_the_runner_stores():
    out = Record(
        "invalid",
        "too few hits",
        {"m": Metric(1.5, "ms", "lower")},
        {"command": "x"},
        {"t": Series({"v": [1, 2]})},
        {"clients": 4},
    )  # the drivers' positional spelling
    assert (out.status, out.reason, out.details, out.facts, out.repetition) == (
        "invalid",
        "too few hits",
        {"command": "x"},
        {"clients": 4},
        0,
    )
    rec = out.stored(
        suite="s",
        case="c",
        repetition=2,
        params={"n": 1},
        started=5.0,
        duration_s=1.5,
        raw_files=["raw/s/c/rep2/x.csv"],
        details={"server_info": {}, **out.details},
    )
    assert (rec.suite, rec.case, rec.repetition, rec.params, rec.duration_s) == ("s", "c", 2, {"n": 1}, 1.5)
    assert rec.metrics is out.metrics and rec.details == {"server_info": {}, "command": "x"} and out.repetition == 0
    again = Record.from_json(json.loads(json.dumps(rec.to_json())))
    assert again == rec and list(rec.to_json()) == [
        "suite",
        "case",
        "repetition",
        "status",
        "reason",
        "bad_input",
        "metrics",
        "series",
        "raw_files",
        "details",
        "params",
        "started",
        "duration_s",
        "facts",
    ]  # the stored record's keys, as results.json has them


def test_a_results_check_lives_in_the_record_once():
    with pytest.raises(ValueError, match="needs a reason"):
        Record("failed")
    with pytest.raises(ValueError, match="status must be one of"):
        Record("s", "c")  # the old positional order (suite, case, ...) is refused, never misread
    with pytest.raises(ValueError, match="repetitions count from 1"):
        Record().stored(suite="s", case="c", repetition=0)
    with pytest.raises(ValueError, match="repetitions count from 1"):
        Record.from_json({"suite": "s", "case": "c", "repetition": 0, "status": "ok"})
    with pytest.raises(ValueError, match="is not a string, number or boolean"):
        Record.from_json({"suite": "s", "case": "c", "repetition": 1, "status": "ok", "facts": {"f": [1]}})
    # a schema-1 record kept its tables in details: it loads, though a driver may not return one
    legacy = {"suite": "s", "case": "c", "repetition": 1, "status": "ok", "details": {"tables": []}}
    assert Record.from_json(legacy).details == {"tables": []}
    # ... and a driver's outcome whose details gained a table after it was made is refused when stored
    late = Record(details={})
    late.details["charts"] = []
    with pytest.raises(ValueError, match="drivers measure"):
        late.stored(suite="s", case="c", repetition=1)


def test_results_never_hold_nan(tmp_path):
    rec = Record(
        suite="s", case="c", repetition=1, series={"t": Series({"v": [float("inf")]})}, details={"x": float("nan")}
    )
    write_results(tmp_path, [rec], {})
    text = (tmp_path / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text)


def test_views_aggregate_across_repetitions(tmp_path):
    recs = [
        Record(
            suite="s",
            case="c",
            repetition=rep,
            series={"per_s": Series({"second": [0, 1], "reads": [10 * rep, 20 * rep]})},
        )
        for rep in (1, 2, 3)
    ]
    run = RunData(tmp_path, {}, recs, {"s": SuiteRun.from_json("s", {"cases": [{"name": "c", "driver": "d"}]})}, [])
    ctx = views.ViewContext(run, analyze(run), "s")
    agg = ctx.aggregate("c", "per_s", key="second")
    assert agg.columns["second"] == [0, 1]
    assert agg.columns["reads"] == [20.0, 40.0]  # the median of 10/20/30 and 20/40/60
    assert (agg.columns["reads.min"], agg.columns["reads.max"]) == ([10, 20], [30, 60])
    table = views.series_table(agg, "t")
    assert table.rows[0] == [0, (20.0, 10, 30)]
    assert views.points(agg, "second", "reads")[1] == [1, 40.0, 20, 60]
    # the default view shows every series of a suite without a view of its own
    blocks = views.build(run, analyze(run), "s")
    assert [b.title for b in blocks] == ["per_s"] and blocks[0].case == "c"


def test_a_schema_1_folder_still_loads_and_renders(tmp_path):
    run_dir = tmp_path / "old"
    shutil.copytree(V1, run_dir)
    data = load_run(run_dir)
    assert data.schema_version == 1 and data.suites["tiny-cluster"].profile == "local"
    a = analyze(data)
    assert {t.metric: t.verdict for t in a.thresholds} == {
        "GET.p99_ms": Verdict.PASS,
        "fixed.reads_allowed": Verdict.PASS,
    }
    html = render_report(data, a).read_text()
    assert "tiny-cluster" in html and "ACL rules tried as a read-only cache user" in html
    assert "(repetition 2 only)" in html  # a schema-1 table is labelled as one repetition's


def test_harness_report_rebuilds_an_old_folder(tmp_path):
    from harness.cli import main

    run_dir = tmp_path / "old"
    shutil.copytree(V1, run_dir)
    with pytest.raises(SystemExit) as e:
        main(["report", str(run_dir)])
    assert e.value.code == 0 and (run_dir / "report.html").exists() and (run_dir / "junit.xml").exists()


@register(
    "test-isolated",
    metrics=(
        MetricDecl("pid", "pid"),
        MetricDecl("n", ""),
    ),
    params={"n": Param(int, 1, "a number", min=1)},
    isolate=True,
)
def _isolated(ctx: CaseContext) -> Record:
    ctx.log(f"running in pid {os.getpid()}")
    return Record(
        metrics={"pid": Metric(os.getpid(), "pid"), "n": Metric(ctx.params["n"], "")},
        series={"s": Series({"i": list(range(ctx.params["n"]))})},
    )


def test_an_isolated_case_runs_in_its_own_process(tmp_path):
    from harness.infra.target import Target
    from harness.run.runner import _run_isolated

    lines = []
    ctx = CaseContext("s", "c", 1, "local", {"n": 3}, tmp_path, Target("t"), log=lines.append)
    out = _run_isolated(driver_contract.get("test-isolated"), ctx)
    assert out.status == "ok" and out.metrics["n"].value == 3 and len(out.series["s"]) == 3
    assert (out.suite, out.case, out.repetition) == ("s", "c", 1)  # the record its process sent back
    assert out.metrics["pid"].value != os.getpid()
    assert lines and lines[0].startswith("running in pid")


def test_param_bounds_are_declared_not_hand_written():
    with pytest.raises(driver_contract.BadInput, match="must be at least 1"):
        driver_contract.get("test-isolated").resolve_params("w", {"n": 0})


def test_a_known_password_never_reaches_a_results_file(tmp_path, monkeypatch):
    monkeypatch.setenv("REDIS_CLUSTER_PASSWORD", "s3cret-Pa55")
    rec = Record(
        suite="s",
        case="c",
        repetition=1,
        details={"command": "redis-benchmark -a s3cret-Pa55 -n 1"},
        metrics={"n": Metric(1.0, "")},
    )
    write_results(tmp_path, [rec], {})
    text = (tmp_path / "results.json").read_text()
    assert "s3cret-Pa55" not in text and "-a ***" in text
    assert json.loads(text)["records"][0]["metrics"]["n"]["value"] == 1.0
