"""Helpers shared by the semantic-cache drivers: parameters, dataset checks, timing."""

from __future__ import annotations

import contextlib
import json

import numpy as np

from harness.drivers import Metric, Param
from harness.errors import BadInput
from harness.experiments.semantic_cache import datasets

KEY_PATTERNS = ("hash_*", "hashn_*", "sem_*", "semb*", "semnn_*", "tpl_*", "tplsem_*")


def dataset_params() -> dict[str, Param]:
    return {
        "dataset": Param(str, datasets.DEFAULT_DATASET,
                         "path of the data: GPTCache .json, .jsonl {query, group} or .tsv sentence1/sentence2/label"),
        "dataset_format": Param(str, "auto", "auto (by extension), gptcache, groups or pairs", datasets.FORMATS),
        "insert_fraction": Param(float, 0.5, "share of origins (groups) put into the cache; the rest must miss"),
        "split_seed": Param(int, 0, "seed of the choice of inserted origins"),
        "torch_threads": Param(int, 0, "torch.set_num_threads for the model work of this case (0 = torch's "
                                       "default; single-query timings then use 1 thread)"),
    }


def check_dataset(where: str, p: dict) -> None:
    """Validate-time check: the dataset loads (missing file, wrong columns, empty file)."""
    if not 0 < p["insert_fraction"] <= 1:
        raise BadInput(f"{where}.insert_fraction: must be in (0, 1], got {p['insert_fraction']}")
    try:
        datasets.load(p["dataset"], p["dataset_format"])
    except BadInput as e:
        raise BadInput(f"{where}.dataset: {e}") from None


@contextlib.contextmanager
def torch_threads(n: int):
    """Set torch's intra-op threads for a block (0 = unchanged). On a shared 2-core host one
    thread avoids OpenMP spin-waiting against other processes (measured 10x on single queries)."""
    if n <= 0:
        yield
        return
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def pct_metrics(prefix: str, ms: list[float], note: str = "") -> dict[str, Metric]:
    a = np.asarray(ms, dtype=float)
    return {f"{prefix}.{q}_ms": Metric(float(np.percentile(a, v)), "ms", "lower", note)
            for q, v in (("p50", 50), ("p95", 95), ("p99", 99))}


def clear_patterns(target) -> int:
    """Delete keys of this experiment's patterns on every primary (left by an earlier,
    interrupted run; they would otherwise answer lookups)."""
    n = 0
    for node in target.primaries:
        c = target.client(node)
        for pat in KEY_PATTERNS:
            batch = list(c.scan_iter(match=pat, count=1000))
            pipe = c.pipeline(transaction=False)
            for k in batch:  # one key per DEL: keys of a node lie in different slots
                pipe.delete(k)
            n += sum(pipe.execute()) if batch else 0
        c.close()
    return n


def write_json(path, data) -> None:
    path.write_text(json.dumps(data, indent=1, default=float))
