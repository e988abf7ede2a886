"""eviction-trace: the real token trace's statistics (C19): the fitted Zipf exponent, the head
and its share of the requests, the head-size sweep, the instrument (a Zipf trace whose head share
the law gives) and the mechanism-off control (uniform draws over the same tokens)."""

from __future__ import annotations

import json

import numpy as np

from harness.mechanisms.cache_policies import traces
from harness.model.driver_contract import CaseContext, Metric, Param, Record, Series
from harness.model.driver_helpers import write_csv

from .common import HEAD_DEFINITION, build_trace, corpus_passes, real_docs, text_path
from .series import HEAD_SWEEP, RANK_FREQUENCY, TOP_TOKENS

TRACE_CASE_PARAMS = {
    "head_sweep": Param(
        list,
        [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2],
        "head sizes (fractions of the distinct tokens) whose share is reported besides head_fraction's",
        min=1e-6,
        max=0.999999,
    ),
    "zipf_control_alpha": Param(
        float, 1.0, "the instrument: exponent of the Zipf trace whose head share is known", min=0.1, max=3
    ),
    "skew": Param(
        bool,
        True,
        "false: the measured trace is replaced by uniform draws over its tokens (the mechanism removed; for tests)",
    ),
}


def uniform_control(trace: traces.Trace, seed: int) -> np.ndarray:
    """The mechanism-off trace of C19: as many requests, drawn uniformly over the same distinct
    tokens (no long tail), so the same head definition must give a share near its size."""
    uniq = np.unique(trace.ids)
    return np.random.default_rng(seed).choice(uniq, size=len(trace))


def zipf_instrument(n_requests: int, n_keys: int, alpha: float, head_fraction: float, seed: int) -> tuple:
    """The instrument of C19: (measured, expected) head share (%) of a Zipf(alpha) trace over as
    many keys and requests as the measured trace. The expected share is computed from the law
    (the ceil(head_fraction x keys) most probable keys' total probability); the measured one
    goes through the same head definition as the real trace, so a broken head or share shows."""
    z = traces.zipf_trace(n_requests, n_keys, alpha, seed)
    probs = traces.zipf_probabilities(n_keys, alpha)
    k = max(1, int(np.ceil(head_fraction * n_keys)))
    measured = 100.0 * traces.head_share(z.ids, traces.head_ids(z.ids, head_fraction))
    return measured, 100.0 * float(probs[:k].sum())


def _write_token_counts(ctx: CaseContext, trace: traces.Trace, st: dict, name) -> None:
    uniq, cnt = np.unique(trace.ids, return_counts=True)
    order = np.lexsort((uniq, -cnt))
    write_csv(
        ctx.raw_path("token_counts.csv"),
        ["rank", "token_id", "token", "count", "in_head"],
        ([r, int(uniq[i]), name(uniq[i]), int(cnt[i]), int(r <= st["head_size"])] for r, i in enumerate(order, 1)),
    )
    ctx.raw_path("trace_stats.json").write_text(json.dumps({**st, "meta": trace.meta}, indent=1))


def _head_metrics(p: dict, trace: traces.Trace, pre: str) -> tuple[dict, Series]:
    """The head share at the judged head size, the head-size sweep, the instrument and the
    mechanism-off control."""
    uniform = uniform_control(trace, trace.seed)
    measured, expected = zipf_instrument(
        len(trace), trace.n_distinct, p["zipf_control_alpha"], p["head_fraction"], trace.seed
    )
    alpha = p["zipf_control_alpha"]
    m = {
        f"{pre}.uniform_head_share_pct": Metric(
            100.0 * traces.head_share(uniform, traces.head_ids(uniform, p["head_fraction"])),
            "%",
            None,
            "mechanism off: the same head definition on a uniform trace over the same tokens (no long tail)",
        ),
        f"{pre}.zipf_control.head_share_pct": Metric(
            measured,
            "%",
            None,
            f"the instrument: the same head definition on a Zipf({alpha:g}) trace over as many "
            "keys and requests (measured)",
        ),
        f"{pre}.zipf_control.expected_head_share_pct": Metric(
            expected,
            "%",
            None,
            f"computed, not measured: the Zipf({alpha:g}) law's share of its most probable "
            f"{100 * p['head_fraction']:g}% of keys",
        ),
    }
    cols: dict[str, list] = {"head_fraction": [], "head_size": [], "share_pct": [], "uniform_share_pct": []}
    for f in sorted(set(p["head_sweep"]) | {p["head_fraction"]}):
        h = traces.head_ids(trace.ids, f)
        share = 100.0 * traces.head_share(trace.ids, h)
        m[f"{pre}.head{100 * f:g}_share_pct"] = Metric(
            share, "%", None, f"share of requests to the top {100 * f:g}% of distinct tokens"
        )
        for col, v in (
            ("head_fraction", f),
            ("head_size", len(h)),
            ("share_pct", share),
            ("uniform_share_pct", 100.0 * traces.head_share(uniform, traces.head_ids(uniform, f))),
        ):
            cols[col].append(v)
    sweep = HEAD_SWEEP.make(cols)
    return m, sweep


