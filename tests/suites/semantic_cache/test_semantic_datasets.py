"""Dataset formats of the semantic-cache experiment and their errors (one clear line, exit 2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import BadInput
from harness.mechanisms.semantic import datasets
from tests import REPO, TESTS

FIX = TESTS / "fixtures" / "semantic"


def test_default_gptcache_file_and_workload_a():
    ds = datasets.load(datasets.DEFAULT_DATASET)
    assert ds.fmt == "gptcache" and len(ds.rows) == 999
    wl = datasets.workload(ds, 0.5, seed=0)
    assert len(wl.queries) == 999
    assert len(wl.inserts) == 482  # half of the 964 distinct origins
    should = wl.should_hit()
    assert 0 < sum(should) < 999  # some queries must miss
    again = datasets.workload(ds, 0.5, seed=0)
    assert again.inserts == wl.inserts
    assert datasets.workload(ds, 0.5, seed=1).inserts != wl.inserts


def test_groups_jsonl():
    ds = datasets.load(FIX / "groups_small.jsonl")
    assert ds.fmt == "groups" and len(ds.rows) == 20
    wl = datasets.workload(ds, 1.0, seed=0)
    assert len(wl.inserts) == 10 and len(wl.queries) == 10  # first query of each group goes in
    assert all(wl.should_hit())


def test_pairs_tsv_and_its_workload():
    ds = datasets.load(FIX / "pairs_small.tsv")
    assert ds.fmt == "pairs" and len(ds.rows) == 24
    assert sum(r[2] for r in ds.rows) == 12
    wl = datasets.workload(ds)
    assert len(wl.inserts) == 12 and len(wl.queries) == 24
    assert sum(wl.should_hit()) == 12  # the label-0 sentence2 texts paraphrase no inserted sentence1


def test_pair_classes_join_label_1_pairs_only():
    rows = [("a", "b", 1), ("b", "c", 1), ("a", "x", 0), ("d", "e", 0)]
    cls = datasets.pair_classes(rows)
    assert cls["a"] == cls["b"] == cls["c"]
    assert len({cls["a"], cls["x"], cls["d"], cls["e"]}) == 4
    wl = datasets.workload(datasets.Dataset(Path("p.tsv"), "pairs", rows))
    assert dict(wl.queries)["e"] == cls["e"] and wl.should_hit() == [True, True, False, False]


@pytest.mark.parametrize(
    "name, fmt, words",
    [
        ("wrong_columns.tsv", "auto", "missing sentence1, sentence2, label"),
        ("empty.tsv", "auto", "empty"),
        ("gptcache_small.json", "groups", "line 1"),
        ("pairs_small.txt", "auto", "cannot tell the format"),
    ],
)
def test_dataset_errors_are_one_line(name, fmt, words):
    with pytest.raises(BadInput) as e:
        datasets.load(FIX / name, fmt)
    msg = str(e.value)
    assert words in msg and "\n" not in msg


def test_bad_json_records(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([{"origin": "a"}]))
    with pytest.raises(BadInput, match="record 0 needs string fields 'origin' and 'similar'"):
        datasets.load(p)
    p = tmp_path / "bad_label.tsv"
    p.write_text("sentence1\tsentence2\tlabel\na\tb\tyes\n")
    with pytest.raises(BadInput, match="label must be 0 or 1"):
        datasets.load(p)
    p = tmp_path / "header_only.tsv"
    p.write_text("sentence1\tsentence2\tlabel\n")
    with pytest.raises(BadInput, match="no records"):
        datasets.load(p)


@pytest.mark.parametrize("name", ["missing.tsv", "wrong_columns.tsv", "empty.tsv", "../../../suites/<script>.tsv"])
def test_cli_exits_2_with_one_line_on_a_bad_dataset(name, tmp_path):
    exe = Path(sys.executable).with_name("harness")
    r = subprocess.run(
        [
            str(exe),
            "run",
            "semantic-cache",
            "--base-port",
            "7270",
            "--results-dir",
            str(tmp_path),
            "--set",
            f"semantic.dataset={FIX / name}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and "dataset" in lines[0]
    assert not any(tmp_path.iterdir())  # refused before anything ran
