"""What a case calls to get its engine: the endpoint, or the reason there is none."""

from __future__ import annotations

import json
from pathlib import Path

from harness.base.errors import EnvironmentProblem
from harness.infra.serving_engine.metrics import alive
from harness.infra.target import LlmEndpoint, Target


def require_engine(target: Target, name: str, raw_dir: Path | None = None, check: bool = True) -> LlmEndpoint:
    """`target.engines[name]`, or the user's server ("external") when the run measures one;
    EnvironmentProblem (the case fails, the run goes on) when the run has neither, saying
    why (the start problem recorded in RUN/engine/<name>/engine.json when `raw_dir`, the
    case's raw folder RUN/raw/SUITE/CASE/repN, is given), or when it does not answer."""
    ep = target.engines.get(name) or target.engines.get("external")
    if ep is None:
        why = _recorded_problem(raw_dir, name) if raw_dir is not None else None
        raise EnvironmentProblem(
            f"no serving engine {name!r} in this run"
            + (f": {why}" if why else "; the run's log says why it did not start")
        )
    problem = alive(ep) if check else None
    if problem:
        raise EnvironmentProblem(problem)
    return ep


def _recorded_problem(raw_dir: Path, name: str) -> str | None:
    try:
        run_dir = Path(raw_dir).resolve().parents[3]
        rec = json.loads((run_dir / "engine" / name / "engine.json").read_text())
    except (OSError, ValueError, IndexError):
        return None
    return rec.get("start_problem") or rec.get("died") if isinstance(rec, dict) else None
