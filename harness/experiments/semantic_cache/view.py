"""The semantic-cache suite's view: key schemes with precision (test split), the
calibration sweeps, TTFT per mode beside the source's figures, memory per mode, the C7
dynamic threshold and the section 3.3 keys and batching - all aggregated across
repetitions (median, min-max); claimed numbers come from the ledger's figures."""

from __future__ import annotations

from harness.experiments.semantic_cache.series import (
    BATCHING,
    C7_STREAMS,
    COMPARISON,
    CONCURRENT,
    ENTITY_SCHEMES,
    GPTCACHE_PROTOCOL,
    GPTCACHE_SWEEP,
    INT8_AGREEMENT,
    KEY_SCHEMES,
    LSH_SWEEP,
    MEMORY_MODES,
    NN_SWEEP,
    PAIRS,
    REQUESTS,
    ROUNDS,
)
from harness.experiments.views import Block, Chart, Table, ViewContext, points, series_table, view
from harness.model.stored_run import Series

SUITE = "semantic-cache"


def _median(ctx: ViewContext, case: str, metric: str):
    m = ctx.metric(case, metric)
    if m is None:
        return None
    return (m.median, m.min, m.max) if m.max != m.min else m.median


def _text(v) -> str:
    """A median (or median, min, max) for a note."""
    if v is None:
        return "not measured"
    if isinstance(v, tuple):
        return f"{v[0]:.3g} ({v[1]:.3g}-{v[2]:.3g} over the repetitions)"
    return f"{v:.3g}"


def _claimed(ctx: ViewContext, claim: str, name: str, i: int | None = None):
    v = ctx.figure(claim, name)
    if v is None:
        return "-"
    return v[i] if i is not None and isinstance(v, list) else v


def _sweep_chart(s: Series, x: str, title: str, case: str) -> Chart:
    """A calibration sweep's test-split rows (every sweep's columns after its setting: LSH_SWEEP's)."""
    split = s.columns[LSH_SWEEP["split"]]
    test = s.take([i for i, sp in enumerate(split) if sp == "test"])
    return Chart(
        title,
        [
            {"name": f"{what} (test split)", "points": points(test, x, LSH_SWEEP[col])}
            for what, col in (
                ("correct hits %", "correct_hit_rate_pct"),
                ("wrong hits %", "wrong_hit_rate_pct"),
                ("precision %", "precision_pct"),
            )
        ],
        x,
        "% of queries / of hits",
        note="each point: median across repetitions, whiskers min-max",
        case=case,
    )


