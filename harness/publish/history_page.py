"""Renders the history page (harness/publish/templates/history.html.j2) from harness.verdict.metric_history's data:
one chart per metric (per-run median with min-max whiskers, the threshold, the fitted
levels), its steps, and the runs with their annotations. Inline SVG only, the report's
Content-Security-Policy, every string escaped (Jinja autoescape; svg.py uses format.esc)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from markupsafe import Markup

from harness.base.files import write_atomic
from harness.base.paths import TEMPLATES_DIR
from harness.publish.render import CSP, _env
from harness.publish.svg import chart
from harness.verdict import display
from harness.verdict.metric_history import (
    HISTORY_HTML,
    HISTORY_JSON,
    build_history,
    level_points,
    out_folder,
    select_runs,
    write_history_json,
)

THRESHOLD_NAME = "threshold"


def metric_chart(h: dict) -> Markup:
    series = [
        {"name": "median (min-max)", "points": [[p["run"], p["median"], p["min"], p["max"]] for p in h["points"]]}
    ]
    if h["thresholds"]:
        t = h["thresholds"]
        series.append(
            {
                "name": f"{THRESHOLD_NAME} {t[-1]['op']} {display.fmt(t[-1]['value'])}",
                "points": [[x["run"], x["value"]] for x in t],
            }
        )
    if h["steps"]:
        series.append({"name": "fitted level", "points": level_points(h)})
    title = f"{h['suite']} / {h['case']}: {h['metric']}"
    return Markup(chart(title, series, "run", h["unit"] or "value"))


def _step_text(h: dict, s: dict) -> str:
    change = "" if s["change"] is None else f" ({s['change']:+.1%})"
    return (
        f"run {s['run']} ({s['date']}, {s['revision'][:10]}): {display.fmt(s['before'])} -> {display.fmt(s['after'])} "
        f"{h['unit']}{change}, p = {s['p']:.3f}"
    ).replace("  ", " ")


def changed_params(runs: list[dict]) -> list[str]:
    """Per run, the case parameters that are not the same in every run ('' when none):
    a step often has its reason here (a changed workload, not a changed system)."""
    cases = sorted({c for r in runs for c in (r.get("params") or {})})
    varying = []  # (case, parameter) whose value differs between the runs that ran the case: found once
    for c in cases:
        having = [(x.get("params") or {}).get(c) or {} for x in runs if c in (x.get("params") or {})]
        keys = sorted({k for p in having for k in p}, key=str)
        varying += [(c, k) for k in keys if len({repr(p.get(k)) for p in having}) > 1]
    out = []
    for r in runs:
        params = r.get("params") or {}
        out.append("; ".join(f"{c} {k}={(params.get(c) or {}).get(k)!r}" for c, k in varying if c in params))
    return out


def build_context(data: dict, root: str) -> dict:
    runs = data["runs"]
    # annotate only what varies: a version that never changed is one line, not a column
    keys = sorted({k for r in runs for k in r["versions"]})
    varying = [k for k in keys if len({r["versions"].get(k) for r in runs}) > 1]
    constant = [(k, runs[-1]["versions"].get(k)) for k in keys if k not in varying]
    changed = changed_params(runs)
    rows = [
        {
            "index": r["index"],
            "date": r["date"],
            "run_id": r["run_id"],
            "revision": r["revision"][:10] + (" (dirty)" if r["dirty"] else ""),
            "profile": r["profile"],
            "host": r["host"],
            "hostname": r["hostname"],
            "versions": ", ".join(f"{k} {r['versions'].get(k) or '-'}" for k in varying),
            "params": changed[i],
        }
        for i, r in enumerate(runs)
    ]
    groups: dict[tuple, list] = {}
    steps = []
    for h in data["metrics"]:
        item = {
            "anchor": h["anchor"],
            "metric": h["metric"],
            "chart": metric_chart(h),
            "steps": [
                {
                    "text": _step_text(h, s),
                    "kind": s["kind"],
                    "css": {"regression": "v-fail", "improvement": "v-pass"}.get(s["kind"], "v-skipped"),
                }
                for s in h["steps"]
            ],
        }
        groups.setdefault((h["suite"], h["case"]), []).append(item)
        for s in item["steps"]:
            steps.append({**s, "anchor": h["anchor"], "where": f"{h['suite']} / {h['case']}: {h['metric']}"})
    return {
        "title": f"Metric history - {len(runs)} runs",
        "csp": CSP,
        "root": root,
        "runs": rows,
        "varying": varying,
        "constant": constant,
        "steps": steps,
        "any_params": any(changed),
        "groups": [
            {"suite": s, "case": c, "id": f"g-{i}", "metrics": ms}
            for i, ((s, c), ms) in enumerate(sorted(groups.items()))
        ],
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def render_history(data: dict, root: str) -> str:
    css = (TEMPLATES_DIR / "report.css").read_text()
    return _env().get_template("history.html.j2").render(css=Markup(css), **build_context(data, root))


def write_history(
    root: Path, out_dir: Path | None = None, last: int | None = None, log=None, profile: str | None = None
) -> tuple[Path, Path]:
    """`harness history`: history.html and history.json of one profile's runs under `root`
    (see harness.verdict.metric_history.select_runs)."""
    data = build_history(select_runs(Path(root), last, log, profile))
    out_dir = out_folder(Path(out_dir or root), given=out_dir is not None)
    html, js = out_dir / HISTORY_HTML, out_dir / HISTORY_JSON
    write_history_json(js, data)
    write_atomic(html, render_history(data, str(Path(root))))
    return html, js
