"""Serving one request of SmolLM2-135M-Instruct with and without a cache in front, and
timing its first token.

TTFT of one request = time from receiving the prompt to having its first correct answer token:
- no cache: chat template + tokenize + prefill + the first greedy token (a manual
  prefill/decode loop on the model's KV cache, so the first token is timed exactly), then
  decoding up to `max_new_tokens` (the same decode work as a miss in the cached modes);
- with a cache: key computation + Redis lookup; on a correct hit the stored answer is
  returned (its first token is there at once); on a miss the model runs as above and the
  answer is stored under the request's key. A *wrong* hit (an entry of another origin) is
  an error: it is counted as one, and the request is then served by the model, so its TTFT
  is lookup + generation, never the lookup alone.
Memory: peak resident set size (psutil, sampled every 10 ms) and, on a GPU, the peak of
torch's allocator and NVML's used memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.mechanisms.semantic import keys
from harness.mechanisms.semantic.store import Entry


@dataclass
class Generation:
    ttft_s: float
    text: str
    tokens: int


def prompt_ids(tok, prompt: str, device: str = "cpu"):
    ids = tok.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt"
    )
    if not hasattr(ids, "shape"):
        ids = ids["input_ids"]
    return ids.to(device)


def generate(
    tok, model, prompt: str, max_new_tokens: int, t0: float | None = None, first_only: bool = False
) -> Generation:
    """Greedy decoding; ttft_s is measured from t0 (default: now) to the first token."""
    import torch

    t0 = time.perf_counter() if t0 is None else t0
    dev = next(model.parameters()).device
    with torch.inference_mode():
        ids = prompt_ids(tok, prompt, str(dev))
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        nxt = out.logits[:, -1].argmax(-1)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        ttft = time.perf_counter() - t0
        toks = [int(nxt)]
        if not first_only:
            past = _cache_of(out)
            eos = tok.eos_token_id
            for _ in range(max_new_tokens - 1):
                if toks[-1] == eos:
                    break
                out = model(input_ids=nxt[:, None], cache=past, use_cache=True, logits_to_keep=1)
                past = _cache_of(out)
                nxt = out.logits[:, -1].argmax(-1)
                toks.append(int(nxt))
    return Generation(ttft, tok.decode(toks, skip_special_tokens=True), len(toks))


def _cache_of(out):
    c = getattr(out, "cache", None)
    return c if c is not None else out.past_key_values


class PeakRSS:
    """Samples this process's RSS in a thread; `.peak` in bytes."""

    def __init__(self, interval_s: float = 0.01):
        import psutil

        self.proc = psutil.Process()
        self.interval_s = interval_s
        self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def nvml_used_bytes() -> int | None:
    """GPU 0 memory in use (all processes) through NVML; None without a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


MODES = ("no_cache", "hash_cache", "semantic_cache", "oracle_cache")


def serve(
    mode: str,
    text: str,
    label: str,
    model_of: Callable[[], tuple[Any, Any]],
    store,
    max_new_tokens: int,
    *,
    emb=None,
    proj=None,
    radius: int = 0,
    signature: str = "lsh",
) -> tuple[float, str]:
    """Serve one request in `mode`; (TTFT in seconds, outcome): outcome is "model" (no
    cache), "hit" (a correct hit), "miss" or "wrong_hit" (an error, then served by the model).
    `model_of()` gives (tokenizer, model) and is called only when the model serves. signature
    "exact" replaces the semantic cache's LSH signature by an exact text hash (the mechanism
    removed). "oracle_cache" is the instrument: the semantic cache's lookup path (embedding,
    LSH signature, banded Redis lookup) against a store that holds every request of the
    stream under its own signature, so every request is a hit whatever `signature` says."""
    import numpy as np

    t0 = time.perf_counter()
    if mode == "no_cache":
        return generate(*model_of(), text, max_new_tokens, t0).ttft_s, "model"
    if mode == "hash_cache":
        key, sig = keys.exact_key(text, True), None
        entry = store.get(key)
    else:
        exact = signature == "exact" and mode == "semantic_cache"
        sig = keys.text_signature(text) if exact else int(keys.signatures(emb.encode_one(text), proj)[0])
        entry, dist, _ = store.lsh_nearest(sig)
        if entry is not None and dist > radius:
            entry = None
    if entry is not None and entry.label == label:
        return time.perf_counter() - t0, "hit"
    g = generate(*model_of(), text, max_new_tokens, t0)
    if entry is not None:
        return g.ttft_s, "wrong_hit"
    new = Entry(label, g.text)
    if mode == "hash_cache":
        store.put_many([(key, new)])
    else:
        store.put_signatures(np.array([sig], dtype=np.uint64), [new])
    return g.ttft_s, "miss"
