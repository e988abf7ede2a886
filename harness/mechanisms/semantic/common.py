"""Helpers shared by the semantic-cache drivers: the dataset parameters, the calibration /
test split of the queries, and cleaning up keys an interrupted run left behind."""

from __future__ import annotations

import json
import random

from harness.base.errors import BadInput
from harness.mechanisms.semantic import datasets
from harness.model.driver_contract import INPUT_FILE, Param

KEY_PATTERNS = (
    "hash_*",
    "hashn_*",
    "sem_*",
    "semb*",
    "semnn_*",
    "tpl_*",
    "tplsem_*",
    "ctl_*",
    "ctlb*",
    "chs_*",
    "chsb*",
    "mem*",
    "orc_*",
    "orcb*",
    "gcnn_*",
)


def dataset_params() -> dict[str, Param]:
    return {
        "dataset": Param(
            str,
            datasets.DEFAULT_DATASET,
            "the data: GPTCache .json, .jsonl {query, group} or .tsv sentence1/sentence2/label "
            "(relative to the repository or absolute)",
            kind=INPUT_FILE,
        ),
        "dataset_format": Param(str, "auto", "auto (by extension), gptcache, groups or pairs", datasets.FORMATS),
        "insert_fraction": Param(
            float, 0.5, "share of origins (groups) put into the cache; the rest must miss", min=0.01, max=1.0
        ),
        "dataset_rows": Param(int, 0, "use a seeded sample of this many records of the dataset (0 = all)", min=0),
        "split_seed": Param(int, 0, "seed of the choice of inserted origins and of the calibration split"),
        "calibration_fraction": Param(
            float,
            0.5,
            "share of the query groups used to choose the Hamming radius "
            "and the cosine threshold; the rest is the test split",
            min=0.1,
            max=0.9,
        ),
        "torch_threads": Param(
            int,
            0,
            "torch threads for the batched model work (0 = torch's default); single-query timings use 1 thread",
            min=0,
        ),
    }


def check_dataset(where: str, p: dict) -> None:
    """Validate-time check: the dataset loads (wrong columns, empty file, bad records)."""
    try:
        datasets.load(p["dataset"], p["dataset_format"])
    except BadInput as e:
        raise BadInput(f"{where}.dataset: {e}") from None


def load(p: dict) -> tuple[datasets.Dataset, datasets.Workload]:
    """The dataset (a seeded sample of `dataset_rows` records when set) and its workload."""
    ds = datasets.load(p["dataset"], p["dataset_format"])
    if p["dataset_rows"] and p["dataset_rows"] < len(ds.rows):
        keep = sorted(random.Random(p["split_seed"] + 202).sample(range(len(ds.rows)), p["dataset_rows"]))
        ds = datasets.Dataset(ds.path, ds.fmt, [ds.rows[i] for i in keep])
    return ds, datasets.workload(ds, p["insert_fraction"], p["split_seed"])


def split_queries(queries: list[tuple[str, str]], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices of the calibration and the test queries: a seeded `fraction` of the query
    labels (groups) goes to calibration, the rest to test, so that no group (and no origin)
    is in both."""
    labels = sorted({lab for _, lab in queries})
    rng = random.Random(seed + 101)
    calib = (
        set(rng.sample(labels, max(1, min(len(labels) - 1, round(len(labels) * fraction)))))
        if len(labels) > 1
        else set()
    )
    cal = [i for i, (_, lab) in enumerate(queries) if lab in calib]
    test = [i for i, (_, lab) in enumerate(queries) if lab not in calib]
    return cal, test


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
