"""The case of driver `serving-prefix-cache` (C1 on an engine): a session sample of the Mooncake
conversation trace replayed open loop to vLLM with prefix caching on ("cached") and off
("uncached": the mechanism-off arm), and the instrument: one long prefix asked again and again.

Arms run one after the other (the two engines share 2 cores: run together they would slow each
other), their order rotating per repetition. Each repetition draws new prompt tokens (a new
salt), so nothing a previous repetition cached can hit. Measured per arm: the client's TTFT,
TPOT and end-to-end percentiles, and the engine's own prefix-cache hit rate (deltas of
`vllm:prefix_cache_hits_total` over `vllm:prefix_cache_queries_total`); beside them the
simulator's prediction for the same engine blocks at the engine's real capacity
(`vllm:cache_config_info`: blocks x block size)."""

from __future__ import annotations

import json
import secrets
from typing import Any, cast

from harness.base import stats
from harness.base.errors import BadInput
from harness.experiments.serving.series import LOADGENS
from harness.infra import serving_engine
from harness.infra.http_get import display
from harness.mechanisms.kv_blocks import trace as kvtrace
from harness.mechanisms.kv_blocks.hit_prediction import predicted_hit_rate, predicted_rates
from harness.model.driver_contract import INPUT_FILE, CaseContext, Metric, Param, Record, input_path

from . import client, client_fleet, engines, replay, summary

PARAMS = {
    "trace": Param(
        str, kvtrace.DEFAULT_TRACE, "a Mooncake-format JSONL trace (512 tokens per hash id)", kind=INPUT_FILE
    ),
    "session_fraction": Param(
        float, 0.004, "the slice: this fraction of the trace's sessions (whole conversations)", min=1e-6, max=1.0
    ),
    "session_seed": Param(int, 0, "seed of the session sample"),
    "max_requests": Param(int, 24, "the slice's first N requests (in time order)", min=2),
    "tokens_per_hash": Param(
        int,
        16,
        "prompt tokens per hash id; it must divide the engine's block or be a multiple of it",
        min=1,
        max=replay.MAX_TOKENS_PER_HASH,
    ),
    "max_prompt_tokens": Param(int, 768, "prompts are cut here (the engine's context is small)", min=16),
    "tail_tokens": Param(int, 8, "tokens of its own at the end of every prompt", min=1),
    "output_tokens": Param(int, 4, "tokens generated per request (ignore_eos)", min=1),
    "duration_s": Param(float, 30.0, "the slice's timestamps scaled to span this many seconds", min=1.0),
    "instrument_requests": Param(int, 5, "the instrument: one long prefix asked this many times", min=2),
    "instrument_prefix_tokens": Param(int, 768, "the instrument's shared prefix, in tokens", min=128),
    "instrument_gap_s": Param(float, 1.0, "seconds between the instrument's requests", min=0.0),
    "policy": Param(
        str, "leaf-lru", "the simulator's eviction policy (vLLM evicts free blocks leaf-first)", ("leaf-lru", "lru")
    ),
    "engine_block": Param(
        int,
        128,
        "the engine's block size when its /metrics does not say (vLLM's CPU backend: 128)",
        min=1,
        max=replay.MAX_TOKENS_PER_HASH,
    ),
    "vocab_size": Param(int, 49152, "the model's vocabulary (prompt token ids are drawn below it)", min=2000),
    "client_on": Param(
        str,
        "here",
        "where the client runs: here, or on every load generator of the --target "
        "inventory at once (loadgens: requests dealt round-robin, their rows merged)",
        choices=("here", "loadgens"),
    ),
    "timeout_s": Param(float, 90.0, "a request's own time limit", min=1.0),
    "stall_s": Param(float, 30.0, "no byte for this long mid-stream: the request stalled", min=0.5),
    "seed": Param(
        int,
        0,
        "salt of the prompt tokens (0: a fresh random salt per repetition, so that nothing an "
        "earlier run left in a long-lived server's cache can hit; else seed + repetition)",
        min=0,
    ),
    "cold_arm": Param(
        bool,
        False,
        "add instrument.cold: the instrument's requests on the caching engine with a document of "
        "their own each (nothing to reuse), beside instrument.on on the same engine and core",
    ),
}
ARMS = ("trace.on", "trace.off", "instrument.on", "instrument.off", "instrument.cold")
COLD_MAX_HIT_PCT = 5.0  # instrument.cold's most reuse (engine counters) for it to be the no-reuse baseline


