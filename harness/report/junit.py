"""JUnit XML of threshold verdicts: one test case per (suite, case, metric) threshold."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from harness.analysis import Analysis


def junit_xml(a: Analysis) -> str:
    suites = ET.Element("testsuites", name="harness")
    by_suite: dict[str, list] = {}
    for t in a.thresholds:
        by_suite.setdefault(t.suite, []).append(t)
    for c in a.cases:  # a suite with no thresholds still shows its case statuses
        by_suite.setdefault(c.suite, [])
    for suite, verdicts in by_suite.items():
        el = ET.SubElement(suites, "testsuite", name=suite, tests=str(len(verdicts)),
                           failures=str(sum(v.verdict in ("fail", "missing") for v in verdicts)),
                           skipped=str(sum(v.verdict == "skipped" for v in verdicts)))
        for v in verdicts:
            tc = ET.SubElement(el, "testcase", classname=f"{suite}.{v.case}", name=f"{v.metric} {v.threshold}")
            text = f"measured {v.measured}; threshold {v.threshold}; {v.reason}" + (f"; {v.detail}" if v.detail else "")
            if v.verdict == "fail":
                ET.SubElement(tc, "failure", message=f"{v.metric} = {v.measured}, not {v.threshold}").text = text
            elif v.verdict == "missing":
                ET.SubElement(tc, "failure", message=f"{v.metric} missing: {v.detail}").text = text
            elif v.verdict == "skipped":
                ET.SubElement(tc, "skipped", message=v.detail or "case skipped")
            else:
                ET.SubElement(tc, "system-out").text = text
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def write_junit(path: Path, a: Analysis) -> Path:
    path.write_text(junit_xml(a))
    return path
