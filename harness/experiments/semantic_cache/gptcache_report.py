"""Metrics and series of the `gptcache` case from its measured counts and timings (what is
measured, not how it is shown: the suite's view builds the tables)."""

from __future__ import annotations

from typing import cast

from harness.experiments.semantic_cache.keys_case import scheme_metrics, sweep_row
from harness.experiments.semantic_cache.series import (
    COMPARISON,
    COMPARISON_NO_UNIT,
    CONCURRENT,
    GPTCACHE_SWEEP,
    INT8_AGREEMENT,
)
from harness.model.driver_contract import Metric, Record, Series
from harness.model.driver_helpers import latency_metrics

# subject (row of the comparison table) -> (latency arm, accuracy prefix or None)
SUBJECTS = {
    "harness, torch embedding (before)": ("torch", "nn"),
    "harness, ONNX Runtime embedding (after)": ("onnx", "nn"),
    "harness, ONNX Runtime int8 embedding (int8 arm)": ("int8", "int8"),
    "GPTCache, SQLite on the run's disk": ("gptcache", "gptcache"),
    "GPTCache, SQLite in RAM (tmpfs)": ("gptcache_ram", "gptcache"),
    "instrument: ONNX path + known wait in the embedding": ("instrument.delay", None),
}
PART_NOTES = {
    "embed": "the query embedding, one query",
    "search": "harness: numpy exact cosine NN + threshold; GPTCache: Faiss search + SearchDistanceEvaluation",
    "store": "harness: GET of the nearest entry from the Redis Cluster; GPTCache: the rest of get() "
    "(SQLite fetch and access update, its per-hit report row, pre/post-processing)",
    "lookup": "the whole lookup, one query",
}


def _counts(out: Record, prefix: str, c, note: str) -> None:
    out.metrics.update(scheme_metrics(prefix, c, note))
    out.metrics[f"{prefix}.correct_hits"] = Metric(c.correct, "queries", "higher", note)
    out.metrics[f"{prefix}.wrong_hits"] = Metric(c.wrong, "queries", "lower", note)


def accuracy_outputs(out: Record, ours: dict, theirs: dict, n_test: int) -> None:
    m = out.metrics
    _counts(out, "nn", ours["test"], f"the harness's exact cosine NN at cosine >= {ours['threshold']:g}, test split")
    _counts(
        out,
        "gptcache",
        theirs["test"],
        f"GPTCache at similarity_threshold {theirs['threshold']:g} (real get() calls), test split",
    )
    t = theirs["test"]
    m["gptcache.answered_pct"] = Metric(
        100.0 * t.hits / t.queries,
        "%",
        "higher",
        "test queries GPTCache answered from its cache (right or wrong: none of them reached the LLM), "
        "counted by the client from what get() returned",
    )
    m["reference.gptcache_counter.answered_pct"] = Metric(
        100.0 * theirs["test_own_hits"] / t.queries,
        "%",
        None,
        "the same pass's hits as GPTCache counted them itself (its report's hint_cache_count), over the queries asked",
    )
    m["nn.threshold"] = Metric(ours["threshold"], "", None, "cosine, chosen on the calibration split (best F1)")
    m["gptcache.threshold"] = Metric(
        theirs["threshold"],
        "",
        None,
        "GPTCache's similarity_threshold, chosen on the calibration split (best F1) with its own scores",
    )
    m["gptcache.recall_minus_nn_pp"] = Metric(
        # recall and precision: set by _counts (scheme_metrics), always numbers
        cast(float, m["gptcache.recall_pct"].value) - cast(float, m["nn.recall_pct"].value),
        "pp",
        None,
        "GPTCache's recall minus the harness's, same vectors and split",
    )
    if "gptcache.precision_pct" in m and "nn.precision_pct" in m:
        m["gptcache.precision_minus_nn_pp"] = Metric(
            cast(float, m["gptcache.precision_pct"].value) - cast(float, m["nn.precision_pct"].value),
            "pp",
            None,
            "GPTCache's precision minus the harness's",
        )
    _counts(
        out,
        "control.gptcache_no_threshold",
        theirs["no_threshold"],
        "GPTCache at threshold 0: every nearest entry accepted (the similarity decision removed), test split",
    )
    _counts(
        out,
        "control.gptcache_exact_only",
        theirs["exact_only"],
        "GPTCache at threshold 1: only identical vectors hit (semantic matching removed), test split",
    )
    r = theirs["repeats"]
    m["instrument.repeats.gptcache.correct_hit_rate_pct"] = Metric(
        100 * r.correct_hit_rate,
        "%",
        "higher",
        f"the instrument: the {r.queries} inserted prompts asked GPTCache again verbatim at the chosen threshold",
    )
    rows = [[t, *sweep_row(split, cc)] for t, split, cc in theirs["sweep"]]
    out.series[GPTCACHE_SWEEP.name] = GPTCACHE_SWEEP.lists(
        rows,
        f"GPTCache's calibration: one pass of real get() calls at threshold 0 (its scores); a hit at t is a score "
        f">= t; the test-split row at the chosen threshold is re-measured with real calls ({n_test} queries)",
    )


