"""The JUnit XML of threshold verdicts: one test case per (suite, case, metric)
threshold, failures for fail and missing, skipped for skipped cases."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from harness.model.spec import SuiteRun
from harness.model.stored_run import Metric, Record, RunData
from harness.publish.junit import junit_xml, write_junit
from harness.verdict.analysis import analyze

THRESHOLDS = [
    {"case": "bench", "metric": "GET.p99_ms", "op": "<", "value": 5.0, "unit": "ms", "reason": "r1"},
    {"case": "bench", "metric": "SET.p99_ms", "op": "<", "value": 1.0, "unit": "ms", "reason": "r2"},
    {"case": "bench", "metric": "GET.rps", "op": ">", "value": 1000, "unit": "req/s", "reason": "r3"},
    {"case": "memtier", "metric": "Totals.ops_per_sec", "op": ">", "value": 10, "unit": "ops/s", "reason": "r4"},
    {"case": "broken", "metric": "x", "op": ">", "value": 1, "unit": "", "reason": "r5"},
]


def _run(tmp_path) -> RunData:
    recs = []
    for rep, (g, s) in enumerate([(1.0, 2.0), (1.2, 2.2), (1.1, 2.1)], start=1):
        recs.append(
            Record(
                suite="suite-a",
                case="bench",
                repetition=rep,
                metrics={"GET.p99_ms": Metric(g, "ms", "lower"), "SET.p99_ms": Metric(s, "ms", "lower")},
            )
        )
    recs.append(
        Record(suite="suite-a", case="memtier", repetition=1, status="skipped", reason="memtier_benchmark not found")
    )
    recs.append(Record(suite="suite-a", case="broken", repetition=1, status="failed", reason="the tool crashed"))
    suites = {
        "suite-a": SuiteRun.from_json("suite-a", {"thresholds": THRESHOLDS}),
        "suite-b": SuiteRun.from_json("suite-b", {"thresholds": []}),
    }
    return RunData(tmp_path, {"run_id": "t"}, recs, suites, [])


def test_every_threshold_verdict_is_one_testcase(tmp_path):
    a = analyze(_run(tmp_path))
    root = ET.fromstring(write_junit(tmp_path / "junit.xml", a).read_text())
    cases = {(tc.get("classname"), tc.get("name").split(" ")[0]): tc for tc in root.iter("testcase")}
    expected = {(f"suite-a.{t['case']}", t["metric"]) for t in THRESHOLDS}
    assert set(cases) == expected
    assert len(list(root.iter("testcase"))) == len(THRESHOLDS)
    verdicts = {(f"{v.suite}.{v.case}", v.metric): v.verdict for v in a.thresholds}
    assert verdicts == {
        ("suite-a.bench", "GET.p99_ms"): "pass",
        ("suite-a.bench", "SET.p99_ms"): "fail",
        ("suite-a.bench", "GET.rps"): "missing",
        ("suite-a.memtier", "Totals.ops_per_sec"): "skipped",
        ("suite-a.broken", "x"): "missing",
    }
    for key, verdict in verdicts.items():
        tc = cases[key]
        kinds = {child.tag for child in tc}
        if verdict in ("fail", "missing"):
            assert "failure" in kinds, key
        elif verdict == "skipped":
            assert kinds == {"skipped"}, key
        else:
            assert "failure" not in kinds and "skipped" not in kinds, key
    failing = cases[("suite-a.bench", "SET.p99_ms")].find("failure")
    assert "2.1" in failing.get("message") and "< 1 ms" in failing.get("message")
    assert "the tool crashed" in cases[("suite-a.broken", "x")].find("failure").get("message")


def test_suite_counts_match_the_verdicts(tmp_path):
    root = ET.fromstring(junit_xml(analyze(_run(tmp_path))))
    by_name = {s.get("name"): s for s in root.iter("testsuite")}
    assert by_name["suite-a"].get("tests") == "5"
    assert by_name["suite-a"].get("failures") == "3"  # one fail, two missing
    assert by_name["suite-a"].get("skipped") == "1"
