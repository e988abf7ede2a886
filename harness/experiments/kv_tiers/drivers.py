"""The kv-tiers suite's drivers (the cases: codecs_case.py, tiers_case.py, ttft_case.py)."""

from __future__ import annotations

from harness.experiments.kv_tiers import codecs_case, metrics, tiers_case, ttft_case
from harness.model.driver_contract import CaseContext, Record, register


@register(
    "kv-tiers-codecs",
    params=codecs_case.CODEC_PARAMS,
    needs="cluster",
    check=codecs_case.check_codecs,
    description="decode time and store-plus-fetch QPS of real SmolLM2 KV data per codec, at the chunk size whose "
    "JSON decode takes the source's time here; control: JSON in the aligned codec's place",
    metrics=metrics.CODECS,
)
def codecs(ctx: CaseContext) -> Record:
    return codecs_case.run_codecs(ctx)


@register(
    "kv-tiers-latency",
    params=tiers_case.TIER_PARAMS,
    needs="cluster",
    check=tiers_case.check_tiers,
    description="per-tier access latency of real KV chunks, each fetch delivering usable data: L1 copy, L2 "
    "(Redis Cluster) GET + decode, L3 (LMDB) cold and warm read + decode; hits and write-behind",
    metrics=metrics.LATENCY,
)
def latency(ctx: CaseContext) -> Record:
    return tiers_case.run_tiers(ctx)


@register(
    "kv-tiers-ttft",
    params=ttft_case.TTFT_PARAMS,
    needs="cluster",
    check=ttft_case.check_ttft,
    description="time to first token with the prefix KV from L1, L2, L3 or a full prefill, per prompt length",
    metrics=metrics.TTFT,
)
def ttft(ctx: CaseContext) -> Record:
    return ttft_case.run_ttft(ctx)
