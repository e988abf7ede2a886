"""Builds the report's data from a results folder and renders harness/publish/templates/report.html.j2.

The template receives computed data only (strings, numbers, lists); charts arrive as
ready SVG markup built by svg.py from the views' Chart blocks. Every string that reaches
the page is escaped by Jinja's autoescape or by format.esc (quotes included), and the
page carries a Content-Security-Policy that allows no script at all. The report never
re-runs anything.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from pathlib import Path, PurePosixPath

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from harness.base import machine_load
from harness.base.errors import BadInput
from harness.base.files import write_atomic
from harness.base.paths import TEMPLATES_DIR
from harness.base.safe_text import BLOCK, for_html, for_terminal
from harness.experiments import views
from harness.model.manifest import Manifest
from harness.model.stored_run import RunData
from harness.publish import monitoring_view
from harness.publish.svg import chart
from harness.verdict import display
from harness.verdict.analysis import Analysis, Verdict
from harness.verdict.metric_history import anchor
from harness.verdict.verdicts_json import deciding_check

PCT = re.compile(r"^(?P<cmd>.+)\.p(?P<q>\d+(?:\.\d+)?)_(?P<unit>ms|us|s)$")
REPORT_NAME = "report.html"
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def time_text(ts) -> str:
    if not ts or not isinstance(ts, (int, float)):
        return "-"
    try:
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "-"


def svg(c: views.Chart) -> Markup:
    return Markup(chart(c.title, c.series, c.x_label, c.y_label, c.kind, c.x_log, c.y_log))


def percentile_charts(a: Analysis, suite: str, case: str) -> list[Markup]:
    series: dict[str, list] = {}
    for m in a.metrics:
        if m.suite != suite or m.case != case:
            continue
        mt = PCT.match(m.metric)
        if mt:
            series.setdefault(mt["unit"], []).append((mt["cmd"], float(mt["q"]), m))
    out = []
    for unit, rows in series.items():
        by_cmd: dict[str, list] = {}
        for cmd, q, m in sorted(rows, key=lambda r: r[1]):
            by_cmd.setdefault(cmd, []).append([f"p{q:g}", m.median, m.min, m.max])
        if sum(len(v) for v in by_cmd.values()) < 2:
            continue
        out.append(
            svg(
                views.Chart(
                    f"{case}: latency percentiles (median of repetitions, min-max whiskers)",
                    [{"name": k, "points": v} for k, v in by_cmd.items()],
                    "percentile",
                    unit,
                )
            )
        )
    return out


_RAW_LINK = re.compile(r"[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+){0,15}")


def _inside_run(f) -> bool:
    """A raw file link stays a relative path inside the run folder, whatever a results.json
    says: plain path segments only (letters, digits, '_', '.', '+', '-'), so no URL
    (javascript:..., //host, a leading space or tab a browser strips), no %-escape a browser
    decodes to '..', never absolute, never '..'. The harness names its raw files so."""
    if not isinstance(f, str) or len(f) > 1000 or not _RAW_LINK.fullmatch(f):
        return False
    return ".." not in PurePosixPath(f).parts


def _cell(v) -> str:
    if isinstance(v, tuple) and len(v) == 3:
        return f"{display.fmt(v[0])} ({display.fmt(v[1])}-{display.fmt(v[2])})"
    return display.fmt(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else ("-" if v is None else str(v))


def _table(t: views.Table) -> dict:
    return {"title": t.title, "columns": t.columns, "note": t.note, "rows": [[_cell(c) for c in r] for r in t.rows]}


def _legacy_blocks(run: RunData, suite: str, case: str) -> list:
    """The tables and charts of one repetition that a schema-1 folder kept (found by
    harness.model.stored_run.load_run), labelled as that repetition's."""
    kept = run.legacy_blocks.get(f"{suite}/{case}")
    if not kept:
        return []
    rep = kept["repetition"]
    out: list = [
        views.Table(
            t.get("title", ""),
            t.get("columns", []),
            t.get("rows", []),
            (t.get("note", "") + f" (repetition {rep} only)").strip(),
            case,
        )
        for t in kept["tables"]
    ]
    out += [
        views.Chart(
            c.get("title", "") + f" (repetition {rep})",
            c.get("series", []),
            c.get("x_label", ""),
            c.get("y_label", ""),
            c.get("kind", "line"),
            c.get("x_log", False),
            c.get("y_log", False),
            case=case,
        )
        for c in kept["charts"]
    ]
    return out


def _server_summary(run: RunData, suite: str, case: str) -> list[dict]:
    recs = [r for r in run.records if r.suite == suite and r.case == case and r.details.get("server_info")]
    if not recs:
        return []
    rows = []
    for addr, s in recs[-1].details["server_info"].items():
        if not isinstance(s, dict):
            continue
        if "error" in s:
            rows.append(
                {
                    "node": addr,
                    "role": "-",
                    "commands": s["error"],
                    "hits": "",
                    "misses": "",
                    "evicted": "",
                    "memory": "",
                }
            )
            continue
        rows.append(
            {
                "node": addr,
                "role": s.get("role") or "-",
                "commands": display.fmt(s.get("total_commands_processed", 0)),
                "hits": display.fmt(s.get("keyspace_hits", 0)),
                "misses": display.fmt(s.get("keyspace_misses", 0)),
                "evicted": display.fmt(s.get("evicted_keys", 0)),
                "memory": f"{(s.get('used_memory') or 0) / 2**20:.1f} MiB",
            }
        )
    return rows


_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")


def check_history_location(history: str | None) -> str | None:
    """`report --history`: a path relative to the report, or an https URL with a host, and
    nothing a browser would read otherwise: no control or space character anywhere (a
    browser drops a tab or newline inside a URL: `java<TAB>script:` is `javascript:`), no
    backslash (read as `/`), no `//host` (another host on the report's scheme), no absolute
    path, no other scheme (`http:`, `javascript:`, `data:`, `file:`). BadInput otherwise."""
    if history is None:
        return None
    shown = for_terminal(repr(history), 120)
    why = ""
    if not history or any(unicodedata.category(ch)[0] in "CZ" for ch in history):
        why = "it is empty or holds a space or a control character"
    elif "\\" in history:
        why = "it holds a backslash (a browser reads it as /)"
    elif history.startswith("/"):
        why = (
            "it starts with / (" + ("another host" if history.startswith("//") else "not relative to the report") + ")"
        )
    elif _SCHEME.match(history):
        if (
            not history.lower().startswith("https://")
            or len(history) <= len("https://")
            or history[len("https://")] in "/?#"
        ):
            why = "its scheme is not https, or it names no host"
    if why:
        raise BadInput(
            f"--history {shown}: {why}; give a relative path (history.html, ../history/history.html) "
            f"or an https URL of the history page"
        )
    return history


def history_link(history: str | None, suite: str, case: str, metric: str) -> str:
    """The link to a metric's chart on the history page (`harness report --history`), or ''."""
    if not history:
        return ""
    return f"{history}#{anchor(suite, case, metric)}"


def _thresholds(a: Analysis, suite: str, history: str | None = None) -> list[dict]:
    return [
        {
            "history": history_link(history, suite, t.case, t.metric),
            "case": t.case,
            "metric": t.metric,
            "claimed": display.claimed_text(t) or "-",
            "threshold": display.threshold_text(t.threshold),
            "measured": display.describe(t.summary),
            "verdict": t.verdict.value,
            "css": display.css_class(t.verdict),
            "detail": t.detail or display.noisy_text(t.summary),
            "reason": t.threshold.reason,
            "anchor": f"claim-{t.claim_id}" if t.claim_id else "",
        }
        for t in a.thresholds
        if t.suite == suite
    ]


def _control_cells(k) -> tuple[list[str], list[str]]:
    """Each control of a check in words, and what it measured (one line each, kind first); a
    control that cannot exist is shown with its reason, the reference cross-check last."""
    chk = k.check
    control, outcome = [], []
    for label, why in (("instrument", chk.no_instrument), ("mechanism off", chk.no_mechanism_off)):
        if why:
            control.append(f"{label}: none, {why}")
            outcome.append(f"{label}: -")
    if k.reference is not None:
        ref = k.reference.reference
        control.append(f"reference: {ref.text} ({chk.metric} within {display.fmt(ref.tolerance)} of {ref.metric})")
        outcome.append(
            "reference: not measured"
            if k.reference.agrees is None
            else f"reference: {display.fmt(k.reference.summary.median)}: "
            + ("agrees" if k.reference.agrees else "DISAGREES")
        )
    if not k.controls and not control:
        return ["none"], ["-"]
    for r in k.controls:
        ctl = r.control
        control.append(f"{ctl.label}: {ctl.text} ({display.control_text(ctl)})")
        if r.held is None:
            outcome.append(f"{ctl.label}: not measured")
        else:
            outcome.append(
                f"{ctl.label}: {display.fmt(r.summary.median)} {r.summary.unit} vs {display.fmt(r.reference)}: "
                + ("held" if r.held else "did NOT hold")
            )
    return control, outcome


def _claims(a: Analysis, history: str | None = None) -> list[dict]:
    out = []
    for cv in a.claims:
        checks = []
        for k in cv.checks:
            control, control_outcome = _control_cells(k)
            checks.append(
                {
                    "check": display.check_text(k.check),
                    "measured": display.describe(k.summary),
                    "controls": list(zip(control, control_outcome)),
                    "held": k.control_held,
                    "verdict": k.outcome.value,
                    "css": display.css_class(k.outcome),
                    "reason": k.reason,
                    "band_reason": k.check.band_reason,
                    "observed": k.check.observed,
                    "where": f"{k.check.suite} / {k.check.case}",
                    "history": history_link(history, k.check.suite, k.check.case, k.check.metric),
                }
            )
        out.append(
            {
                "id": cv.id,
                "section": cv.claim.section,
                "text": cv.claim.text,
                "verdict": cv.outcome.value,
                "css": display.css_class(cv.outcome),
                "note": cv.note,
                "differs": cv.claim.differs,
                "checks": checks,
            }
        )
    return out


def one_line(text: str, limit: int, sentence: bool = False) -> str:
    """A text cut to `limit` characters at a word (to its first sentence first when
    `sentence`), for a board cell; the whole text is in the claim's section."""
    text = " ".join(str(text or "").split())
    if sentence:
        text = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " \u2026"


def _board(a: Analysis, changed: list[dict] | None = None) -> list[dict]:
    """The verdict board: one row per claim, in the ledger's order (with a baseline, the
    claims whose verdict changed first, regressions first); the deciding check's claimed and
    measured values; the long text stays in the claim's section."""
    was = {c["id"]: c for c in changed or []}
    rows = []
    for cv in a.claims:
        k = deciding_check(cv)
        measured = display.describe(k.summary) if k is not None else "-"
        if k is not None and k.summary is not None and len(k.summary.values) > 1 and k.summary.spread != float("inf"):
            measured += f", spread {k.summary.spread:.0%}"
        more = len(cv.checks) - 1
        c = was.get(cv.id)
        rows.append(
            {
                "id": cv.id,
                "text": one_line(cv.claim.text, 110, sentence=True),
                "verdict": cv.outcome.value,
                "css": display.css_class(cv.outcome),
                "section": cv.claim.section,
                "claimed": one_line(display.check_text(k.check).split(" (")[0], 60)
                if k is not None
                else "not measurable",
                "measured": measured,
                "more": f"+{more} more check{'s' * (more > 1)}" if more > 0 else "",
                "reason": one_line((k.reason if k is not None else "") or cv.note, 120),
                "was": (
                    f"{c['kind']}, was {c['before']}"
                    if c and c["kind"] in ("regressed", "recovered")
                    else f"was {c['before']}"
                    if c
                    else ""
                ),
            }
        )
    order = [c["id"] for c in changed or []]
    return sorted(rows, key=lambda r: order.index(r["id"]) if r["id"] in order else len(order))


def _changed(changed: list[dict] | None, comparison: list[dict] | None) -> dict | None:
    """What changed since the baseline: a line for the report's top (the claims whose verdict
    changed, by kind; the metrics that regressed) and the tables after the board."""
    if changed is None and comparison is None:
        return None
    regressions = [r for r in comparison or [] if r.get("regression")]
    kinds: dict[str, list[str]] = {}
    for c in changed or []:
        kinds.setdefault(c["kind"], []).append(c["id"])
    return {
        "verdicts": [
            {
                **c,
                "reason": one_line(c.get("reason", ""), 130),
                "css_before": display.css_class(c["before"]),
                "css_after": display.css_class(c["after"]),
            }
            for c in changed or []
        ],
        "kinds": [(k, ", ".join(ids)) for k, ids in kinds.items()],
        "regressions": regressions,
    }


def _monitoring(run: RunData) -> dict | None:
    """The telemetry section; a block damaged in results.json (an edited file) is shown as
    such, with the rest of the report."""
    mon = run.monitoring
    if not isinstance(mon, dict):
        return None
    try:
        return _monitoring_section(mon)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as e:
        return {
            "status": "damaged",
            "charts": [],
            "tables": [],
            "reason": f"results.json's monitoring block is malformed ({type(e).__name__}); re-run the suites",
        }


def _monitoring_section(mon: dict) -> dict:
    blocks = monitoring_view.blocks(mon) if mon.get("status") == "ok" else []
    legacy_charts = [
        views.Chart(c.get("title", ""), c.get("series", []), c.get("x_label", ""), c.get("y_label", ""))
        for c in mon.get("charts", [])
    ]
    return {
        "status": mon.get("status", ""),
        "reason": mon.get("reason", ""),
        "charts": [svg(b) for b in blocks if isinstance(b, views.Chart)] + [svg(c) for c in legacy_charts],
        "tables": [_table(b) for b in blocks if isinstance(b, views.Table)]
        + [
            {
                "title": t.get("title", ""),
                "columns": t.get("columns", []),
                "note": "",
                "rows": [[_cell(c) for c in r] for r in t.get("rows", [])],
            }
            for t in mon.get("tables", [])
        ],
    }


def build_context(
    run: RunData,
    a: Analysis,
    comparison: list[dict] | None = None,
    history: str | None = None,
    changed: list[dict] | None = None,
) -> dict:
    check_history_location(history)
    man = run.manifest
    counts = a.counts()
    interrupted = run.interrupted
    run_id = man.run_id or run.run_dir.name
    duration = man.duration_s
    return {
        "title": f"Cache reproduction report - {run_id}",
        "csp": CSP,
        "run_id": run_id,
        "profile": man.profile,
        "target": man.target,
        "started": time_text(man.started),
        "ended": time_text(man.ended),
        "duration": f"{duration:.0f} s" if duration is not None else "-",
        "exit_code": a.exit_code,
        "exit_reason": a.exit_reason,
        "counts": {v.value: n for v, n in counts.items()},
        "suites": [_suite_context(run, a, name, srun, history) for name, srun in run.suites.items()],
        "claims": _claims(a, history),
        "pack": _pack_context(man),
        **_machine_context(man),
        "monitoring": _monitoring(run),
        "comparison": comparison,
        "board": _board(a, changed),
        "changed": _changed(changed, comparison),
        "identity": _identity(man),
        "machine_load": machine_load.header_line([r.machine_load for r in run.records if r.machine_load]),
        "interrupted": None
        if not interrupted
        else {
            "at": time_text(interrupted.get("at")),
            "case": interrupted.get("case", ""),
            "signal": interrupted.get("signal", ""),
        },
        "hosts": man.hosts,
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _suite_context(run: RunData, a: Analysis, name: str, srun, history: str | None) -> dict:
    blocks = views.build(run, a, name)
    cases = [_case_context(run, a, name, c, [b for b in blocks if b.case == c.name]) for c in srun.cases]
    suite_blocks = [b for b in blocks if not b.case]
    return {
        "name": name,
        "description": srun.description,
        "claim": srun.claim,
        "profile": srun.profile,
        "profile_description": srun.profile_description,
        "repetitions": srun.repetitions,
        "conditions": srun.conditions,
        "fewer": [f"{c.name} {srun.reps(c)}" for c in srun.cases if srun.reps(c) != srun.repetitions],
        "thresholds": _thresholds(a, name, history),
        "cases": cases,
        "charts": [svg(b) for b in suite_blocks if isinstance(b, views.Chart)],
        "tables": [_table(b) for b in suite_blocks if isinstance(b, views.Table)],
    }


def _case_context(run: RunData, a: Analysis, name: str, c, own: list) -> dict:
    cs = a.case_status(name, c.name)
    recs = [r for r in run.records if r.suite == name and r.case == c.name]
    own = own or _legacy_blocks(run, name, c.name)
    return {
        "name": c.name,
        "driver": c.driver,
        "description": c.description,
        "params": ", ".join(f"{k}={v}" for k, v in c.params.items()),
        "statuses": ", ".join(f"{n} {k}" for k, n in (cs.statuses.items() if cs else [])) or "not run",
        "reasons": cs.reasons if cs else [],
        "metrics": [
            {
                "name": m.metric,
                "median": display.fmt(m.median),
                "min": display.fmt(m.min),
                "max": display.fmt(m.max),
                "unit": m.unit,
                "n": len(m.values),
                "spread": f"{m.spread * 100:.1f}%" if m.spread != float("inf") else "inf",
                "noisy": m.noisy,
                "note": m.note,
            }
            for m in a.metrics
            if m.suite == name and m.case == c.name
        ],
        "percentile_charts": percentile_charts(a, name, c.name),
        "charts": [svg(b) for b in own if isinstance(b, views.Chart)],
        "tables": [_table(b) for b in own if isinstance(b, views.Table)],
        "servers": _server_summary(run, name, c.name),
        "raw": sorted({f for r in recs for f in r.raw_files if _inside_run(f)}),
        "hosts": sorted({str(r.details.get("ran_on")) for r in recs if r.details.get("ran_on")}),
        # a load tool's stand-in that replays recorded real output says so (the lab in a box's memtier)
        "replayed": sorted(
            {str(line) for r in recs if isinstance(r.details.get("replayed"), list) for line in r.details["replayed"]}
        ),
    }


SAFE_URL = re.compile(r"^https://[A-Za-z0-9.-]+(/[^\s<>\"'\\]*)?$")


def _pack_context(man: Manifest) -> dict | None:
    """The claim pack a run judged, for the first screen: its name, title and source (a link
    only to an https:// address; every text bounded: the manifest is a stored file)."""
    pack = man.pack
    if not pack:
        return None
    given = pack.get("source")
    src: dict = given if isinstance(given, dict) else {}
    url: str = src["url"] if isinstance(src.get("url"), str) else ""
    quotes = [q for q in src.get("quotes") or [] if isinstance(q, dict)][:5]
    return {
        "name": for_html(str(pack.get("name", "?")), 60),
        "title": for_html(str(pack.get("title", "")), 300),
        "source_title": for_html(str(src.get("title", "")), 300),
        "url": url if SAFE_URL.match(url) and len(url) <= 500 else "",
        "no_url": for_html(str(src.get("no_url", "")), 300),
        "quotes": [(for_html(str(q.get("text", "")), 400), for_html(str(q.get("where", "")), 100)) for q in quotes],
    }


def _machine_context(man: Manifest) -> dict:
    """The report's environment section: host, GPU, revision, pins, tools, packages, servers."""
    host, git = man.host, man.git
    env = [
        ("CPU", f"{host.get('cpu_model', '?')} ({host.get('cpu_logical', '?')} logical cores)"),
        ("Memory", f"{host.get('memory_total_gib', '?')} GiB"),
        ("Kernel", host.get("kernel", "?")),
        ("Python", host.get("python", "?")),
        ("GPU", gpu_line(man.gpu)),
        ("Git revision", f"{git.get('revision', '?')}{' (uncommitted changes)' if git.get('dirty') else ''}"),
        ("Pinned versions", _constraints_line(man.get("constraints"))),
    ]
    tools = [
        (k, (v or {}).get("version") or (v or {}).get("missing") or "-")
        for k, v in man.tools.items()
        if isinstance(v, dict)
    ]
    packages = [(k, v or "not installed") for k, v in man.packages.items()]
    servers = [
        (k, v.get("redis_version") or v.get("error"), v.get("role") or "")
        for k, v in man.servers.items()
        if isinstance(v, dict)
    ]
    return {"env": env, "tools": tools, "packages": packages, "servers": servers}


def _identity(man: Manifest) -> str:
    """The run's machine in one line: CPU and cores, GPU, revision."""
    host, git = man.host, man.git
    rev = str(git.get("revision") or "?")[:10] + (" (uncommitted changes)" if git.get("dirty") else "")
    gpu = gpu_line(man.gpu) if man.gpu.get("present") else "no GPU"
    return (
        f"{host.get('cpu_model', '?')}, {host.get('cpu_logical', '?')} logical cores, "
        f"{host.get('memory_total_gib', '?')} GiB; {gpu}; revision {rev}"
    )


def _constraints_line(c) -> str:
    """constraints.txt as the manifest recorded it: its digest and what was not installed as pinned."""
    if not isinstance(c, dict):
        return "not recorded"
    if not c.get("sha256"):
        return c.get("missing") or "no constraints file"
    head = f"{c.get('file', 'constraints.txt')} (sha256 {str(c['sha256'])[:12]})"
    differs = c.get("differs") or {}
    if not differs:
        return head + ": every package installed as pinned"
    return (
        head
        + f": {c.get('differs_count', len(differs))} not as pinned: "
        + "; ".join(f"{k} {v}" for k, v in list(differs.items())[:5])
    )


def gpu_line(gpu: dict) -> str:
    if not gpu.get("present"):
        return gpu.get("reason") or "no GPU"
    return (
        "; ".join(f"{g.get('name')} ({g.get('memory_total_mib')} MiB)" for g in gpu.get("gpus", []))
        + f", driver {gpu.get('driver', '?')}"
    )


def _finalize(value):
    """Every value a template prints, before Jinja escapes it: text (from a results folder,
    a server, a manifest) is bounded and its control characters and lone surrogates shown
    as escapes, so that a 7 MB name is not a 7 MB field and the page is always UTF-8;
    markup the harness built (Markup: charts, the style sheet) and numbers are kept."""
    if value is None or isinstance(value, (Markup, bool, int, float)):
        return value
    return for_html(value, BLOCK)


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters["fmt"] = display.fmt
    return env


def render_html(
    run: RunData,
    a: Analysis,
    comparison: list[dict] | None = None,
    history: str | None = None,
    changed: list[dict] | None = None,
) -> str:
    env = _env()
    css = (TEMPLATES_DIR / "report.css").read_text()
    return env.get_template("report.html.j2").render(
        css=Markup(css), pass_verdict=Verdict.PASS.value, **build_context(run, a, comparison, history, changed)
    )


def render_report(
    run: RunData,
    a: Analysis,
    comparison: list[dict] | None = None,
    out: Path | None = None,
    history: str | None = None,
    changed: list[dict] | None = None,
) -> Path:
    """report.html; `changed`: the claims whose verdict changed since the baseline (harness.verdict.verdicts_json.changes)."""
    out = out or run.run_dir / REPORT_NAME
    write_atomic(out, render_html(run, a, comparison, history, changed))  # never through a link left in the folder
    return out
