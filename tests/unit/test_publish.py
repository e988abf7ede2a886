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
from harness.base.format_versions import MANIFEST_FORMAT
from harness.cli import main
from harness.model.manifest import Manifest
from harness.model.stored_run import load_run, write_manifest
from harness.publish import outputs as P
from tests import TESTS

V2 = TESTS / "fixtures" / "results-v2" / "run"


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
