"""Correct and wrong hits of GPTCache and of the harness's exact cosine NN on the same data,
split and vectors: each threshold chosen on the calibration split (best F1 of correct hits, the
harness's rule), the counts reported on the test split.

GPTCache's threshold is calibrated with its own decision: one pass of real `get()` calls at
threshold 0 (every nearest entry returned, with the score its `SearchDistanceEvaluation` gave
it), then a hit at threshold t is a returned score >= t, which is the comparison GPTCache makes
(rank >= 4 t with top_k = 1). The reported test-split counts come from a second pass of real
calls at the chosen threshold. The accuracy passes embed with the same all-MiniLM-L6-v2
vectors the harness uses (computed once, batched); the timed calls embed live.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.mechanisms.semantic import keys, metrics


@dataclass
class Pass:
    answers: list  # the label GPTCache returned, or None
    scores: list  # its normalised score, or None


def run_pass(cache, texts: list[str]) -> Pass:
    answers, scores = [], []
    for t in texts:
        a, s, _ = cache.lookup(t)
        answers.append(a)
        scores.append(s)
    return Pass(answers, scores)


def counts_at(idx: list[int], hit: list[bool], matched: list, labels: list, should: list) -> metrics.CacheCounts:
    return metrics.cache_counts(
        [bool(hit[i]) for i in idx], [matched[i] for i in idx], [labels[i] for i in idx], [should[i] for i in idx]
    )


def calibrate(
    settings: list[float], idx: list[int], hit_at, matched: list, labels: list, should: list
) -> tuple[float, list[metrics.CacheCounts]]:
    """The best-F1 setting on `idx` (strictest first on ties) and the counts of every setting."""
    cc = [counts_at(idx, hit_at(s), matched, labels, should) for s in settings]
    return settings[metrics.best_setting(settings, cc)], cc


def gptcache_accuracy(cache, wl, cal: list[int], test: list[int], thresholds: list[float]) -> dict:
    """GPTCache on the workload: calibration pass at threshold 0 over every query, the test
    split at the chosen threshold, and its controls (threshold 0 = the similarity decision
    removed; threshold 1 = only identical vectors hit) and instrument (inserted prompts asked
    again verbatim). `cache` is a GptCache holding the inserts, answers = labels."""
    labels = [lab for _, lab in wl.queries]
    should = wl.should_hit()
    texts = [t for t, _ in wl.queries]
    ths = sorted({float(x) for x in thresholds}, reverse=True)
    cache.set_threshold(0.0)
    p0 = run_pass(cache, texts)
    hit_at = lambda t: [s is not None and s >= t for s in p0.scores]  # noqa: E731
    chosen, cal_counts = calibrate(ths, cal, hit_at, p0.answers, labels, should)
    sweep = [[t, "calibration", c] for t, c in zip(ths, cal_counts)]
    sweep += [[t, "test", counts_at(test, hit_at(t), p0.answers, labels, should)] for t in ths]
    test_texts = [texts[i] for i in test]
    t_labels, t_should = [labels[i] for i in test], [should[i] for i in test]

    def measured(t: float) -> metrics.CacheCounts:
        cache.set_threshold(t)
        p = run_pass(cache, test_texts)
        return metrics.cache_counts([a is not None for a in p.answers], p.answers, t_labels, t_should)

    before = cache.own_hits()
    test_counts = measured(chosen)
    own = cache.own_hits() - before  # GPTCache's own count of the hits of the same pass
    out = {
        "threshold": chosen,
        "test": test_counts,
        "test_own_hits": own,
        "exact_only": measured(1.0),
        "sweep": sweep,
        "no_threshold": counts_at(test, [s is not None for s in p0.scores], p0.answers, labels, should),
    }
    cache.set_threshold(chosen)
    ins_texts, ins_labels = [t for t, _ in wl.inserts], [lab for _, lab in wl.inserts]
    p = run_pass(cache, ins_texts)
    out["repeats"] = metrics.cache_counts(
        [a is not None for a in p.answers], p.answers, ins_labels, [True] * len(ins_texts)
    )
    return out


def nn_accuracy(
    q_vec: np.ndarray,
    ins_vec: np.ndarray,
    ins_labels: list,
    wl,
    cal: list[int],
    test: list[int],
    thresholds: list[float],
) -> dict:
    """The harness's exact cosine NN (numpy) on the same vectors: threshold chosen on the
    calibration split, counts on the test split; also the nearest index and cosine per query."""
    labels = [lab for _, lab in wl.queries]
    should = wl.should_hit()
    idx, sim = keys.nearest_cosine(q_vec, ins_vec)
    matched = [ins_labels[int(i)] for i in idx]
    ths = sorted({float(x) for x in thresholds}, reverse=True)
    chosen, _ = calibrate(ths, cal, lambda t: list(sim >= t), matched, labels, should)
    return {
        "threshold": chosen,
        "test": counts_at(test, list(sim >= chosen), matched, labels, should),
        "nearest": idx,
        "cosine": sim,
    }


def answers_of(acc: dict, ins_labels: list) -> list:
    """What the harness's NN gives the caller for each query at its calibrated threshold: the
    nearest entry's label on a hit, None on a miss."""
    return [ins_labels[int(i)] if s >= acc["threshold"] else None for i, s in zip(acc["nearest"], acc["cosine"])]


def agreement(a: list, b: list, idx: list[int]) -> dict:
    """Two arms' answers (label or None per query) compared query by query on `idx`: the share
    with the same hit/miss decision and the share with the same answer (both miss, or both hit
    the same label), in %."""
    n = len(idx)
    same_decision = sum((a[i] is None) == (b[i] is None) for i in idx)
    same_answer = sum(a[i] == b[i] for i in idx)
    return {
        "queries": n,
        "same_decision_pct": 100 * same_decision / n if n else float("nan"),
        "same_answer_pct": 100 * same_answer / n if n else float("nan"),
    }


def perturbed(vecs: np.ndarray, cosine: float, seed: int) -> np.ndarray:
    """Each unit vector turned in a seeded random direction to exactly `cosine` of itself (the
    instrument of the agreement checks: a known change the comparison must see)."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(vecs.shape).astype(np.float32)
    noise -= (noise * vecs).sum(1, keepdims=True) * vecs  # orthogonal to each vector
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    out = cosine * vecs + np.sqrt(max(0.0, 1 - cosine * cosine)) * noise
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)