def latency_outputs(out: Record, tm, p: dict, n_queries: int) -> None:
    m = out.metrics
    for arm in tm.rows:
        for part in ("embed", "search", "store", "lookup"):
            m.update(latency_metrics(f"{arm}.{part}", tm.part(arm, part), qs=(50, 95), note=PART_NOTES[part]))
    fast = "ONNX Runtime" if p["fast_embedding"] == "onnx" else "torch (the ONNX session removed)"
    for theirs in ("gptcache", "gptcache_ram"):
        if theirs not in tm.rows:
            continue
        sfx = "" if theirs == "gptcache" else "_ram"
        m[f"lookup.speedup_vs_gptcache{sfx}"] = Metric(
            tm.p50(theirs) / tm.p50("onnx"),
            "x",
            "higher",
            f"GPTCache's lookup P50 / the harness's with the {fast} embedding",
        )
        m[f"control.torch.speedup_vs_gptcache{sfx}"] = Metric(
            tm.p50(theirs) / tm.p50("torch"),
            "x",
            None,
            "the ONNX session removed: GPTCache's lookup P50 / the harness's with the torch embedding",
        )
    if "int8" in tm.rows:
        for theirs in ("gptcache", "gptcache_ram"):
            if theirs in tm.rows:
                m[f"int8.speedup_vs_{theirs}"] = Metric(
                    tm.p50(theirs) / tm.p50("int8"),
                    "x",
                    "higher",
                    f"{theirs}'s lookup P50 / the int8 path's, one query at a time",
                )
    m["instrument.delay.known_ms"] = Metric(float(p["instrument_delay_ms"]), "ms", None, "the wait added")
    m["instrument.delay.embed_seen_ms"] = Metric(
        tm.p50("instrument.delay", "embed") - tm.p50("onnx", "embed"),
        "ms",
        None,
        "embedding P50 of the delayed arm minus the fast arm's",
    )
    out.series[COMPARISON.name] = _comparison(
        m,
        tm,
        (
            f"{n_queries} queries, each through every subject (order rotated per query); correct/wrong hits, precision "
            f"and recall on the test split at each subject's calibrated threshold (the harness's torch and ONNX paths "
            f"make the same decisions: same model, vectors equal to cosine >= 0.9999); GPTCache embeds with the same "
            f"torch all-MiniLM-L6-v2 as the harness's 'before' path; one thread everywhere"
        ),
    )


def _comparison(m: dict, tm, note: str) -> Series:
    rows = []
    ref = {arm: tm.p50(arm) for arm in ("gptcache", "gptcache_ram") if arm in tm.rows}
    for subject, (arm, acc) in SUBJECTS.items():
        if arm not in tm.rows:
            continue
        row: list[str | float | None] = [subject]
        for k in ("correct_hits", "wrong_hits", "precision_pct", "recall_pct"):
            row.append(m[f"{acc}.{k}"].value if acc and f"{acc}.{k}" in m else None)
        for part in ("lookup", "embed", "search", "store"):
            row += [m[f"{arm}.{part}.p50_ms"].value, m[f"{arm}.{part}.p95_ms"].value]
        row.append(ref["gptcache"] / tm.p50(arm) if "gptcache" in ref else None)
        rows.append(row)
    return COMPARISON.lists(rows, note, units=COMPARISON_NO_UNIT)


def _diff(m: dict, a: str, b: str, name: str, note: str) -> None:
    if a in m and b in m:
        m[name] = Metric(m[a].value - m[b].value, "pp", None, note)