def _semantic(ctx: ViewContext) -> list:
    out: list[Block]
    case, out = "semantic", []
    s = ctx.aggregate(case, KEY_SCHEMES, key=KEY_SCHEMES["scheme"])
    if s is not None:
        out.append(
            series_table(s, "Key schemes on the test split (only correct hits count; wrong hits are errors)", case)
        )
        out.append(
            Table(
                "The source's section 1 hit rates beside the measured ones (test split)",
                ["scheme", "claimed hit rate %", "measured correct hits %", "wrong hits %", "precision %"],
                [
                    [
                        name,
                        _claimed(ctx, "C2", fig),
                        _median(ctx, case, f"{pre}.correct_hit_rate_pct"),
                        _median(ctx, case, f"{pre}.wrong_hit_rate_pct"),
                        _median(ctx, case, f"{pre}.precision_pct"),
                    ]
                    for name, pre, fig in (
                        ("prompt hash", "hash", "hash_hit_rate_pct"),
                        ("sem_<hex> as an exact key", "lsh_r0", "semantic_hit_rate_pct"),
                        ("LSH at the calibrated radius", "lsh", "semantic_hit_rate_pct"),
                        ("control: exact hash as the signature", "control.exact_key", "-"),
                    )
                ],
                note=f"calibrated on the calibration split: Hamming radius "
                f"{_text(_median(ctx, case, 'lsh.radius'))}, cosine threshold "
                f"{_text(_median(ctx, case, 'nn.threshold'))}",
                case=case,
            )
        )
    for shape, x, title in (
        (LSH_SWEEP, "radius", "LSH through Redis against the Hamming radius"),
        (NN_SWEEP, "threshold", "Exact cosine NN against the threshold"),
    ):
        sw = ctx.aggregate(case, shape, key=[shape[x], shape["split"]])
        if sw is not None:
            out.append(_sweep_chart(sw, shape[x], title, case))
            out.append(
                series_table(
                    sw,
                    f"{title}: calibration and test splits",
                    case,
                    note="the setting with the best F1 of correct hits on the calibration split "
                    "is the one reported; its test-split row is the measurement",
                )
            )
    c7 = ctx.aggregate(case, C7_STREAMS, key=C7_STREAMS["stream"])
    if c7 is not None:
        out.append(
            series_table(
                c7,
                "C7: the dynamic threshold max(0.4, 0.85 (1 - H/8 (1 - |r|))) over token streams",
                case,
                note=f"claimed: uniform random traffic {_claimed(ctx, 'C7', 'uniform_threshold')}, "
                f"periodic sequences {_claimed(ctx, 'C7', 'periodic_threshold')}; " + c7.note,
            )
        )
        out.append(
            Table(
                "C7: correct hits a static threshold loses against the dynamic one (test split)",
                [
                    "loss % (computed from measured hits)",
                    "claimed loss %",
                    "instrument: strict static loss %",
                    "instrument: H error bits",
                    "instrument: r error",
                ],
                [
                    [
                        _median(ctx, case, "c7.static_loss_pct"),
                        _claimed(ctx, "C7", "static_loss_pct"),
                        _median(ctx, case, "c7.instrument.strict_loss_pct"),
                        _median(ctx, case, "c7.instrument.entropy_error_bits"),
                        _median(ctx, case, "c7.instrument.lag1_r_error"),
                    ]
                ],
                note="every threshold is computed (the formula on measured H and r); the hit counts are "
                "measured lookups; the loss is >= 0 by construction while the dynamic threshold is "
                "below the static one",
                case=case,
            )
        )
    for shape, title in ((PAIRS, "Pair-level decisions"), (GPTCACHE_PROTOCOL, "GPTCache's own protocol")):
        t = ctx.aggregate(case, shape, key=None)
        if t is not None:
            out.append(series_table(t, title, case))
    return out


def _ttft(ctx: ViewContext) -> list:
    out: list[Block]
    case, out = "ttft", []
    rows = []
    for i, mode in enumerate(("hash_cache", "semantic_cache")):
        rows.append(
            [
                mode,
                _claimed(ctx, "C3", "p95_ms", i),
                _median(ctx, case, f"{mode}.p50_ms"),
                _median(ctx, case, f"{mode}.p95_ms"),
                _median(ctx, case, f"{mode}.p95_floor_ms"),
                _median(ctx, case, f"{mode}.correct_hit_rate_pct"),
                _median(ctx, case, f"{mode}.wrong_hits"),
            ]
        )
    rows.append(
        [
            "oracle_cache (instrument)",
            "-",
            _median(ctx, case, "oracle_cache.p50_ms"),
            _median(ctx, case, "oracle_cache.p95_ms"),
            "-",
            _median(ctx, case, "oracle_cache.correct_hit_rate_pct"),
            _median(ctx, case, "oracle_cache.wrong_hits"),
        ]
    )
    rows.append(
        [
            "no_cache (control)",
            "-",
            _median(ctx, case, "no_cache.p50_ms"),
            _median(ctx, case, "no_cache.p95_ms"),
            "-",
            "-",
            "-",
        ]
    )
    if any(r[3] is not None for r in rows):
        out.append(
            Table(
                "Time to first token per mode, claimed vs measured",
                [
                    "mode",
                    "claimed P95 ms",
                    "P50 ms",
                    "P95 ms",
                    "P95 floor ms (computed)",
                    "correct hits %",
                    "wrong hits (errors)",
                ],
                rows,
                note="modes interleaved per query; a wrong hit is served by the model and counted as an "
                "error; the oracle cache answers every request from the store (the instrument); the "
                "P95 floor is computed, not measured: the misses' own (0.95 - h) / (1 - h) quantile at "
                "the measured hit rate h, below which no P95 can fall",
                case=case,
            )
        )
    runs = ctx.series(case, REQUESTS)
    if runs:
        series = []
        for mode in ("no_cache", "hash_cache", "semantic_cache", "oracle_cache"):
            vals = sorted(
                v
                for _, s in runs
                for v, md in zip(s.columns[REQUESTS["ttft_ms"]], s.columns[REQUESTS["mode"]])
                if md == mode
            )
            series.append({"name": mode, "points": [[100 * (i + 1) / len(vals), v] for i, v in enumerate(vals)]})
        out.append(
            Chart(
                "TTFT distribution per mode (all repetitions pooled)",
                series,
                "percentile",
                "TTFT ms",
                y_log=True,
                note=runs[0][1].note,
                case=case,
            )
        )
    return out


