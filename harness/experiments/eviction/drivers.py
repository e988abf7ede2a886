"""Harness drivers of the eviction experiment (suite `eviction`).

eviction-trace          the real token trace: Zipf fit, head, head share (C19)
eviction-simulate       libCacheSim + hybrid + OPT across cache sizes (C18, simulated)
eviction-crosscheck     every simulated policy against reference.py on a short trace
eviction-redis          real redis-server per maxmemory-policy and knob (standalone)
eviction-redis-cluster  the same replay on the target Redis Cluster (maxmemory per node)

Drivers return metrics and series; the suite's view (harness/experiments/eviction/view.py)
builds the tables and charts and takes the source's numbers from the ledger (C18 figures).
Controls: seeded random eviction on the same trace and sizes (simulate), allkeys-random on
the same replay (redis), and the head share of a uniform trace over the same tokens (trace).
"""

from __future__ import annotations

import json
import time
from functools import lru_cache

import numpy as np

from harness.base.errors import BadInput
from harness.experiments.eviction import metrics, standin
from harness.infra.redis_server import require_tool
from harness.mechanisms.cache_policies import reference, traces
from harness.mechanisms.cache_policies import sim as simulate
from harness.mechanisms.cache_policies.sim import ALL_POLICIES, CONTROL_POLICY, LIB_BELADY, LIB_POLICIES
from harness.model.driver_contract import CaseContext, Metric, Param, Record, Series, input_path, register
from harness.model.driver_helpers import write_csv

from .redis_replay import (
    RECENCY_PROBE_SLEEP_S,
    config_facts,
    key_names,
    parse_runs,
    refuse_names_not_in_redis,
    replay_cluster,
    replay_standalone,
)
from .series import CURVES, HEAD_SWEEP, ORDERING, PAIRS, RANK_FREQUENCY, RPS, RUNS, TOP_TOKENS

ORDER = ("lru", "lfu", "hybrid")  # the source's ordering of hit rates: lru < lfu < "lru-lfu" (our hybrid)
HYBRID_DEFINITION = (
    "hybrid = LRU-K eviction with LFU admission: the victim is LRU-K's (objects with fewer than K "
    "accesses since insertion first, oldest insertion first; otherwise the oldest K-th most recent "
    "access); every key's access count over the trace so far is kept, also after eviction, and on a "
    "miss in a full cache the new object is admitted only if its count exceeds the victim's."
)
HEAD_DEFINITION = (
    "head = the ceil(head_fraction x distinct) most frequent tokens of the whole trace "
    "(ties by smaller token id); long-tail retention = hit rate on requests for tokens "
    "outside the head"
)

TRACE_PARAMS = {
    "trace": Param(str, "real", "real: the tokenized text; zipf: synthetic Zipf draws", ("real", "zipf")),
    "n_requests": Param(int, 200000, "requests (tokens) in the trace", min=100),
    "seed": Param(int, 1, "seed of the text order / Zipf draws; repetition r uses seed + r - 1"),
    "head_fraction": Param(
        float, 0.01, "the head: this fraction of the distinct tokens, most frequent first", min=1e-6, max=0.999999
    ),
    "text_file": Param(
        str, "data/gptcache_mock_data.json", "JSON list of {origin, similar} texts (relative to the repo)"
    ),
    "tokenizer": Param(str, "minilm", "the real tokenizer: all-MiniLM-L6-v2's WordPiece", traces.TOKENIZERS),
    "zipf_alpha": Param(float, 1.0, "Zipf exponent of the synthetic trace", min=0),
    "zipf_keys": Param(int, 10000, "distinct keys of the synthetic trace", min=2),
}


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


def _check_trace(where: str, p: dict) -> None:
    refuse_names_not_in_redis(where, p)


def _text_path(p: dict):

    return input_path(p["text_file"])


@lru_cache(maxsize=4)
def _real_docs(path: str, tokenizer: str):
    tok = traces.load_tokenizer(tokenizer)
    return tuple(traces.tokenize(traces.load_texts(path), tok)), tok


def build_trace(p: dict, repetition: int = 1, n_requests: int | None = None) -> traces.Trace:
    seed = p["seed"] + repetition - 1
    n = n_requests or p["n_requests"]
    if p["trace"] == "zipf":
        return traces.zipf_trace(n, p["zipf_keys"], p["zipf_alpha"], seed)
    docs, _ = _real_docs(str(_text_path(p)), p["tokenizer"])
    t = traces.text_trace(list(docs), n, seed, name="real")
    t.meta.update({"text_file": p["text_file"], "tokenizer": p["tokenizer"]})
    return t


def corpus_passes(trace: traces.Trace) -> float | None:
    """How many times the trace goes through the corpus (requests / corpus tokens); None for
    a synthetic trace."""
    total = trace.meta.get("corpus_tokens")
    return len(trace) / total if total else None


def percent(x: float, note: str = "") -> Metric:
    return Metric(x, "%", "higher", note)


# ---- eviction-trace ------------------------------------------------------------------


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


@register(
    "eviction-trace",
    params=dict(TRACE_PARAMS, **TRACE_CASE_PARAMS),
    check=_check_trace,
    description="token trace statistics: fitted Zipf exponent, head size and head share (C19)",
    metrics=metrics.TRACE,
)
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
    tok = _real_docs(str(_text_path(p)), p["tokenizer"])[1] if p["trace"] == "real" else None

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