def slice_records(p: dict) -> tuple[list[dict], kvtrace.KVTrace]:
    full = kvtrace.load_trace(input_path(p["trace"]), 512, shown=p["trace"])
    s = kvtrace.session_sample(full, p["session_fraction"], p["session_seed"])
    n = min(s.n_requests, p["max_requests"])
    keys = kvtrace.session_keys(s)
    recs = [
        {
            "timestamp": int(s.timestamps_ms[i]),
            "input_length": int(s.input_len[i]),
            "output_length": int(s.output_len[i]),
            "hash_ids": s.blocks[s.offsets[i] : s.offsets[i + 1]].tolist(),
            "session": int(keys[i]),  # the request's conversation (per-session hit rates)
        }
        for i in range(n)
    ]
    return recs, full


def _arm(ctx, arm: str, ep, reqs, p, caching_on: bool | None = None) -> tuple[list[client.Result], dict]:
    """One arm's results and the engine's counts around it. `caching_on` (default: an ".on"
    arm) says the engine caches prefixes: then its queries counter must follow the prompt
    tokens it served, or its hit rate is invalid."""
    before = engines.Counters.read(ep)
    res, by_host = _send(ctx, arm, ep, reqs, p)
    served = sum(r.prompt_tokens or 0 for r in res if r.status == "ok")
    on = arm.endswith(".on") if caching_on is None else caching_on
    d = before.delta(engines.Counters.read(ep), served, on)
    ok = sum(r.status == "ok" for r in res)
    ctx.log(
        f"{arm}: {ok}/{len(res)} ok, engine hits {d.hits} of {d.queries} tokens queried"
        + (f" (no measurement: {d.problem})" if d.problem else "")
    )
    counts: dict[str, Any] = {
        "queries": d.queries,
        "hits": d.hits,
        "hit_pct": engines.hit_pct(d, served),
        "served": served,
    }
    if by_host:
        counts["by_loadgen"] = by_host
    if d.problem:  # the counters' deltas are impossible: the hit rate is invalid, with the reason
        counts["invalid"] = f"{arm}.engine_hit_pct: {d.problem}"
    return res, counts


def _send(ctx, arm: str, ep, reqs, p) -> tuple[list[client.Result], dict]:
    """The arm's requests sent from here, or from every load generator at once (their rows
    merged in request order; each host's own rows kept in raw/ARM-HOST.csv)."""
    if p.get("client_on", "here") == "here":  # (a caller that passes only the client's limits sends from here)
        return client.run(ep.base_url, ep.model, reqs, timeout_s=p["timeout_s"], stall_s=p["stall_s"]), {}
    hosts = [h for h in ctx.target.load_generators if h is not None]
    if not hosts or not ctx.target.loadgen_python:
        raise BadInput(
            f"{ctx.case}.client_on=loadgens needs load generators: give --target an inventory whose "
            f"loadgen group has hosts (with the harness installed: role loadgen), or client_on=here"
        )
    fl = client_fleet.run(
        hosts, ctx.target.loadgen_python, ep.base_url, ep.model, reqs, timeout_s=p["timeout_s"], stall_s=p["stall_s"]
    )
    by_host = {}
    for h, why in zip(hosts, fl.failures):
        own = [r for r, o in zip(fl.results, fl.hosts) if o == h.name]
        summary.write_rows(ctx.raw_path(f"{arm}-{h.name}.csv"), own)
        ok = [r.ttft_ms for r in own if r.status == "ok" and r.ttft_ms is not None]
        by_host[h.name] = {
            "requests": len(own),
            "ok": len(ok),
            "failure": why,
            "ttft_p50_ms": stats.percentile(ok, 50) if ok else None,
            "ttft_p95_ms": stats.percentile(ok, 95) if ok else None,
        }
        if why:
            ctx.log(f"{arm}: {why}")
    return fl.results, by_host


