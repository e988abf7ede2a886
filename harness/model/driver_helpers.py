"""Small helpers every experiment uses, so that drivers do not repeat them: one CSV
writer for raw files, one way to pin torch's threads, one set of latency percentiles."""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path
from typing import Iterable

from harness.base import stats
from harness.model.stored_run import Metric


def write_csv(path: Path, header: list[str], rows: Iterable[Iterable]) -> Path:
    """A raw CSV file (header first); returns its path."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


@contextlib.contextmanager
def torch_threads(n: int):
    """torch.set_num_threads(n) for the block (n = 0: leave torch's default), restored after."""
    if not n:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def latency_metrics(
    prefix: str, values_ms: list[float], qs: Iterable[float] = (50, 95, 99), note: str = "", unit: str = "ms"
) -> dict[str, Metric]:
    """{prefix}.p50_ms, ... of a latency sample (numpy's linear percentiles); empty when no values."""
    if not values_ms:
        return {}
    return {f"{prefix}.p{q:g}_{unit}": Metric(stats.percentile(values_ms, q), unit, "lower", note) for q in qs}