# ---- eviction-simulate -----------------------------------------------------------------

SIM_PARAMS = {
    **TRACE_PARAMS,
    "policies": Param(list, list(ALL_POLICIES), "policies to simulate (opt is always run)", ALL_POLICIES),
    "size_fractions": Param(
        list, [0.005, 0.01, 0.02, 0.05, 0.1, 0.2], "cache sizes as fractions of the distinct tokens", min=1e-6, max=1
    ),
    "table_fraction": Param(
        float, 0.05, "the cache size (fraction of distinct tokens) of the claim table and metrics", min=1e-6, max=1
    ),
    "ordering_fractions": Param(
        list,
        [0.01, 0.02, 0.05, 0.1, 0.2],
        "sizes (fractions of distinct tokens, each one of size_fractions) at which the "
        "ordering lru < lfu < hybrid is checked",
        min=1e-6,
        max=1,
    ),
    "hybrid_k": Param(int, 2, "K of the hybrid's LRU-K part", min=1),
    "rps_requests": Param(int, 1000000, "requests of the trace timed for requests/s per policy (0 = skip)", min=0),
    "calibrate_lru_hit_pct": Param(
        (float, type(None)),
        None,
        "also simulate every policy at the cache size where exact LRU first reaches this "
        "hit rate on the trace (the suite's copy of the source's LRU figure: the source "
        "gives no cache size); null: no such size",
        min=0.001,
        max=99.999,
    ),
    "as_random": Param(
        list,
        [],
        "policies simulated as seeded random eviction under their own names (the mechanism removed; for tests)",
        ALL_POLICIES,
    ),
    "standin_lruk_k": Param(
        int,
        2,
        "the hybrid's stand-in LRU-K (LRU-K eviction without the hybrid's LFU "
        "admission) at the calibrated size: its K (sim.calibrated.standin.lruk.*; the "
        "ledger fixes it at the hybrid's K)",
        min=2,
    ),
    "standin_capacity_ratio": Param(
        float,
        1.0,
        "the hybrid's stand-in LRU-K runs at this share of the calibrated "
        "size (the ledger fixes it at 1: the hybrid's own size); the case's "
        "fact of this name is the size libCacheSim's LRU-K cache reports it "
        "ran at over the calibrated size",
        min=0.01,
        max=1,
    ),
    "reference_at_calibrated": Param(
        bool,
        True,
        "also simulate lru, lfu and the hybrid at the calibrated size with "
        "the pure-Python references (reference.* metrics: the ledger's "
        "cross-check of the calibrated hit rates)",
    ),
}


def _check_sim(where: str, p: dict) -> None:
    _check_trace(where, p)
    fr = p["size_fractions"]
    if not fr or not all(isinstance(f, (int, float)) for f in fr):
        raise BadInput(f"{where}.size_fractions: a non-empty list of numbers in (0, 1]")
    for name in ("table_fraction",):
        if p[name] not in fr:
            raise BadInput(f"{where}.{name}: {p[name]} must be one of size_fractions {fr}")
    missing = [f for f in p["ordering_fractions"] if f not in fr]
    if missing or not p["ordering_fractions"]:
        raise BadInput(
            f"{where}.ordering_fractions: each must be one of size_fractions {fr}"
            + (f"; {missing[0]} is not" if missing else "")
        )
    if any(x not in p["policies"] for x in ORDER):
        raise BadInput(f"{where}.policies: must include {', '.join(ORDER)} (the source's ordering is checked)")


def ordering_holds(rates: dict[str, float], names: tuple[str, ...]) -> bool:
    """True when the hit rates of `names` increase strictly in that order."""
    vals = [rates[n] for n in names]
    return all(a < b for a, b in zip(vals, vals[1:]))


def _sweep(ctx: CaseContext, p: dict, ids, nxt, tail, caps: list[int], policies: list[str]) -> dict:
    """policy -> capacity -> (hit rate, long-tail retention) of every policy and the random control.
    A policy named in `as_random` is simulated as random eviction (the mechanism removed)."""

    res: dict[str, dict[int, tuple]] = {x: {} for x in policies + [CONTROL_POLICY]}
    for cap in dict.fromkeys(caps):
        for pol in res:
            run_as = CONTROL_POLICY if pol in p["as_random"] else pol
            hits, _ = simulate.timed_hits(run_as, ids, nxt, cap, p["hybrid_k"])
            res[pol][cap] = traces.hit_rates(hits, tail)
        ctx.log(f"size {cap}: " + ", ".join(f"{x} {res[x][cap][0]:.1f}" for x in res))
    return res


def _curves(res: dict, fractions: list, cap_of: dict) -> dict[str, list]:
    cols: dict[str, list] = {
        "policy": [],
        "size_fraction": [],
        "capacity": [],
        "hit_rate_pct": [],
        "long_tail_pct": [],
        "gap_to_opt_pp": [],
    }
    for x in res:
        for f in fractions:
            c = cap_of[f]
            for col, v in zip(cols, (x, f, c, res[x][c][0], res[x][c][1], res["opt"][c][0] - res[x][c][0])):
                cols[col].append(v)
    return cols