@engines.fails_when_down
def run(ctx: CaseContext) -> Record:
    p = ctx.params
    on, off = engines.pick_warm(ctx.target, ctx.raw_dir, ctx.log)
    cfg = serving_engine.cache_config(on) or {}
    block = int(cfg.get("block_size") or p["engine_block"])
    replay.check_block(p["tokens_per_hash"], block, display(on.base_url) if cfg.get("block_size") else "", ctx.case)
    capacity = cfg.get("kv_cache_size_tokens")
    recs, full = slice_records(p)
    salt = p["seed"] + ctx.repetition if p["seed"] else secrets.randbits(48)
    sc = replay.scale(
        recs,
        tokens_per_hash=p["tokens_per_hash"],
        engine_block=block,
        max_prompt_tokens=p["max_prompt_tokens"],
        tail_tokens=p["tail_tokens"],
        duration_s=p["duration_s"],
        output_tokens=p["output_tokens"],
        salt=salt,
        vocab_high=p["vocab_size"],
    )
    instr = replay.repeated_prefix(
        p["instrument_requests"],
        p["instrument_prefix_tokens"],
        p["tail_tokens"],
        p["instrument_gap_s"],
        p["output_tokens"],
        salt + 7919,
        p["vocab_size"],
    )
    plan = {
        "trace.on": (on, sc.requests),
        "trace.off": (off, sc.requests),
        "instrument.on": (on, instr),
        "instrument.off": (off, instr),
    }
    if p["cold_arm"]:
        plan["instrument.cold"] = (on, _cold(instr, p, salt))
    arms = [a for a in ARMS if a in plan]
    k = (ctx.repetition - 1) % len(arms)
    results, counts = {}, {}
    for arm in arms[k:] + arms[:k]:
        ep, reqs = plan[arm]
        if ep is None:
            continue
        caching = arm.endswith((".on", ".cold")) and cfg.get("enable_prefix_caching") is not False
        results[arm], counts[arm] = _arm(ctx, arm, ep, [_tagged(r, arm) for r in reqs], p, caching)
        summary.write_rows(ctx.raw_path(f"{arm}.csv"), results[arm])  # kept at once: a later failure loses nothing
        try:
            engines.require(ep)
        except engines.EngineDown as e:
            return Record(
                "failed", f"the engine stopped answering during {arm}: {e}", details={"arms_done": list(results)}
            )
    out = _outcome(ctx, p, sc, results, counts, block, capacity, cfg, full, (on, off), salt)
    usage = _usage_observer(results, counts)
    if capacity and "trace.on" in results:
        usage.update(_per_session(results["trace.on"], sc, [r["session"] for r in recs], block, capacity, p))
    return _with_usage(out, usage)


def _with_usage(out: Record, usage: dict[str, Metric]) -> Record:
    """`out` with the usage observer's metrics; invalid, with each reason, where one of them
    is (a hit rate outside 0-100%, or a cached count the client could not hold to its prompt)."""
    out.metrics.update(usage)
    why = [
        m.note.removeprefix("invalid: ") for m in usage.values() if m.value is None and m.note.startswith("invalid: ")
    ]
    if why:
        out.status, out.reason = "invalid", "; ".join([out.reason, *why] if out.reason else why)
    return out


def _cold(instr: list[client.Request], p: dict, salt: int) -> list[client.Request]:
    """The instrument's requests at the same times and lengths, each with a document of its
    own: on the caching engine, nothing of one can be reused by the next."""
    own = [
        replay.repeated_prefix(
            1,
            p["instrument_prefix_tokens"],
            p["tail_tokens"],
            0.0,
            p["output_tokens"],
            salt + 104729 * (i + 1),
            p["vocab_size"],
        )[0]
        for i in range(len(instr))
    ]
    return [client.Request(r.at_s, o.prompt, r.max_tokens, r.tag, r.ignore_eos, r.sampling) for r, o in zip(instr, own)]


def _tagged(r: client.Request, arm: str) -> client.Request:
    return client.Request(r.at_s, r.prompt, r.max_tokens, arm, r.ignore_eos, r.sampling)


