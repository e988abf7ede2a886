"""JUnit XML of threshold verdicts: one test case per (suite, case, metric) threshold.

Names, reasons and details come from a results folder (outside text): every attribute
and element text goes through harness.base.safe_text.for_xml, so that the file parses whatever
they hold (ESC, NUL, lone surrogates are shown as escapes) and stays small (every field
bounded)."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from harness.base.files import write_atomic
from harness.base.safe_text import BLOCK, NAME, TEXT, bounded, for_xml
from harness.verdict.analysis import Analysis, Verdict
from harness.verdict.display import describe, threshold_text


def _attr(text) -> str:
    """An attribute value: one bounded line of characters XML 1.0 allows."""
    return for_xml(text, TEXT, one_line=True)


def _n(name) -> str:
    """A name inside an attribute (suite, case, metric): bounded on its own, so that what
    follows it (the threshold) is still shown."""
    return bounded(name, NAME)


def _text(text) -> str:
    """Element text (a failure's detail, system-out): bounded, newlines kept."""
    return for_xml(text, BLOCK)


def _case(parent, classname: str, name: str):
    return ET.SubElement(parent, "testcase", classname=_attr(classname), name=_attr(name))


def junit_xml(a: Analysis) -> str:
    suites = ET.Element("testsuites", name="harness")
    by_suite: dict[str, list] = {}
    for t in a.thresholds:
        by_suite.setdefault(t.suite, []).append(t)
    checked = {(t.suite, t.case) for t in a.thresholds}
    unchecked: dict[str, list] = {}
    for c in a.cases:  # a case without thresholds still shows its status
        by_suite.setdefault(c.suite, [])
        if (c.suite, c.case) not in checked:
            unchecked.setdefault(c.suite, []).append(c)
    for suite, verdicts in by_suite.items():
        extra = unchecked.get(suite, [])
        broken = [c for c in extra if c.statuses.get("failed") or c.statuses.get("invalid")]
        el = ET.SubElement(
            suites,
            "testsuite",
            name=_attr(_n(suite)),
            tests=str(len(verdicts) + len(extra)),
            failures=str(sum(v.verdict in (Verdict.FAIL, Verdict.MISSING) for v in verdicts) + len(broken)),
            skipped=str(
                sum(v.verdict is Verdict.SKIPPED for v in verdicts) + sum(set(c.statuses) == {"skipped"} for c in extra)
            ),
        )
        for c in extra:
            tc = _case(el, f"{_n(suite)}.{_n(c.case)}", "status")
            text = ", ".join(f"{n} {k}" for k, n in c.statuses.items()) + (
                "; " + "; ".join(c.reasons) if c.reasons else ""
            )
            if c in broken:
                ET.SubElement(tc, "failure", message=_attr(text)).text = _text(text)
            elif set(c.statuses) == {"skipped"}:
                ET.SubElement(tc, "skipped", message=_attr(text))
            else:
                ET.SubElement(tc, "system-out").text = _text(text)
        for v in verdicts:
            limit, measured = threshold_text(v.threshold), describe(v.summary)
            tc = _case(el, f"{_n(suite)}.{_n(v.case)}", f"{_n(v.metric)} {limit}")
            text = f"measured {measured}; threshold {limit}; {v.threshold.reason}" + (
                f"; {v.detail}" if v.detail else ""
            )
            if v.verdict is Verdict.FAIL:
                ET.SubElement(tc, "failure", message=_attr(f"{_n(v.metric)} = {measured}, not {limit}")).text = _text(
                    text
                )
            elif v.verdict is Verdict.MISSING:
                ET.SubElement(tc, "failure", message=_attr(f"{_n(v.metric)} missing: {v.detail}")).text = _text(text)
            elif v.verdict is Verdict.SKIPPED:
                ET.SubElement(tc, "skipped", message=_attr(v.detail or "case skipped"))
            else:
                ET.SubElement(tc, "system-out").text = _text(text)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def write_junit(path: Path, a: Analysis) -> Path:
    write_atomic(path, junit_xml(a))  # a new file in the folder, renamed over whatever was there
    return path
