"""Harness drivers of the eviction experiment (suite `eviction`).

eviction-trace          the real token trace: Zipf fit, head, head share (C19)
eviction-simulate       libCacheSim + hybrid + OPT across cache sizes (C18, simulated)
eviction-crosscheck     every simulated policy against reference.py on a short trace
eviction-redis          real redis-server per maxmemory-policy and knob (standalone)
eviction-redis-cluster  the same replay on the target Redis Cluster (maxmemory per node)
"""

from __future__ import annotations

import csv
import json
import time
from functools import lru_cache

import numpy as np

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput

from . import traces as T
from .redis_replay import parse_runs, refuse_names_not_in_redis
from .simulate import ALL_POLICIES, LIB_BELADY, LIB_POLICIES

# The source's table (section 4.2): policy -> (hit rate %, long-tail retention %)
CLAIMED = {"allkeys-lru": (68.2, 12.5), "allkeys-lfu": (71.9, 41.3), "allkeys-lru-lfu": (79.6, 63.8)}
# which simulated policy stands for each of the source's rows
CLAIM_TO_SIM = {"allkeys-lru": "lru", "allkeys-lfu": "lfu", "allkeys-lru-lfu": "hybrid"}
HYBRID_DEFINITION = (
    "hybrid = LRU-K eviction with LFU admission: the victim is LRU-K's (objects with fewer than K "
    "accesses since insertion first, oldest insertion first; otherwise the oldest K-th most recent "
    "access); every key's access count over the trace so far is kept, also after eviction, and on a "
    "miss in a full cache the new object is admitted only if its count exceeds the victim's.")
HEAD_DEFINITION = ("head = the ceil(head_fraction x distinct) most frequent tokens of the whole trace "
                   "(ties by smaller token id); long-tail retention = hit rate on requests for tokens "
                   "outside the head")

TRACE_PARAMS = {
    "trace": Param(str, "real", "real: the tokenized text; zipf: synthetic Zipf draws", ("real", "zipf")),
    "n_requests": Param(int, 200000, "requests (tokens) in the trace"),
    "seed": Param(int, 1, "seed of the text order / Zipf draws; repetition r uses seed + r - 1"),
    "head_fraction": Param(float, 0.01, "the head: this fraction of the distinct tokens, most frequent first"),
    "text_file": Param(str, "data/gptcache_mock_data.json", "JSON list of {origin, similar} texts (relative to the repo)"),
    "tokenizer": Param(str, "minilm", "the real tokenizer: all-MiniLM-L6-v2's WordPiece", T.TOKENIZERS),
    "zipf_alpha": Param(float, 1.0, "Zipf exponent of the synthetic trace"),
    "zipf_keys": Param(int, 10000, "distinct keys of the synthetic trace"),
}


def _check_trace(where: str, p: dict) -> None:
    refuse_names_not_in_redis(where, p)
    if p["n_requests"] < 100:
        raise BadInput(f"{where}.n_requests: at least 100, got {p['n_requests']}")
    if not 0 < p["head_fraction"] < 1:
        raise BadInput(f"{where}.head_fraction: must be in (0, 1), got {p['head_fraction']}")
    if p["zipf_alpha"] < 0 or p["zipf_keys"] < 2:
        raise BadInput(f"{where}: zipf_alpha must be >= 0 and zipf_keys >= 2")


def _text_path(p: dict):
    from pathlib import Path

    from harness.paths import REPO_ROOT

    path = Path(p["text_file"])
    return path if path.is_absolute() else REPO_ROOT / path


@lru_cache(maxsize=4)
def _real_docs(path: str, tokenizer: str):
    tok = T.load_tokenizer(tokenizer)
    return tuple(T.tokenize(T.load_texts(path), tok)), tok


