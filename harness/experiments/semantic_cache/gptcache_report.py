"""Metrics and series of the `gptcache` case from its measured counts and timings (what is
measured, not how it is shown: the suite's view builds the tables)."""

from __future__ import annotations

from harness.driver_contract import CaseOutcome, Metric, Series
from harness.driver_helpers import latency_metrics
from harness.experiments.semantic_cache.keys_case import SWEEP_COLUMNS, scheme_metrics, sweep_row

# subject (row of the comparison table) -> (latency arm, accuracy prefix or None)
SUBJECTS = {
    "harness, torch embedding (before)": ("torch", "nn"),
    "harness, ONNX Runtime embedding (after)": ("onnx", "nn"),
    "GPTCache, SQLite on the run's disk": ("gptcache", "gptcache"),
    "GPTCache, SQLite in RAM (tmpfs)": ("gptcache_ram", "gptcache"),
    "instrument: ONNX path + known wait in the embedding": ("instrument.delay", None),
}
COLUMNS = ["subject", "correct_hits", "wrong_hits", "precision_pct", "recall_pct", "lookup_p50_ms", "lookup_p95_ms",
           "embed_p50_ms", "embed_p95_ms", "search_p50_ms", "search_p95_ms", "store_p50_ms", "store_p95_ms",
           "gptcache_p50_over_this"]
PART_NOTES = {"embed": "the query embedding, one query",
              "search": "harness: numpy exact cosine NN + threshold; GPTCache: Faiss search + SearchDistanceEvaluation",
              "store": "harness: GET of the nearest entry from the Redis Cluster; GPTCache: the rest of get() "
                       "(SQLite fetch and access update, its per-hit report row, pre/post-processing)",
              "lookup": "the whole lookup, one query"}


def _counts(out: CaseOutcome, prefix: str, c, note: str) -> None:
    out.metrics.update(scheme_metrics(prefix, c, note))
    out.metrics[f"{prefix}.correct_hits"] = Metric(c.correct, "queries", "higher", note)
    out.metrics[f"{prefix}.wrong_hits"] = Metric(c.wrong, "queries", "lower", note)


def accuracy_outputs(out: CaseOutcome, ours: dict, theirs: dict, n_test: int) -> None:
    m = out.metrics
    _counts(out, "nn", ours["test"], f"the harness's exact cosine NN at cosine >= {ours['threshold']:g}, test split")
    _counts(out, "gptcache", theirs["test"], f"GPTCache at similarity_threshold {theirs['threshold']:g} (real get() "
                                             f"calls), test split")
    m["nn.threshold"] = Metric(ours["threshold"], "", None, "cosine, chosen on the calibration split (best F1)")
    m["gptcache.threshold"] = Metric(theirs["threshold"], "", None, "GPTCache's similarity_threshold, chosen on the "
                                                                    "calibration split (best F1) with its own scores")
    m["gptcache.recall_minus_nn_pp"] = Metric(m["gptcache.recall_pct"].value - m["nn.recall_pct"].value, "pp", None,
                                              "GPTCache's recall minus the harness's, same vectors and split")
    if "gptcache.precision_pct" in m and "nn.precision_pct" in m:
        m["gptcache.precision_minus_nn_pp"] = Metric(m["gptcache.precision_pct"].value - m["nn.precision_pct"].value,
                                                     "pp", None, "GPTCache's precision minus the harness's")
    _counts(out, "control.gptcache_no_threshold", theirs["no_threshold"],
            "GPTCache at threshold 0: every nearest entry accepted (the similarity decision removed), test split")
    _counts(out, "control.gptcache_exact_only", theirs["exact_only"],
            "GPTCache at threshold 1: only identical vectors hit (semantic matching removed), test split")
    r = theirs["repeats"]
    m["instrument.repeats.gptcache.correct_hit_rate_pct"] = Metric(
        100 * r.correct_hit_rate, "%", "higher",
        f"the instrument: the {r.queries} inserted prompts asked GPTCache again verbatim at the chosen threshold")
    rows = [[t, *sweep_row(split, cc)] for t, split, cc in theirs["sweep"]]
    out.series["gptcache_sweep"] = Series(
        {c: [r[i] for r in rows] for i, c in enumerate(["threshold", *SWEEP_COLUMNS])}, {},
        f"GPTCache's calibration: one pass of real get() calls at threshold 0 (its scores); a hit at t is a score "
        f">= t; the test-split row at the chosen threshold is re-measured with real calls ({n_test} queries)")


def latency_outputs(out: CaseOutcome, tm, p: dict, n_queries: int) -> None:
    m = out.metrics
    for arm in tm.rows:
        for part in ("embed", "search", "store", "lookup"):
            m.update(latency_metrics(f"{arm}.{part}", tm.part(arm, part), qs=(50, 95), note=PART_NOTES[part]))
    fast = "ONNX Runtime" if p["fast_embedding"] == "onnx" else "torch (the ONNX session removed)"
    for theirs in ("gptcache", "gptcache_ram"):
        if theirs not in tm.rows:
            continue
        sfx = "" if theirs == "gptcache" else "_ram"
        m[f"lookup.speedup_vs_gptcache{sfx}"] = Metric(tm.p50(theirs) / tm.p50("onnx"), "x", "higher",
                                                       f"GPTCache's lookup P50 / the harness's with the {fast} embedding")
        m[f"control.torch.speedup_vs_gptcache{sfx}"] = Metric(
            tm.p50(theirs) / tm.p50("torch"), "x", None,
            "the ONNX session removed: GPTCache's lookup P50 / the harness's with the torch embedding")
    m["instrument.delay.known_ms"] = Metric(float(p["instrument_delay_ms"]), "ms", None, "the wait added")
    m["instrument.delay.embed_seen_ms"] = Metric(tm.p50("instrument.delay", "embed") - tm.p50("onnx", "embed"), "ms",
                                                 None, "embedding P50 of the delayed arm minus the fast arm's")
    out.series["comparison"] = _comparison(m, tm, (
        f"{n_queries} queries, each through every subject (order rotated per query); correct/wrong hits, precision "
        f"and recall on the test split at each subject's calibrated threshold (the harness's torch and ONNX paths "
        f"make the same decisions: same model, vectors equal to cosine >= 0.9999); GPTCache embeds with the same "
        f"torch all-MiniLM-L6-v2 as the harness's 'before' path; one thread everywhere"))


def _comparison(m: dict, tm, note: str) -> Series:
    rows = []
    ref = {arm: tm.p50(arm) for arm in ("gptcache", "gptcache_ram") if arm in tm.rows}
    for subject, (arm, acc) in SUBJECTS.items():
        if arm not in tm.rows:
            continue
        row = [subject]
        for k in ("correct_hits", "wrong_hits", "precision_pct", "recall_pct"):
            row.append(m[f"{acc}.{k}"].value if acc and f"{acc}.{k}" in m else None)
        for part in ("lookup", "embed", "search", "store"):
            row += [m[f"{arm}.{part}.p50_ms"].value, m[f"{arm}.{part}.p95_ms"].value]
        row.append(ref["gptcache"] / tm.p50(arm) if "gptcache" in ref else None)
        rows.append(row)
    return Series({c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)},
                  {c: ("ms" if c.endswith("_ms") else "%" if c.endswith("_pct") else "") for c in COLUMNS}, note)
