"""The kv-tiers suite's view: codecs at the sized chunk beside their controls, per-tier
fetch latency beside the source's figures, TTFT against prompt length per tier; all
aggregated across repetitions, claimed numbers from the ledger (C15, C17)."""

from __future__ import annotations

from harness.experiments.kv_tiers.series import CODEC_SERIES, TIER_SERIES, TTFT_SERIES
from harness.experiments.views import Chart, Table, ViewContext, points, series_table, view


def _range(s):
    if s is None:
        return "-"
    return (s.median, s.min, s.max) if s.min != s.max else s.median


def _codecs(ctx: ViewContext, case: str) -> list:
    agg = ctx.aggregate(case, CODEC_SERIES, key=[CODEC_SERIES["codec"], CODEC_SERIES["scope"]])
    if agg is None:
        return []
    claimed = {"json": ctx.figure("C15", "json_decode_ms"), "aligned128": ctx.figure("C15", "aligned_decode_ms")}
    blocks = [series_table(agg, "Codecs on real KV data: encode, decode, bytes, store+fetch QPS", case)]
    f = ctx.figure
    rows = [
        [
            "JSON decode at the sized chunk (ms)",
            f("C15", "json_decode_ms"),
            _range(ctx.metric(case, "sized.json.decode_ms")),
            "the size is chosen so that this matches",
        ],
        [
            "aligned128 decode at the sized chunk (ms)",
            claimed["aligned128"],
            _range(ctx.metric(case, "sized.aligned128.decode_ms")),
            "",
        ],
        [
            "decode speedup aligned128 vs JSON",
            f("C15", "decode_speedup"),
            _range(ctx.metric(case, "sized.decode_speedup.aligned128_vs_json")),
            f"control, JSON in the aligned codec's place: {_fmt(ctx.metric(case, 'control.decode_speedup.json_vs_json'))}x",
        ],
        [
            "store+fetch QPS gain aligned128 vs JSON (%)",
            f("C15", "qps_gain_pct"),
            _range(ctx.metric(case, "qps_gain_pct.aligned128_vs_json")),
            f"control, JSON in the aligned codec's place: {_fmt(ctx.metric(case, 'control.qps_gain_pct.json_vs_json'))}%",
        ],
        [
            "decode speedup, whole 32-token chunk of all layers",
            "-",
            _range(ctx.metric(case, "chunk.decode_speedup.aligned128_vs_json")),
            "for the record",
        ],
    ]
    n = ctx.metric(case, "sized.elements")
    blocks.append(
        Table(
            "Claimed vs measured: chunk decode and QPS (source 3.2)",
            ["what", "claimed", "measured", "note"],
            [[r[0], "-" if r[1] is None else r[1], r[2], r[3]] for r in rows],
            note=f"Sized chunk: {n.median:.0f} float32 values (median over repetitions, calibrated in "
            f"each: {n.min:.0f}-{n.max:.0f})."
            if n
            else "",
            case=case,
        )
    )
    return blocks


def _fmt(s) -> str:
    return "-" if s is None else f"{s.median:.3g}"


CLAIMED_TIER = {
    "L1.fetch_copy": ("l1_us", "< {} us"),
    "L2.fetch_decode": ("l2_us", "~{} us"),
    "L3.cold": ("l3_ms", "~{} ms"),
}


def _tiers(ctx: ViewContext, case: str) -> list:
    agg = ctx.aggregate(case, TIER_SERIES, key=TIER_SERIES["measure"])
    if agg is None:
        return []
    claimed = []
    measure, tier, what = (TIER_SERIES[c] for c in ("measure", "tier", "what"))
    for m in agg.column(measure):
        fig, fmt = CLAIMED_TIER.get(m, (None, ""))
        v = ctx.figure("C17", fig) if fig else None
        claimed.append(fmt.format(f"{v:g}") if v is not None else "-")
    agg.columns["claimed"] = claimed
    order = [measure, tier, "claimed", what] + [c for c in agg.columns if c not in (measure, tier, "claimed", what)]
    agg = agg.select(order)
    return [series_table(agg, "Tier access latency: claimed (source 4.1) vs measured", case)]


def _ttft(ctx: ViewContext, case: str) -> list:
    tokens = TTFT_SERIES["tokens"]
    agg = ctx.aggregate(case, TTFT_SERIES, key=tokens)
    if agg is None:
        return []
    series = [{"name": "full prefill", "points": points(agg, tokens, TTFT_SERIES["full_ms"])}]
    series += [
        {"name": f"prefix KV from {t}", "points": points(agg, tokens, TTFT_SERIES[f"{t}_ms"])}
        for t in ("L1", "L2", "L3")
    ]
    return [
        series_table(agg, "TTFT per prompt length: full prefill vs prefix KV restored from each tier", case),
        Chart(
            "Time to first token against prompt length, per tier holding the prefix KV",
            series,
            "prompt tokens",
            "TTFT ms",
            x_log=True,
            y_log=True,
            case=case,
        ),
    ]


@view("kv-tiers")
def kv_tiers(ctx: ViewContext) -> list:
    blocks: list = []
    for case in ctx.case_names():
        names = ctx.series_names(case)
        if CODEC_SERIES.name in names:
            blocks += _codecs(ctx, case)
        if TIER_SERIES.name in names:
            blocks += _tiers(ctx, case)
        if TTFT_SERIES.name in names:
            blocks += _ttft(ctx, case)
    return blocks
