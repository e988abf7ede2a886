"""kv-tiers-ttft: time to first token against prompt length, with the prefix KV found in
L1, L2, L3 or nowhere (a full prefill, the control every restore is compared with)."""

from __future__ import annotations

import json

from harness.base.errors import BadInput
from harness.experiments.kv_tiers import extract, ttft
from harness.experiments.kv_tiers.common import (
    COMMON,
    TIER_STORE_PARAMS,
    Store,
    env_note,
    in_torch_threads,
    load_model,
    text_path,
)
from harness.experiments.kv_tiers.series import TTFT_SERIES
from harness.model.driver_contract import CaseContext, Metric, Param, Record

TTFT_PARAMS = {
    **COMMON,
    **TIER_STORE_PARAMS,
    "lengths": Param(
        list, [128, 256, 512, 1024, 2048], "prompt lengths in tokens (SmolLM2 context: 8192)", min=1, max=8192
    ),
    "repeats": Param(int, 2, "timed TTFTs per prompt length and tier (median kept)", min=1),
    "min_suffix": Param(int, 16, "tokens always computed after the restored prefix", min=1),
}


def check_ttft(where: str, p: dict) -> None:
    lengths = p["lengths"]
    if not lengths or any(not isinstance(n, int) or isinstance(n, bool) for n in lengths):
        raise BadInput(f"{where}.lengths: a list of integer token counts, e.g. [128, 512, 2048]")
    for n in lengths:
        if n - p["min_suffix"] < p["chunk_tokens"]:
            raise BadInput(
                f"{where}.lengths: {n} tokens leave no whole {p['chunk_tokens']}-token chunk "
                f"before the {p['min_suffix']}-token suffix"
            )


@in_torch_threads
def run_ttft(ctx: CaseContext) -> Record:

    p = ctx.params
    tok, model, device = load_model(ctx)
    all_ids = extract.prompt_ids(tok, max(p["lengths"]), text_path(p))
    c = p["chunk_tokens"]
    shape = (
        model.config.num_hidden_layers,
        2,
        model.config.num_key_value_heads,
        c,
        model.config.hidden_size // model.config.num_attention_heads,
    )
    s = Store(ctx, shape, device)
    points = []
    try:
        for n in sorted(p["lengths"]):
            ids = all_ids[:n]
            s.keys.update(extract.chunk_keys(ids[: ttft.prefix_tokens(n, c, p["min_suffix"])], c))
            points.append(ttft.measure_point(model, s.store, ids, c, p["min_suffix"], p["repeats"], log=ctx.log))
    finally:
        s.close()
    ctx.raw_path("ttft.json").write_text(json.dumps([vars(pt) for pt in points], indent=1))
    return ttft_outcome(points, p, device)


def ttft_outcome(points, p: dict, device: str) -> Record:

    metrics: dict[str, Metric] = {}
    for pt in points:
        n = pt.tokens
        metrics[f"ttft_ms.full.n{n}"] = Metric(pt.full_ms(), "ms", "lower")
        for tier in ttft.TIER_ORDER:
            metrics[f"ttft_ms.{tier}.n{n}"] = Metric(pt.tier_ms(tier), "ms", "lower")
            metrics[f"ttft_ratio.{tier}_over_full.n{n}"] = Metric(pt.tier_ms(tier) / pt.full_ms(), "x", "lower")
    long = [pt for pt in points if pt.tokens >= 512]
    if long:
        metrics["ttft_ratio.L2_over_full.max_ge512"] = Metric(
            max(pt.tier_ms("L2") / pt.full_ms() for pt in long),
            "x",
            "lower",
            "worst L2-restore TTFT / full-prefill TTFT over prompts of 512 tokens and more",
        )
    metrics["first_token_mismatches"] = Metric(
        sum(pt.mismatches for pt in points),
        "prompts",
        "lower",
        "restored-prefix first token differs from the full prefill's",
    )
    metrics["first_token_compared"] = Metric(
        sum(len(v) for pt in points for v in pt.tier_s.values()),
        "prompts",
        None,
        "restored-prefix continuations whose first token was compared with "
        "the full prefill's (the denominator of first_token_mismatches)",
    )
    metrics["wrong_tier_hits"] = Metric(sum(pt.wrong_tier for pt in points), "prompts", "lower")
    for tier in ttft.TIER_ORDER:
        be = ttft.breakeven(points, tier)
        if be is not None:
            metrics[f"breakeven_tokens.{tier}"] = Metric(
                be, "tokens", "lower", "smallest length from which the tier beats a full prefill"
            )
    cols: dict[str, list] = {
        "tokens": [pt.tokens for pt in points],
        "prefix_tokens": [pt.prefix_tokens for pt in points],
        "chunks": [pt.chunks for pt in points],
        "full_ms": [pt.full_ms() for pt in points],
    }
    for tier in ttft.TIER_ORDER:
        cols[f"{tier}_ms"] = [pt.tier_ms(tier) for pt in points]
    for tier in ttft.TIER_ORDER:
        cols[f"{tier}_fetch_ms"] = [pt.fetch_ms(tier) for pt in points]
    note = (
        f"{p['repeats']} timed run(s) per point and variant in each repetition (median); codec "
        f"{p['codec']}; chunk {p['chunk_tokens']} tokens; the last >= {p['min_suffix']} tokens are "
        f"always computed; fetch = lookups + decode + cache assembly. {env_note(device)}."
    )
    series = {TTFT_SERIES.name: TTFT_SERIES.make(cols, note)}
    return Record("ok", metrics=metrics, series=series)
