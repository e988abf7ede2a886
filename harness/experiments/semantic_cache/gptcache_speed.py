"""GPTCache's speed claim against the LLM it fronts (`llm_answer_tokens` > 0): the time of a
GPTCache hit beside the time the LLM takes to write the same answer.

The LLM is SmolLM2-135M-Instruct on this machine's CPU (greedy decoding, up to
`llm_answer_tokens` new tokens, one torch thread), standing in for the remote API that
GPTCache's README compares with. For `llm_queries` test queries that GPTCache answers rightly
at its calibrated threshold, interleaved per query with the order rotated:
- the hit: GPTCache's `get` (its live embedding, Faiss search, SQLite fetch);
- the LLM: the whole answer to the same prompt;
- the mechanism off: the same prompt through an empty GPTCache (same embedding, same store,
  nothing cached: it misses) and then the LLM, as a cache that never hits serves it;
- the instrument: the LLM call with a known wait added, which the timing must show (the
  median over queries of its time minus the plain LLM's on the same query).
Over the traffic: the mean time per request when the test split's right hits take the hit's
time and every other request the miss path's (a wrong answer is asked again), from the
measured medians and the run's right-hit share (computed), against the LLM alone. Each time is taken by the caller around the call (perf_counter). Raw rows in
raw/gptcache_speed_ms.csv."""

from __future__ import annotations

import statistics
import time
from typing import Callable

from harness.experiments.semantic_cache import gptcache_subject
from harness.mechanisms.semantic.serve import generate
from harness.model.driver_contract import Metric, Param, Record
from harness.model.driver_helpers import torch_threads, write_csv

PARAMS = {
    "llm_answer_tokens": Param(
        int,
        0,
        "GPTCache's speed against the LLM: new tokens of each LLM answer (SmolLM2 on this CPU; 0 = no such pass)",
        min=0,
        max=512,
    ),
    "llm_queries": Param(
        int, 8, "queries of the speed pass (GPTCache's right hits, each also answered by the LLM)", min=1
    ),
    "llm_instrument_wait_ms": Param(
        float, 500.0, "the speed pass's instrument: a known wait added to the LLM call", min=0
    ),
}

ARMS = ("gptcache_hit", "llm", "control.empty_gptcache", "instrument.llm_wait")


def hits_of(cache: gptcache_subject.GptCache, queries: list[tuple[str, str]], n: int) -> list[str]:
    """Up to `n` of `queries` (text, label) that `cache` answers with their own label (an
    untimed pass: the speed pass times right hits only)."""
    texts = []
    for text, label in queries:
        answer, _, _ = cache.lookup(text)
        if answer == label:
            texts.append(text)
            if len(texts) == n:
                break
    return texts


def run(ctx, cache: gptcache_subject.GptCache, make_empty: Callable, queries: list[tuple[str, str]], out: Record):
    """The speed pass (see the module's doc); `make_empty()` gives an empty GPTCache like `cache`
    (a context manager); `queries` are the test split's (text, label) pairs."""
    p = ctx.params
    # lazy: the LLM's wheel and transformers only when the speed pass runs (llm_answer_tokens > 0)
    from harness.infra.model_wheels import smollm2

    ctx.log("speed against the LLM: loading SmolLM2-135M-Instruct (the LLM behind GPTCache)")
    tok, model = smollm2("cpu")
    texts = hits_of(cache, queries, p["llm_queries"])
    if not texts:
        why = "GPTCache answered none of the test queries rightly at its threshold: no hit to time"
        out.details.setdefault("absent_metrics", {}).update(
            {m: why for m in ("speed.gptcache_vs_llm", "speed.traffic_vs_llm")}
        )
        return
    wait_s = p["llm_instrument_wait_ms"] / 1000.0
    tokens: list[int] = []

    def llm(text: str) -> None:
        tokens.append(generate(tok, model, text, p["llm_answer_tokens"]).tokens)

    def waited(text: str) -> None:
        generate(tok, model, text, p["llm_answer_tokens"])
        time.sleep(wait_s)

    times: dict[str, list[float]] = {a: [] for a in ARMS}
    raw = []
    with torch_threads(1), make_empty() as empty:
        served_by: dict[str, Callable[[str], object]] = {
            "gptcache_hit": lambda t: _hit(cache, t),
            "llm": llm,
            "control.empty_gptcache": lambda t: _miss_then(empty, t, llm),
            "instrument.llm_wait": waited,
        }
        generate(tok, model, texts[0], 2)  # warm-up: the first call of a model is slow
        cache.lookup(texts[0])
        for n, text in enumerate(texts):
            order = ARMS[n % len(ARMS) :] + ARMS[: n % len(ARMS)]
            for pos, arm in enumerate(order):
                t0 = time.perf_counter()
                served_by[arm](text)
                ms = 1000 * (time.perf_counter() - t0)
                times[arm].append(ms)
                raw.append([n, arm, pos, f"{ms:.3f}"])
            ctx.log(f"speed against the LLM: {n + 1}/{len(texts)} queries through {len(ARMS)} arms")
    write_csv(ctx.raw_path("gptcache_speed_ms.csv"), ["query", "arm", "position", "ms"], raw)
    _outputs(out, times, tokens, p, len(texts))


