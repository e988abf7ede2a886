"""The engine-hotload suite's drivers (the cases: cases.py, signed_load.py, hot_swap_case.py,
incompatible_swap_case.py)."""

from __future__ import annotations

from harness.experiments.engine_hotload import cases, hot_swap_case, incompatible_swap_case, metrics, signed_load
from harness.experiments.engine_hotload.served import COMMON, check_common
from harness.model.driver_contract import CaseContext, Param, Record, register


@register(
    "engine-hotload-cold-start",
    params={**COMMON, "cold_starts": Param(int, 5, "fresh processes, one load each", min=1)},
    check=check_common,
    metrics=metrics.COLD_START,
    description="From nothing to the first result in a fresh process: read, verify, deserialize/session, "
    "contexts, first inference",
)
def cold_start(ctx: CaseContext) -> Record:
    return cases.cold_start(ctx)


@register(
    "engine-hotload-prewarm",
    params=cases.PREWARM_PARAMS,
    check=check_common,
    metrics=metrics.PREWARM,
    description="First request per shape bucket of fresh engines in fresh processes: no prewarm, the source's "
    "profile-0 prewarm, every profile and bucket; against steady-state p50/p99",
)
def prewarm(ctx: CaseContext) -> Record:
    return cases.prewarm(ctx)


@register(
    "engine-hotload-signed-load",
    params={**COMMON},
    check=check_common,
    metrics=metrics.SIGNED_LOAD,
    description="SHA-256 manifest with an Ed25519 signature: verified load, and refused tampered, unknown and "
    "unsigned files before deserialization; control: the same loads with verification off",
)
def signed(ctx: CaseContext) -> Record:
    return signed_load.signed_load(ctx)


@register(
    "engine-hotload-hot-swap",
    params=hot_swap_case.SWAP_PARAMS,
    check=check_common,
    metrics=metrics.HOT_SWAP,
    isolate=True,
    description="Hot swaps under a steady multi-threaded request stream, restarts interleaved as the control: "
    "failures, switch time, memory peak",
)
def hot_swap(ctx: CaseContext) -> Record:
    return hot_swap_case.hot_swap(ctx)


@register(
    "engine-hotload-incompatible-swap",
    params={
        **COMMON,
        "threads": Param(int, 2, "request threads during the attempts", min=1),
        "interval_ms": Param(float, 10.0, "per-thread request interval", min=0),
    },
    check=check_common,
    metrics=metrics.INCOMPATIBLE_SWAP,
    description="Swaps to models with other IO tensors are refused, naming the tensor; the old engine serves on. "
    "Control: the same swaps with the compatibility check off",
)
def incompatible_swap(ctx: CaseContext) -> Record:
    return incompatible_swap_case.incompatible_swap(ctx)
