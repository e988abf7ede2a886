"""The serving suite's drivers (the cases: prefix_case.py, semantic_case.py, peer_case.py, sweep_case.py)."""

from __future__ import annotations

from harness.experiments.serving import metrics
from harness.mechanisms.semantic import stream as semantic_stream
from harness.model.driver_contract import CaseContext, Record, register

from . import peer_case, prefix_case, semantic_case, sweep_case


@register(
    "serving-prefix-cache",
    params=prefix_case.PARAMS,
    metrics=metrics.PREFIX_CACHE,
    engines=("cached", "uncached"),
    description="the Mooncake trace replayed to vLLM with prefix caching on and off, the engine's hit rate "
    "beside the simulator's, and a repeated long prefix (the instrument)",
)
def prefix_cache(ctx: CaseContext) -> Record:
    return prefix_case.run(ctx)


@register(
    "serving-semantic-e2e",
    params=semantic_case.PARAMS,
    metrics=metrics.SEMANTIC_E2E,
    needs="cluster",
    check=semantic_stream.check,
    engines=("uncached",),
    description="the semantic-cache suite's TTFT stream with the engine serving over HTTP: no cache, hash "
    "cache, semantic cache and the oracle cache (the instrument), interleaved per query",
)
def semantic_e2e(ctx: CaseContext) -> Record:
    return semantic_case.run(ctx)


@register(
    "serving-client-vs-vllm",
    params=peer_case.PARAMS,
    metrics=metrics.CLIENT_VS_VLLM,
    engines=("uncached",),
    description="the harness's streaming client beside vLLM's benchmark client on the same server and requests, "
    "round by round",
)
def client_vs_vllm(ctx: CaseContext) -> Record:
    return peer_case.run(ctx)


@register(
    "serving-sweep",
    params=sweep_case.PARAMS,
    metrics=metrics.SWEEP,
    needs="cluster",
    engines=("cached", "uncached"),
    check=sweep_case.check,
    description="a load sweep per arm (prefix caching on/off, and a repeated long prefix as the instrument; "
    "the semantic cache, the hash cache, no cache and the oracle cache in front of the engine): "
    "open-loop rates or closed-loop users, each point's load checked to be the load configured, "
    "stopping one point past the knee; the highest load at the SLO per arm and what the cache buys",
)
def load_sweep(ctx: CaseContext) -> Record:
    return sweep_case.run(ctx)
