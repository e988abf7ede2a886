"""The report in a real browser (issue 42, item 5): Debian's Chromium, headless, 1280 x 800,
driven by Selenium through Debian's chromedriver, on the reports of a real run made here (the
kv-trace suite with every policy and capacity of its local profile, on the first 2,000 requests
of the shared trace so that it takes seconds; the claims ledger gets real verdicts) - once alone
and once against a baseline run (its "what changed" part). A trace of one's own is not the
Mooncake release, so the paper's-figures table says "not shown" here.

The verdict board is on the first screen, nothing scrolls sideways, every internal link lands,
no console error and no request leaves the file, axe-core finds no serious or critical
violation, print media shows every <details>' content; a screenshot of the first screen and
axe's result are kept in $HARNESS_TEST_ARTIFACTS (default .harness/test-artifacts/). A copy of
the report with a fault for each check shows that each check catches its fault.

Without chromium, chromedriver or axe-core (make setup-test installs them) the tests skip;
with CI set they fail instead."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests import browser_support as b

TRACE = b.REPO / "data" / "mooncake" / "conversation_trace.jsonl"
REQUESTS = 2000
REPORTS = ("plain", "compared")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """{"plain": report.html of a real kv-trace run, "compared": the same run's report against
    an earlier run of the suite's crosscheck alone (so verdicts changed)}."""
    b.need_browser(b.missing())
    from harness.publish.outputs import publish
    from harness.run import runner

    root, log = tmp_path_factory.mktemp("browser-reports"), []
    trace = root / "trace.jsonl"
    with TRACE.open(encoding="utf-8") as f:
        trace.write_text("".join(line for _, line in zip(range(REQUESTS), f)), encoding="utf-8")
    small = [f"prefix-cache.trace={trace}", f"crosscheck.trace={trace}", "crosscheck.session_fraction=0.02"]
    base = runner.run_suites(
        ["kv-trace"], results_dir=root / "base", keyword="crosscheck", overrides=small[1:], log=log.append
    )
    run = runner.run_suites(["kv-trace"], results_dir=root / "runs", overrides=small, log=log.append)
    assert base.exit_code == 0 and run.exit_code == 0, "\n".join(log[-30:])
    compared = root / "compared" / run.run_dir.name
    shutil.copytree(run.run_dir, compared)
    publish(compared, baseline=base.run_dir)
    return {"plain": run.report, "compared": compared / "report.html"}


@pytest.fixture(scope="module")
def driver():
    b.need_browser(b.missing())
    d = b.start_driver()
    try:
        yield d
    finally:
        d.quit()


@pytest.fixture(params=REPORTS)
def page(request, reports, driver):
    return request.param, b.load(driver, reports[request.param])


def test_the_verdict_board_is_on_the_first_screen(page, driver):
    problems = b.first_screen_problems(driver)
    assert not problems, "\n".join(problems)


def test_the_verdict_board_has_a_row_linking_to_each_claim(page, driver):
    claims = [c["id"] for c in json.loads((page[1].path.parent / "verdicts.json").read_text())["claims"]]
    links = b.board_claim_links(driver)
    assert claims and sorted(links) == sorted(claims), f"board rows link to {links}, the ledger has {claims}"


def test_no_board_cell_is_over_about_three_lines(page, driver):
    problems = b.tall_cell_problems(driver)
    assert not problems, "\n".join(problems)


def test_nothing_scrolls_sideways(page, driver):
    problems = b.overflow_problems(driver)
    assert not problems, "\n".join(problems)


def test_every_internal_link_lands_on_an_element(page, driver):
    problems = b.dangling_link_problems(driver)
    assert not problems, "\n".join(problems)
    assert driver.execute_script("return document.querySelectorAll('a[href^=\"#\"]').length") > 0  # links to check


def test_no_console_error_and_no_request_leaves_the_file(page, driver):
    _, loaded = page
    assert loaded.requests[:1] == [loaded.path.resolve().as_uri()], loaded.requests  # the network log is read
    problems = b.console_problems(loaded) + b.external_request_problems(driver, loaded)
    assert not problems, "\n".join(problems)


def test_axe_finds_no_serious_or_critical_violation(page, driver):
    name, _ = page
    result = b.run_axe(driver)
    (b.artifacts_dir() / f"{_stem(name)}-axe.json").write_text(json.dumps(result, indent=1))
    assert result["testEngine"]["name"] == "axe-core" and result["url"].startswith("file:")
    problems = b.axe_problems(result)
    assert not problems, "axe-core:\n" + "\n".join(problems)


def test_a_screenshot_of_the_first_screen_is_kept(page, driver):
    name, _ = page
    shot = b.artifacts_dir() / f"{_stem(name)}-first-screen.png"
    shot.unlink(missing_ok=True)
    assert driver.execute_script("return scrollY") == 0
    assert driver.save_screenshot(str(shot))
    assert b.png_size(shot) == (b.WIDTH, b.HEIGHT)


def test_print_media_shows_every_details_content(page, driver):
    count, hidden_on_screen = b.hidden_details_problems(driver)
    assert count > 0 and hidden_on_screen, "the report has no closed <details>: nothing to expand in print"
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    assert driver.execute_script("return matchMedia('print').matches")
    _, problems = b.hidden_details_problems(driver)
    assert not problems, f"{len(problems)} of {count} <details> stay closed in print:\n" + "\n".join(problems[:10])


def test_the_compared_report_starts_with_what_changed(reports, driver):
    b.load(driver, reports["plain"])
    assert driver.execute_script("return document.getElementById('changes')") is None
    b.load(driver, reports["compared"])
    changes = driver.execute_script(
        "const c = document.getElementById('changes');return c && [c.checkVisibility(), c.textContent]"
    )
    assert changes and changes[0] and "C1" in changes[1], changes


FAULTS = """
<canvas width="10" height="2000"></canvas>
<section id="verdict-board"><h2>Verdicts (fault: below the first screen)</h2></section>
<div style="width: 3000px">fault: too wide</div>
<a href="#no-such-element">fault: dangling link</a>
<img src="http://example.invalid/x.png">
<details><summary>fault: closed details</summary><p>hidden content</p></details>
<script>document.title = 'fault: a script ran';</script>
"""


def test_a_broken_report_fails_every_check(reports, driver, tmp_path):
    """The same checks on a copy of the real report with one fault each: each is caught (the
    external image is never fetched: the report's CSP refuses it, the DOM still names it)."""
    broken = tmp_path / "report.html"
    html, n = re.subn(r"(<body[^>]*>)", lambda m: m.group(1) + FAULTS, reports["plain"].read_text(), count=1)
    assert n == 1
    broken.write_text(html)
    loaded = b.load(driver, broken)
    assert any("starts at 2" in p for p in b.first_screen_problems(driver)), b.first_screen_problems(driver)
    assert any("px wide" in p for p in b.overflow_problems(driver))
    assert b.dangling_link_problems(driver) == ["internal link #no-such-element names no element"]
    assert any("http://example.invalid/x.png" in p for p in b.external_request_problems(driver, loaded))
    console = b.console_problems(loaded)
    assert any("Content Security Policy" in p for p in console), console
    assert driver.title != "fault: a script ran"  # and the report's CSP held
    assert any(p.startswith("image-alt (critical") for p in b.axe_problems(b.run_axe(driver))), "axe missed image-alt"
    _, hidden = b.hidden_details_problems(driver)  # screen media: the closed fault shows no content
    assert "<details> 'fault: closed details': its content is hidden" in hidden


def test_a_missing_browser_skips_here_and_fails_under_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    b.need_browser(None)
    with pytest.raises(pytest.skip.Exception, match="make setup-test"):
        b.need_browser("chromium is not installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set .* chromium is not installed"):
        b.need_browser("chromium is not installed")


def _stem(name: str) -> str:
    return "report" if name == "plain" else f"report-{name}"