def build_trace(p: dict, repetition: int = 1, n_requests: int | None = None) -> T.Trace:
    seed = p["seed"] + repetition - 1
    n = n_requests or p["n_requests"]
    if p["trace"] == "zipf":
        return T.zipf_trace(n, p["zipf_keys"], p["zipf_alpha"], seed)
    docs, _ = _real_docs(str(_text_path(p)), p["tokenizer"])
    t = T.text_trace(list(docs), n, seed, name="real")
    t.meta.update({"text_file": p["text_file"], "tokenizer": p["tokenizer"]})
    return t


def _pct(x: float) -> Metric:
    return Metric(x, "%", "higher")


# ---- eviction-trace ------------------------------------------------------------------

@register("eviction-trace", params=dict(TRACE_PARAMS), check=_check_trace,
          description="token trace statistics: fitted Zipf exponent, head size and head share (C19)")
def run_trace(ctx: CaseContext) -> CaseOutcome:
    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    ctx.log(f"{trace.name} trace: {len(trace)} requests, seed {trace.seed}")
    st = T.trace_stats(trace, p["head_fraction"])
    counts = T.rank_counts(trace.ids)
    uniq, cnt = np.unique(trace.ids, return_counts=True)
    order = np.lexsort((uniq, -cnt))
    tok = _real_docs(str(_text_path(p)), p["tokenizer"])[1] if p["trace"] == "real" else None
    with ctx.raw_path("token_counts.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rank", "token_id", "token", "count", "in_head"])
        for r, i in enumerate(order, 1):
            w.writerow([r, int(uniq[i]), tok.id_to_token(int(uniq[i])) if tok else "", int(cnt[i]),
                        int(r <= st["head_size"])])
    ctx.raw_path("trace_stats.json").write_text(json.dumps({**st, "meta": trace.meta}, indent=1))
    s = st["zipf_mle"]
    ranks = np.unique(np.round(np.logspace(0, np.log10(len(counts)), 40)).astype(int))
    fitted = counts.sum() * ranks.astype(float) ** -s / (np.arange(1, len(counts) + 1) ** -s).sum()
    top = [[r + 1, tok.id_to_token(int(uniq[i])) if tok else int(uniq[i]), int(cnt[i]),
            100.0 * cnt[i] / len(trace)] for r, i in enumerate(order[:20])]
    pre = "real" if p["trace"] == "real" else "zipf"
    metrics = {
        f"{pre}.zipf_exponent": Metric(s, "", None, "maximum-likelihood Zipf exponent of the rank-frequency list"),
        f"{pre}.zipf_exponent_lsq": Metric(st["zipf_lsq"], "", None, "least-squares log-log slope (for comparison)"),
        f"{pre}.distinct_tokens": Metric(st["distinct"], "tokens"),
        f"{pre}.head_size": Metric(st["head_size"], "tokens"),
        f"{pre}.head_share_pct": Metric(100.0 * st["head_share"], "%", None,
                                        f"share of requests to the top {100 * p['head_fraction']:g}% of distinct tokens (C19)"),
    }
    for frac in (0.05, 0.10, 0.20):
        h = T.head_ids(trace.ids, frac)
        metrics[f"{pre}.head{int(frac * 100)}_share_pct"] = Metric(100.0 * T.head_share(trace.ids, h), "%")
    return CaseOutcome("ok", metrics=metrics, details={
        "trace": {**{k: v for k, v in st.items()}, "meta": trace.meta, "seed": trace.seed},
        "tables": [
            {"title": f"{trace.name} trace: the 20 most frequent tokens", "columns": ["rank", "token", "count", "share %"],
             "rows": top, "note": HEAD_DEFINITION + f"; head size here {st['head_size']} tokens, "
                                  f"{100 * st['head_share']:.1f}% of requests; fitted Zipf exponent {s:.3f} "
                                  f"(MLE over {st['distinct']} ranks), trace SHA-256 {st['digest'][:16]}..."},
        ],
        "charts": [{"title": f"{trace.name} trace: rank-frequency", "x_label": "rank", "y_label": "requests",
                    "kind": "line", "x_log": True, "y_log": True,
                    "series": [{"name": "measured", "points": [[int(r), int(counts[r - 1])] for r in ranks]},
                               {"name": f"Zipf s={s:.2f}", "points": [[int(r), float(v)] for r, v in zip(ranks, fitted)]}]}],
    })


