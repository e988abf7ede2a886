"""One lookup at a time through every subject, interleaved per query, each split into
embedding, search and store.

Harness arms (`harness_lookup`): the query embedding (torch or ONNX Runtime, one query), the
exact cosine nearest neighbour over the inserted vectors in numpy and the threshold decision
(search), and the GET of the nearest entry from the Redis Cluster (store; fetched on every
lookup, as GPTCache fetches its nearest entry before it evaluates it). GPTCache arms call
`GptCache.lookup` (its own split). The order of the arms rotates from one query to the next so
that no arm always runs first or last.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from harness.experiments.semantic_cache import keys

PARTS = ("embed", "search", "store", "lookup")


@dataclass
class Timings:
    rows: dict = field(default_factory=dict)  # arm -> list of (embed, search, store, total) ms

    def add(self, arm: str, embed: float, search: float, store: float, total: float) -> None:
        self.rows.setdefault(arm, []).append((embed, search, store, total))

    def part(self, arm: str, name: str) -> list[float]:
        return [r[PARTS.index(name)] for r in self.rows.get(arm, [])]

    def p50(self, arm: str, name: str = "lookup") -> float:
        return float(np.percentile(self.part(arm, name), 50))


def harness_lookup(embed, text: str, ins_vec: np.ndarray, threshold: float, store, prefix: str):
    """(vector, hit, entry, (embed, search, store, total) ms) of one lookup."""
    t0 = time.perf_counter()
    v = embed(text)
    t1 = time.perf_counter()
    idx, sim = keys.nearest_cosine(v[None, :], ins_vec)
    i, hit = int(idx[0]), bool(sim[0] >= threshold)
    t2 = time.perf_counter()
    entry = store.get(f"{prefix}{i}")
    t3 = time.perf_counter()
    return v, hit, entry, (1000 * (t1 - t0), 1000 * (t2 - t1), 1000 * (t3 - t2), 1000 * (t3 - t0))


def interleaved(texts: list[str], harness_arms: dict, gptcache_arms: dict, ins_vec: np.ndarray, threshold: float,
                store, prefix: str, log=lambda m: None) -> tuple[Timings, list[list], dict]:
    """Every text through every arm, the arm order rotated per text. Returns the timings, one
    raw row per (text, arm) and the vectors each harness arm computed (arm -> list)."""
    names = list(harness_arms) + list(gptcache_arms)
    tm, raw, vecs = Timings(), [], {a: [] for a in harness_arms}
    for n, text in enumerate(texts):
        order = names[n % len(names):] + names[:n % len(names)]
        for pos, arm in enumerate(order):
            if arm in harness_arms:
                v, hit, entry, parts = harness_lookup(harness_arms[arm], text, ins_vec, threshold, store, prefix)
                vecs[arm].append(v)
                answer = entry.label if (entry is not None and hit) else None
            else:
                answer, _, sp = gptcache_arms[arm].lookup(text)
                parts = (sp.embed_ms, sp.search_ms, sp.store_ms, sp.total_ms)
            tm.add(arm, *parts)
            raw.append([n, arm, pos, *(f"{x:.4f}" for x in parts), int(answer is not None)])
        if (n + 1) % 20 == 0:
            log(f"latency: {n + 1}/{len(texts)} queries through {len(names)} subjects")
    return tm, raw, vecs