def _outcome(ctx, p, sc, results, counts, block, capacity, cfg, full, eps, salt) -> Record:
    m: dict[str, Metric] = {}
    series = {}
    for arm, res in results.items():
        m.update(summary.metrics_of(arm, res))
        hp = counts[arm]["hit_pct"]
        why = counts[arm].get("invalid")
        m[f"{arm}.engine_hit_pct"] = Metric(
            hp,
            "%",
            None,
            f"invalid: {why}"
            if why
            else "the engine's own "
            "prefix-cache hit rate: deltas of vllm:prefix_cache_hits_total over "
            "vllm:prefix_cache_queries_total",
        )
        series[arm.replace(".", "_")] = summary.series_of(res, arm)
    hosts = [(arm, h, c) for arm in results for h, c in (counts[arm].get("by_loadgen") or {}).items()]
    if hosts:
        series[LOADGENS.name] = LOADGENS.make(
            {
                "arm": [a for a, _, _ in hosts],
                "load_generator": [h for _, h, _ in hosts],
                **{k: [c[k] for _, _, c in hosts] for k in ("requests", "ok", "ttft_p50_ms", "ttft_p95_ms")},
            }
        )
    m.update(_instrument_metrics(results))
    m.update(_prediction(sc, block, capacity, p, m.get("trace.on.engine_hit_pct")))
    m["trace.prompt_tokens"] = Metric(sc.prompt_tokens, "tokens", None, "prompt tokens of the scaled slice")
    on, off = (results.get(a) for a in ("trace.on", "trace.off"))
    if on and off and "trace.on.ttft_p50_ms" in m and "trace.off.ttft_p50_ms" in m:
        m["trace.ttft_p50_speedup_x"] = Metric(
            # TTFT percentiles of summary.metrics_of: numbers whenever present
            cast(float, m["trace.off.ttft_p50_ms"].value) / cast(float, m["trace.on.ttft_p50_ms"].value),
            "x",
            "higher",
            "TTFT P50, caching off over on",
        )
    m.update(_tpot_changes(m))
    absent = {}
    if "instrument.cold.itl_p50_ms" in m and "instrument.itl_p50_change_vs_cold_pct" not in m:
        absent["instrument.itl_p50_change_vs_cold_pct"] = (
            f"instrument.cold reused {m['instrument.cold.engine_hit_pct'].value}% of its prompt tokens "
            f"(the engine's counters; at most {COLD_MAX_HIT_PCT:g}% for a baseline without reuse)"
            if "instrument.cold.engine_hit_pct" in m
            else "instrument.cold has no engine hit rate: no baseline without reuse"
        )
    details = {
        "absent_metrics": absent,
        "counts": counts,
        "cache_config": cfg,
        "scaling": _scaling(sc, p, block),
        "salt": salt,
        "slice": {
            "requests": len(sc.requests),
            "session_fraction": p["session_fraction"],
            "session_seed": p["session_seed"],
        },
    }
    ctx.raw_path("details.json").write_text(json.dumps(details, indent=1, default=str))
    ctx.raw_path("slice_engine_blocks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sc.records))
    facts = {
        "trace_sha256": full.sha256 or full.digest(),
        "trace_is_mooncake_conversation": full.is_mooncake_conversation,
        "engine_block_size": block,
        "tokens_per_hash": p["tokens_per_hash"],
        "length_scale": round(sc.length_scale, 5),
        "time_scale": round(sc.time_scale, 6),
        "engine_counters": m["trace.on.engine_hit_pct"].value is not None if "trace.on.engine_hit_pct" in m else False,
        "mechanism_off_engine": eps[1] is not None,
        "client_loadgens": len({h for _, h, _ in hosts}) if hosts else 0,
    }
    if capacity:
        facts["engine_kv_tokens"] = int(capacity)
    invalid = [c["invalid"] for c in counts.values() if c.get("invalid")]
    invalid += [why for arm, res in results.items() if (why := summary.invalid_usage(arm, res))]
    if invalid:  # an impossible counter delta or usage count is no measurement: the case says so, with the reason
        return Record("invalid", "; ".join(invalid), m, details, series, facts)
    return Record("ok", metrics=m, series=series, details=details, facts=facts)


def _tpot_changes(m: dict[str, Metric]) -> dict[str, Metric]:
    """TPOT and inter-token latency P50 with caching on against off, per workload (prefix
    caching saves prefill; the decoding of each new token is what vLLM's documentation says it
    does not speed up). TPOT is a request's decoding time over its tokens, waits behind other
    requests' prefills included; the ITL median is closer to one decoding step."""
    out = {}
    on, cold = m.get("instrument.on.itl_p50_ms"), m.get("instrument.cold.itl_p50_ms")
    reused = m.get("instrument.cold.engine_hit_pct")
    if reused is not None and (reused.value is None or reused.value > COLD_MAX_HIT_PCT):
        cold = None  # no baseline without reuse: the change is left out (absent_metrics says why)
    if on is not None and cold is not None and on.value is not None and cold.value:
        out["instrument.itl_p50_change_vs_cold_pct"] = Metric(
            100.0 * (on.value - cold.value) / cold.value,
            "%",
            None,
            "inter-token latency P50 of the document reused against documents of their own, same engine "
            "(negative: faster when reused)",
        )
    for w in ("trace", "instrument"):
        for fig, what in (("tpot", "TPOT"), ("itl", "inter-token latency")):
            on, off = m.get(f"{w}.on.{fig}_p50_ms"), m.get(f"{w}.off.{fig}_p50_ms")
            if on is not None and off is not None and on.value is not None and off.value:
                out[f"{w}.{fig}_p50_change_pct"] = Metric(
                    100.0 * (on.value - off.value) / off.value,
                    "%",
                    None,
                    f"{what} P50 with caching on against off (negative: faster with caching on)",
                )
    return out


def _usage_observer(results: dict, counts: dict) -> dict[str, Metric]:
    """The engine's hit rate read a second way: each answer's usage.prompt_tokens_details.
    cached_tokens (vLLM's --enable-prompt-tokens-details) summed by the client over the arm's
    completed requests, beside the /metrics counters' deltas; absent where a completed
    request's answer did not report it (another server, or the flag off). Invalid (value
    None, the note saying why) where a completed request's cached count was impossible for
    what the client sent (client.check_usage), or the sums give a rate outside 0-100% (rows
    a load generator sent back)."""
    m = {}
    for arm, res in results.items():
        done = [r for r in res if r.status == "ok"]
        bad = [r for r in done if client.CACHED in r.usage_problem]
        if bad:
            m[f"{arm}.usage_cached_pct"] = Metric(
                None,
                "%",
                None,
                f"invalid: {arm}.usage_cached_pct: {len(bad)} of {len(done)} completed requests: "
                f"request {bad[0].index}: {bad[0].usage_problem}",
            )
            continue
        if not done or any(r.cached_tokens is None or not r.prompt_tokens for r in done):
            continue
        cached, prompt = sum(r.cached_tokens or 0 for r in done), sum(r.prompt_tokens or 0 for r in done)
        pct = 100.0 * cached / prompt
        if not 0.0 <= pct <= 100.0:
            m[f"{arm}.usage_cached_pct"] = Metric(
                None,
                "%",
                None,
                f"invalid: {arm}.usage_cached_pct: {client.CACHED} sums to {cached} of {prompt} "
                f"usage.prompt_tokens over {len(done)} completed requests ({pct:,.2f}%): a hit rate outside "
                f"0-100% is no measurement",
            )
            continue
        m[f"{arm}.usage_cached_pct"] = Metric(
            pct,
            "%",
            None,
            "the engine's per-answer usage.prompt_tokens_details.cached_tokens over prompt_tokens, summed by the client",
        )
        hp = counts.get(arm, {}).get("hit_pct")
        if hp is not None:
            m[f"{arm}.observers_gap_pp"] = Metric(
                pct - hp, "pp", None, "per-answer usage minus the /metrics counters' deltas"
            )
    return m


def _per_session(res: list[client.Result], sc, sessions: list[int], block: int, capacity, p: dict) -> dict:
    """Per conversation of the slice: the engine's hit rate (its answers' cached tokens over
    the prompt tokens the client sent) beside the simulator's prediction for the same
    requests at the engine's capacity. A conversation's rate outside 0-100% is no
    measurement: trace.sessions.engine_hit_p50_pct is then invalid, naming it."""
    pred = predicted_rates(sc.records, block, int(capacity), p["policy"]).hit_tokens
    by: dict[int, list[float]] = {}
    for r in res:
        if r.status != "ok" or r.cached_tokens is None or r.index >= len(sessions):
            continue
        t = by.setdefault(sessions[r.index], [0.0, 0.0, 0.0])
        t[0] += r.cached_tokens
        t[1] += float(pred[r.index])
        t[2] += sc.records[r.index]["input_length"]
    why = _session_out_of_range(by)
    if why:
        return {"trace.sessions.engine_hit_p50_pct": Metric(None, "%", None, f"invalid: {why}")}
    rows = [(100 * c / n, 100 * q / n) for c, q, n in by.values() if n]
    if not rows:
        return {}
    eng, sim = [a for a, _ in rows], [b for _, b in rows]
    return {
        "trace.sessions.count": Metric(
            len(rows), "sessions", None, "conversations of the slice with a completed request"
        ),
        "trace.sessions.engine_hit_p50_pct": Metric(
            stats.percentile(eng, 50),
            "%",
            None,
            "median over conversations of the engine's hit rate (its answers' usage)",
        ),
        "trace.sessions.predicted_hit_p50_pct": Metric(
            stats.percentile(sim, 50), "%", None, "the same median as the simulator predicts it"
        ),
        "trace.sessions.max_gap_pp": Metric(
            max(abs(a - b) for a, b in rows),
            "pp",
            "lower",
            "the largest engine-minus-simulator gap of one conversation",
        ),
    }


def _session_out_of_range(by: dict[int, list[float]]) -> str:
    """'' or why a conversation's hit rate (cached tokens over the prompt tokens sent) is no
    measurement: outside 0-100%, or cached tokens reported for prompts of no token."""
    for key, (cached, _, sent) in by.items():
        if not 0 <= cached <= sent:
            pct = f" ({100 * cached / sent:,.2f}%)" if sent else ""
            return (
                f"trace.sessions.engine_hit_p50_pct: conversation {key}: {client.CACHED} sums to {cached:.0f} "
                f"of {sent:.0f} prompt tokens the client sent{pct}: a hit rate outside 0-100% is no measurement"
            )
    return ""


def _repeats(res: list[client.Result]) -> list[float]:
    """TTFTs of the instrument's repeats (its first request fills the cache)."""
    return [r.ttft_ms for r in res[1:] if r.status == "ok" and r.ttft_ms is not None]


def _instrument_metrics(results: dict) -> dict[str, Metric]:

    m = {}
    for arm in ("instrument.on", "instrument.off"):
        if arm in results and _repeats(results[arm]):
            m[f"{arm}.repeat_ttft_p50_ms"] = Metric(
                stats.percentile(_repeats(results[arm]), 50),
                "ms",
                "lower",
                "TTFT of the repeats (the first request excluded)",
            )
    a, b = m.get("instrument.on.repeat_ttft_p50_ms"), m.get("instrument.off.repeat_ttft_p50_ms")
    if a and b and a.value:
        # b: set just above from a percentile, a number
        m["instrument.ttft_cut_x"] = Metric(
            cast(float, b.value) / a.value, "x", "higher", "the repeats' TTFT P50 with caching off over on"
        )
    return m


def _prediction(sc, block: int, capacity, p: dict, measured: Metric | None) -> dict[str, Metric]:
    m = {}
    if capacity:
        pred = 100 * predicted_hit_rate(sc.records, block, int(capacity), p["policy"])
        m["trace.predicted_hit_pct"] = Metric(
            pred,
            "%",
            None,
            f"the simulator ({p['policy']}) on the same engine blocks at the engine's {int(capacity):,} tokens",
        )
        if measured is not None and measured.value is not None:
            m["trace.hit_gap_pp"] = Metric(measured.value - pred, "pp", None, "engine minus simulator")
            m["trace.hit_gap_abs_pp"] = Metric(abs(measured.value - pred), "pp", "lower")
    m["trace.predicted_max_hit_pct"] = Metric(
        100 * predicted_hit_rate(sc.records, block, 10**12, "lru"),
        "%",
        None,
        "the slice's reuse with an infinite cache",
    )
    return m


def _scaling(sc, p: dict, block: int) -> dict:
    return {
        "tokens_per_hash": p["tokens_per_hash"],
        "mooncake_tokens_per_hash": replay.MOONCAKE_BLOCK,
        "engine_block": block,
        "length_scale": sc.length_scale,
        "time_scale": sc.time_scale,
        "span_s": sc.span_s,
        "max_prompt_tokens": p["max_prompt_tokens"],
        "tail_tokens": p["tail_tokens"],
        "output_tokens": p["output_tokens"],
    }