def int8_outputs(out: Record, int8: dict, n_test: int, dataset: str) -> None:
    """The int8 arm's accuracy pass: its counts, its agreement with FP32 query by query, and the
    instrument (its query vectors turned to a known cosine of themselves)."""
    m, acc, noisy = out.metrics, int8["acc"], int8["noisy"]
    _counts(
        out,
        "int8",
        acc["test"],
        f"the int8 path's exact cosine NN at cosine >= {acc['threshold']:g} on int8 vectors, test split",
    )
    m["int8.threshold"] = Metric(acc["threshold"], "", None, "cosine: FP32's, chosen on the calibration split")
    for k in ("precision", "recall"):
        _diff(
            m,
            f"int8.{k}_pct",
            f"nn.{k}_pct",
            f"int8.{k}_minus_fp32_pp",
            f"the int8 path's {k} minus FP32's, same split, each against the dataset's labels",
        )
    for sfx, ag, where in (("", int8["agree"], "test split"), (".all", int8["agree_all"], "every query")):
        m[f"int8{sfx}.same_decision_pct"] = Metric(
            ag["same_decision_pct"], "%", None, f"queries where int8 and FP32 both hit or both miss ({where})"
        )
        m[f"int8{sfx}.same_answer_pct"] = Metric(
            ag["same_answer_pct"], "%", None, f"queries where int8 and FP32 give the same answer ({where})"
        )
    _counts(
        out,
        "instrument.noisy",
        noisy["test"],
        f"the instrument: the int8 query vectors turned to cosine "
        f"{int8['noise_cosine']:g} of themselves, same rule, test split",
    )
    m["instrument.noisy.cosine"] = Metric(int8["noise_cosine"], "", None, "the known turn of each query vector")
    shifts = [
        abs(cast(float, m[f"instrument.noisy.{k}_pct"].value) - cast(float, m[f"int8.{k}_pct"].value))
        for k in ("precision", "recall")
        if f"instrument.noisy.{k}_pct" in m and f"int8.{k}_pct" in m
    ]
    if shifts:
        m["instrument.noisy.accuracy_shift_pp"] = Metric(
            max(shifts),
            "pp",
            None,
            "the instrument's larger move of precision or recall from the int8 arm's: the comparison must see it",
        )
    rows = []
    for arm, pre, ag, th in (
        ("FP32 (ONNX Runtime, the default)", "nn", None, None),
        ("int8 (dynamic per-channel)", "int8", int8["agree"], acc["threshold"]),
        (
            f"instrument: int8 turned to cosine {int8['noise_cosine']:g}",
            "instrument.noisy",
            int8["noisy_agree"],
            noisy["threshold"],
        ),
    ):
        rows.append(
            [
                arm,
                th if th is not None else m["nn.threshold"].value,
                *(
                    m[f"{pre}.{k}"].value if f"{pre}.{k}" in m else None
                    for k in ("correct_hits", "wrong_hits", "precision_pct", "recall_pct")
                ),
                100.0 if ag is None else ag["same_decision_pct"],
                100.0 if ag is None else ag["same_answer_pct"],
            ]
        )
    out.series[INT8_AGREEMENT.name] = INT8_AGREEMENT.lists(
        rows,
        f"{dataset}: {n_test} test queries at FP32's threshold (chosen on the calibration split); decisions and "
        f"answers compared with FP32's query by query, precision and recall against the dataset's labels "
        f"(every query: same decision {int8['agree_all']['same_decision_pct']:.1f}%, same answer "
        f"{int8['agree_all']['same_answer_pct']:.1f}%)",
    )


def concurrent_outputs(out: Record, totals: dict, p: dict) -> None:
    """Queries per second of every subject under `concurrent_clients` client threads, and the ratios."""
    m, clients = out.metrics, p["concurrent_clients"]
    qps = {arm: n / t for arm, (n, t) in totals.items()}
    for arm, v in qps.items():
        m[f"concurrent.{arm}.qps"] = Metric(v, "queries/s", "higher", f"{clients} client threads, same queries")
    for theirs in ("gptcache", "gptcache_ram"):
        if theirs not in qps:
            continue
        sfx = "" if theirs == "gptcache" else "_ram"
        for arm, what in (("int8", "the int8 path's"), ("onnx", "the FP32 path's (quantization removed)")):
            m[f"{arm}.concurrent.speedup_vs_gptcache{sfx}"] = Metric(
                qps[arm] / qps[theirs],
                "x",
                "higher" if arm == "int8" else None,
                f"{what} queries/s over {theirs}'s, {clients} concurrent clients",
            )
    m["instrument.double.qps_over_int8"] = Metric(
        qps["instrument.double"] / qps["int8"],
        "x",
        None,
        "the instrument: the int8 lookup embedding every query twice, its "
        "queries/s over the int8 path's (about 0.5 when the pass sees work)",
    )
    rows = [[arm, clients, n, v, v / qps["gptcache"]] for arm, v, n in ((a, qps[a], totals[a][0]) for a in qps)]
    out.series[CONCURRENT.name] = CONCURRENT.lists(
        rows,
        f"the same {p['concurrent_queries']} queries through each subject from {clients} client threads at once (a "
        f"shared queue), sent again until the subject has run {p['concurrent_min_s']:g} s in the round; "
        f"{p['concurrent_rounds']} rounds, the subjects' order rotated per round; GPTCache "
        f"embeds with the torch all-MiniLM-L6-v2, every model session on one thread",
    )


def served_outputs(out: Record, served: dict, int8: dict) -> None:
    """The answers the timed lookups (interleaved and concurrent) gave their callers, against
    the accuracy pass's answers for the same texts: the arm timed is the arm judged."""
    for arm, ref, note in (
        ("int8", int8["answers"], "the int8 arm's accuracy pass"),
        ("onnx", int8["fp32_answers"], "FP32's accuracy pass (torch vectors)"),
    ):
        pairs = served.get(arm, [])
        if pairs:
            same = sum(ans == ref[t] for t, ans in pairs)
            out.metrics[f"{arm}.served_same_answer_pct"] = Metric(
                100 * same / len(pairs),
                "%",
                None,
                f"the {len(pairs)} answers the timed {arm} lookups returned, the same as {note} gave for the text",
            )
