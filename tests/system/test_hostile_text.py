"""Text from outside made safe where it goes (issue 40, classes 5, 6 and 9): results folders
whose names, reasons and manifest facts carry terminal escape sequences (clear screen,
window title, OSC 52 clipboard writes, 8-bit C1 ones), NUL, carriage returns, a newline
that forges an `error:` line, line separators, bidi overrides, lone surrogates, a 7 MB
name, and Markdown links and images. `harness report`, `compare` (text, markdown, json)
and `history`, run as real processes through pipes: nothing of it reaches the terminal
as it is, junit.xml parses, the files stay small, Markdown forges no link, a lone
surrogate is carried (shown as an escape), never a traceback or "a bug of the harness";
and a refused run's empty folder is never pooled. The harness.base.safe_text functions are
checked with hypothesis."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import safe_text
from harness.model.spec import SuiteRun
from harness.model.stored_run import Metric, Record, write_manifest, write_results
from tests import REPO

HOSTILE = {  # each kind of text the issue names, by what it attacks
    "clear": "\x1b[2J\x1b[3J\x1b[H",
    "title": "\x1b]0;owned\x07",
    "clipboard": "\x1b]52;c;ZWNobyBvd25lZA==\x07",
    "c1": "\x9b2J\x9d0;t\x9c",
    "nul": "nul\x00byte\x7f",
    "cr": "shown\roverwritten",
    "forge": "x\nerror: forged\r\nerror: forged too",
    "separators": "a\x85b\u2028c\x1cd\x0be\x0cf",
    "surrogate": "lone\ud800 and \udfff alone",
    "bidi": "\u202etxt.exe\u2066\u200b",
    "link": "[x](http://evil)",
    "image": "![i](http://evil/i.png)",
    "html": "<img src=x onerror=alert(1)>`code`|cell|",
}
ALL = " ".join(HOSTILE.values())
BIG = "M" * 7_000_000  # a 7 MB model id or metric name
RAW_BYTES = (
    b"\x1b",
    b"\x07",
    b"\x00",
    b"\x7f",
    b"\r",
    b"\xc2\x9b",
    b"\xc2\x9d",
    b"\xc2\x85",
    "\u202e".encode(),
    "\u2028".encode(),
)
MAX_BYTES = 2 << 20  # what a report, a junit.xml or a command's output may grow to from one folder


def harness(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "harness", *map(str, args)], capture_output=True, cwd=REPO, timeout=timeout
    )


def _manifest(run_id: str, started: float, version: str) -> dict:
    return {
        "run_id": run_id,
        "profile": "local" + ALL,
        "target": "local" + ALL,
        "suites": ["kv" + ALL],
        "started": started,
        "ended": started + 60,
        "host": {"cpu_model": ALL, "cpu_logical": 4, "memory_total_gib": 8, "hostname": ALL, "kernel": ALL},
        "git": {"revision": ALL, "dirty": False},
        "packages": {"redis": version, ALL: ALL},
        "tools": {"redis-server": {"version": ALL}},
        "servers": {ALL: {"redis_version": ALL, "role": ALL}},
        "gpu": {"present": False, "reason": ALL},
        "model_id": BIG,
        "harness_version": ALL,
    }


def _suite() -> dict:
    return {
        "description": ALL,
        "claim": {"section": ALL, "text": ALL, "ids": [ALL]},
        "profile": ALL,
        "cases": [
            {"name": "bench" + ALL, "driver": ALL, "description": ALL, "params": {ALL: ALL}},
            {"name": "broken" + ALL, "driver": "d", "params": {}},
        ],
        "thresholds": [
            {"case": "bench" + ALL, "metric": "get" + ALL, "op": ">=", "value": 1e9, "unit": ALL, "reason": ALL},
            {"case": "bench" + ALL, "metric": BIG, "op": ">=", "value": 0, "unit": "", "reason": BIG},
        ],
    }


def write_hostile_run(
    root: Path, name: str, started: float, scale: float, version: str = ALL, interrupted: dict | None = None
) -> Path:
    """A results folder written by the real writer whose every name, reason and fact is hostile."""
    d = root / name
    (d / "raw").mkdir(parents=True)
    write_manifest(d, _manifest(name + ALL, started, version))
    suite, case = "kv" + ALL, "bench" + ALL
    recs = [
        Record(
            suite=suite,
            case=case,
            repetition=rep,
            metrics={
                "get" + ALL: Metric(100.0 * scale + rep, "req/s" + ALL, "higher"),
                BIG: Metric(1.0 * scale + rep, ALL),
                "plain": Metric(5.0 + rep, "ms", "lower"),
            },
            details={"model": ALL},
            facts={"model": ALL},
        )
        for rep in (1, 2, 3)
    ]
    recs.append(
        Record(suite=suite, case="broken" + ALL, repetition=1, status="failed", reason=ALL, facts={"model": BIG})
    )
    write_results(d, recs, {suite: SuiteRun.from_json(suite, _suite())}, [], interrupted=interrupted)
    return d


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Two hostile runs under one root, the newer with another `redis` version (a warning
    made of hostile text), a refused run's empty folder and a folder with a manifest only."""
    root = tmp_path_factory.mktemp("hostile")
    a = write_hostile_run(root, "20260101-000000-a", 1_767_225_600, 1.0)
    b = write_hostile_run(root, "20260102-000000-b", 1_767_312_000, 2.0, version=ALL + "2")
    empty = root / "20260103-000000-refused"
    (empty / "raw").mkdir(parents=True)
    write_manifest(empty, _manifest("refused", 1_767_398_400, ALL))
    write_results(empty, [], {}, [])
    half = root / "20260104-000000-manifest-only"
    half.mkdir()
    write_manifest(half, _manifest("half", 1_767_484_800, ALL))
    return root, a, b, empty


