"""Builds the report's data from a results folder and renders reports/templates/report.html.j2.

The template receives computed data only (strings, numbers, lists); charts arrive as
ready SVG markup. The report never re-runs anything.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from harness.analysis import Analysis, fmt
from harness.paths import REPORTS_DIR
from harness.report.svg import chart
from harness.results import RunData

PCT = re.compile(r"^(?P<cmd>.+)\.p(?P<q>\d+(?:\.\d+)?)_(?P<unit>ms|us|s)$")
REPORT_NAME = "report.html"


def _time(ts) -> str:
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def percentile_charts(a: Analysis, suite: str, case: str) -> list[Markup]:
    series: dict[tuple, list] = {}
    for m in a.metrics:
        if m.suite != suite or m.case != case:
            continue
        mt = PCT.match(m.metric)
        if mt:
            series.setdefault((mt["unit"],), []).append((mt["cmd"], float(mt["q"]), m.median))
    out = []
    for (unit,), rows in series.items():
        by_cmd: dict[str, list] = {}
        for cmd, q, v in sorted(rows, key=lambda r: r[1]):
            by_cmd.setdefault(cmd, []).append([f"p{q:g}", v])
        if sum(len(v) for v in by_cmd.values()) < 2:
            continue
        out.append(Markup(chart(f"{case}: latency percentiles (median of repetitions)",
                                [{"name": k, "points": v} for k, v in by_cmd.items()],
                                "percentile", unit, kind="line")))
    return out


def _detail_blocks(run: RunData, suite: str, case: str) -> dict:
    """Tables and charts an experiment attached, from its last ok repetition."""
    recs = [r for r in run.records if r.suite == suite and r.case == case and r.status == "ok"]
    if not recs:
        return {"tables": [], "charts": [], "repetition": None}
    r = recs[-1]
    tables = []
    for t in r.details.get("tables", []):
        tables.append({"title": t.get("title", ""), "columns": t.get("columns", []), "note": t.get("note", ""),
                       "rows": [[fmt(c) if isinstance(c, float) else c for c in row] for row in t.get("rows", [])]})
    charts = [Markup(chart(c.get("title", ""), c.get("series", []), c.get("x_label", ""), c.get("y_label", ""),
                           c.get("kind", "line"), c.get("x_log", False), c.get("y_log", False)))
              for c in r.details.get("charts", [])]
    return {"tables": tables, "charts": charts, "repetition": r.repetition}


def _server_summary(run: RunData, suite: str, case: str) -> list[dict]:
    recs = [r for r in run.records if r.suite == suite and r.case == case and r.details.get("server_info")]
    if not recs:
        return []
    rows = []
    for addr, s in recs[-1].details["server_info"].items():
        if "error" in s:
            rows.append({"node": addr, "role": "-", "commands": s["error"], "hits": "", "misses": "", "evicted": "", "memory": ""})
            continue
        rows.append({"node": addr, "role": s.get("role") or "-", "commands": f"{s.get('total_commands_processed', 0):,}",
                     "hits": f"{s.get('keyspace_hits', 0):,}", "misses": f"{s.get('keyspace_misses', 0):,}",
                     "evicted": f"{s.get('evicted_keys', 0):,}",
                     "memory": f"{s.get('used_memory', 0) / 2**20:.1f} MiB"})
    return rows


def build_context(run: RunData, a: Analysis, comparison: list[dict] | None = None) -> dict:
    man = run.manifest
    counts = {k: sum(t.verdict == k for t in a.thresholds) for k in ("pass", "fail", "missing", "skipped")}
    suites = []
    for name, spec in run.suites.items():
        cases = []
        for c in spec.get("cases", []):
            cs = a.case_status(name, c["name"])
            recs = [r for r in run.records if r.suite == name and r.case == c["name"]]
            cases.append({
                "name": c["name"], "driver": c["driver"], "description": c.get("description", ""),
                "params": ", ".join(f"{k}={v}" for k, v in c.get("params", {}).items()),
                "statuses": ", ".join(f"{n} {k}" for k, n in (cs.statuses.items() if cs else [])) or "not run",
                "reasons": cs.reasons if cs else [],
                "metrics": [m for m in a.metrics if m.suite == name and m.case == c["name"]],
                "percentile_charts": percentile_charts(a, name, c["name"]),
                "details": _detail_blocks(run, name, c["name"]),
                "servers": _server_summary(run, name, c["name"]),
                "raw": sorted({f for r in recs for f in r.raw_files}),
            })
        suites.append({"name": name, "description": spec.get("description", ""), "claim": spec.get("claim", {}),
                       "profile": spec.get("profile"), "profile_description": spec.get("profile_description", ""),
                       "repetitions": spec.get("repetitions"),
                       "thresholds": [t for t in a.thresholds if t.suite == name], "cases": cases})
    host = man.get("host", {})
    env = [("CPU", f"{host.get('cpu_model', '?')} ({host.get('cpu_logical', '?')} logical cores)"),
           ("Memory", f"{host.get('memory_total_gib', '?')} GiB"), ("Kernel", host.get("kernel", "?")),
           ("Python", host.get("python", "?")),
           ("GPU", _gpu_line(man.get("gpu", {}))),
           ("Git revision", f"{man.get('git', {}).get('revision', '?')}{' (uncommitted changes)' if man.get('git', {}).get('dirty') else ''}")]
    tools = [(k, v.get("version") or v.get("missing") or "-") for k, v in man.get("tools", {}).items()]
    packages = [(k, v or "not installed") for k, v in man.get("packages", {}).items()]
    servers = [(k, v.get("redis_version") or v.get("error"), v.get("role") or "") for k, v in man.get("servers", {}).items()]
    mon = man.get("monitoring")
    monitoring = None
    if mon is not None:
        monitoring = {"status": mon.get("status", ""), "reason": mon.get("reason", ""),
                      "charts": [Markup(chart(c.get("title", ""), c.get("series", []), c.get("x_label", ""),
                                              c.get("y_label", ""), c.get("kind", "line")))
                                 for c in mon.get("charts", [])],
                      "tables": mon.get("tables", [])}
    return {
        "title": f"Cache reproduction report - {man.get('run_id', run.run_dir.name)}",
        "run_id": man.get("run_id", run.run_dir.name), "profile": man.get("profile"),
        "target": man.get("target"), "started": _time(man.get("started")), "ended": _time(man.get("ended")),
        "duration": f"{(man.get('ended') or 0) - (man.get('started') or 0):.0f} s" if man.get("ended") else "-",
        "exit_code": a.exit_code, "exit_reason": a.exit_reason, "counts": counts, "suites": suites,
        "claims": a.claims, "env": env, "tools": tools, "packages": packages, "servers": servers,
        "monitoring": monitoring, "comparison": comparison,
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _gpu_line(gpu: dict) -> str:
    if not gpu.get("present"):
        return gpu.get("reason") or "no GPU"
    return "; ".join(f"{g['name']} ({g['memory_total_mib']} MiB)" for g in gpu.get("gpus", [])) + \
        f", driver {gpu.get('driver', '?')}"


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(REPORTS_DIR / "templates")),
                      autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = fmt
    return env


def render_html(run: RunData, a: Analysis, comparison: list[dict] | None = None) -> str:
    env = _env()
    css = (REPORTS_DIR / "templates" / "report.css").read_text()
    return env.get_template("report.html.j2").render(css=Markup(css), **build_context(run, a, comparison))


def render_report(run: RunData, a: Analysis, comparison: list[dict] | None = None,
                  out: Path | None = None) -> Path:
    out = out or run.run_dir / REPORT_NAME
    out.write_text(render_html(run, a, comparison))
    return out


def escape(s: str) -> str:
    return html.escape(s)