def _memory(ctx: ViewContext) -> list:
    s = ctx.aggregate("memory", MEMORY_MODES, key=MEMORY_MODES["mode"])
    if s is None:
        return []
    note = (
        f"claimed (GPU memory): {_claimed(ctx, 'C4', 'gpu_change_pct')}%; measured peak RSS change while serving "
        f"{_text(_median(ctx, 'memory', 'memory.rss_change_pct'))}%, control (two no-cache processes) "
        f"{_text(_median(ctx, 'memory', 'control.rss_change_pct'))}%, instrument (a known extra allocation of "
        f"{_text(_median(ctx, 'memory', 'instrument.known_mb'))} MiB) seen as "
        f"{_text(_median(ctx, 'memory', 'instrument.rss_seen_mb'))} MiB. " + s.note
    )
    return [series_table(s, "Memory peak per serving mode, each in a fresh process", "memory", note=note)]


def _entity(ctx: ViewContext) -> list:
    case, out = "entity-keys", []
    s = ctx.aggregate(case, ENTITY_SCHEMES, key=ENTITY_SCHEMES["key"])
    if s is not None:
        out.append(
            series_table(
                s,
                "Section 3.3 key schemes: correct hits through Redis",
                case,
                note=f"claimed: token key {_claimed(ctx, 'C16', 'hit_rate_pct', 0)}% -> template/entity "
                f"key {_claimed(ctx, 'C16', 'hit_rate_pct', 1)}%. " + s.note,
            )
        )
    b = ctx.aggregate(case, BATCHING, key=[BATCHING["arm"], BATCHING["round"]])
    if b is not None:
        claimed = {
            "static_batch_token_key": _claimed(ctx, "C16", "added_ms", 0),
            "dynamic_batch_entity_key": _claimed(ctx, "C16", "added_ms", 1),
        }
        out.append(
            Table(
                "Added latency of batching on the real dispatcher, claimed vs measured",
                [
                    "arm",
                    "claimed added ms",
                    "added mean ms",
                    "added P95 ms",
                    "end to end over no batching ms",
                    "requests / batch",
                ],
                [
                    [
                        arm,
                        claimed.get(arm, "-"),
                        _median(ctx, case, f"{arm}.added_ms_mean"),
                        _median(ctx, case, f"{arm}.added.p95_ms"),
                        _median(ctx, case, f"{arm}.e2e_added_ms_mean"),
                        _median(ctx, case, f"{arm}.requests_per_batch"),
                    ]
                    for arm in dict.fromkeys(b.columns[BATCHING["arm"]])
                ],
                note="judged: added = arrival to dispatch; dynamic minus static: "
                f"{_text(_median(ctx, case, 'batching.dynamic_vs_static_added_ms'))} ms (the dynamic rule "
                f"removed: {_text(_median(ctx, case, 'control.static_vs_static_added_ms'))} ms); the end "
                "to end time over no batching on the same arrivals is shown beside it. " + b.note,
                case=case,
            )
        )
        out.append(series_table(b, "Batching per arm and round", case))
    return out


def _gptcache(ctx: ViewContext) -> list:
    out: list[Block]
    case, out = "gptcache", []
    s = ctx.aggregate(case, COMPARISON, key=COMPARISON["subject"])
    if s is None:
        return out
    speed = ", ".join(
        f"{label} {_text(_median(ctx, case, name))}x"
        for label, name in (
            ("over GPTCache with SQLite on disk", "lookup.speedup_vs_gptcache"),
            ("over GPTCache with SQLite in RAM", "lookup.speedup_vs_gptcache_ram"),
            ("the torch path (control) over GPTCache on disk", "control.torch.speedup_vs_gptcache"),
        )
    )
    out.append(
        series_table(
            s,
            "GPTCache beside the harness: same data, split, model and machine (measured)",
            case,
            note=f"ONNX path's lookup P50 {speed}; thresholds chosen on the calibration split: "
            f"GPTCache {_text(_median(ctx, case, 'gptcache.threshold'))}, harness cosine "
            f"{_text(_median(ctx, case, 'nn.threshold'))}; the instrument's known "
            f"{_text(_median(ctx, case, 'instrument.delay.known_ms'))} ms wait seen as "
            f"{_text(_median(ctx, case, 'instrument.delay.embed_seen_ms'))} ms. " + s.note,
        )
    )
    out += _int8(ctx)
    out.append(_published(ctx))
    sw = ctx.aggregate(case, GPTCACHE_SWEEP, key=[GPTCACHE_SWEEP["threshold"], GPTCACHE_SWEEP["split"]])
    if sw is not None:
        out.append(series_table(sw, "GPTCache's similarity threshold: calibration and test splits", case, note=sw.note))
    return out