def assert_safe(p: subprocess.CompletedProcess, codes=(0, 1), errors: int = 0) -> tuple[str, str]:
    """Nothing hostile reached the terminal: no ESC, BEL, NUL, DEL, CR, C1 control, line
    separator or bidi override; valid UTF-8; no traceback; `errors` lines starting with
    'error:' (however a reader splits lines); every line bounded."""
    for stream in (p.stdout, p.stderr):
        for raw in RAW_BYTES:
            assert raw not in stream, (raw, stream[:3000])
        assert len(stream) < MAX_BYTES, len(stream)
    out, err = p.stdout.decode("utf-8"), p.stderr.decode("utf-8")  # strict: a surrogate cannot be encoded
    assert "Traceback" not in out + err, err[-3000:]
    assert p.returncode in codes, (p.returncode, err[-3000:])
    lines = (out + "\n" + err).splitlines()  # splits on \x85, \u2028, \x1c, \x0b, \x0c too
    assert sum(line.lstrip().startswith("error:") for line in lines) == errors, err[-3000:]
    assert all(not any(safe_text.is_unsafe(ch) for ch in line) for line in lines)
    assert max(map(len, lines), default=0) < 20_000
    assert "bug in the harness" not in err
    return out, err


def assert_no_markdown_from_data(md: str) -> None:
    """No link, image, HTML, code span or extra table cell made of the data's text."""
    assert md.startswith("### ")  # the harness's own heading; every line after it is made of data
    for line in md.splitlines()[1:]:
        unescaped = re.sub(r"\\.", "", line)  # what is left when every backslash escape is taken out
        assert not set("[]()!<>`&#") & set(unescaped), line
        if line.startswith("| kv"):  # a row: its cells are the columns', no more
            assert len(re.findall(r"(?<!\\)\|", line)) == 10, line


def test_report_of_a_hostile_folder_is_safe_parseable_and_small(hostile):
    _, a, _, _ = hostile
    p = harness("report", a)
    assert_safe(p)
    junit, html = a / "junit.xml", a / "report.html"
    assert junit.stat().st_size < MAX_BYTES and html.stat().st_size < MAX_BYTES
    tree = ET.parse(junit)  # ESC and NUL no longer make it unparseable
    text = junit.read_text("utf-8")
    assert "\x1b" not in text and "\\x1b]52;c;" in text  # shown as an escape
    assert len(tree.getroot().findall(".//testcase")) >= 3
    page = html.read_text("utf-8")  # strict UTF-8: the lone surrogate is carried as an escape
    assert "\x1b" not in page and "\\ud800" in page and "more characters)" in page
    assert "<img src=x" not in page and "&lt;img src=x" in page


def test_report_of_an_interrupted_hostile_run_notes_it_safely(tmp_path):
    """The note on an interrupted run names its case, from results.json (harness.cli's report)."""
    run = write_hostile_run(
        tmp_path,
        "20260101-000000-i",
        1_767_225_600,
        1.0,
        interrupted={"at": 1_767_225_660.0, "case": ALL, "signal": ALL},
    )
    _, err = assert_safe(harness("report", run))
    assert "note: this run was interrupted" in err and "\\x1b]52;c;" in err


