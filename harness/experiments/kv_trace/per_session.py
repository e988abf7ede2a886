"""Hit rates per conversation: how the trace's reuse is spread over its sessions, at the
GPU's KV capacity and at the maximum (an infinite cache). A trace's overall hit rate can come
from a few long conversations while most get nothing; these say which.

A session is the trace's own (a Bailian trace's chat, a sessions file's session) or, for a
Mooncake trace, the requests that share their second block (pool.conversations)."""

from __future__ import annotations

import numpy as np

from harness.base.metrics_model import Metric
from harness.mechanisms.kv_blocks.policies import Stream
from harness.mechanisms.kv_blocks.trace import KVTrace

from .analyses import rates_at
from .pool import conversations


def per_session_pct(trace: KVTrace, hit_tokens: np.ndarray) -> np.ndarray:
    """Each session's token hit rate (%), from per-request hit tokens."""
    _, which = np.unique(conversations(trace), return_inverse=True)
    hit = np.bincount(which, weights=hit_tokens.astype(np.float64))
    total = np.bincount(which, weights=trace.input_len.astype(np.float64))
    return 100.0 * np.divide(hit, total, out=np.zeros_like(hit), where=total > 0)


def session_metrics(trace: KVTrace, gpu_blocks: int, policy: str) -> dict[str, Metric]:
    st = Stream(trace)
    n = len(np.unique(conversations(trace)))
    src = "the trace's own" if trace.sessions is not None else "requests sharing their second block"
    m = {"sessions.count": Metric(n, "sessions", None, f"conversations ({src})")}
    for where, cap in (("max", None), ("gpu", gpu_blocks)):
        pct = per_session_pct(trace, rates_at(trace, st, policy, cap).hit_tokens)
        at = "an infinite cache" if cap is None else f"{policy} with the GPU's KV capacity"
        for q in (50, 90):
            m[f"sessions.{where}.token_hit_p{q}_pct"] = Metric(
                float(np.percentile(pct, q)), "%", None, f"the {q}th percentile of the sessions' token hit rates, {at}"
            )
        m[f"sessions.{where}.with_hits_pct"] = Metric(
            100.0 * float(np.mean(pct > 0)), "%", None, f"sessions with any prompt token hit, {at}"
        )
    return m
