"""Token traces: real text through a real tokenizer, synthetic Zipf, and their statistics.

Definitions used everywhere in the eviction experiment:

- A *request* is one token id; the cache key is the token id.
- The *head* is the `head_fraction` (default 1%) most frequent distinct tokens of the whole
  trace, at least one token; ties in frequency are broken by the smaller token id.
  `head_share` is the fraction of requests that go to the head (claim C19).
- *Long-tail retention* is the hit rate on the requests for tokens outside the head.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.base.errors import BadInput
from harness.base.paths import DATA_DIR
from harness.base.text_data import texts_from_records
from harness.infra.model_wheels import minilm_path

DATA_FILE = DATA_DIR / "gptcache_mock_data.json"
TOKENIZERS = ("minilm",)


@dataclass
class Trace:
    """A sequence of object ids (token ids) with where it came from."""

    name: str
    ids: np.ndarray  # int64, one per request
    seed: int
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.ids = np.asarray(self.ids, dtype=np.int64)
        if self.ids.ndim != 1 or len(self.ids) == 0:
            raise ValueError("a trace needs a non-empty 1-D array of ids")
        if (self.ids < 0).any():
            raise ValueError("trace ids must be >= 0")

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_distinct(self) -> int:
        return int(len(np.unique(self.ids)))

    def digest(self) -> str:
        """SHA-256 of the ids (little-endian int64): two runs with the same seed agree."""
        return hashlib.sha256(self.ids.astype("<i8").tobytes()).hexdigest()


# ---- real text -----------------------------------------------------------------------


def load_texts(path: str | Path = DATA_FILE) -> list[str]:
    """Every `origin` and `similar` string of the GPTCache mock data, in file order."""
    return texts_from_records(path, ("origin", "similar"), "the eviction trace")


def load_tokenizer(name: str = "minilm"):
    """The tokenizer shipped with all-MiniLM-L6-v2 (BERT WordPiece, 30522 ids), offline."""
    if name not in TOKENIZERS:
        raise BadInput(f"tokenizer {name!r} is not one of {', '.join(TOKENIZERS)}")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(minilm_path() / "tokenizer.json"))
    tok.no_padding()  # the shipped tokenizer.json pads to 128 with [PAD]: not text
    tok.no_truncation()
    return tok


def tokenize(texts: list[str], tokenizer) -> list[np.ndarray]:
    """Token ids of each text, without [CLS]/[SEP]."""
    encs = tokenizer.encode_batch(texts, add_special_tokens=False)
    return [np.asarray(e.ids, dtype=np.int64) for e in encs]


def text_trace(docs: list[np.ndarray], n_requests: int, seed: int, name: str = "real") -> Trace:
    """Concatenate tokenized texts in a seeded random order until `n_requests` tokens.

    Each pass over the corpus uses a fresh permutation (numpy PCG64 seeded with `seed`),
    so the token order inside a text is real and the text order is reproducible.
    """
    if n_requests < 1:
        raise BadInput(f"n_requests must be at least 1, got {n_requests}")
    docs = [d for d in docs if len(d)]
    if not docs:
        raise BadInput("no text produced any token")
    rng = np.random.default_rng(seed)
    parts, total, passes = [], 0, 0
    while total < n_requests:
        passes += 1
        for i in rng.permutation(len(docs)):
            parts.append(docs[i])
            total += len(docs[i])
            if total >= n_requests:
                break
    ids = np.concatenate(parts)[:n_requests]
    return Trace(
        name,
        ids,
        seed,
        {"source": "text", "texts": len(docs), "passes": passes, "corpus_tokens": int(sum(len(d) for d in docs))},
    )


def real_trace(n_requests: int, seed: int, path: Path = DATA_FILE, tokenizer: str = "minilm") -> Trace:
    """The token trace of the GPTCache mock data (origin and similar texts)."""
    tok = load_tokenizer(tokenizer)
    t = text_trace(tokenize(load_texts(path), tok), n_requests, seed, name="real")
    t.meta.update({"text_file": str(path), "tokenizer": tokenizer})
    return t


# ---- synthetic -----------------------------------------------------------------------


def zipf_probabilities(n_keys: int, alpha: float) -> np.ndarray:
    """p(rank r) proportional to r^-alpha for r = 1..n_keys."""
    if n_keys < 1:
        raise BadInput(f"n_keys must be at least 1, got {n_keys}")
    if alpha < 0:
        raise BadInput(f"the Zipf exponent must be >= 0, got {alpha}")
    p = np.arange(1, n_keys + 1, dtype=np.float64) ** -alpha
    return p / p.sum()


def zipf_trace(n_requests: int, n_keys: int, alpha: float, seed: int) -> Trace:
    """Independent draws from a Zipf(alpha) law over keys 1..n_keys (key 1 the most popular)."""
    if n_requests < 1:
        raise BadInput(f"n_requests must be at least 1, got {n_requests}")
    rng = np.random.default_rng(seed)
    ids = rng.choice(n_keys, size=n_requests, p=zipf_probabilities(n_keys, alpha)) + 1
    return Trace(f"zipf-{alpha:g}", ids, seed, {"source": "zipf", "alpha": alpha, "n_keys": n_keys})


# ---- statistics ----------------------------------------------------------------------


def rank_counts(ids: np.ndarray) -> np.ndarray:
    """Request counts of the distinct ids, most frequent first."""
    _, counts = np.unique(np.asarray(ids), return_counts=True)
    return np.sort(counts)[::-1]


def fit_zipf(counts: np.ndarray, lo: float = 0.01, hi: float = 5.0, tol: float = 1e-6) -> float:
    """Maximum-likelihood Zipf exponent of a rank-frequency list (most frequent first).

    Model: P(rank r) = r^-s / H(N, s) over the N observed ranks; the log-likelihood
    -s * sum(c_r ln r) - C ln H(N, s) is concave in s, maximised by golden-section search.
    """
    c = np.asarray(counts, dtype=np.float64)
    if len(c) < 2:
        raise ValueError("fitting a Zipf exponent needs at least 2 distinct ids")
    logr = np.log(np.arange(1, len(c) + 1, dtype=np.float64))
    a, total = float((c * logr).sum()), float(c.sum())

    def negll(s: float) -> float:
        return s * a + total * math.log(np.exp(-s * logr).sum())

    g = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = negll(x1), negll(x2)
    while hi - lo > tol:
        if f1 < f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = negll(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = negll(x2)
    return (lo + hi) / 2


def fit_zipf_lsq(counts: np.ndarray) -> float:
    """Least-squares slope of log(count) on log(rank), negated (the classic log-log fit)."""
    c = np.asarray(counts, dtype=np.float64)
    x = np.log(np.arange(1, len(c) + 1))
    slope = np.polyfit(x, np.log(c), 1)[0]
    return float(-slope)


def head_ids(ids: np.ndarray, head_fraction: float = 0.01) -> np.ndarray:
    """The head: the ceil(head_fraction * distinct) most frequent ids (at least one);
    equal counts are ordered by the smaller id."""
    if not 0 < head_fraction < 1:
        raise BadInput(f"head_fraction must be between 0 and 1 (exclusive), got {head_fraction}")
    uniq, counts = np.unique(np.asarray(ids), return_counts=True)
    k = max(1, math.ceil(head_fraction * len(uniq)))
    order = np.lexsort((uniq, -counts))  # by count descending, then id ascending
    return np.sort(uniq[order[:k]])


def tail_mask(ids: np.ndarray, head: np.ndarray) -> np.ndarray:
    """True for the requests whose id is outside the head (the long tail)."""
    return ~np.isin(np.asarray(ids), head)


def head_share(ids: np.ndarray, head: np.ndarray) -> float:
    """Fraction of requests that go to the head (0..1)."""
    return float(1.0 - tail_mask(ids, head).mean())


def hit_rates(hits: np.ndarray, tail: np.ndarray) -> tuple[float, float]:
    """(hit rate, long-tail retention) in percent from per-request hits and the tail mask."""
    hits = np.asarray(hits, dtype=bool)
    if len(hits) != len(tail):
        raise ValueError("hits and tail mask differ in length")
    hr = 100.0 * hits.mean()
    lt = 100.0 * hits[tail].mean() if tail.any() else 0.0
    return float(hr), float(lt)


def next_access(ids: np.ndarray) -> np.ndarray:
    """For each request, the index of the next request for the same id, or -1 (oracle info)."""
    ids = np.asarray(ids)
    nxt = np.full(len(ids), -1, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    same = s[1:] == s[:-1]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def trace_stats(trace: Trace, head_fraction: float) -> dict:
    counts = rank_counts(trace.ids)
    head = head_ids(trace.ids, head_fraction)
    return {
        "requests": len(trace),
        "distinct": int(len(counts)),
        "head_fraction": head_fraction,
        "head_size": int(len(head)),
        "head_share": head_share(trace.ids, head),
        "zipf_mle": fit_zipf(counts),
        "zipf_lsq": fit_zipf_lsq(counts),
        "singletons": int((counts == 1).sum()),
        "digest": trace.digest(),
    }