# ---- eviction-simulate -----------------------------------------------------------------

SIM_PARAMS = {
    **TRACE_PARAMS,
    "policies": Param(list, list(ALL_POLICIES), "policies to simulate (opt is always run)", ALL_POLICIES),
    "size_fractions": Param(list, [0.005, 0.01, 0.02, 0.05, 0.1, 0.2], "cache sizes as fractions of the distinct tokens"),
    "table_fraction": Param(float, 0.05, "the cache size (fraction of distinct tokens) of the claim table and metrics"),
    "hybrid_k": Param(int, 2, "K of the hybrid's LRU-K part"),
    "rps_requests": Param(int, 1000000, "requests of the trace timed for requests/s per policy (0 = skip)"),
}


def _check_sim(where: str, p: dict) -> None:
    _check_trace(where, p)
    fr = p["size_fractions"]
    if not fr or any(not isinstance(f, (int, float)) or not 0 < f <= 1 for f in fr):
        raise BadInput(f"{where}.size_fractions: a non-empty list of numbers in (0, 1]")
    if p["table_fraction"] not in fr:
        raise BadInput(f"{where}.table_fraction: {p['table_fraction']} must be one of size_fractions {fr}")
    if p["hybrid_k"] < 1:
        raise BadInput(f"{where}.hybrid_k: at least 1")


@register("eviction-simulate", params=SIM_PARAMS, check=_check_sim,
          description="libCacheSim policies, the hybrid and Belady's OPT across cache sizes on a token trace")
