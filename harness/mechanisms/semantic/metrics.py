"""Hit rate, correct and wrong hits, precision and recall of a cache; pure functions.

Cache level (one lookup per query): a hit is *correct* when the matched entry's label
equals the query's label, *wrong* otherwise; a query *should hit* when its label was
inserted. hit rate = hits / queries; precision = correct / hits (1 - false-hit share);
recall = correct / queries that should hit.

Pair level (labelled pairs): a pair is predicted "same" when the key scheme matches its
two sentences; TP = predicted and label 1, FP = predicted and label 0, FN = not predicted
and label 1. precision = TP / (TP + FP), recall = TP / (TP + FN), hit rate = predicted /
pairs. An empty denominator gives 0 (nothing was claimed, nothing was found).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from harness.base import stats


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


@dataclass(frozen=True)
class CacheCounts:
    queries: int
    hits: int
    correct: int
    wrong: int
    should_hit: int
    false_hits_on_new: int  # hits on queries whose answer was never inserted

    @property
    def misses(self) -> int:
        return self.queries - self.hits

    @property
    def hit_rate(self) -> float:
        return _ratio(self.hits, self.queries)

    @property
    def precision(self) -> float:
        return _ratio(self.correct, self.hits)

    @property
    def recall(self) -> float:
        return _ratio(self.correct, self.should_hit)

    @property
    def correct_hit_rate(self) -> float:
        """Correct hits / queries: the hit rate that counts (a wrong hit is an error)."""
        return _ratio(self.correct, self.queries)

    @property
    def wrong_hit_rate(self) -> float:
        return _ratio(self.wrong, self.queries)

    @property
    def f1(self) -> float:
        return _ratio(2 * self.precision * self.recall, self.precision + self.recall)

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "misses": self.misses,
            "hit_rate": self.hit_rate,
            "correct_hit_rate": self.correct_hit_rate,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
        }


def best_setting(candidates: Sequence, counts: Sequence[CacheCounts]) -> int:
    """Index of the candidate setting with the best F1 of correct hits (RedisVL's threshold
    optimizer does the same); ties go to the first, so list the strictest setting first."""
    if not candidates or len(candidates) != len(counts):
        raise ValueError("one CacheCounts per candidate, at least one")
    best = 0
    for i, c in enumerate(counts):
        if c.f1 > counts[best].f1:
            best = i
    return best


def cache_counts(
    hit: Sequence[bool], matched_label: Sequence, query_label: Sequence, should_hit: Sequence[bool]
) -> CacheCounts:
    """Counts for one lookup per query. `matched_label[i]` is ignored when not `hit[i]`."""
    n = len(hit)
    if not (len(matched_label) == len(query_label) == len(should_hit) == n):
        raise ValueError("hit, matched_label, query_label and should_hit must have one entry per query")
    hits = correct = new_hits = 0
    for h, m, q, s in zip(hit, matched_label, query_label, should_hit):
        if h:
            hits += 1
            correct += m == q
            new_hits += not s
    return CacheCounts(n, hits, correct, hits - correct, sum(map(bool, should_hit)), new_hits)


@dataclass(frozen=True)
class PairCounts:
    pairs: int
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def hit_rate(self) -> float:
        return _ratio(self.tp + self.fp, self.pairs)

    @property
    def precision(self) -> float:
        return _ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float:
        return _ratio(2 * self.precision * self.recall, self.precision + self.recall)

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "hit_rate": self.hit_rate,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
        }


def pair_counts(predicted: Sequence[bool], labels: Sequence[int]) -> PairCounts:
    if len(predicted) != len(labels):
        raise ValueError("predicted and labels must have the same length")
    tp = sum(1 for p, y in zip(predicted, labels) if p and y == 1)
    fp = sum(1 for p, y in zip(predicted, labels) if p and y != 1)
    fn = sum(1 for p, y in zip(predicted, labels) if not p and y == 1)
    return PairCounts(len(labels), tp, fp, fn, len(labels) - tp - fp - fn)


def roc_auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve by the rank-sum (Mann-Whitney) formula, ties averaged.
    0.5 when only one class is present."""
    pos = sum(1 for y in labels if y == 1)
    neg = len(labels) - pos
    if pos == 0 or neg == 0:
        return 0.5
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_pos = sum(r for r, y in zip(ranks, labels) if y == 1)
    return (rank_pos - pos * (pos + 1) / 2) / (pos * neg)


