"""Variants a second round of hostile tries found after the first fixes of issue 40: list
parameters whose items are of the wrong kind, special files given as traces, stdout or
stderr on a full disk, raw-file links a browser reads as another site, bare URLs and
@mentions in Markdown, and thresholds of Infinity in a stored results folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base import safe_text
from harness.base.errors import BadInput
from harness.model.driver_contract import MAX_LIST_ITEMS, Param
from harness.publish.render import _inside_run
from tests import stored_runs


def _harness(*args: str, timeout: float = 180, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout, **kw
    )


@pytest.mark.parametrize(
    "value, needle",
    [
        ("[abc]", "item 1 is str"),
        ("[1e400]", "item 1 is str"),
        ("[[1]]", "item 1 is list"),
        ("[]", "an empty list"),
        ("[true, 24]", "item 1 is bool"),
        ("[10.5]", "item 1 is float"),
    ],
)
def test_a_list_parameters_items_are_checked_before_anything_runs(value, needle, tmp_path):
    r = _harness(
        "run",
        "kv-trace",
        "-k",
        "kv-trace/crosscheck",
        "--set",
        f"crosscheck.capacities_blocks={value}",
        "--results-dir",
        str(tmp_path / "res"),
    )
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "crosscheck.capacities_blocks" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").iterdir())


def test_list_items_kinds_and_lengths():
    ints = Param(list, [24, 160], min=10)
    assert ints.check("c.p", [10, 20]) == [10, 20]
    with pytest.raises(BadInput, match=f"give at most {MAX_LIST_ITEMS}"):
        ints.check("c.p", list(range(10, 10 + MAX_LIST_ITEMS + 1)))
    numbers = Param(list, [0.01, 0.5], min=0, max=1)
    assert numbers.check("c.p", ["1e-3", 0.5]) == [0.001, 0.5]  # YAML 1.1 reads 1e-3 as text
    with pytest.raises(BadInput, match="a number"):
        numbers.check("c.p", ["x"])
    selection = Param(list, ["a"], choices=("a", "b"))
    assert selection.check("c.p", []) == []  # a selection may be empty (no controls)
    rich = Param(list, ["allkeys-lru"])
    assert rich.check("c.p", [{"policy": "x"}]) == [{"policy": "x"}]  # text items may be mappings


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "/proc/self"])
def test_a_special_file_given_as_a_trace_is_not_a_regular_file(path):
    r = _harness("run", "kv-trace", "-k", "kv-trace/crosscheck", "--set", f"crosscheck.trace={path}", "--dry-run")
    assert r.returncode == 2 and "not a regular file" in r.stderr and "no such file" not in r.stderr


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_to_a_full_disk_is_dropped_and_the_run_measures(stream, tmp_path):
    res = tmp_path / "res"
    with open("/dev/full", "w") as full, open(tmp_path / "other.txt", "w") as other:
        out, err = (full, other) if stream == "stdout" else (other, full)
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "run",
                "kv-trace",
                "-k",
                "kv-trace/crosscheck",
                "--results-dir",
                str(res),
            ],
            stdout=out,
            stderr=err,
            timeout=300,
        )
    text = (tmp_path / "other.txt").read_text()
    assert r.returncode == 0, text
    assert f"note: {stream}: no space left" in text and "Traceback" not in text
    run = next(res.iterdir())
    recs = json.loads((run / "results.json").read_text())["records"]
    assert recs and recs[0]["status"] == "ok" and (run / "report.html").is_file()


@pytest.mark.parametrize(
    "link",
    [
        " //evil.example/a",
        "\t//evil.example/b",
        "\n//evil.example/c",
        "%2e%2e/%2e%2e/etc/passwd",
        ".%2e/x",
        "javascript:alert(1)",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a\\b",
        "a b",
        "\x1b/x",
        "a\ud800.csv",
        "",
    ],
)
def test_a_raw_file_link_is_plain_path_segments_only(link):
    assert not _inside_run(link)


@pytest.mark.parametrize(
    "link",
    [
        "kv-trace/crosscheck/rep1/crosscheck.csv",
        "memtier.json",
        "lg1_FULL_RUN_1.hgrm",
        "redis-benchmark.stdout",
        "a+b.txt",
    ],
)
def test_the_harness_own_raw_files_stay_linked(link):
    assert _inside_run(link)


@pytest.mark.parametrize("name", ["https://evil.example/steal?x=1", "www.evil.example", "@octocat", "a@b.example"])
def test_markdown_has_no_bare_autolink_or_mention(name):
    md = safe_text.for_markdown(name)
    assert "https://" not in md and "www." not in md.lower() and "@" not in md.replace("\\@", "")


@pytest.mark.parametrize("limit", ["Infinity", "-Infinity"])
def test_a_stored_threshold_of_infinity_is_damaged_input(limit, tmp_path):
    """`<= Infinity` would pass whatever was measured (a NaN limit is kept: it fails its check,
    tests/system/test_hostile_results.py::test_history_and_report_of_a_nan_threshold)."""
    d = stored_runs.write_run(tmp_path, 1, {"get.rps": [100000.0]})
    path = d / "results.json"
    doc = json.loads(path.read_text())

    def rewrite(o):
        if isinstance(o, dict):
            if o.get("metric") == "get.rps" and "op" in o:
                o["value"] = float(limit.replace("Infinity", "inf"))
            for v in o.values():
                rewrite(v)
        elif isinstance(o, list):
            for v in o:
                rewrite(v)

    rewrite(doc)
    path.write_text(json.dumps(doc))
    assert limit in path.read_text()
    r = _harness("report", str(d))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "not a finite number" in r.stderr and "Traceback" not in r.stderr


def test_no_threshold_is_left_unbounded_in_a_spec_either(tmp_path):
    """The spec side already refused it; the two stay in step."""
    from harness.model.spec import Threshold

    with pytest.raises(BadInput):
        Threshold.from_json({"case": "c", "metric": "m", "op": "<=", "value": float("inf"), "unit": "", "reason": "r"})


def test_a_stored_folder_with_finite_limits_still_renders(tmp_path):
    d = stored_runs.write_run(tmp_path, 1, {"get.rps": [100000.0]})
    r = _harness("report", str(d))
    assert r.returncode == 0, r.stderr
    assert Path(d / "report.html").is_file()
