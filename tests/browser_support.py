"""Checks of a report page in a real browser (Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver), used by tests/system/test_report_browser.py on real reports and on a
deliberately broken copy. Each check returns a list of problems, one line each: empty = holds.

Nothing is fetched: the browser and its driver are Debian packages, axe-core is the copy that
`make setup-test` installs from tools/browser/package-lock.json.

The report's Content-Security-Policy allows no script. WebDriver's execute_script runs through
the DevTools protocol (Runtime.callFunctionOn), which a page's CSP does not govern, so axe-core
is injected that way and the report's policy stays as it is."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
AXE = REPO / "tools" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 800
FIX = "make setup-test (as root: apt-get install -y chromium chromium-driver; npm ci --prefix tools/browser)"


def artifacts_dir() -> Path:
    d = Path(os.environ.get("HARNESS_TEST_ARTIFACTS") or REPO / ".harness" / "test-artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the Python package selenium is not installed (it is in the test extra)"
    if not chromium():
        return "chromium is not installed (Debian package chromium)"
    if not CHROMEDRIVER.is_file():
        return f"{CHROMEDRIVER} is missing (Debian package chromium-driver)"
    if not AXE.is_file():
        return f"{AXE.relative_to(REPO)} is missing (axe-core from tools/browser/package-lock.json)"
    return None


def need_browser(reason: str | None) -> None:
    """Skip with the reason and the fix; under CI (CI set) fail instead: CI must run them."""
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and the browser tests cannot run: {reason}; fix: {FIX}", pytrace=False)
    pytest.skip(f"{reason}; fix: {FIX}")


def start_driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WIDTH},{HEIGHT}",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))


@dataclass
class Loaded:
    """A page as it loaded: its SEVERE console lines and every URL the browser requested."""

    path: Path
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def load(driver, path: Path) -> Loaded:
    """Open `path` in a 1280 x 800 viewport, at the top, in screen media."""
    for log in ("browser", "performance"):
        driver.get_log(log)  # drop what an earlier page left
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "screen"})
    driver.get(path.resolve().as_uri())
    console = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    events = [json.loads(e["message"])["message"] for e in driver.get_log("performance")]
    requests = [m["params"]["request"]["url"] for m in events if m["method"] == "Network.requestWillBeSent"]
    return Loaded(path, console, requests)


FIRST_SCREEN = """
const board = document.getElementById('verdict-board');
if (!board) return {board: null};
const h = board.querySelector('h1, h2, h3, h4, h5, h6');
const r = h && h.getBoundingClientRect();
return {board: board.getBoundingClientRect().top + scrollY, scrollY: scrollY, vw: innerWidth, vh: innerHeight,
        heading: h ? {text: h.textContent.trim().slice(0, 60), top: r.top, bottom: r.bottom, left: r.left,
                      right: r.right, visible: h.checkVisibility({opacityProperty: true, visibilityProperty: true})}
                   : null};
"""


def first_screen_problems(driver) -> list[str]:
    """#verdict-board starts inside the first screen and its heading shows without scrolling."""
    s = driver.execute_script(FIRST_SCREEN)
    if s["board"] is None:
        return ["no element #verdict-board in the page"]
    out = []
    if not s["board"] < HEIGHT:
        out.append(f"#verdict-board starts at {s['board']:.0f} px, below the first screen ({HEIGHT} px)")
    h = s["heading"]
    if h is None:
        out.append("#verdict-board has no heading")
    elif not (
        s["scrollY"] == 0
        and h["visible"]
        and h["top"] >= 0
        and h["bottom"] <= s["vh"]
        and h["left"] >= 0
        and h["right"] <= s["vw"]
    ):
        out.append(f"#verdict-board's heading {h['text']!r} is not visible without scrolling: {h}")
    return out


def board_claim_links(driver) -> list[str]:
    """The claim ids the verdict board's rows link to (#claim-ID), in order."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#verdict-board table.board tr')]"
        ".flatMap(tr => [...tr.querySelectorAll('a[href^=\"#claim-\"]')].slice(0, 1))"
        ".map(a => a.getAttribute('href').slice('#claim-'.length))"
    )


CELL_LINES = """
const out = [];
for (const td of document.querySelectorAll('#verdict-board table.board tbody td, #verdict-board table.board tbody th')) {
  const cs = getComputedStyle(td);
  const range = document.createRange();
  range.selectNodeContents(td);
  const inner = range.getBoundingClientRect().height;  // the content's height, not the row's
  const line = parseFloat(cs.lineHeight) || 1.45 * parseFloat(cs.fontSize);
  out.push({col: td.cellIndex, lines: inner / line, text: td.textContent.trim().slice(0, 80)});
}
return out;
"""
MAX_CELL_LINES = 3.6  # "about three lines": three of text, and the verdict's badge padding


def tall_cell_problems(driver, max_lines: float = MAX_CELL_LINES) -> list[str]:
    """Board cells whose content is taller than about three lines at this window's width."""
    cells = driver.execute_script(CELL_LINES)
    if not cells:
        return ["the verdict board has no cells"]
    return [
        f"board cell in column {c['col']} is {c['lines']:.1f} lines tall: {c['text']!r}"
        for c in cells
        if c["lines"] > max_lines
    ]


