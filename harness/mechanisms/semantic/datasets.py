"""Datasets for the semantic-cache experiment, and the cache workloads built from them.

Formats (chosen by extension when `fmt` is "auto"):
- gptcache (.json): a JSON array of {"origin": str, "similar": str} (GPTCache's
  examples/benchmark/mock_data.json). `origin` goes into the cache, `similar` is a query.
- groups (.jsonl): one JSON object per line, {"query": str, "group": str|int}; queries of
  the same group mean the same thing.
- pairs (.tsv): tab-separated with a header naming at least `sentence1`, `sentence2`,
  `label` (1 = same meaning, 0 = different).

Every problem with a file raises BadInput with one line that names the file and the fix.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.errors import BadInput
from harness.base.files import loads_json
from harness.model.driver_contract import input_path

FORMATS = ("auto", "gptcache", "groups", "pairs")
EXTENSIONS = {".json": "gptcache", ".jsonl": "groups", ".tsv": "pairs"}
DEFAULT_DATASET = "data/gptcache_mock_data.json"  # relative to the repository
PAIR_COLUMNS = ("sentence1", "sentence2", "label")


@dataclass
class Dataset:
    path: Path
    fmt: str
    # gptcache: list of (origin, similar); groups: list of (query, group); pairs: (s1, s2, label)
    rows: list[tuple] = field(default_factory=list)


@dataclass
class Workload:
    """What goes into the cache and what is asked of it.

    `inserts`: (text, label) entries; `queries`: (text, label) lookups. A hit is correct
    when the matched entry's label equals the query's label; a query whose label is not
    among the inserted labels must miss.
    """

    name: str
    inserts: list[tuple[str, str]]
    queries: list[tuple[str, str]]

    def should_hit(self) -> list[bool]:
        present = {lab for _, lab in self.inserts}
        return [lab in present for _, lab in self.queries]


def detect_format(path: Path, fmt: str = "auto") -> str:
    if fmt not in FORMATS:
        raise BadInput(f"dataset_format {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt != "auto":
        return fmt
    ext = path.suffix.lower()
    if ext not in EXTENSIONS:
        raise BadInput(
            f"dataset {path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            f"use .json (GPTCache), .jsonl (query/group) or .tsv (sentence1/sentence2/label), "
            f"or set dataset_format"
        )
    return EXTENSIONS[ext]


def load(path: str | Path, fmt: str = "auto") -> Dataset:
    """Read and check a dataset file; BadInput (one line) for anything wrong with it."""

    p = input_path(str(path))
    fmt = detect_format(p, fmt)
    if not p.exists():
        raise BadInput(f"dataset {p}: no such file; give a path relative to the repository or an absolute one")
    if not p.is_file():
        raise BadInput(f"dataset {p}: not a file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"dataset {p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not text.strip():
        raise BadInput(f"dataset {p}: the file is empty; it needs at least one record")
    rows = {"gptcache": _gptcache, "groups": _groups, "pairs": _pairs}[fmt](p, text)
    if not rows:
        raise BadInput(f"dataset {p}: no records (a header or blank lines only)")
    return Dataset(p, fmt, rows)


def _gptcache(p: Path, text: str) -> list[tuple]:
    try:
        data = loads_json(text)
    except json.JSONDecodeError as e:
        raise BadInput(
            f"dataset {p}: not valid JSON (line {e.lineno}: {e.msg}); "
            f'expected an array of {{"origin", "similar"}} objects'
        ) from None
    if not isinstance(data, list):
        raise BadInput(
            f'dataset {p}: expected a JSON array of {{"origin", "similar"}} objects, got a {type(data).__name__}'
        )
    rows = []
    for i, rec in enumerate(data):
        if (
            not isinstance(rec, dict)
            or not isinstance(rec.get("origin"), str)
            or not isinstance(rec.get("similar"), str)
        ):
            have = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
            raise BadInput(f"dataset {p}: record {i} needs string fields 'origin' and 'similar' (found {have})")
        rows.append((rec["origin"], rec["similar"]))
    return rows


def _groups(p: Path, text: str) -> list[tuple]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = loads_json(line)
        except json.JSONDecodeError as e:
            raise BadInput(
                f"dataset {p}: line {n} is not valid JSON ({e.msg}); "
                f'expected one {{"query": ..., "group": ...}} object per line'
            ) from None
        if (
            not isinstance(rec, dict)
            or not isinstance(rec.get("query"), str)
            or "group" not in rec
            or not isinstance(rec["group"], (str, int))
            or isinstance(rec["group"], bool)
        ):
            have = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
            raise BadInput(
                f"dataset {p}: line {n} needs a string 'query' and a string or integer 'group' (found {have})"
            )
        rows.append((rec["query"], str(rec["group"])))
    return rows


def _pairs(p: Path, text: str) -> list[tuple]:
    reader = csv.DictReader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE)
    cols = reader.fieldnames or []
    missing = [c for c in PAIR_COLUMNS if c not in cols]
    if missing:
        raise BadInput(
            f"dataset {p}: a pairs TSV needs the tab-separated columns "
            f"{', '.join(PAIR_COLUMNS)}; missing {', '.join(missing)} "
            f"(header has: {', '.join(cols) or 'nothing'})"
        )
    rows = []
    for n, rec in enumerate(reader, 2):
        s1, s2, lab = rec.get("sentence1"), rec.get("sentence2"), (rec.get("label") or "").strip()
        if s1 is None or s2 is None:
            raise BadInput(f"dataset {p}: line {n} has fewer columns than the header")
        if lab not in ("0", "1"):
            raise BadInput(f"dataset {p}: line {n}: label must be 0 or 1, got {lab!r}")
        rows.append((s1, s2, int(lab)))
    return rows


def workload(ds: Dataset, insert_fraction: float = 0.5, seed: int = 0) -> Workload:
    """The cache workload of a dataset.

    gptcache: a seeded `insert_fraction` of the distinct origins goes in (label = the origin
    text, so duplicate origins count as the same answer); every `similar` is a query.
    groups: for a seeded `insert_fraction` of the groups, the group's first query goes in;
    every other query is asked. pairs: every distinct sentence1 goes in and every distinct
    sentence2 is asked once; a hit is correct when both lie in the same class of
    `pair_classes` (texts joined by label-1 pairs), and a sentence2 in no label-1 pair must miss.
    """
    rng = random.Random(seed)
    if ds.fmt == "gptcache":
        origins = sorted({o for o, _ in ds.rows})
        chosen = set(rng.sample(origins, round(len(origins) * insert_fraction)))
        inserts = [(o, o) for o in origins if o in chosen]
        queries = [(s, o) for o, s in ds.rows]
        return Workload(f"{ds.path.name}: {len(inserts)} of {len(origins)} distinct origins inserted", inserts, queries)
    if ds.fmt == "groups":
        first: dict[str, str] = {}
        for q, g in ds.rows:
            first.setdefault(g, q)
        groups = sorted(first)
        chosen = set(rng.sample(groups, round(len(groups) * insert_fraction)))
        inserts = [(first[g], g) for g in groups if g in chosen]
        queries = [(q, g) for q, g in ds.rows if not (g in chosen and q == first[g])]
        return Workload(
            f"{ds.path.name}: first query of {len(inserts)} of {len(groups)} groups inserted", inserts, queries
        )
    cls = pair_classes(ds.rows)
    s1s = sorted({s1 for s1, _, _ in ds.rows})
    inserts = [(s, cls[s]) for s in s1s]
    s2s = list(dict.fromkeys(s2 for _, s2, _ in ds.rows))
    queries = [(s, cls[s]) for s in s2s]
    return Workload(
        f"{ds.path.name}: {len(inserts)} distinct sentence1 inserted, {len(queries)} distinct sentence2 asked",
        inserts,
        queries,
    )


def pair_classes(rows: list[tuple]) -> dict[str, str]:
    """Meaning classes of the texts of labelled pairs: the connected components of the
    label-1 pairs (union-find), named by their smallest text. A text in no label-1 pair is
    a class of its own, so as a query it must miss."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s1, s2, lab in rows:
        a, b = find(s1), find(s2)
        if lab == 1 and a != b:
            parent[max(a, b)] = min(a, b)
    return {t: find(t) for t in list(parent)}