def _hit(cache: gptcache_subject.GptCache, text: str) -> None:
    if cache.lookup(text)[0] is None:
        raise RuntimeError(f"GPTCache missed a query it had answered in the untimed pass: {text[:60]!r}")


def _miss_then(empty: gptcache_subject.GptCache, text: str, llm: Callable[[str], None]) -> None:
    if empty.lookup(text)[0] is not None:
        raise RuntimeError("the empty GPTCache answered a query: it is not empty")
    llm(text)


def _outputs(out: Record, times: dict[str, list[float]], tokens: list[int], p: dict, n: int) -> None:
    med = {a: statistics.median(v) for a, v in times.items()}
    m = out.metrics
    what = f"median of {n} queries, interleaved per query, timed by the caller"
    m["speed.gptcache_hit.p50_ms"] = Metric(
        med["gptcache_hit"], "ms", "lower", f"GPTCache's get on a right hit; {what}"
    )
    m["speed.llm_answer.p50_ms"] = Metric(
        med["llm"], "ms", "lower", f"SmolLM2 writing the answer (up to {p['llm_answer_tokens']} tokens); {what}"
    )
    m["speed.llm_tokens_mean"] = Metric(statistics.fmean(tokens), "tokens", None, "new tokens per LLM answer")
    m["speed.gptcache_vs_llm"] = Metric(
        med["llm"] / med["gptcache_hit"], "x", "higher", "the LLM's answer time over GPTCache's hit time (medians)"
    )
    m["control.empty_gptcache.p50_ms"] = Metric(
        med["control.empty_gptcache"], "ms", "lower", f"an empty GPTCache's miss and then the LLM; {what}"
    )
    m["control.empty_gptcache.speedup_vs_llm"] = Metric(
        med["llm"] / med["control.empty_gptcache"],
        "x",
        None,
        "the LLM alone over the empty GPTCache's miss path (nothing served from the cache)",
    )
    m["instrument.llm_wait.known_ms"] = Metric(p["llm_instrument_wait_ms"], "ms", None, "the known wait added")
    paired = [w - a for w, a in zip(times["instrument.llm_wait"], times["llm"])]
    m["instrument.llm_wait.seen_ms"] = Metric(
        statistics.median(paired), "ms", None, "the LLM arm with the wait minus without, same query (median)"
    )
    right = out.metrics.get("gptcache.correct_hit_rate_pct")
    if right is not None and right.value is not None:
        h = float(right.value) / 100.0
        mean = h * med["gptcache_hit"] + (1 - h) * med["control.empty_gptcache"]
        m["speed.traffic_vs_llm"] = Metric(
            med["llm"] / mean,
            "x",
            "higher",
            f"computed: the LLM's time over the mean time per request of the test split ({100 * h:.1f}% right hits "
            "at the hit's time, every other request at the miss path's: GPTCache's miss and then the LLM)",
        )