def dynamic_threshold(entropy_bits: float, r: float) -> float:
    """The source's section 2.2 formula: max(0.4, 0.85 * (1 - (H/8) * (1 - |r|)))."""
    return max(0.4, 0.85 * (1 - (entropy_bits / 8) * (1 - abs(r))))


def periodic_sequence(pattern: Sequence, length: int) -> list:
    """`pattern` repeated until `length` symbols."""
    if not pattern:
        raise ValueError("an empty pattern has no period")
    return [pattern[i % len(pattern)] for i in range(length)]


def c7_streams(ids: Sequence[int], vocab_size: int, period: int, seed: int) -> dict[str, list[int]]:
    """The token streams of the C7 measurement, all as long as `ids` (the real query stream):
    uniform random tokens, the first `period` tokens repeated, the real stream, and two
    controls: the periodic stream shuffled (same tokens, no period) and one constant token."""
    import numpy as np

    rng = np.random.default_rng(seed)
    periodic = periodic_sequence(list(ids[:period]), len(ids))
    return {
        "uniform_tokens": [int(x) for x in rng.integers(0, vocab_size, len(ids))],
        "periodic_tokens": periodic,
        "query_stream": [int(x) for x in ids],
        "control.periodic_shuffled": [int(x) for x in rng.permutation(periodic)],
        "control.constant": [int(ids[0])] * len(ids),
    }


def known_streams(length: int, symbols: int, r: float, seed: int) -> dict[str, list[int]]:
    """The C7 instrument's streams, whose inputs to the formula are known in advance:
    `control.known_entropy`, i.i.d. uniform over `symbols` token ids (H = log2(symbols) bits,
    lag-1 r = 0), and `control.known_r`, a stationary Gaussian AR(1) process with coefficient
    `r` (its lag-1 correlation is `r`), rounded to integer token ids. An estimator that does
    not recover log2(symbols) and `r` on them cannot measure what the formula needs."""
    import numpy as np

    rng = np.random.default_rng(seed + 17)
    x = np.empty(length)
    x[0] = rng.standard_normal()
    noise = rng.standard_normal(length) * (1 - r * r) ** 0.5
    for t in range(1, length):
        x[t] = r * x[t - 1] + noise[t]
    return {
        "control.known_entropy": [int(v) for v in rng.integers(0, symbols, length)],
        "control.known_r": [int(round(1000 + 100 * v)) for v in x],
    }


def stream_threshold(seq: Sequence[int]) -> tuple[float, float, float]:
    """(entropy bits, lag-1 r, dynamic threshold) of a token stream."""
    h, r = shannon_entropy_bits(seq), lag1_pearson([float(x) for x in seq])
    return h, r, dynamic_threshold(h, r)


def static_loss_pct(correct_dynamic: int, correct_static: int) -> float | None:
    """How much smaller (in %) the static threshold's correct hits are than the dynamic one's;
    None when the dynamic threshold found nothing."""
    return 100 * (correct_dynamic - correct_static) / correct_dynamic if correct_dynamic else None


def shannon_entropy_bits(symbols: Sequence) -> float:
    """Plug-in Shannon entropy (bits) of the empirical distribution of `symbols`."""
    import math
    from collections import Counter

    n = len(symbols)
    if n == 0:
        return 0.0
    return max(0.0, -sum(c / n * math.log2(c / n) for c in Counter(symbols).values()))


def lag1_pearson(xs: Sequence[float]) -> float:
    """Pearson correlation of (x_t, x_{t+1}); 0 when undefined (constant or < 3 values)."""
    if len(xs) < 3:
        return 0.0
    a, b = xs[:-1], xs[1:]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else 0.0


def quantile_floor(hit_share: float, miss_values: Sequence[float], q: float = 0.95) -> tuple[float, float] | None:
    """(the misses' quantile level, its value): a lower bound of the q-quantile of a stream in
    which a share `hit_share` of the requests hit, however fast the hits are. With F_mix(x) =
    h F_hit(x) + (1 - h) F_miss(x) >= q and F_hit <= 1, F_miss(x) >= (q - h) / (1 - h): the
    stream's q-quantile is at least the misses' own (q - h) / (1 - h) quantile (numpy's linear
    percentile of the measured misses). None when h >= q (the hits alone can set the quantile)
    or no request missed."""

    if hit_share >= q or not miss_values:
        return None
    level = (q - hit_share) / (1 - hit_share)
    return level, stats.percentile(list(miss_values), 100 * level)
