"""The semantic-cache suite's drivers (the cases: keys_case.py, gptcache_case.py, ttft_case.py,
memory_case.py, perf_case.py, entity_case.py)."""

from __future__ import annotations

from harness.experiments.semantic_cache import (
    entity_case,
    gptcache_case,
    keys_case,
    memory_case,
    metrics,
    perf_case,
    ttft_case,
)
from harness.mechanisms.semantic import common
from harness.model.driver_contract import CaseContext, Record, register


@register(
    "semantic-cache-keys",
    params=keys_case.PARAMS,
    metrics=metrics.KEYS,
    needs="cluster",
    check=keys_case.check,
    description="semantic cache keys: exact hash, 64-bit LSH, cosine NN, calibrated on one split and "
    "reported on another; exact-hash control; latency split; C7 dynamic threshold",
)
def key_schemes(ctx: CaseContext) -> Record:
    return keys_case.run(ctx)


@register(
    "semantic-cache-gptcache",
    params=gptcache_case.PARAMS,
    metrics=metrics.GPTCACHE,
    needs="cluster",
    check=gptcache_case.check,
    description="GPTCache 0.1.44 (SQLite + Faiss) beside the harness on the same data, split and model: "
    "correct/wrong hits, precision, recall, lookup latency split; the ONNX Runtime lookup",
)
def gptcache(ctx: CaseContext) -> Record:
    return gptcache_case.run(ctx)


@register(
    "semantic-cache-ttft",
    params=ttft_case.STREAM_PARAMS,
    metrics=metrics.TTFT,
    needs="cluster",
    check=ttft_case.check,
    description="SmolLM2 time to first token: no cache, hash cache, LSH cache and the oracle cache (the "
    "instrument), interleaved per query",
)
def ttft(ctx: CaseContext) -> Record:
    return ttft_case.run(ctx)


@register(
    "semantic-cache-memory",
    params=memory_case.PARAMS,
    metrics=metrics.MEMORY,
    needs="cluster",
    check=ttft_case.check,
    description="C4: memory peak per serving mode, each in a fresh process, same decode work",
)
def memory(ctx: CaseContext) -> Record:
    return memory_case.run(ctx)


@register(
    "semantic-cache-embed-perf",
    params=perf_case.PARAMS,
    metrics=metrics.EMBED_PERF,
    check=common.check_dataset,
    isolate=True,
    description="embedding throughput (ours vs sentence-transformers), single-query rate, LSH signing speed",
)
def embed_perf(ctx: CaseContext) -> Record:
    return perf_case.run(ctx)


@register(
    "semantic-cache-entity-keys",
    params=entity_case.PARAMS,
    metrics=metrics.ENTITY_KEYS,
    needs="cluster",
    check=common.check_dataset,
    description="section 3.3: template + entity keys; a real dispatcher: equal-key dynamic batching vs "
    "static token-key batching vs no batching",
)
def entity_batching(ctx: CaseContext) -> Record:
    return entity_case.run(ctx)
