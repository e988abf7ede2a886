"""Publishing a stored results folder (harness.publish): `harness report` renders a folder
written before the format versions (tests/fixtures/results-v2: a real `harness run
kv-trace/crosscheck --repeat 1` of the harness as it was), every stored file says its
format, and a bug past loading is the harness's, not the folder's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.base.errors import BadInput
from harness.base.format_versions import MANIFEST_FORMAT, RESULTS_SCHEMA
from harness.cli import main
from harness.model.manifest import Manifest
from harness.model.stored_run import load_run, write_manifest
from harness.publish import outputs as P
from harness.verdict.analysis import analyze
from harness.verdict.baseline import compare
from tests import TESTS

V2 = TESTS / "fixtures" / "results-v2" / "run"
# `harness run kv-trace/crosscheck --repeat 2` stored by two harnesses: 4ea09cb (results.json schema 2) and
# the one of issue 52 (schema 3: the ledger with each check's evidence, the manifest's references, each
# record's machine load)
BEFORE = TESTS / "fixtures" / "results-v2-manifest-v1" / "run"
TODAY = TESTS / "fixtures" / "results-v3-manifest-v1" / "run"


def _copy(tmp_path: Path) -> Path:
    run_dir = tmp_path / "stored"
    shutil.copytree(V2, run_dir)
    return run_dir


def test_harness_report_renders_a_folder_written_before_format_versions(tmp_path, capsys):
    run_dir = _copy(tmp_path)
    assert "format_version" not in json.loads((run_dir / "manifest.json").read_text())
    with pytest.raises(SystemExit) as e:
        main(["report", str(run_dir)])
    assert e.value.code == 0, capsys.readouterr().err
    html = (run_dir / "report.html").read_text()
    assert "kv-trace" in html and "crosscheck" in html and "20261202-004610-629c8a" in html
    assert "<testsuites" in (run_dir / "junit.xml").read_text()
    assert json.loads((run_dir / "manifest.json").read_text()) == json.loads((V2 / "manifest.json").read_text())


@pytest.mark.parametrize(
    "folder, schema, run_id", [(BEFORE, 2, "20261206-065002-2d023a"), (TODAY, RESULTS_SCHEMA, "20261206-204711-41ae3f")]
)
def test_a_folder_of_todays_format_renders_and_compares_with_itself(tmp_path, capsys, folder, schema, run_id):
    """`harness run kv-trace/crosscheck --repeat 2`, stored by the harness at 4ea09cb (before a
    driver's outcome and a stored record were one type and the manifest was typed when
    written: results.json schema 2, manifest.json format 1) and by today's (schema 3). Each
    loads as written, renders the verdicts its harness gave it, and compares with itself as
    no change."""
    run_dir = tmp_path / folder.name
    shutil.copytree(folder, run_dir)
    man, res = (json.loads((folder / f).read_text()) for f in ("manifest.json", "results.json"))
    assert man["format_version"] == MANIFEST_FORMAT and res["schema_version"] == schema
    data = load_run(run_dir)
    # every key it holds is declared (an empty object, its `servers` here, reads as absent)
    assert data.manifest.extra == {} and data.manifest.to_json() == {k: v for k, v in man.items() if v != {}}
    assert [r.to_json() for r in data.records] == res["records"]  # the records read back as written
    with pytest.raises(SystemExit) as e:
        main(["report", str(run_dir)])
    assert e.value.code == 0, capsys.readouterr().err
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    assert verdicts["exit_code"] == 0 and verdicts["run_id"] == man["run_id"] == run_id
    assert [(t["metric"], t["verdict"], t["measured"]["values"]) for t in verdicts["thresholds"]] == [
        ("crosscheck.mismatched_pairs", "pass", [0.0, 0.0])
    ]
    assert {c["id"]: c["verdict"] for c in verdicts["claims"] if c["verdict"] != "not run"} == {
        c: "not measurable here" for c in ("C6", "C10", "C11", "C22")
    }
    assert "crosscheck.sample_blocks" in (run_dir / "report.html").read_text()
    rows = compare(analyze(data), analyze(load_run(run_dir)))
    assert len(rows) == 4 and {r["change"] for r in rows} == {"+0.0%"} and not any(r["regression"] for r in rows)
    same = tmp_path / "again"  # the CLI refuses one run id on both sides: the same run under another id
    shutil.copytree(folder, same)
    (same / "manifest.json").write_text(json.dumps({**man, "run_id": "20261206-065003-000000"}))
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["compare", str(run_dir), str(same)])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "no claim's verdict changed" in out and "0 regression(s), 0 improvement(s)" in out


def test_the_stored_manifest_loads_as_a_typed_record(tmp_path):
    run = load_run(_copy(tmp_path))
    man = run.manifest
    assert isinstance(man, Manifest) and man.format_version == MANIFEST_FORMAT
    assert man.profile == "local" and man.suites == ("kv-trace",) and man.duration_s > 0
    assert man.run_id == "20261202-004610-629c8a" == man.get("run_id") and man.host.get("cpu_logical")
    assert man.target_nodes["kind"] == "none"


def test_a_new_manifest_says_its_format_and_a_newer_one_is_refused(tmp_path):
    write_manifest(tmp_path, {"run_id": "r", "profile": "local"})
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["format_version"] == MANIFEST_FORMAT
    with pytest.raises(BadInput, match="upgrade the harness"):
        Manifest.from_json({**data, "format_version": MANIFEST_FORMAT + 1})


def test_a_value_of_the_wrong_type_reads_as_absent_and_unknown_fields_are_kept():
    man = Manifest.from_json({"run_id": 5, "git": ["x"], "started": float("nan"), "ended": 3.0, "later": {"a": 1}})
    assert man.run_id is None and man.git == {} and man.started is None and man.duration_s is None
    assert man.get("later") == {"a": 1} and man.to_json()["later"] == {"a": 1}


def test_a_bug_in_a_view_is_the_harness_s_error_with_its_traceback_kept(tmp_path, monkeypatch, capsys):
    run_dir = _copy(tmp_path)

    def broken(*args, **kwargs):
        raise KeyError("a view's bug")

    monkeypatch.setattr(P, "render_report", broken)
    with pytest.raises(SystemExit) as e:
        main(["report", str(run_dir)])
    err = capsys.readouterr().err
    assert e.value.code == 3 and len(err.strip().splitlines()) == 1, err
    assert "a bug in the harness, not in the folder" in err and "damaged" not in err
    assert "KeyError" in (run_dir / "report-error.txt").read_text()


def test_a_damaged_folder_is_still_the_folder_s_fault(tmp_path, capsys):
    run_dir = _copy(tmp_path)
    data = json.loads((run_dir / "results.json").read_text())
    data["records"] = {"not": "a list"}
    (run_dir / "results.json").write_text(json.dumps(data))
    with pytest.raises(SystemExit) as e:
        main(["report", str(run_dir)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "the file is damaged" in err and not (run_dir / "report-error.txt").exists()


def test_run_and_report_publish_alike(tmp_path):
    """The summary `harness run` prints is built from the stored folder, as `harness report`'s is."""
    out = P.publish(_copy(tmp_path))
    text = out.summary()
    assert "thresholds: 1 pass" in text and "kv-trace" in text and out.exit_code == 0
    assert out.report.name == "report.html" and out.junit.name == "junit.xml"


def test_history_json_says_its_format(tmp_path):
    from harness.base.format_versions import HISTORY_FORMAT
    from harness.publish.history_page import write_history

    root = tmp_path / "runs"
    shutil.copytree(V2, root / V2.name)
    html, js = write_history(root, tmp_path / "out")
    data = json.loads(js.read_text())
    assert data["format_version"] == HISTORY_FORMAT and len(data["runs"]) == 1 and html.exists()