def overflow_problems(driver) -> list[str]:
    width = driver.execute_script("return document.documentElement.scrollWidth")
    return [] if width <= WIDTH else [f"the page is {width} px wide: it scrolls sideways in a {WIDTH} px window"]


def dangling_link_problems(driver) -> list[str]:
    """Every a[href^="#"] names an element id in the page ("#" alone is the top: allowed)."""
    dangling = driver.execute_script(
        "return [...document.querySelectorAll('a[href^=\"#\"]')].map(a => a.getAttribute('href'))"
        ".filter(h => h.length > 1 && !document.getElementById(decodeURIComponent(h.slice(1))))"
    )
    return [f"internal link {h} names no element" for h in dict.fromkeys(dangling)]


LOCAL = ("file:", "data:")
SOURCES = r"""
const urls = [...document.querySelectorAll(`img[src], script[src], iframe[src], source[src], video[src], audio[src],
                                           embed[src], input[src], track[src]`)].map(e => e.src);
urls.push(...[...document.querySelectorAll('link[href]')].map(e => e.href));
urls.push(...[...document.querySelectorAll('object[data]')].map(e => e.data));
for (const e of document.querySelectorAll('img[srcset], source[srcset]'))
  urls.push(...e.srcset.split(/,\s+/).map(c => new URL(c.trim().split(/\s+/)[0], document.baseURI).href));
urls.push(...performance.getEntriesByType('resource').map(e => e.name));
return urls;
"""


def external_request_problems(driver, page: Loaded) -> list[str]:
    """Nothing leaves the file: every resource the DOM names or the page loaded, and every
    request the browser sent (the DevTools network log), is file: or data:."""
    urls = driver.execute_script(SOURCES) + page.requests
    return [
        f"request or source outside the file: {u[:120]}" for u in dict.fromkeys(urls) if u and not u.startswith(LOCAL)
    ]


def console_problems(page: Loaded) -> list[str]:
    return [f"console error: {line[:300]}" for line in page.console]


def run_axe(driver) -> dict:
    """axe-core's result on the open page (violations only; every rule axe runs by default)."""
    driver.execute_script(AXE.read_text(encoding="utf-8") + "\n;return typeof axe;")
    driver.set_script_timeout(60)
    raw = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(JSON.stringify(r)), e => done(JSON.stringify({error: String(e)})));"
    )
    result = json.loads(raw)
    assert "error" not in result, f"axe-core failed to run: {result['error']}"
    return result


def axe_problems(result: dict, impacts=("serious", "critical")) -> list[str]:
    """One line per violation of those impacts: rule, impact, what it is, the first nodes."""
    out = []
    for v in result["violations"]:
        if v.get("impact") in impacts:
            targets = [
                "".join(map(str, n["target"])) if isinstance(n["target"], list) else str(n["target"])
                for n in v["nodes"][:3]
            ]
            out.append(f"{v['id']} ({v['impact']}, {len(v['nodes'])} nodes): {v['help']}; first: {targets}")
    return out


HIDDEN_DETAILS = """
const hidden = [];
for (const d of document.querySelectorAll('details')) {
  for (const n of d.childNodes) {
    if (n.nodeName === 'SUMMARY') continue;
    let shown;
    if (n.nodeType === Node.ELEMENT_NODE) {
      shown = n.checkVisibility({visibilityProperty: true}) && n.getClientRects().length > 0;
    } else if (n.nodeType === Node.TEXT_NODE && n.textContent.trim()) {
      const r = document.createRange(); r.selectNodeContents(n); shown = r.getClientRects().length > 0;
    } else continue;
    if (!shown) { hidden.push((d.querySelector('summary') || d).textContent.trim().slice(0, 60)); break; }
  }
}
return [document.querySelectorAll('details').length, hidden];
"""


def hidden_details_problems(driver) -> tuple[int, list[str]]:
    """(number of <details>, one line per <details> whose content does not show)."""
    count, hidden = driver.execute_script(HIDDEN_DETAILS)
    return count, [f"<details> {s!r}: its content is hidden" for s in hidden]


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