def run_trace(ctx: CaseContext) -> Record:
    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    if not p["skew"]:  # the mechanism removed: uniform draws over the same tokens stand for the trace
        trace = traces.Trace(
            trace.name,
            uniform_control(trace, trace.seed + 7919),
            trace.seed,
            {**trace.meta, "skew": "removed: uniform draws over the same tokens"},
        )
    ctx.log(f"{trace.name} trace: {len(trace)} requests, seed {trace.seed}")
    st = traces.trace_stats(trace, p["head_fraction"])
    counts = traces.rank_counts(trace.ids)
    uniq, cnt = np.unique(trace.ids, return_counts=True)
    order = np.lexsort((uniq, -cnt))
    tok = real_docs(str(text_path(p)), p["tokenizer"])[1] if p["trace"] == "real" else None

    def name(token_id) -> str:
        return tok.id_to_token(int(token_id)) if tok else str(int(token_id))

    _write_token_counts(ctx, trace, st, lambda t: name(t) if tok else "")
    s = st["zipf_mle"]
    ranks = np.unique(np.round(np.logspace(0, np.log10(len(counts)), 40)).astype(int))
    fitted = counts.sum() * ranks.astype(float) ** -s / (np.arange(1, len(counts) + 1) ** -s).sum()
    pre = "real" if p["trace"] == "real" else "zipf"
    metrics = {
        f"{pre}.zipf_exponent": Metric(s, "", None, "maximum-likelihood Zipf exponent of the rank-frequency list"),
        f"{pre}.zipf_exponent_lsq": Metric(st["zipf_lsq"], "", None, "least-squares log-log slope (for comparison)"),
        f"{pre}.distinct_tokens": Metric(st["distinct"], "tokens"),
        f"{pre}.head_size": Metric(st["head_size"], "tokens"),
        f"{pre}.head_share_pct": Metric(
            100.0 * st["head_share"],
            "%",
            None,
            f"share of requests to the top {100 * p['head_fraction']:g}% of distinct tokens (C19)",
        ),
    }
    head, sweep = _head_metrics(p, trace, pre)
    metrics.update(head)
    passes = corpus_passes(trace)
    if passes is not None:
        metrics[f"{pre}.corpus_passes"] = Metric(passes, "passes", None, "trace requests / tokens in the corpus")
    top = order[:20]
    series = {
        TOP_TOKENS.name: TOP_TOKENS.make(
            {
                "rank": list(range(1, len(top) + 1)),
                "token": [name(uniq[i]) for i in top],
                "count": [int(cnt[i]) for i in top],
                "share_pct": [100.0 * cnt[i] / len(trace) for i in top],
            },
            note=HEAD_DEFINITION,
        ),
        RANK_FREQUENCY.name: RANK_FREQUENCY.make(
            {
                "rank": [int(r) for r in ranks],
                "requests": [int(counts[r - 1]) for r in ranks],
                "zipf_fit": [float(v) for v in fitted],
            }
        ),
        HEAD_SWEEP.name: sweep,
    }
    return Record(
        "ok", metrics=metrics, series=series, details={"trace": {**st, "meta": trace.meta, "seed": trace.seed}}
    )
