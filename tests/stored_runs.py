"""Synthetic stored runs written through the real results writer (harness.model.stored_run), for the
history, compare and benchmark tests: N results folders under one root, each with the
real manifest of this machine and records whose values are known."""

from __future__ import annotations

import random
from pathlib import Path

from harness.infra import machine_facts as manifest
from harness.model.spec import SuiteRun
from harness.model.stored_run import Metric, Record, write_manifest, write_results

METRICS = {  # name: (level, unit, better)
    "get.rps": (100000.0, "req/s", "higher"),
    "get.p99_ms": (1.2, "ms", "lower"),
    "set.rps": (90000.0, "req/s", "higher"),
}
_FACTS = None


def facts() -> dict:
    global _FACTS
    if _FACTS is None:
        _FACTS = manifest.collect_all()
    return _FACTS


def suite_run(cases=("bench",), params=None) -> SuiteRun:
    return SuiteRun.from_json(
        "kv",
        {
            "cases": [{"name": c, "driver": "d", "params": params or {}} for c in cases],
            "thresholds": [
                {"case": cases[0], "metric": "get.rps", "op": ">=", "value": 50000, "unit": "req/s", "reason": "r"}
            ],
        },
    )


def write_run(
    root: Path,
    i: int,
    values: dict[str, list[float]],
    *,
    profile="local",
    started=None,
    case="bench",
    units=None,
    man_extra=None,
    params=None,
) -> Path:
    d = root / f"2026010{i // 10}-{i % 10:02d}0000-run{i:03d}"
    (d / "raw").mkdir(parents=True)
    man = {
        "run_id": d.name,
        "profile": profile,
        "target": "local",
        "suites": ["kv"],
        "started": started if started is not None else 1_767_225_600 + i * 86400,
        "ended": None,
        **facts(),
        **(man_extra or {}),
    }
    man["ended"] = man["started"] + 60
    write_manifest(d, man)
    reps = len(next(iter(values.values())))
    recs = []
    for rep in range(reps):
        ms = {}
        for k, vs in values.items():
            unit, better = (units or METRICS).get(k, ("", None))[1:] if k in (units or METRICS) else ("", None)
            ms[k] = Metric(vs[rep], unit, better)
        recs.append(Record(suite="kv", case=case, repetition=rep + 1, metrics=ms))
    write_results(d, recs, {"kv": suite_run((case,), params)}, [])
    return d


def noisy_values(level: float, rnd: random.Random, rel=0.01, reps=3) -> list[float]:
    return [level * (1 + rnd.gauss(0, rel)) for _ in range(reps)]


def write_series(
    root: Path, n: int, *, step_metric=None, step_at=None, step=0.0, seed=1, rel=0.01, last_only=False
) -> list[Path]:
    """n runs of METRICS with ~rel noise; from run step_at on (or only the last run when
    last_only) step_metric is multiplied by (1 + step)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        vals = {}
        for k, (level, _, _) in METRICS.items():
            hit = k == step_metric and ((i == n - 1) if last_only else (step_at is not None and i >= step_at))
            vals[k] = noisy_values(level * (1 + step) if hit else level, rnd, rel)
        out.append(write_run(root, i, vals))
    return out