def run_simulate(ctx: CaseContext) -> CaseOutcome:
    from . import simulate as S

    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    ids, nxt = trace.ids, T.next_access(trace.ids)
    head = T.head_ids(ids, p["head_fraction"])
    tail = T.tail_mask(ids, head)
    nd = trace.n_distinct
    caps = S.capacities(nd, p["size_fractions"])
    table_cap = S.capacities(nd, [p["table_fraction"]])[0]
    policies = [x for x in ALL_POLICIES if x in p["policies"] or x == "opt"]
    ctx.log(f"{trace.name}: {len(ids)} requests, {nd} distinct, head {len(head)} tokens; sizes {caps}")
    res: dict[str, dict[int, tuple]] = {x: {} for x in policies}
    for cap in caps:
        for pol in policies:
            hits, _ = S.timed_hits(pol, ids, nxt, cap, p["hybrid_k"])
            res[pol][cap] = T.hit_rates(hits, tail)
        ctx.log(f"size {cap}: " + ", ".join(f"{x} {res[x][cap][0]:.1f}" for x in policies))
    violations = [(x, c) for x in policies for c in caps if res[x][c][0] > res["opt"][c][0] + 1e-9]
    with ctx.raw_path("miss_ratio_curves.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "capacity_objects", "size_fraction", "hit_rate_pct", "long_tail_pct", "gap_to_opt_pp"])
        for x in policies:
            for c in caps:
                w.writerow([x, c, c / nd, f"{res[x][c][0]:.4f}", f"{res[x][c][1]:.4f}",
                            f"{res['opt'][c][0] - res[x][c][0]:.4f}"])
    rps = {}
    if p["rps_requests"]:
        big = build_trace(p, ctx.repetition, p["rps_requests"])
        bnxt = T.next_access(big.ids)
        bcap = S.capacities(big.n_distinct, [p["table_fraction"]])[0]
        path = S.write_oracle_general(ctx.raw_path("rps_trace.oracleGeneral.bin"), big.ids, bnxt)
        for pol in policies:
            if pol in LIB_POLICIES:
                _, r = S.lib_process_trace(pol, path, bcap)
            else:
                _, dt = S.timed_hits(pol, big.ids, bnxt, bcap, p["hybrid_k"])
                r = len(big.ids) / dt
            rps[pol] = r
        path.unlink()  # 24 bytes per request; regenerated from the seed when needed
        ctx.log("requests/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in rps.items()))
    pre = "sim" if p["trace"] == "real" else "zipf"
    m: dict[str, Metric] = {}
    for x in policies:
        hr, lt = res[x][table_cap]
        m[f"{pre}.{x}.hit_rate_pct"] = _pct(hr)
        m[f"{pre}.{x}.long_tail_pct"] = _pct(lt)
        m[f"{pre}.{x}.gap_to_opt_pp"] = Metric(res["opt"][table_cap][0] - hr, "pp", "lower")
        if x in rps:
            impl = "libCacheSim C loop (process_trace)" if x in LIB_POLICIES else "pure Python (this package)"
            m[f"{pre}.{x}.rps"] = Metric(rps[x], "req/s", "higher", f"{p['rps_requests']} requests, {impl}")
    m[f"{pre}.opt_violations"] = Metric(len(violations), "cases", "lower", "policy x size where a policy beat OPT")
    m[f"{pre}.capacity_objects"] = Metric(table_cap, "tokens")
    m[f"{pre}.head_share_pct"] = Metric(100.0 * (1 - tail.mean()), "%")
    claim_rows = []
    for name, (chr_, clt) in CLAIMED.items():
        sim = CLAIM_TO_SIM[name]
        if sim in res:
            hr, lt = res[sim][table_cap]
            claim_rows.append([name, sim, chr_, hr, clt, lt, res["opt"][table_cap][0] - hr])
    for x in policies:
        if x not in CLAIM_TO_SIM.values():
            hr, lt = res[x][table_cap]
            claim_rows.append(["(not in the source)", x, "", hr, "", lt, res["opt"][table_cap][0] - hr])
    size_cols = [f"{c} ({100 * c / nd:.1f}%)" for c in caps]
    details = {
        "trace": {"name": trace.name, "requests": len(ids), "distinct": nd, "seed": trace.seed,
                  "digest": trace.digest(), "head_size": int(len(head)), "meta": trace.meta},
        "capacities": caps, "table_capacity": table_cap, "violations": violations,
        "results": {x: {str(c): list(v) for c, v in d.items()} for x, d in res.items()},
        "rps": rps, "hybrid_definition": HYBRID_DEFINITION,
        "tables": [
            {"title": f"Source table vs measured ({trace.name} trace, cache = {table_cap} tokens = "
                      f"{100 * p['table_fraction']:g}% of {nd} distinct)",
             "columns": ["source's policy", "simulated as", "claimed hit %", "measured hit %",
                         "claimed long-tail %", "measured long-tail %", "gap to OPT (pp)"],
             "rows": claim_rows,
             "note": f"{HEAD_DEFINITION}. 'allkeys-lru-lfu' does not exist in Redis; it is simulated as "
                     f"{HYBRID_DEFINITION} K = {p['hybrid_k']}. The source gives no cache size or key space, "
                     f"so the size here is a choice; see the full table for every size."},
            {"title": "Hit rate % by cache size (tokens held, % of distinct)", "columns": ["policy"] + size_cols,
             "rows": [[x] + [res[x][c][0] for c in caps] for x in policies]},
            {"title": "Long-tail retention % by cache size", "columns": ["policy"] + size_cols,
             "rows": [[x] + [res[x][c][1] for c in caps] for x in policies]},
            {"title": "Gap to the optimal bound (OPT hit % minus policy hit %, pp)", "columns": ["policy"] + size_cols,
             "rows": [[x] + [res["opt"][c][0] - res[x][c][0] for c in caps] for x in policies if x != "opt"],
             "note": "OPT = Belady's MIN with bypass, computed here with a heap over next-access times; "
                     f"{len(violations)} policy/size pairs beat it (must be 0)."},
        ],
        "charts": [
            {"title": f"Miss-ratio curves as hit rate ({trace.name} trace)", "x_label": "cache size (tokens)",
             "y_label": "hit rate %", "kind": "line", "x_log": True,
             "series": [{"name": x, "points": [[c, res[x][c][0]] for c in caps]} for x in policies]},
            {"title": f"Long-tail retention ({trace.name} trace)", "x_label": "cache size (tokens)",
             "y_label": "long-tail hit rate %", "kind": "line", "x_log": True,
             "series": [{"name": x, "points": [[c, res[x][c][1]] for c in caps]} for x in policies]},
        ],
    }
    if rps:
        details["tables"].append({"title": f"Requests/s per policy ({p['rps_requests']} requests, cache {table_cap})",
                                  "columns": ["policy", "requests/s", "implementation"],
                                  "rows": [[k, v, "libCacheSim process_trace (C)" if k in LIB_POLICIES else "pure Python"]
                                           for k, v in rps.items()]})
    if violations:
        return CaseOutcome("failed", f"{len(violations)} policy/size pairs beat the optimal bound, e.g. {violations[0]}",
                           m, details)
    return CaseOutcome("ok", metrics=m, details=details)


# ---- eviction-crosscheck ----------------------------------------------------------------

CROSS_PARAMS = {
    **TRACE_PARAMS,
    "n_requests": Param(int, 20000, "requests of the short trace"),
    "size_fractions": Param(list, [0.01, 0.05], "cache sizes as fractions of the distinct tokens"),
    "hybrid_k": Param(int, 2, "K of the hybrid's LRU-K part"),
}


@register("eviction-crosscheck", params=CROSS_PARAMS, check=_check_trace,
          description="libCacheSim and the fast hybrid/OPT against the pure-Python references, request by request")
def run_crosscheck(ctx: CaseContext) -> CaseOutcome:
    from . import reference as R
    from . import simulate as S

    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    ids, nxt = trace.ids, T.next_access(trace.ids)
    caps = S.capacities(trace.n_distinct, p["size_fractions"])
    rows, mism, per_pol = [], 0, {}
    checks = [(x, x) for x in ALL_POLICIES] + [(LIB_BELADY, "opt"), ("wtinylfu-shipped", "wtinylfu")]
    for cap in caps:
        for lib_name, ref_name in checks:
            if lib_name == "wtinylfu-shipped":
                lib = S.lib_hits_with("WTinyLFU", {"window_size": 0.01}, ids, cap)
            else:
                lib = S.policy_hits(lib_name, ids, nxt, cap, p["hybrid_k"])
            ref_obj = R.RefHybrid(cap, p["hybrid_k"]) if ref_name == "hybrid" else R.REFERENCES[ref_name](cap)
            ref = np.array(R.run(ref_obj, ids, nxt), dtype=bool)
            diff = np.nonzero(lib != ref)[0]
            first = int(diff[0]) if len(diff) else ""
            rows.append([lib_name, ref_name, cap, int(lib.sum()), int(ref.sum()), int(len(diff)), first,
                         "match" if not len(diff) else "MISMATCH"])
            if len(diff) and lib_name not in ("wtinylfu", "wtinylfu-shipped", LIB_BELADY):
                mism += 1
            per_pol[lib_name] = per_pol.get(lib_name, 0) + int(len(diff))
    with ctx.raw_path("crosscheck.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["implementation", "reference", "capacity", "hits", "reference_hits", "differing_requests", "first_difference", "verdict"])
        w.writerows(rows)
    m = {"crosscheck.mismatched_pairs": Metric(mism, "pairs", "lower",
                                               "policy x size pairs whose hit/miss sequence differs from the reference (W-TinyLFU, which uses a sketch, and libCacheSim's Belady, which cannot bypass, are shown in the table but not counted)")}
    for k, v in per_pol.items():
        m[f"crosscheck.{k}.differing_requests"] = Metric(v, "requests", "lower")
    return CaseOutcome("ok", metrics=m, details={
        "trace": {"requests": len(ids), "seed": trace.seed, "digest": trace.digest()},
        "tables": [{"title": f"Cross-check on a {len(ids)}-request {trace.name} trace (request-by-request hit/miss)",
                    "columns": ["implementation", "reference", "capacity", "hits", "reference hits",
                                "differing requests", "first difference at", "verdict"],
                    "rows": rows,
                    "note": "Rows 'lru'...'wtinylfu' are libCacheSim 0.3.5; 'hybrid' and 'opt' are this package's heap "
                            "versions. W-TinyLFU's reference counts frequencies exactly where libCacheSim uses a "
                            "count-min sketch, so small differences are expected there. 'wtinylfu-shipped' is "
                            "libCacheSim's W-TinyLFU with its default window-size=0.01: below 100 objects its window "
                            "holds 0 objects and it never hits; the simulations therefore use a window of at least one "
                            "object. 'belady-lib' is libCacheSim's Belady, which always admits; the reference "
                            "(and the bound used) may bypass, so it can have a few more hits."}],
    })


# ---- eviction-redis / eviction-redis-cluster ---------------------------------------------

DEFAULT_RUNS = ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu",
                "volatile-ttl", "noeviction",
                {"policy": "allkeys-lru", "maxmemory-samples": 1},
                {"policy": "allkeys-lru", "maxmemory-samples": 10},
                {"policy": "allkeys-lfu", "lfu-log-factor": 0},
                {"policy": "allkeys-lfu", "lfu-log-factor": 100},
                {"policy": "allkeys-lfu", "lfu-decay-time": 0}]

REDIS_PARAMS = {
    **TRACE_PARAMS,
    "n_requests": Param(int, 60000, "requests replayed (warm-up included)"),
    "warmup_requests": Param(int, 20000, "requests replayed before the counters are reset (fills past maxmemory)"),
    "runs": Param(list, DEFAULT_RUNS, "configurations: a maxmemory-policy, or {policy, maxmemory-samples, lfu-log-factor, lfu-decay-time}"),
    "capacity_fraction": Param(float, 0.1, "maxmemory holds about this fraction of the distinct keys"),
    "value_bytes": Param(int, 4096, "bytes of each cached value (large, so that maxmemory dwarfs buffers)"),
    "volatile_ttl_s": Param(int, 3600, "TTL given to every key under volatile-* policies (0 elsewhere)"),
    "batch": Param(int, 200, "requests per pipeline"),
    "lru-k-samples": Param((int, type(None)), None, "not a Redis setting; any value is refused (see the hybrid)"),
}


def _check_redis(where: str, p: dict) -> None:
    if p.get("lru-k-samples") is not None:
        refuse_names_not_in_redis(where, {"lru-k-samples": p["lru-k-samples"]})
    _check_trace(where, {k: v for k, v in p.items() if k != "lru-k-samples"})
    parse_runs(where, p["runs"])
    if not 0 < p["warmup_requests"] < p["n_requests"]:
        raise BadInput(f"{where}.warmup_requests: must be between 0 and n_requests ({p['n_requests']})")
    if not 0 < p["capacity_fraction"] < 1:
        raise BadInput(f"{where}.capacity_fraction: must be in (0, 1)")
    if p["value_bytes"] < 1 or p["batch"] < 1:
        raise BadInput(f"{where}: value_bytes and batch must be >= 1")


def _redis_outcome(ctx: CaseContext, results: list, trace: T.Trace, pre: str, note: str) -> CaseOutcome:
    from . import simulate as S

    p = ctx.params
    ids, nxt = trace.ids, T.next_access(trace.ids)
    warm = p["warmup_requests"]
    tail = T.tail_mask(ids, T.head_ids(ids, p["head_fraction"]))[warm:]
    m: dict[str, Metric] = {}
    rows, problems, sims = [], [], {}
    for r in results:
        cap = max(1, int(round(r.dbsize_median)))
        if cap not in sims:
            sims[cap] = {x: T.hit_rates(S.policy_hits(x, ids, nxt, cap)[warm:], tail) for x in ("lru", "lfu", "opt")}
        hr, lt = T.hit_rates(r.results == 1, tail)
        a = r.info_after
        n_info = a["keyspace_hits"] + a["keyspace_misses"]
        info_hr = 100.0 * a["keyspace_hits"] / n_info if n_info else 0.0
        if a["keyspace_hits"] != r.hits:
            problems.append(f"{r.label}: INFO keyspace_hits {a['keyspace_hits']} != {r.hits} hits seen by the client")
        if not r.filled and r.label.split(".")[0] != "noeviction":
            problems.append(f"{r.label}: the warm-up did not fill maxmemory (no eviction)")
        L = f"{pre}.{r.label}"
        m[f"{L}.hit_rate_pct"] = _pct(info_hr)
        m[f"{L}.long_tail_pct"] = _pct(lt)
        m[f"{L}.evicted_keys"] = Metric(a["evicted_keys"], "keys")
        m[f"{L}.refused_sets"] = Metric(r.refused, "requests", None, "SET refused with OOM")
        m[f"{L}.keys_held"] = Metric(r.dbsize_median, "keys")
        m[f"{L}.rps"] = Metric(len(r.results) / r.seconds if r.seconds else 0.0, "req/s", "higher",
                               "GET-or-SET scripts, pipelined")
        m[f"{L}.gap_to_exact_lru_pp"] = Metric(info_hr - sims[cap]["lru"][0], "pp")
        m[f"{L}.gap_to_exact_lfu_pp"] = Metric(info_hr - sims[cap]["lfu"][0], "pp")
        if r.idle_max_s is not None:
            m[f"{L}.idle_time_max_s"] = Metric(r.idle_max_s, "s", None,
                                               "largest OBJECT IDLETIME of cached keys at the end (LRU clock resolution 1 s)")
        rows.append([r.label, r.maxmemory, r.bytes_per_key, r.target_keys, r.dbsize_median, info_hr, hr, lt,
                     int(a["evicted_keys"]), r.refused, "n/a (LFU)" if r.idle_max_s is None else r.idle_max_s, sims[cap]["lru"][0], sims[cap]["lfu"][0], sims[cap]["opt"][0]])
    claim_rows = []
    for name, (chr_, clt) in CLAIMED.items():
        r = next((x for x in results if x.label == name), None)
        if name == "allkeys-lru-lfu":
            claim_rows.append([name, chr_, "does not exist in Redis", clt, "-"])
        elif r is not None:
            claim_rows.append([name, chr_, m[f"{pre}.{name}.hit_rate_pct"].value, clt, m[f"{pre}.{name}.long_tail_pct"].value])
    ctx.raw_path("redis_runs.json").write_text(json.dumps(
        [{"label": r.label, "maxmemory": r.maxmemory, "bytes_per_key": r.bytes_per_key, "target_keys": r.target_keys,
          "keys_held_median": r.dbsize_median, "filled": r.filled, "seconds": r.seconds, "info_before": r.info_before,
          "info_after": r.info_after, "client_hits": r.hits, "refused": r.refused} for r in results], indent=1))
    for r in results:
        for node, text in r.raw_infos.items():
            ctx.raw_path(f"info_{r.label}_{node.replace(':', '_')}.txt").write_text(text)
    details = {"tables": [
        {"title": "Source table vs real Redis", "columns": ["policy", "claimed hit %", "measured hit %",
                                                            "claimed long-tail %", "measured long-tail %"],
         "rows": claim_rows, "note": "allkeys-lru-lfu and lru-k-samples do not exist in Redis; see the simulated hybrid."},
        {"title": "Real Redis per configuration (measured after warm-up)",
         "columns": ["configuration", "maxmemory B", "bytes/key", "target keys", "keys held (median)",
                     "hit % (INFO)", "hit % (client)", "long-tail %", "evicted", "refused SETs", "max idle s",
                     "exact LRU hit % @ keys held", "exact LFU hit % @ keys held", "OPT hit % @ keys held"],
         "rows": rows, "note": note}]}
    if problems:
        return CaseOutcome("invalid", "; ".join(problems), m, details)
    return CaseOutcome("ok", metrics=m, details=details)


REDIS_NOTE = ("maxmemory = used_memory of the empty server + target keys x bytes/key, where bytes/key is the "
              "used_memory added by probe keys of the same shape (measured on each server). The exact "
              "simulations use the number of keys Redis actually held (median of DBSIZE after each batch). "
              "Hit % (INFO) = keyspace_hits / (keyspace_hits + keyspace_misses) after CONFIG RESETSTAT. "
              "volatile-* runs give every key the same TTL (volatile_ttl_s), so volatile-ttl evicts the "
              "key set earliest; other runs set no TTL. Redis's LRU clock has a 1-second resolution "
              "(LRU_CLOCK_RESOLUTION): a replay at tens of thousands of requests/s leaves every cached key with "
              "OBJECT IDLETIME 0 or 1 ('max idle s'), so approximated LRU cannot tell recent from old and lands "
              "near allkeys-random, whatever maxmemory-samples is. Redis's LFU counters do not depend on that "
              "clock (except for decay, in minutes), so allkeys-lfu tracks exact LFU.")


@register("eviction-redis", params=REDIS_PARAMS, check=_check_redis,
          description="the trace replayed on standalone redis-servers, one per maxmemory-policy/knob")
def run_redis(ctx: CaseContext) -> CaseOutcome:
    from harness.redis_server import require_tool

    from .redis_replay import key_names, replay_standalone

    require_tool("redis-server")
    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    keys = key_names(trace.ids)
    results = []
    for spec in parse_runs("runs", p["runs"]):
        t0 = time.perf_counter()
        r = replay_standalone(spec, keys, p["warmup_requests"], ctx.raw_dir / f"server-{spec.label}",
                              n_distinct=trace.n_distinct, capacity_fraction=p["capacity_fraction"],
                              value_bytes=p["value_bytes"], ttl_s=p["volatile_ttl_s"], batch=p["batch"])
        results.append(r)
        ctx.log(f"{spec.label}: hit {100 * r.hits / len(r.results):.1f}%, keys held {r.dbsize_median:.0f}, "
                f"evicted {r.info_after['evicted_keys']} ({time.perf_counter() - t0:.1f} s)")
    return _redis_outcome(ctx, results, trace, "redis", REDIS_NOTE)


CLUSTER_PARAMS = {**REDIS_PARAMS, "runs": Param(list, ["allkeys-lru", "allkeys-lfu"], REDIS_PARAMS["runs"].help)}


@register("eviction-redis-cluster", params=CLUSTER_PARAMS, needs="cluster", check=_check_redis,
          description="the trace replayed on the target Redis Cluster (maxmemory per primary, INFO summed)")
def run_redis_cluster(ctx: CaseContext) -> CaseOutcome:
    from .redis_replay import replay_cluster

    p = ctx.params
    if ctx.target.kind != "cluster" or not ctx.target.nodes:
        return CaseOutcome("skipped", "no Redis Cluster target")
    trace = build_trace(p, ctx.repetition)
    results = []
    for spec in parse_runs("runs", p["runs"]):
        r = replay_cluster(spec, ctx.target, trace.ids, p["warmup_requests"], capacity_fraction=p["capacity_fraction"],
                           value_bytes=p["value_bytes"], ttl_s=p["volatile_ttl_s"], batch=p["batch"], log=ctx.log)
        results.append(r)
        ctx.log(f"{spec.label}: hit {100 * r.hits / len(r.results):.1f}%, keys held {r.dbsize_median:.0f} (all primaries)")
    note = (REDIS_NOTE + " Cluster: maxmemory is per node; each primary gets maxmemory for its share of the "
            "distinct keys; counters and keys held are summed over the primaries; the exact simulations use "
            "the summed keys held as one cache, which a sharded cache can only approach.")
    return _redis_outcome(ctx, results, trace, "cluster", note)
