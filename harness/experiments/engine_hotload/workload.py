"""Requests for the engine cases: real query texts tokenized per shape bucket, latency
summaries, and the multi-threaded request stream used around a hot swap.

Texts: the `similar` strings of data/gptcache_mock_data.json (GPTCache's benchmark
queries), tokenized by all-MiniLM-L6-v2's own tokenizer, padded or truncated to the
bucket's sequence length. Token values do not change a BERT model's cost; the shapes do.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.base import stats
from harness.base.text_data import texts_from_records
from harness.experiments.engine_hotload.lifecycle import Bucket, TensorSpec, input_shape, inputs_of
from harness.infra.model_wheels import minilm_path

VARIANTS = 8  # distinct request batches per bucket, cycled


def load_texts(path: Path) -> list[str]:
    """The `similar` strings (GPTCache's benchmark queries) of a JSON list of records."""
    return texts_from_records(path, ("similar",), "engine requests")


class TextFeeds:
    """Input arrays for a bucket and an IO description, made once and cycled."""

    def __init__(self, texts: list[str], tokenizer=None):
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
        self.texts, self.tok = texts, tokenizer
        self._cache: dict = {}
        self._lock = threading.Lock()

    def _tokens(self, bucket: Bucket, variant: int) -> dict:
        import numpy as np

        key = (bucket, variant)
        with self._lock:
            if key not in self._cache:
                start = (variant * bucket.batch) % len(self.texts)
                batch = [self.texts[(start + i) % len(self.texts)] for i in range(bucket.batch)]
                enc = self.tok(batch, padding="max_length", truncation=True, max_length=bucket.seq, return_tensors="np")
                self._cache[key] = {k: np.asarray(v) for k, v in enc.items()}
            return self._cache[key]

    def feeds(self, io: list[TensorSpec], bucket: Bucket, variant: int = 0) -> dict:
        return feeds_for_shapes(io, bucket, self._tokens(bucket, variant % VARIANTS))

    def feeds_for(self, io: list[TensorSpec], variant: int = 0):
        return lambda bucket: self.feeds(io, bucket, variant)

    def save_tokens(self, path: Path, buckets: list[Bucket], variants: int = VARIANTS) -> Path:
        """The tokenizer outputs of every bucket and variant in one .npz (for fresh.py)."""
        import numpy as np

        arrays = {}
        for b in buckets:
            for v in range(variants):
                for name, arr in self._tokens(b, v).items():
                    arrays[f"{b.name}.{v}.{name}"] = arr
        with open(path, "wb") as f:
            np.savez(f, **arrays)
        return path


def feeds_for_shapes(io: list[TensorSpec], bucket: Bucket, tok: dict) -> dict:
    """Input arrays for the engine's inputs: the tokenizer output of the same name where its
    shape fits, ones of the input's dtype otherwise (a token value does not change the cost)."""
    import numpy as np

    out = {}
    for t in inputs_of(io):
        shape = input_shape(t, bucket)
        src = tok.get(t.name)
        if src is not None and tuple(src.shape) == shape:
            out[t.name] = src.astype(t.dtype, copy=False)
        else:
            out[t.name] = np.ones(shape, dtype=t.dtype)
    return out


def feeds_from_tokens(io: list[TensorSpec], bucket: Bucket, tokens: dict, variant: int = 0) -> dict:
    """feeds_for_shapes over a flat {"<bucket>.<variant>.<name>": array} map (save_tokens')."""
    prefix = f"{bucket.name}.{variant % VARIANTS}."
    tok = {k[len(prefix) :]: v for k, v in tokens.items() if k.startswith(prefix)}
    return feeds_for_shapes(io, bucket, tok)


def summary(latencies_ms: list[float]) -> dict:
    """n, p50, p99, mean and max of a latency list (percentiles by linear interpolation)."""
    if not latencies_ms:
        return {"n": 0}
    return {
        "n": len(latencies_ms),
        "p50": stats.percentile(latencies_ms, 50),
        "p99": stats.percentile(latencies_ms, 99),
        "mean": sum(latencies_ms) / len(latencies_ms),
        "max": max(latencies_ms),
    }


@dataclass
class Request:
    t: float  # start, seconds since the stream's t0
    ms: float
    ok: bool
    thread: int
    bucket: str
    version: int = -1
    error: str = ""
    answered_by: str = ""  # the model version whose answer this is, told from the output (fingerprint.py)


class RequestStream:
    """`threads` threads each sending requests through `call(bucket, i)` until stopped.
    `call` returns the slot's version, or (version, the model version that answered).

    Each thread paces itself to one request every `interval_ms` (0 = back to back); a
    request that runs late starts the next one at once (no catch-up burst)."""

    def __init__(self, call, buckets: list[Bucket], threads: int, interval_ms: float, t0: float):
        self.call, self.buckets, self.n, self.interval = call, buckets, threads, interval_ms / 1e3
        self.t0 = t0
        self.records: list[Request] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _worker(self, k: int):
        i = 0
        nxt = time.perf_counter()
        while not self._stop.is_set():
            b = self.buckets[(i + k) % len(self.buckets)]
            t = time.perf_counter()
            try:
                version = self.call(b, i)
                version, by = version if isinstance(version, tuple) else (version, "")
                rec = Request(t - self.t0, (time.perf_counter() - t) * 1e3, True, k, b.name, version, "", by)
            except Exception as e:  # a failed request is data, not a crash
                rec = Request(
                    t - self.t0, (time.perf_counter() - t) * 1e3, False, k, b.name, -1, f"{type(e).__name__}: {e}"[:300]
                )
            with self._lock:
                self.records.append(rec)
            i += 1
            if self.interval > 0:
                nxt = max(nxt + self.interval, time.perf_counter())
                self._stop.wait(max(0.0, nxt - time.perf_counter()))

    def start(self) -> "RequestStream":
        for k in range(self.n):
            th = threading.Thread(target=self._worker, args=(k,), name=f"requests-{k}", daemon=True)
            th.start()
            self._threads.append(th)
        return self

    def stop(self) -> list[Request]:
        self._stop.set()
        for th in self._threads:
            th.join(timeout=60)
        with self._lock:
            return sorted(self.records, key=lambda r: r.t)


def windows(records: list[Request], width_s: float) -> list[dict]:
    """Per time window: start, count, p50 and max latency, failures."""
    if not records:
        return []
    out: list[dict] = []
    by: dict[int, list[Request]] = {}
    for r in records:
        by.setdefault(int(r.t // width_s), []).append(r)
    for k in sorted(by):
        rs = by[k]
        lat = [r.ms for r in rs]
        out.append(
            {
                "t": k * width_s,
                "n": len(rs),
                "p50": stats.percentile(lat, 50),
                "max": max(lat),
                "failed": sum(not r.ok for r in rs),
            }
        )
    return out


# ---- service as the clients saw it (request timestamps only) ------------------------------


def answer_gaps(records: list[Request]) -> list[tuple[float, float]]:
    """(from, to) between consecutive successful answers, in the order the clients got them:
    the intervals in which no client got an answer. A restart's outage is the gap that spans
    it; a swap that makes every request wait shows the same way."""
    ends = sorted(r.t + r.ms / 1e3 for r in records if r.ok)
    return list(zip(ends, ends[1:]))


def steady_gap_ms(gaps: list[tuple[float, float]], windows: list[tuple[float, float]]) -> float | None:
    """The longest answer gap that overlaps none of the windows (steady state), in ms."""
    outside = [b - a for a, b in gaps if not any(a <= hi and b >= lo for lo, hi in windows)]
    return max(outside) * 1e3 if outside else None