def test_compare_text_markdown_and_json_are_safe(hostile):
    _, a, b, _ = hostile
    out, _ = assert_safe(harness("compare", a, b, "--allow-mismatch"), errors=0)
    assert "\\x1b[2J" in out and "\\ud800" in out  # shown, not sent
    md, _ = assert_safe(harness("compare", a, b, "--allow-mismatch", "--format", "markdown"))
    assert_no_markdown_from_data(md)
    assert "\\[x\\]\\(http\\://evil\\)" in md and "\\!\\[i\\]" in md  # shown as text
    js, _ = assert_safe(harness("compare", a, b, "--allow-mismatch", "--format", "json"))
    data = json.loads(js)
    assert any("\x1b" in r["metric"] for r in data["rows"])  # the data is still the data, escaped as JSON
    assert all(len(r["metric"]) < 2000 for r in data["rows"])  # and bounded


def test_compare_refusal_made_of_hostile_text_is_one_safe_line(hostile):
    _, a, b, _ = hostile
    _, err = assert_safe(harness("compare", a, b), codes=(2,), errors=1)
    assert "the sides are not comparable" in err and "\\x1b]52" in err


def test_history_of_hostile_runs_is_safe_and_leaves_out_the_empty_folders(hostile, tmp_path):
    root, _, _, empty = hostile
    _, err = assert_safe(harness("history", root, "--out", tmp_path))
    assert f"left out: {empty}: no records" in err
    assert "manifest-only: no results.json" in err
    data = json.loads((tmp_path / "history.json").read_text())
    assert len(data["runs"]) == 2  # the empty folder is not pooled
    assert (tmp_path / "history.html").stat().st_size < MAX_BYTES
    assert "\x1b" not in (tmp_path / "history.html").read_text("utf-8")


def test_compare_refuses_an_empty_run_and_leaves_it_out_of_a_pool(hostile):
    root, a, b, empty = hostile
    _, err = assert_safe(harness("compare", a, empty), codes=(2,), errors=1)
    assert "holds no records" in err
    _, err = assert_safe(harness("compare", empty, b), codes=(2,), errors=1)
    assert "holds no records" in err
    out, err = assert_safe(harness("compare", root, b, "--allow-mismatch"))
    assert "median of the last 1 run(s)" in out and "no records" in err


def test_a_lone_surrogate_anywhere_is_carried_not_a_traceback(tmp_path):
    """Only the surrogate (valid JSON: "\\ud800"), in the manifest and results.json alike."""
    run = tmp_path / "20260101-000000-s"
    (run / "raw").mkdir(parents=True)
    write_manifest(
        run, {"run_id": "s\ud800", "profile": "local\udc80", "started": 1.0, "host": {"cpu_model": "\ud800"}}
    )
    suite = SuiteRun.from_json("kv", {"cases": [{"name": "c\ud800", "driver": "d"}]})
    write_results(
        run,
        [
            Record(suite="kv", case="c\ud800", repetition=1, metrics={"m\ud800": Metric(1.0, "u\ud800")}),
            Record(suite="kv", case="c\ud800", repetition=2, status="failed", reason="why\ud800"),
        ],
        {"kv": suite},
        [],
    )
    assert '"\\ud800"' in (run / "results.json").read_text() or "\\ud800" in (run / "results.json").read_text()
    p = harness("report", run)
    assert_safe(p, codes=(0, 1, 3))  # 3: a failed case, not a bug
    assert b"bug in the harness" not in p.stderr and not (run / "report-error.txt").exists()
    ET.parse(run / "junit.xml")
    other = tmp_path / "20260102-000000-t"
    (other / "raw").mkdir(parents=True)
    write_manifest(other, {"run_id": "t", "profile": "local\udc80", "started": 2.0, "host": {"cpu_model": "\ud800"}})
    write_results(
        other,
        [Record(suite="kv", case="c\ud800", repetition=1, metrics={"m\ud800": Metric(2.0, "u\ud800")})],
        {"kv": suite},
        [],
    )
    for fmt in ("text", "markdown", "json"):
        assert_safe(harness("compare", run, other, "--format", fmt, "--allow-mismatch"))
    assert_safe(harness("history", tmp_path, "--out", tmp_path / "h"))