def _ordering(res: dict, fractions: list, cap_of: dict) -> dict[str, list]:
    control_order = ORDER[:-1] + (CONTROL_POLICY,)
    cols: dict[str, list] = {
        "size_fraction": [],
        "capacity": [],
        **{x: [] for x in ORDER},
        CONTROL_POLICY: [],
        "holds": [],
        "holds_with_random": [],
    }
    for f in fractions:
        rates = {x: res[x][cap_of[f]][0] for x in res}
        for col, v in (
            ("size_fraction", f),
            ("capacity", cap_of[f]),
            *((x, rates[x]) for x in ORDER),
            (CONTROL_POLICY, rates[CONTROL_POLICY]),
            ("holds", int(ordering_holds(rates, ORDER))),
            ("holds_with_random", int(ordering_holds(rates, control_order))),
        ):
            cols[col].append(v)
    return cols


def _rps(ctx: CaseContext, p: dict, policies: list[str]) -> dict[str, float]:

    if not p["rps_requests"]:
        return {}
    big = build_trace(p, ctx.repetition, p["rps_requests"])
    bnxt = traces.next_access(big.ids)
    bcap = simulate.capacities(big.n_distinct, [p["table_fraction"]])[0]
    path = simulate.write_oracle_general(ctx.raw_path("rps_trace.oracleGeneral.bin"), big.ids, bnxt)
    rps = {}
    for pol in policies:
        if pol in LIB_POLICIES:
            _, r = simulate.lib_process_trace(pol, path, bcap)
        else:
            _, dt = simulate.timed_hits(pol, big.ids, bnxt, bcap, p["hybrid_k"])
            r = len(big.ids) / dt
        rps[pol] = r
    path.unlink()  # 24 bytes per request; regenerated from the seed when needed
    ctx.log("requests/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in rps.items()))
    return rps


def calibrated_capacity(ids, hit_pct: float | None, start: int = 0) -> int | None:
    """The cache size (objects) at which exact LRU reaches `hit_pct` on these requests (from
    `start` on): the source gives no cache size, so its own LRU figure fixes the size at which
    its other figures are judged. None when not asked or not reachable."""

    if hit_pct is None:
        return None
    return simulate.lru_capacity_for(simulate.lru_stack_distances(ids), hit_pct, start)


def _calibrated_metrics(ctx: CaseContext, p: dict, ids, nxt, tail, policies: list[str], pre: str) -> dict:
    cap = calibrated_capacity(ids, p["calibrate_lru_hit_pct"])
    if cap is None:
        return {}
    res = _sweep(ctx, p, ids, nxt, tail, [cap], policies)
    why = (
        f"at the cache size where exact LRU first hits {p['calibrate_lru_hit_pct']:g}% of this trace (the "
        f"suite's copy of the source's LRU figure; the source gives no cache size): {cap} tokens"
    )
    m = {
        f"{pre}.calibrated.capacity_objects": Metric(cap, "tokens", None, why),
        f"{pre}.calibrated.size_fraction_pct": Metric(100.0 * cap / len(np.unique(ids)), "% of distinct", None, why),
    }
    for x in res:
        hr, lt = res[x][cap]
        note = ("the control: seeded random eviction, same trace and size; " if x == CONTROL_POLICY else "") + why
        m[f"{pre}.calibrated.{x}.hit_rate_pct"] = percent(hr, note)
        m[f"{pre}.calibrated.{x}.long_tail_pct"] = percent(lt, note)
    m.update(_reference_metrics(ctx, p, ids, nxt, tail, cap, [x for x in REFERENCE_POLICIES if x in res], pre))
    m.update(_standin_metrics(p, ids, tail, cap, pre, why))
    return m


def _standin_metrics(p: dict, ids, tail, cap: int, pre: str, why: str) -> dict[str, Metric]:
    """The stand-ins of C18's checks and their own instruments: the LRU-K stand-in of the hybrid
    at the calibrated size (K = standin_lruk_k), and each stand-in (plain LRU, that LRU-K) on a
    short sequence whose hits and misses are known by construction (standin.py): the share of
    its requests whose outcome is the known one must be 100%."""
    k = p["standin_lruk_k"]
    hits, ran_at = standin.lruk_standin_run(ids, max(1, int(round(cap * p["standin_capacity_ratio"]))), k)
    hr, lt = traces.hit_rates(hits, tail)
    note = f"the hybrid's stand-in: LRU-{k} eviction without its LFU admission (libCacheSim LRUK), " + why
    known = (
        "; the stand-in's instrument: every request of a sequence whose outcome under it is known by "
        f"construction (a cache of {standin.KNOWN_CAPACITY}; harness/experiments/eviction/standin.py)"
    )
    return {
        f"{pre}.calibrated.standin.lruk.hit_rate_pct": percent(hr, note),
        f"{pre}.calibrated.standin.lruk.long_tail_pct": percent(lt, note),
        f"{pre}.calibrated.standin.lruk.capacity_objects": Metric(
            ran_at,
            "tokens",
            None,
            "the size the stand-in LRU-K ran at, as its libCacheSim cache reports it after the replay (cache_size); "
            f"the calibrated size is {cap}: their ratio is the case's fact standin_capacity_ratio, which the ledger "
            "fixes at 1 (its known-sequence instrument runs at a size of its own, so it cannot see this)",
        ),
        f"{pre}.standin.lru.known_sequence_agree_pct": Metric(
            standin.lru_instrument(),
            "% of requests",
            None,
            "plain LRU (the stand-in, the same simulator call as the calibrated sweep's) on a 66-request sequence: "
            "a loop that fits (hits), a loop one key too large (LRU misses all), a hot key between fresh keys "
            "(hits)" + known,
        ),
        f"{pre}.standin.lruk.known_sequence_agree_pct": Metric(
            standin.lruk_instrument(k),
            "% of requests",
            None,
            f"LRU-{k} (the stand-in) on hot keys requested {k} times, a scan of once-requested keys, the hot keys "
            "again (LRU-K keeps them, plain LRU would not)" + known,
        ),
    }


REFERENCE_POLICIES = ("lru", "lfu", "hybrid")  # the policies of the source's figures (C18)


def _reference_metrics(ctx: CaseContext, p: dict, ids, nxt, tail, cap: int, policies: list[str], pre: str) -> dict:
    """The same policies at the calibrated size, simulated again by the pure-Python references
    on the same trace: an independent count of the hits the ledger judges, so a simulator that
    forgets or miscounts shows up as a mismatch (as the crosscheck case does on a short trace).
    Every number is computed by reference.calibrated_rates (the module the ledger names as the
    reference, whose imports each run checks); this only stores them as the reference.* metrics.
    `reference_at_calibrated` false skips them."""

    if not p["reference_at_calibrated"]:
        return {}
    m: dict[str, Metric] = {}
    for x, r in reference.calibrated_rates(policies, ids, nxt, tail, cap, p["hybrid_k"]).items():
        note = f"the pure-Python reference ({r['reference']}) on the same trace and size"
        m[f"reference.{pre}.calibrated.{x}.hit_rate_pct"] = percent(r["hit_rate_pct"], note)
        m[f"reference.{pre}.calibrated.{x}.long_tail_pct"] = percent(r["long_tail_pct"], note)
        ctx.log(
            f"reference {x} at {cap}: hit rate {r['hit_rate_pct']:.2f}%, tail {r['long_tail_pct']:.2f}% "
            f"({r['seconds']:.1f} s)"
        )
    return m


def _table_metrics(p: dict, res: dict, table_cap: int, rps: dict, pre: str) -> dict[str, Metric]:
    m: dict[str, Metric] = {}
    for x in res:
        hr, lt = res[x][table_cap]
        note = "the control: seeded random eviction, same trace and size" if x == CONTROL_POLICY else ""
        m[f"{pre}.{x}.hit_rate_pct"] = percent(hr, note)
        m[f"{pre}.{x}.long_tail_pct"] = percent(lt, note)
        m[f"{pre}.{x}.gap_to_opt_pp"] = Metric(res["opt"][table_cap][0] - hr, "pp", "lower")
        if x in rps:
            impl = "libCacheSim C loop (process_trace)" if x in LIB_POLICIES else "pure Python (this package)"
            m[f"{pre}.{x}.rps"] = Metric(rps[x], "req/s", "higher", f"{p['rps_requests']} requests, {impl}")
    return m


def _ordering_metrics(p: dict, ord_cols: dict, pre: str) -> dict[str, Metric]:
    n_ord = len(ord_cols["holds"])
    held = [f for f, h in zip(ord_cols["size_fraction"], ord_cols["holds"]) if h]
    sizes = ", ".join(f"{100 * f:g}%" for f in p["ordering_fractions"])
    where = ", ".join(f"{100 * f:g}%" for f in held) or "none"
    return {
        f"{pre}.ordering_sizes_pct": Metric(
            100.0 * sum(ord_cols["holds"]) / n_ord,
            "% of sizes",
            "higher",
            f"sizes ({sizes} of distinct tokens) where hit rates order lru < lfu < hybrid; held at: {where}",
        ),
        f"{pre}.ordering_random_sizes_pct": Metric(
            100.0 * sum(ord_cols["holds_with_random"]) / n_ord,
            "% of sizes",
            None,
            "the control: the same sizes with the hybrid replaced by random eviction (lru < lfu < random)",
        ),
    }


@register(
    "eviction-simulate",
    params=SIM_PARAMS,
    check=_check_sim,
    description="libCacheSim policies, the hybrid and Belady's OPT across cache sizes on a token trace",
    metrics=metrics.SIMULATE,
)
def run_simulate(ctx: CaseContext) -> Record:

    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    ids, nxt = trace.ids, traces.next_access(trace.ids)
    head = traces.head_ids(ids, p["head_fraction"])
    tail = traces.tail_mask(ids, head)
    nd = trace.n_distinct
    fractions = list(dict.fromkeys(p["size_fractions"]))
    cap_of = {f: simulate.capacities(nd, [f])[0] for f in fractions}
    table_cap = cap_of[p["table_fraction"]]
    policies = [x for x in ALL_POLICIES if x in p["policies"] or x == "opt"]
    ctx.log(
        f"{trace.name}: {len(ids)} requests, {nd} distinct, head {len(head)} tokens; "
        f"sizes {sorted(set(cap_of.values()))}"
    )
    res = _sweep(ctx, p, ids, nxt, tail, list(cap_of.values()), policies)
    violations = [(x, c) for x in policies for c in res[x] if res[x][c][0] > res["opt"][c][0] + 1e-9]
    curve_cols = _curves(res, fractions, cap_of)
    write_csv(ctx.raw_path("miss_ratio_curves.csv"), list(curve_cols), zip(*curve_cols.values()))
    ord_cols = _ordering(res, p["ordering_fractions"], cap_of)
    rps = _rps(ctx, p, policies)
    pre = "sim" if p["trace"] == "real" else "zipf"
    m = _table_metrics(p, res, table_cap, rps, pre)
    m.update(_ordering_metrics(p, ord_cols, pre))
    m.update(_calibrated_metrics(ctx, p, ids, nxt, tail, policies, pre))
    m[f"{pre}.opt_violations"] = Metric(len(violations), "cases", "lower", "policy x size where a policy beat OPT")
    m[f"{pre}.opt_compared"] = Metric(
        sum(len(res[x]) for x in policies if x != "opt" and x in res),
        "cases",
        None,
        "policy x size cases compared with OPT (the denominator of opt_violations)",
    )
    m[f"{pre}.capacity_objects"] = Metric(table_cap, "tokens")
    facts = _standin_facts(m, pre)
    m[f"{pre}.head_share_pct"] = Metric(100.0 * (1 - tail.mean()), "%")
    passes = corpus_passes(trace)
    if passes is not None:
        m[f"{pre}.corpus_passes"] = Metric(passes, "passes", None, "trace requests / tokens in the corpus")
    series = {
        CURVES.name: CURVES.make(curve_cols),
        ORDERING.name: ORDERING.make(ord_cols),
    }
    if rps:
        series[RPS.name] = RPS.make(
            {
                "policy": list(rps),
                "rps": list(rps.values()),
                "implementation": [
                    "libCacheSim process_trace (C)" if k in LIB_POLICIES else "pure Python" for k in rps
                ],
            },
            f"{p['rps_requests']} requests, cache {100 * p['table_fraction']:g}% of distinct",
        )
    details = {
        "trace": {
            "name": trace.name,
            "requests": len(ids),
            "distinct": nd,
            "seed": trace.seed,
            "digest": trace.digest(),
            "head_size": int(len(head)),
            "meta": trace.meta,
        },
        "capacities": cap_of,
        "table_capacity": table_cap,
        "violations": violations,
        "hybrid_definition": HYBRID_DEFINITION,
        "head_definition": HEAD_DEFINITION,
        "hybrid_k": p["hybrid_k"],
        "as_random": list(p["as_random"]),
    }
    if violations:
        return Record(
            "failed",
            f"{len(violations)} policy/size pairs beat the optimal bound, e.g. {violations[0]}",
            m,
            details,
            series,
            facts,
        )
    return Record("ok", metrics=m, details=details, series=series, facts=facts)


def _standin_facts(m: dict[str, Metric], pre: str) -> dict:
    """standin_capacity_ratio: the size the LRU-K stand-in ran at (its cache's own report) over
    the calibrated size, rounded to 4 places; the ledger's stand-in params fix it at 1, so a
    stand-in run smaller (weaker) than the hybrid it stands in for is inconclusive. Absent when
    nothing was calibrated (no stand-in ran)."""
    ran, cal = m.get(f"{pre}.calibrated.standin.lruk.capacity_objects"), m.get(f"{pre}.calibrated.capacity_objects")
    if ran is None or ran.value is None or cal is None or not cal.value:
        return {}
    return {"standin_capacity_ratio": round(ran.value / cal.value, 4)}


# ---- eviction-crosscheck ----------------------------------------------------------------

CROSS_PARAMS = {
    **TRACE_PARAMS,
    "n_requests": Param(int, 20000, "requests of the short trace", min=100),
    "size_fractions": Param(list, [0.01, 0.05], "cache sizes as fractions of the distinct tokens", min=1e-6, max=1),
    "hybrid_k": Param(int, 2, "K of the hybrid's LRU-K part", min=1),
}
CROSS_COLUMNS = [
    "implementation",
    "reference",
    "capacity",
    "hits",
    "reference_hits",
    "differing_requests",
    "first_difference",
    "verdict",
]
NOT_COUNTED = ("wtinylfu", "wtinylfu-shipped", LIB_BELADY)  # sketch-based or cannot bypass: shown, not counted


@register(
    "eviction-crosscheck",
    params=CROSS_PARAMS,
    check=_check_trace,
    description="libCacheSim and the fast hybrid/OPT against the pure-Python references, request by request",
    metrics=metrics.CROSSCHECK,
)
def run_crosscheck(ctx: CaseContext) -> Record:

    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    ids, nxt = trace.ids, traces.next_access(trace.ids)
    caps = simulate.capacities(trace.n_distinct, p["size_fractions"])
    rows, mism = [], 0
    per_pol: dict[str, int] = {}
    checks = [(x, x) for x in ALL_POLICIES] + [(LIB_BELADY, "opt"), ("wtinylfu-shipped", "wtinylfu")]
    for cap in caps:
        for lib_name, ref_name in checks:
            if lib_name == "wtinylfu-shipped":
                lib = simulate.lib_hits_with("WTinyLFU", {"window_size": 0.01}, ids, cap)
            else:
                lib = simulate.policy_hits(lib_name, ids, nxt, cap, p["hybrid_k"])
            ref_obj = (
                reference.RefHybrid(cap, p["hybrid_k"]) if ref_name == "hybrid" else reference.REFERENCES[ref_name](cap)
            )
            ref = np.array(reference.run(ref_obj, ids, nxt), dtype=bool)
            diff = np.nonzero(lib != ref)[0]
            rows.append(
                [
                    lib_name,
                    ref_name,
                    cap,
                    int(lib.sum()),
                    int(ref.sum()),
                    int(len(diff)),
                    int(diff[0]) if len(diff) else None,
                    "match" if not len(diff) else "MISMATCH",
                ]
            )
            if len(diff) and lib_name not in NOT_COUNTED:
                mism += 1
            per_pol[lib_name] = per_pol.get(lib_name, 0) + int(len(diff))
    write_csv(ctx.raw_path("crosscheck.csv"), CROSS_COLUMNS, rows)
    m = {
        "crosscheck.mismatched_pairs": Metric(
            mism,
            "pairs",
            "lower",
            "policy x size pairs whose hit/miss sequence differs from the reference (W-TinyLFU, "
            "which uses a sketch, and libCacheSim's Belady, which cannot bypass, are shown but "
            "not counted)",
        ),
        "crosscheck.pairs": Metric(
            sum(1 for r in rows if r[0] not in NOT_COUNTED),
            "pairs",
            None,
            "policy x size pairs compared request by request and counted (the denominator of mismatched_pairs)",
        ),
    }
    for k, v in per_pol.items():
        m[f"crosscheck.{k}.differing_requests"] = Metric(v, "requests", "lower")
    pairs = PAIRS.make({c: list(col) for c, col in zip(CROSS_COLUMNS, zip(*rows))})
    return Record(
        "ok",
        metrics=m,
        series={PAIRS.name: pairs},
        details={"trace": {"requests": len(ids), "seed": trace.seed, "digest": trace.digest()}},
    )


# ---- eviction-redis / eviction-redis-cluster ---------------------------------------------

DEFAULT_RUNS = [
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-ttl",
    "noeviction",
    {"policy": "allkeys-lru", "maxmemory-samples": 1},
    {"policy": "allkeys-lru", "maxmemory-samples": 10},
    {"policy": "allkeys-lfu", "lfu-log-factor": 0},
    {"policy": "allkeys-lfu", "lfu-log-factor": 100},
    {"policy": "allkeys-lfu", "lfu-decay-time": 0},
]

REDIS_PARAMS = {
    **TRACE_PARAMS,
    "n_requests": Param(int, 60000, "requests replayed (warm-up included)", min=100),
    "warmup_requests": Param(
        int, 20000, "requests replayed before the counters are reset (fills past maxmemory)", min=1
    ),
    "runs": Param(
        list,
        DEFAULT_RUNS,
        "configurations: a maxmemory-policy, or {policy, maxmemory-samples, lfu-log-factor, lfu-decay-time}",
    ),
    "capacity_fraction": Param(
        float, 0.1, "maxmemory holds about this fraction of the distinct keys", min=1e-6, max=0.999999
    ),
    "value_bytes": Param(int, 4096, "bytes of each cached value (large, so that maxmemory dwarfs buffers)", min=1),
    "volatile_ttl_s": Param(int, 3600, "TTL given to every key under volatile-* policies (0 elsewhere)", min=0),
    "batch": Param(int, 200, "requests per pipeline", min=1),
    "lru-k-samples": Param((int, type(None)), None, "not a Redis setting; any value is refused (see the hybrid)"),
    "standin_lru_samples": Param(
        int,
        5,
        "the LRU stand-in of allkeys-lfu: maxmemory-samples of the allkeys-lru "
        "run that names none (Redis's default 5; read back from its server)",
        min=1,
        max=64,
    ),
    "calibrate_lru_hit_pct": Param(
        (float, type(None)),
        None,
        "maxmemory for the number of keys at which exact LRU first reaches this hit rate on "
        "the measured requests (the suite's copy of the source's LRU figure; the source "
        "gives no cache size); replaces capacity_fraction; null: use capacity_fraction",
        min=0.001,
        max=99.999,
    ),
}


def capacity_fraction(ctx: CaseContext, trace: traces.Trace) -> tuple[float, dict[str, Metric]]:
    """The replay's cache size as a fraction of the distinct keys: capacity_fraction, or the
    size at which exact LRU reaches calibrate_lru_hit_pct after the warm-up."""
    p = ctx.params
    cap = calibrated_capacity(trace.ids, p["calibrate_lru_hit_pct"], p["warmup_requests"])
    if cap is None:
        if p["calibrate_lru_hit_pct"] is not None:
            ctx.log(f"exact LRU never reaches {p['calibrate_lru_hit_pct']:g}%: capacity_fraction is used")
        return p["capacity_fraction"], {}
    ctx.log(f"calibrated: exact LRU hits {p['calibrate_lru_hit_pct']:g}% after the warm-up at {cap} keys")
    note = (
        f"the number of keys at which exact LRU first hits {p['calibrate_lru_hit_pct']:g}% of the measured "
        "requests (the source's LRU figure; the source gives no cache size)"
    )
    return cap / trace.n_distinct, {"calibrated.capacity_objects": Metric(cap, "keys", None, note)}


def _check_redis(where: str, p: dict) -> None:
    if p.get("lru-k-samples") is not None:
        refuse_names_not_in_redis(where, {"lru-k-samples": p["lru-k-samples"]})
    _check_trace(where, {k: v for k, v in p.items() if k != "lru-k-samples"})
    parse_runs(where, p["runs"])
    if p["warmup_requests"] >= p["n_requests"]:
        raise BadInput(f"{where}.warmup_requests: must be below n_requests ({p['n_requests']})")


REDIS_COLUMNS = (
    "configuration",
    "maxmemory_bytes",
    "bytes_per_key",
    "target_keys",
    "keys_held",
    "hit_pct_info",
    "hit_pct_client",
    "long_tail_pct",
    "evicted",
    "refused_sets",
    "max_idle_s",
    "exact_lru_pct",
    "exact_lfu_pct",
    "opt_pct",
)


def _redis_outcome(ctx: CaseContext, results: list, trace: traces.Trace, pre: str, note: str) -> Record:

    p = ctx.params
    ids, nxt = trace.ids, traces.next_access(trace.ids)
    warm = p["warmup_requests"]
    tail = traces.tail_mask(ids, traces.head_ids(ids, p["head_fraction"]))[warm:]
    m: dict[str, Metric] = {}
    cols: dict[str, list] = {c: [] for c in REDIS_COLUMNS}
    problems, sims, facts = [], {}, {}
    for r in results:
        # the policy, maxmemory and knobs as the server reported them during the run (CONFIG GET,
        # INFO): the ledger's `configured` compares them with what its checks need
        facts.update(config_facts(f"{pre}.{r.label}", r.config_read, r.maxmemory))
        cap = max(1, int(round(r.dbsize_median)))
        if cap not in sims:
            sims[cap] = {
                x: traces.hit_rates(simulate.policy_hits(x, ids, nxt, cap)[warm:], tail) for x in ("lru", "lfu", "opt")
            }
        hr, lt = traces.hit_rates(r.results == 1, tail)
        a = r.info_after
        n_info = a["keyspace_hits"] + a["keyspace_misses"]
        info_hr = 100.0 * a["keyspace_hits"] / n_info if n_info else 0.0
        if a["keyspace_hits"] != r.hits:
            problems.append(f"{r.label}: INFO keyspace_hits {a['keyspace_hits']} != {r.hits} hits seen by the client")
        if not r.filled and r.label.split(".")[0] != "noeviction":
            problems.append(f"{r.label}: the warm-up did not fill maxmemory (no eviction)")
        label = f"{pre}.{r.label}"
        m[f"{label}.hit_rate_pct"] = percent(
            info_hr,
            "the control of allkeys-lru/lfu: random eviction, same replay" if r.label == "allkeys-random" else "",
        )
        m[f"reference.{label}.hit_rate_pct"] = percent(
            hr, "the replay client's own count of the GETs that found their key (the reference of INFO's hit rate)"
        )
        m[f"{label}.long_tail_pct"] = percent(lt)
        m[f"{label}.evicted_keys"] = Metric(a["evicted_keys"], "keys")
        m[f"{label}.refused_sets"] = Metric(r.refused, "requests", None, "SET refused with OOM")
        m[f"{label}.keys_held"] = Metric(r.dbsize_median, "keys")
        m[f"{label}.rps"] = Metric(
            len(r.results) / r.seconds if r.seconds else 0.0, "req/s", "higher", "GET-or-SET scripts, pipelined"
        )
        m[f"{label}.gap_to_exact_lru_pp"] = Metric(info_hr - sims[cap]["lru"][0], "pp")
        m[f"{label}.gap_to_exact_lfu_pp"] = Metric(info_hr - sims[cap]["lfu"][0], "pp")
        if r.idle_max_s is not None:
            m[f"{label}.idle_time_max_s"] = Metric(
                r.idle_max_s, "s", None, "largest OBJECT IDLETIME of cached keys at the end (LRU clock resolution 1 s)"
            )
        for c, v in zip(
            REDIS_COLUMNS,
            (
                r.label,
                r.maxmemory,
                r.bytes_per_key,
                r.target_keys,
                r.dbsize_median,
                info_hr,
                hr,
                lt,
                int(a["evicted_keys"]),
                r.refused,
                r.idle_max_s,
                sims[cap]["lru"][0],
                sims[cap]["lfu"][0],
                sims[cap]["opt"][0],
            ),
        ):
            cols[c].append(v)
    ctx.raw_path("redis_runs.json").write_text(
        json.dumps(
            [
                {
                    "label": r.label,
                    "maxmemory": r.maxmemory,
                    "bytes_per_key": r.bytes_per_key,
                    "target_keys": r.target_keys,
                    "keys_held_median": r.dbsize_median,
                    "filled": r.filled,
                    "seconds": r.seconds,
                    "info_before": r.info_before,
                    "info_after": r.info_after,
                    "client_hits": r.hits,
                    "refused": r.refused,
                    "config_read": r.config_read,
                }
                for r in results
            ],
            indent=1,
        )
    )
    for r in results:
        for node, text in r.raw_infos.items():
            ctx.raw_path(f"info_{r.label}_{node.replace(':', '_')}.txt").write_text(text)
    series = {RUNS.name: RUNS.make(cols, note)}
    if problems:
        return Record("invalid", "; ".join(problems), m, {}, series, facts)
    return Record("ok", metrics=m, series=series, facts=facts)


REDIS_NOTE = (
    "maxmemory = used_memory of the empty server + target keys x bytes/key, where bytes/key is the "
    "used_memory added by probe keys of the same shape (measured on each server). The exact "
    "simulations use the number of keys Redis actually held (median of DBSIZE after each batch). "
    "Hit % (INFO) = keyspace_hits / (keyspace_hits + keyspace_misses) after CONFIG RESETSTAT. "
    "volatile-* runs give every key the same TTL (volatile_ttl_s), so volatile-ttl evicts the "
    "key set earliest; other runs set no TTL. Redis's LRU clock has a 1-second resolution "
    "(LRU_CLOCK_RESOLUTION): a replay at tens of thousands of requests/s leaves every cached key with "
    "OBJECT IDLETIME 0 or 1 ('max idle s'), so approximated LRU cannot tell recent from old and lands "
    "near allkeys-random, whatever maxmemory-samples is. Redis's LFU counters do not depend on that "
    "clock (except for decay, in minutes), so allkeys-lfu tracks exact LFU."
)


@register(
    "eviction-redis",
    params=REDIS_PARAMS,
    check=_check_redis,
    description="the trace replayed on standalone redis-servers, one per maxmemory-policy/knob",
    metrics=metrics.REDIS,
)
def run_redis(ctx: CaseContext) -> Record:

    require_tool("redis-server")
    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    keys = key_names(trace.ids)
    fraction, cal = capacity_fraction(ctx, trace)
    results, stand_in = [], None
    for spec in parse_runs("runs", p["runs"]):
        is_stand_in = stand_in is None and spec.policy == STAND_IN_POLICY and "maxmemory-samples" not in spec.knobs
        if is_stand_in:  # the LRU stand-in: its strength is the case's parameter (the ledger fixes it)
            spec.knobs["maxmemory-samples"] = p["standin_lru_samples"]
        t0 = time.perf_counter()
        r = replay_standalone(
            spec,
            keys,
            p["warmup_requests"],
            ctx.raw_dir / f"server-{spec.label}",
            n_distinct=trace.n_distinct,
            capacity_fraction=fraction,
            value_bytes=p["value_bytes"],
            ttl_s=p["volatile_ttl_s"],
            batch=p["batch"],
            probe=is_stand_in,
        )
        results.append(r)
        if is_stand_in:
            stand_in = r
        ctx.log(
            f"{spec.label}: hit {100 * r.hits / len(r.results):.1f}%, keys held {r.dbsize_median:.0f}, "
            f"evicted {r.info_after['evicted_keys']} ({time.perf_counter() - t0:.1f} s)"
        )
    out = _redis_outcome(ctx, results, trace, "redis", REDIS_NOTE)
    out.metrics.update({f"redis.{k}": v for k, v in cal.items()})
    if stand_in is not None:
        _stand_in_outcome(out, stand_in)
    return out


STAND_IN_POLICY = "allkeys-lru"  # the stand-in of allkeys-lfu's check (C18)


def _stand_in_outcome(out: Record, r) -> None:
    """The LRU stand-in's strength as its server reports it (fact standin_lru_samples, CONFIG GET
    maxmemory-samples after the replay) and its instrument: the recency probe on the same server."""
    # the last reading (after the measured replay) of the stand-in's own server
    samples = r.config_read[-1].get("maxmemory-samples") if r.config_read else None
    if samples is not None:
        out.facts["standin_lru_samples"] = int(samples)
    pr = r.probe
    n = pr["keys_per_group"]
    label = f"redis.{r.label}"
    out.metrics[f"{label}.known_recency_kept_pct"] = Metric(
        100.0 * pr["kept"]["touched"] / n,
        "%",
        None,
        f"the LRU stand-in's instrument, on its own server after the replay: {n} keys read again "
        f"{RECENCY_PROBE_SLEEP_S:g} s after {n} others were written, then {n} new keys past maxmemory; LRU keeps every "
        "key read again (it evicts the idle ones), random eviction loses about a fifth of them",
    )
    out.metrics[f"{label}.known_recency_idle_kept_pct"] = Metric(
        100.0 * pr["kept"]["idle"] / n, "%", None, "the same probe: the idle keys still held (LRU evicts these)"
    )
    out.details["stand_in_probe"] = {"label": r.label, **pr, "config_read": r.config_read}


CLUSTER_PARAMS = {**REDIS_PARAMS, "runs": Param(list, ["allkeys-lru", "allkeys-lfu"], REDIS_PARAMS["runs"].help)}


@register(
    "eviction-redis-cluster",
    params=CLUSTER_PARAMS,
    needs="cluster",
    check=_check_redis,
    description="the trace replayed on the target Redis Cluster (maxmemory per primary, INFO summed)",
    metrics=metrics.REDIS_CLUSTER,
)
def run_redis_cluster(ctx: CaseContext) -> Record:

    p = ctx.params
    if ctx.target.kind != "cluster" or not ctx.target.nodes:
        return Record("skipped", "no Redis Cluster target")
    trace = build_trace(p, ctx.repetition)
    fraction, cal = capacity_fraction(ctx, trace)
    results = []
    for spec in parse_runs("runs", p["runs"]):
        r = replay_cluster(
            spec,
            ctx.target,
            trace.ids,
            p["warmup_requests"],
            capacity_fraction=fraction,
            value_bytes=p["value_bytes"],
            ttl_s=p["volatile_ttl_s"],
            batch=p["batch"],
            log=ctx.log,
        )
        results.append(r)
        ctx.log(
            f"{spec.label}: hit {100 * r.hits / len(r.results):.1f}%, keys held {r.dbsize_median:.0f} (all primaries)"
        )
    note = (
        REDIS_NOTE + " Cluster: maxmemory is per node; each primary gets maxmemory for its share of the "
        "distinct keys; counters and keys held are summed over the primaries; the exact simulations use "
        "the summed keys held as one cache, which a sharded cache can only approach."
    )
    out = _redis_outcome(ctx, results, trace, "cluster", note)
    out.metrics.update({f"cluster.{k}": v for k, v in cal.items()})
    return out
