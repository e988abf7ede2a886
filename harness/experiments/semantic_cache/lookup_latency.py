"""One lookup at a time through every subject, interleaved per query, each split into
embedding, search and store.

Harness arms (`harness_lookup`): the query embedding (torch or ONNX Runtime, one query), the
exact cosine nearest neighbour over the inserted vectors in numpy and the threshold decision
(search), and the GET of the nearest entry from the Redis Cluster (store; fetched on every
lookup, as GPTCache fetches its nearest entry before it evaluates it). GPTCache arms call
`GptCache.lookup` (its own split). The order of the arms rotates from one query to the next so
that no arm always runs first or last. A harness arm may carry its own index (its inserts'
vectors and its calibrated threshold: the int8 arm searches int8 vectors).

`concurrent` sends a list of queries through one subject from several client threads at once
(a shared queue, each thread taking the next query when its last one is answered) and returns
the queries answered per second of wall-clock time and every answer.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from harness.mechanisms.semantic import keys

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


def harness_answer(embed, text: str, ins_vec: np.ndarray, threshold: float, store, prefix: str):
    """The answer (the entry's label) one harness lookup gives its caller, or None on a miss."""
    _, hit, entry, _ = harness_lookup(embed, text, ins_vec, threshold, store, prefix)
    return entry.label if (entry is not None and hit) else None


def interleaved(
    texts: list[str],
    harness_arms: dict,
    gptcache_arms: dict,
    ins_vec: np.ndarray,
    threshold: float,
    store,
    prefix: str,
    log=lambda m: None,
    index: dict | None = None,
) -> tuple[Timings, list[list], dict]:
    """Every text through every arm, the arm order rotated per text; `index` gives an arm its
    own (inserts' vectors, threshold). Returns the timings, one raw row per (text, arm) and
    what each harness arm computed: arm -> list of vectors, and arm + ".answers" -> answers."""
    names = list(harness_arms) + list(gptcache_arms)
    vecs: dict[str, list]  # arm -> its vectors, arm + ".answers" -> its answers
    tm, raw, vecs = Timings(), [], {**{a: [] for a in harness_arms}, **{f"{a}.answers": [] for a in harness_arms}}
    for n, text in enumerate(texts):
        order = names[n % len(names) :] + names[: n % len(names)]
        for pos, arm in enumerate(order):
            if arm in harness_arms:
                arm_vec, arm_th = (index or {}).get(arm, (ins_vec, threshold))
                v, hit, entry, parts = harness_lookup(harness_arms[arm], text, arm_vec, arm_th, store, prefix)
                answer = entry.label if (entry is not None and hit) else None
                vecs[arm].append(v)
                vecs[f"{arm}.answers"].append(answer)
            else:
                answer, _, sp = gptcache_arms[arm].lookup(text)
                parts = (sp.embed_ms, sp.search_ms, sp.store_ms, sp.total_ms)
            tm.add(arm, *parts)
            raw.append([n, arm, pos, *(f"{x:.4f}" for x in parts), int(answer is not None)])
        if (n + 1) % 20 == 0:
            log(f"latency: {n + 1}/{len(texts)} queries through {len(names)} subjects")
    return tm, raw, vecs


def concurrent(lookup, texts: list[str], clients: int) -> tuple[float, list]:
    """`texts` through `lookup(text) -> answer` from `clients` threads at once, each taking the
    next text of a shared queue when its last lookup returned. Returns the lookups per second
    (all texts over the wall-clock time from the common start to the last answer) and the
    answers in the texts' order. A lookup that raises stops the pass and raises here."""
    answers: list = [None] * len(texts)
    todo = iter(range(len(texts)))
    lock, start = threading.Lock(), threading.Barrier(clients + 1)

    def client() -> None:
        start.wait()
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            answers[i] = lookup(texts[i])

    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client) for _ in range(clients)]
        start.wait()
        t0 = time.perf_counter()
        for f in futures:
            f.result()
        elapsed = time.perf_counter() - t0
    return len(texts) / elapsed, answers