def test_a_huge_value_in_a_message_is_bounded(tmp_path):
    """A damaged file whose refusal quotes a value: one line, bounded, escapes shown."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"format_version": "\x1b]52;c;eA==\x07" + "v" * 3_000_000}))
    (run / "results.json").write_text(json.dumps({"schema_version": 2, "records": []}))
    _, err = assert_safe(harness("report", run), codes=(2,), errors=1)
    assert len(err) < 2000 and "more characters" in err
    (run / "manifest.json").write_text(json.dumps({"format_version": 1}))
    (run / "results.json").write_text(json.dumps({"schema_version": "\x1b[2J\n" + "s" * 3_000_000, "records": []}))
    _, err = assert_safe(harness("report", run), codes=(2,), errors=1)
    assert len(err) < 2000
    (run / "results.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "records": [
                    {
                        "suite": "s",
                        "case": "c",
                        "repetition": 1,
                        "status": "\x1b]0;t\x07\nerror: forged" + "x" * 3_000_000,
                    }
                ],
            }
        )
    )
    _, err = assert_safe(harness("report", run), codes=(2,), errors=1)
    assert len(err) < 2000


def test_harness_runs_summary_table_and_exit_reason_are_safe(hostile):
    """What `harness run` prints at its end (the summary table, the exit line), in-process."""
    from harness.model.stored_run import load_run
    from harness.verdict.analysis import analyze
    from harness.verdict.summary import summary_text

    _, a, _, _ = hostile
    analysis = analyze(load_run(a))
    text = summary_text(analysis, {"kv" + ALL: 1.0})
    assert not any(safe_text.is_unsafe(ch) for ch in text.replace("\n", ""))
    assert not any(line.startswith("error:") for line in text.splitlines()) and len(text) < 20_000
    assert analysis.exit_reason and not any(safe_text.is_unsafe(ch) for ch in analysis.exit_reason)
    assert len(analysis.exit_reason) < 2000


# ---- the safe_text functions -------------------------------------------------------------
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60)  # surrogates included
HOSTILE_TEXT = st.one_of(
    ANY_TEXT,
    st.sampled_from(list(HOSTILE.values())),
    st.lists(st.sampled_from(list(HOSTILE.values()) + ["a", "\\", "#"]), max_size=8).map("".join),
)


@settings(max_examples=200, deadline=None)
@given(HOSTILE_TEXT)
def test_for_terminal_never_passes_a_control_character_or_a_line_break(text):
    out = safe_text.for_terminal(text)
    out.encode("utf-8")  # no lone surrogate
    assert not any(safe_text.is_unsafe(ch) for ch in out)
    assert len(out.splitlines()) <= 1 and all(ch not in out for ch in "\x1b\x07\x00\r\n\x9b")
    lines = safe_text.for_terminal_lines(text)
    assert not any(safe_text.is_unsafe(ch) for ch in lines.replace("\n", ""))


@settings(max_examples=200, deadline=None)
@given(HOSTILE_TEXT)
def test_for_xml_always_parses_inside_an_element_and_an_attribute(text):
    el = ET.Element("testcase", name=safe_text.for_xml(text, one_line=True))
    el.text = safe_text.for_xml(text)
    back = ET.fromstring(ET.tostring(el, encoding="unicode"))
    assert back.get("name") == safe_text.for_xml(text, one_line=True)
    assert (back.text or "") == safe_text.for_xml(text).replace("\r", "\n")


def _rendered(md: str) -> str:
    """What Markdown shows for for_markdown's output: its backslash escapes undone."""
    return re.sub(r"\\([\\`*_\[\]()#!|<>~&:@.])", r"\1", md)  # '.': of "www\." only


@settings(max_examples=200, deadline=None)
@given(HOSTILE_TEXT)
def test_markdown_escaping_round_trips_visibly(text):
    md = safe_text.for_markdown(text)
    assert _rendered(md) == safe_text.for_terminal(text)  # shown as the terminal shows it, nothing lost
    # every character that makes structure is escaped: preceded by an odd number of backslashes
    for m in re.finditer(r"[`*_\[\]()#!|<>~&:@]", md):
        run = len(md[: m.start()]) - len(md[: m.start()].rstrip("\\"))
        assert run % 2 == 1, (md, m.start())


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(1, 200))
def test_every_field_is_bounded_with_a_visible_marker(text, limit):
    for out in (safe_text.bounded(text, limit), safe_text.for_terminal(text, limit)):
        if len(text) <= limit:
            assert "more characters)" not in out or "more characters)" in text
        else:
            assert out.endswith(f"... ({len(text) - limit:,} more characters)")
    assert len(safe_text.bounded(text, limit)) <= limit + 40
    assert len(safe_text.for_terminal(text, limit)) <= 10 * limit + 40


def test_a_seven_megabyte_field_costs_its_bound_only():
    assert len(safe_text.for_terminal(BIG, safe_text.NAME)) < 300
    assert len(safe_text.for_markdown(BIG)) < 1100 and len(safe_text.for_xml(BIG)) < 4100
    assert safe_text.bound_strings({BIG: [BIG, 1, None]}, 10) == {
        "MMMMMMMMMM... (6,999,990 more characters)": ["MMMMMMMMMM... (6,999,990 more characters)", 1, None]
    }
