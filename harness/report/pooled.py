"""Pooled tail percentiles of memtier runs: the P50/P99/P99.9 of every request of every
repetition (memtier's HDR histograms merged, harness.tools.memtier.pooled_percentiles),
beside the median (min-max) of the per-repetition percentiles. Read from the raw
memtier*.json files the repetitions kept; a report block, computed when the report is
rendered (nothing is re-run)."""

from __future__ import annotations

import json
from pathlib import Path

from harness import stats
from harness.report import views
from harness.results import RunData

QS = (50, 99, 99.9)
KINDS = ("Totals", "Gets", "Sets")


def _histograms(path: Path) -> dict[str, str]:
    from harness.tools.memtier import parse_json

    try:
        data = json.loads(path.read_text(errors="replace"))
    except (OSError, json.JSONDecodeError):
        return {}
    return parse_json(data).histograms if isinstance(data, dict) else {}


def pooled_rows(run: RunData, suite: str, case: str) -> dict[str, list]:
    """{raw file name: rows [kind, repetitions, requests, (median, min, max) per q, pooled per q]}."""
    from harness.tools.memtier import pooled_percentiles

    files: dict[str, list[Path]] = {}
    for r in run.ok_records(suite, case):
        for f in r.raw_files:
            name = Path(f).name
            if name.startswith("memtier") and name.endswith(".json"):
                files.setdefault(name, []).append(run.run_dir / f)
    out: dict[str, list] = {}
    for name, paths in sorted(files.items()):
        per_file = [_histograms(p) for p in paths]
        rows = []
        for kind in KINDS:
            enc = [h[kind] for h in per_file if kind in h]
            if not enc:
                continue
            try:
                per_run = [pooled_percentiles([e], QS)[0] for e in enc]
                pooled, n = pooled_percentiles(enc, QS)
            except ValueError:
                continue
            per_run = [p for p in per_run if p]
            if not pooled or not per_run:
                continue
            row = [kind, len(per_run), n]
            for q in QS:
                vals = [p[q] for p in per_run]
                row.append((stats.median(vals), min(vals), max(vals)) if len(vals) > 1 else vals[0])
            row += [pooled[q] for q in QS]
            rows.append(row)
        if rows:
            out[name] = rows
    return out


def pooled_tables(run: RunData, suite: str, case: str) -> list[views.Table]:
    cols = (["rows", "repetitions", "requests"] + [f"P{q:g} median of runs (ms)" for q in QS]
            + [f"P{q:g} pooled (ms)" for q in QS])
    return [views.Table(f"{case}: {name} latency percentiles, pooled over repetitions", cols, rows,
                        "pooled: memtier's HDR histograms of every repetition merged (every request counted once); "
                        "median of runs: the median (min-max) of each repetition's own percentile", case)
            for name, rows in pooled_rows(run, suite, case).items()]