def _int8(ctx: ViewContext) -> list:
    """The int8 arm beside FP32 (when the run had it): throughput under concurrent clients
    against GPTCache's, and the agreement of the two arms on the run's data."""
    case, out = "gptcache", []
    c = ctx.aggregate(case, CONCURRENT, key=CONCURRENT["subject"])
    if c is not None:
        out.append(
            series_table(
                c,
                "Queries per second under concurrent clients: the int8 and FP32 lookups against GPTCache (measured)",
                case,
                note=f"int8 over GPTCache on disk {_text(_median(ctx, case, 'int8.concurrent.speedup_vs_gptcache'))}x"
                f" (in RAM {_text(_median(ctx, case, 'int8.concurrent.speedup_vs_gptcache_ram'))}x),"
                f" FP32 {_text(_median(ctx, case, 'onnx.concurrent.speedup_vs_gptcache'))}x; lookup"
                f" P50 one query at a time: int8 {_text(_median(ctx, case, 'int8.lookup.p50_ms'))}"
                f" ms, FP32 {_text(_median(ctx, case, 'onnx.lookup.p50_ms'))} ms (the split is in "
                f"the table above); the instrument (int8 embedding every query twice) at "
                f"{_text(_median(ctx, case, 'instrument.double.qps_over_int8'))}x the int8 "
                f"path's queries/s. " + c.note,
            )
        )
    a = ctx.aggregate(case, INT8_AGREEMENT, key=INT8_AGREEMENT["arm"])
    if a is not None:
        out.append(
            series_table(
                a,
                "The int8 arm beside FP32: same decisions, same answers, precision and recall (test split)",
                case,
                note=f"int8 minus FP32: precision {_text(_median(ctx, case, 'int8.precision_minus_fp32_pp'))}"
                f" pp, recall {_text(_median(ctx, case, 'int8.recall_minus_fp32_pp'))} pp; the "
                f"timed int8 lookups returned the accuracy pass's answer for "
                f"{_text(_median(ctx, case, 'int8.served_same_answer_pct'))}% of their queries. " + a.note,
            )
        )
    return out


def _published(ctx: ViewContext) -> Table:
    """GPTCache's own published counts (the ledger's figures), precision and recall computed from them."""
    ths = ctx.figure("I24", "gptcache_published_thresholds") or []
    n = ctx.figure("I24", "gptcache_published_queries")
    cols = [ctx.figure("I24", f"gptcache_published_{k}") or [] for k in ("correct", "wrong", "miss", "s_per_query")]
    rows = []
    for i, t in enumerate(ths):
        c, w, miss, sec = (col[i] if i < len(col) else None for col in cols)
        prec = 100 * c / (c + w) if c is not None and w is not None and c + w else None
        rec = 100 * c / n if c is not None and n else None
        rows.append([t, c, w, miss, prec, rec, 1000 * sec if sec is not None else None])
    return Table(
        "GPTCache's published counts (its own benchmark: published, not measured here)",
        ["threshold", "correct", "wrong", "miss", "precision % (computed)", "recall % (computed)", "ms per query"],
        rows,
        note=f"GPTCache's examples/README.md over its {n or '-'} paraphrase queries: every origin inserted, "
        "no query that must miss, its ALBERT ONNX model, other hardware; t is about cosine >= 2t - 1",
        case="gptcache",
    )


def _embed(ctx: ViewContext) -> list:
    s = ctx.aggregate("embed-perf", ROUNDS, key=[ROUNDS["path"], ROUNDS["round"]])
    return [series_table(s, "Embedding throughput, same process, alternating passes", "embed-perf")] if s else []


@view(SUITE)
def semantic_cache_view(ctx: ViewContext) -> list:
    return _semantic(ctx) + _gptcache(ctx) + _embed(ctx) + _ttft(ctx) + _memory(ctx) + _entity(ctx)
