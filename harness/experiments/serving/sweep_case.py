"""The case of driver `serving-sweep`: what a cache buys under load. Each arm is swept over a
list of open-loop rates (or closed-loop concurrencies); each point sends a fresh workload (its
first requests kept out of the statistics), and an arm stops one point past its knee (harness.experiments.serving.sweep says what a point measured, whether it
was valid, where the server stopped keeping up and the highest load at the SLO).

A point sends at least `warmup_requests + point_requests` requests at its rate and lasts at
least `warmup_s + window_s` (so it is longer at low rates, and a queue has time to show itself
at high ones); in closed loop it lasts `warmup_s + window_s`.

Arms (each on the same levels, one after the other):
- prefix.on / prefix.off: the workload to the engine with prefix caching on ("cached") and off
  ("uncached": the mechanism-off control);
- instrument.on / instrument.off: one long prefix asked again and again at the same rates (a
  workload whose capacity a prefix cache must raise: the instrument of the capacity gain);
- semantic.on / semantic.hash / semantic.off / semantic.oracle: the semantic-cache suite's
  query stream through a cache in front of the engine (harness.experiments.serving.semantic_arms):
  the semantic cache, the prompt-hash cache (C3's baseline), no cache (the control) and the
  oracle cache (the instrument). C3 (P95 TTFT, semantic against hash) is judged against the
  curve: per rate both ran validly, and at the rate where the cut was largest.

Workloads (`workload`): the Mooncake trace (a session sample, its timestamps scaled to each
rate), multi-turn sessions from the seeded generator (harness.experiments.serving.sessions;
its parameters are recorded), or the user's sessions (`sessions_file`, JSONL). Every point
draws new prompt tokens, so nothing an earlier point cached can hit.

What the hit rate buys, per cache: the engine's hit rate over the sweep (its /metrics), the
TTFT change at the highest load both arms ran validly, the capacity change at the SLO (on
over off), and the prefill tokens the cache saved per second at the on arm's highest load at
the SLO.
"""

from __future__ import annotations

import asyncio
import math
from typing import cast

from harness.base import stats
from harness.base.errors import BadInput
from harness.experiments.serving.series import POINTS, SEMANTIC_VS_HASH
from harness.infra import serving_engine
from harness.mechanisms.kv_blocks import trace as kvtrace
from harness.mechanisms.semantic import stream as semantic_stream
from harness.model.driver_contract import INPUT_FILE, CaseContext, Metric, Param, Record, input_path

from . import client, engines, replay, semantic_arms, sessions, sweep, sweep_run

ARMS = ("prefix.on", "prefix.off", "instrument.on", "instrument.off", *semantic_arms.ARMS)
WORKLOADS = ("trace", "sessions", "file")

PARAMS = {
    "arms": Param(list, list(ARMS), "the arms swept", ARMS),
    "workload": Param(
        str,
        "trace",
        "what the prefix arms send: the Mooncake trace, generated multi-turn sessions, or the user's sessions_file",
        choices=WORKLOADS,
    ),
    "mode": Param(str, "open", "open loop at `rates`, or closed loop at `concurrencies`", choices=("open", "closed")),
    "rates": Param(list, [0.5, 1.0, 2.0, 4.0], "open loop: requests per second, in increasing order", min=0.01),
    "concurrencies": Param(list, [1, 2, 4, 8], "closed loop: users, in increasing order", min=1),
    "point_requests": Param(
        int,
        32,
        "open loop: at least this many requests measured per point (at least window_s long); 0: a point lasts window_s",
        min=0,
    ),
    "warmup_requests": Param(
        int,
        8,
        "open loop: at least this many requests before them (at least warmup_s long), kept out of the statistics",
        min=0,
    ),
    "warmup_s": Param(float, 3.0, "each point's first seconds at least, kept out of the statistics", min=0.0),
    "window_s": Param(float, 12.0, "each point's measured seconds at least", min=1.0),
    "slo_ttft_p95_ms": Param(float, 1000.0, "the SLO's TTFT bound (ms; 0: none)", min=0.0),
    "slo_tpot_p95_ms": Param(float, 0.0, "the SLO's TPOT bound (ms; 0: none)", min=0.0),
    "slo_min_met_pct": Param(float, 90.0, "the share of a point's requests that must meet the bounds", min=0, max=100),
    "margin": Param(
        float,
        0.1,
        "sent under (1 - margin) x offered: invalid; completed under (1 - margin) x sent: saturated",
        min=0.0,
        max=0.9,
    ),
    "max_late_ms": Param(float, 50.0, "schedule lateness P95 above this: the point is invalid", min=0.0),
    "growth": Param(float, 2.0, "TTFT of a point's last third over its first third above this: saturated", min=1.0),
    "trace": Param(str, kvtrace.DEFAULT_TRACE, "a Mooncake-format JSONL trace", kind=INPUT_FILE),
    "session_fraction": Param(
        float,
        0.004,
        "the trace's sessions sampled (whole conversations); a point sends the sample's first requests in time order",
        min=0.0001,
        max=1,
    ),
    "tokens_per_hash": Param(int, 16, "prompt tokens per hash id", min=1),
    "max_prompt_tokens": Param(int, 512, "prompts are cut here", min=16),
    "tail_tokens": Param(int, 8, "tokens of its own at the end of every prompt", min=1),
    "output_tokens": Param(int, 4, "tokens generated per request (ignore_eos)", min=1),
    "instrument_prefix_tokens": Param(int, 512, "the instrument's shared prefix, in tokens", min=64),
    "session_turns": Param(list, [2, 5], "generated sessions: turns per user, [min, max]", min=1),
    "session_system_tokens": Param(int, 256, "generated sessions: the shared system prompt", min=0),
    "session_user_tokens": Param(int, 48, "generated sessions: a user turn's new tokens", min=1),
    "session_answer_tokens": Param(int, 32, "generated sessions: an answer's tokens in the history", min=0),
    "session_think_s": Param(float, 2.0, "generated sessions: mean think time between turns", min=0.0),
    "sessions_file": Param(str, "", "the user's sessions (JSONL: session, at_s, prompt, max_tokens); workload=file"),
    "engine_block": Param(int, 128, "the engine's block size when its /metrics does not say", min=1),
    "vocab_size": Param(int, 49152, "the model's vocabulary (prompt token ids are drawn below it)", min=2000),
    "timeout_s": Param(float, 60.0, "a request's own time limit", min=1.0),
    "stall_s": Param(float, 20.0, "no byte for this long mid-stream: the request stalled", min=0.5),
    "seed": Param(int, 0, "seed of the workloads' tokens and arrivals (each point and repetition adds its own)"),
    **semantic_arms.PARAMS,
}


def check(where: str, p: dict) -> None:
    levels = p["rates"] if p["mode"] == "open" else p["concurrencies"]
    if list(levels) != sorted(levels) or len(set(levels)) != len(levels) or not levels:
        raise BadInput(
            f"{where}.{'rates' if p['mode'] == 'open' else 'concurrencies'}: give increasing levels, "
            f"e.g. [0.5, 1, 2, 4]"
        )
    if len(p["session_turns"]) != 2 or p["session_turns"][0] > p["session_turns"][1]:
        raise BadInput(f"{where}.session_turns: give [min, max], e.g. [2, 5]")
    if p["workload"] == "file" and not p["sessions_file"]:
        raise BadInput(f"{where}: workload=file needs sessions_file=PATH (JSONL: session, at_s, prompt)")
    if not (p["slo_ttft_p95_ms"] or p["slo_tpot_p95_ms"]):
        raise BadInput(f"{where}: give the SLO at least one bound: slo_ttft_p95_ms or slo_tpot_p95_ms")
    if any(a in semantic_arms.ARMS for a in p["arms"]):
        semantic_stream.check(where, p)


def slo_of(p: dict) -> sweep.Slo:
    return sweep.Slo(p["slo_ttft_p95_ms"] or None, p["slo_tpot_p95_ms"] or None, p["slo_min_met_pct"])


def rules_of(p: dict) -> sweep.Rules:
    return sweep.Rules(p["margin"], p["max_late_ms"], p["growth"])


# ---- workloads: a point's requests ----------------------------------------------------------


class Workloads:
    """The requests of one point: `level` (rate or users) for `span_s` seconds, with tokens of
    its own (`salt`)."""

    def __init__(self, p: dict):
        self.p = p
        self._trace: list[dict] | None = None
        self._file: list[client.Request] | None = None

    def _trace_records(self) -> list[dict]:
        if self._trace is None:
            full = kvtrace.load_trace(input_path(self.p["trace"]), 512, shown=self.p["trace"])
            s = kvtrace.session_sample(full, self.p["session_fraction"], self.p["seed"])
            self._trace = [
                {
                    "timestamp": int(s.timestamps_ms[i]),
                    "input_length": int(s.input_len[i]),
                    "output_length": int(s.output_len[i]),
                    "hash_ids": s.blocks[s.offsets[i] : s.offsets[i + 1]].tolist(),
                }
                for i in range(s.n_requests)
            ]
        return self._trace

    def reset(self, arm: str) -> None:
        """Nothing to reset: every point sends tokens of its own."""

    def serving(self, arm: str):
        return engine_serve

    def figures(self, results: list[client.Result], warmup_s: float) -> dict:
        return {}

    def engine_served(self, results: list[client.Result]) -> list[client.Result]:
        return results

    def requests(self, arm: str, rate: float, span_s: float, salt: int, block: int) -> list[client.Request]:
        n = max(2, round(rate * span_s))
        p = self.p
        if arm.startswith("instrument"):
            return replay.repeated_prefix(
                n,
                p["instrument_prefix_tokens"],
                p["tail_tokens"],
                1.0 / rate,
                p["output_tokens"],
                salt,
                p["vocab_size"],
                tag=arm,
            )
        if p["workload"] == "sessions":
            return self._sessions(rate, span_s, salt, arm)
        if p["workload"] == "file":
            return _scaled(self._user_file(), rate, n, arm)
        return self._trace_requests(rate, n, salt, block, arm)

    def _trace_requests(self, rate: float, n: int, salt: int, block: int, arm: str) -> list[client.Request]:
        """n requests of the trace sample at `rate` on average: the sample's timestamps scaled,
        and where it has fewer than n requests, copies of it one after the other, each with
        tokens of its own (a copy shares nothing with another)."""
        p, base = self.p, self._trace_records()
        out: list[client.Request] = []
        for c in range(math.ceil(n / len(base))):
            recs = base[: min(len(base), n - c * len(base))]
            sc = replay.scale(
                recs,
                tokens_per_hash=p["tokens_per_hash"],
                engine_block=block,
                max_prompt_tokens=p["max_prompt_tokens"],
                tail_tokens=p["tail_tokens"],
                duration_s=max(1.0, (len(recs) - 1) / rate),
                output_tokens=p["output_tokens"],
                salt=salt + 104729 * c,
                vocab_high=p["vocab_size"],
            )
            start = c * len(base) / rate
            out += [client.Request(start + r.at_s, r.prompt, r.max_tokens, arm) for r in sc.requests]
        return out

    def _sessions(self, rate: float, span_s: float, salt: int, arm: str) -> list[client.Request]:
        reqs = [r for r in sessions.generate(self.session_spec(rate, span_s, salt)) if r.at_s < span_s]
        return [client.Request(r.at_s, r.prompt, r.max_tokens, arm) for r in reqs]

    def session_spec(self, rate: float, span_s: float, salt: int) -> sessions.SessionSpec:
        p = self.p
        lo, hi = p["session_turns"]
        users_per_s = rate / ((lo + hi) / 2)  # a user sends its turns one think time apart
        return sessions.SessionSpec(
            users=max(1, math.ceil(users_per_s * span_s)),
            users_per_s=users_per_s,
            turns=(lo, hi),
            system_tokens=p["session_system_tokens"],
            user_tokens=p["session_user_tokens"],
            answer_tokens=p["session_answer_tokens"],
            think_s=p["session_think_s"],
            output_tokens=p["output_tokens"],
            max_prompt_tokens=p["max_prompt_tokens"],
            vocab_high=p["vocab_size"],
            seed=salt,
        )

    def _user_file(self) -> list[client.Request]:
        if self._file is None:
            self._file = sessions.from_jsonl(input_path(self.p["sessions_file"]), self.p["output_tokens"])
        return self._file


def _scaled(reqs: list[client.Request], rate: float, n: int, arm: str) -> list[client.Request]:
    """The first n requests, their times scaled so that they arrive at `rate` on average."""
    reqs = reqs[:n]
    span = reqs[-1].at_s - reqs[0].at_s if len(reqs) > 1 else 0.0
    k = ((len(reqs) - 1) / rate) / span if span > 0 else 0.0
    return [
        client.Request((r.at_s - reqs[0].at_s) * k if span else i / rate, r.prompt, r.max_tokens, arm)
        for i, r in enumerate(reqs)
    ]


# ---- running an arm -------------------------------------------------------------------------


def engine_serve(sess, ep, lim) -> sweep_run.Serve:
    url = client.completions_url(ep.base_url)

    async def serve(i: int, r: client.Request, t0: float) -> client.Result:
        return await client.send(sess, url, ep.model, i, r, t0, lim)

    return serve


async def run_point(
    ep, reqs: list[client.Request], p: dict, users: int | None, make_serve=engine_serve
) -> list[client.Result]:
    lim = client.limits(p["timeout_s"], p["stall_s"])
    async with client.session() as sess:
        serve = make_serve(sess, ep, lim)
        if users is None:
            results = await sweep_run.open_loop(reqs, serve, p["timeout_s"])
        else:
            results = await sweep_run.closed_loop(reqs, serve, users, p["warmup_s"] + p["window_s"], p["timeout_s"])
    client.refuse_redirects(results)  # a redirect ends the case (exit 3), never a point measured elsewhere
    return results


def timing(p: dict, level: float) -> tuple[float, float]:
    """(warm-up seconds, measured seconds) of a point at `level`: open loop, long enough for
    warmup_requests and point_requests at its rate and never shorter than warmup_s and
    window_s (a queue must have time to show itself); closed loop, warmup_s and window_s."""
    if p["mode"] == "open" and p["point_requests"]:
        return max(p["warmup_requests"] / level, p["warmup_s"]), max(p["point_requests"] / level, p["window_s"])
    return p["warmup_s"], p["window_s"]


def sweep_arm(ctx: CaseContext, arm: str, ep, loads, block: int, salt: int) -> list[dict]:
    """Every point of one arm, climbing until one past the knee: one row per point. `loads`
    gives each point's requests and how they are served (Workloads: straight to the engine;
    semantic_arms.SemanticArms: through a cache in front of it)."""
    p = ctx.params
    levels = p["rates"] if p["mode"] == "open" else p["concurrencies"]
    points, rows = [], []
    for k, level in enumerate(levels):
        warmup, window = timing(p, float(level))
        rate = float(level) if p["mode"] == "open" else 50.0 * level  # closed loop: enough requests
        reqs = loads.requests(arm, rate, warmup + window, salt + 7919 * (k + 1), block)
        loads.reset(arm)
        before = engines.Counters.read(ep)
        pp = dict(p, warmup_s=warmup, window_s=window)
        results = asyncio.run(run_point(ep, reqs, pp, None if p["mode"] == "open" else int(level), loads.serving(arm)))
        served = sum(r.prompt_tokens or 0 for r in results if r.status == "ok")
        counts = before.delta(engines.Counters.read(ep), served, arm.endswith(".on") and ep.prefix_caching is not False)
        offered = (sum(warmup <= r.at_s < warmup + window for r in reqs) / window) if p["mode"] == "open" else None
        st = sweep.point_stats(
            results, float(level), warmup, window, slo_of(p), rules_of(p), offered, loads.engine_served(results)
        )
        points.append(st)
        rows.append(
            {
                **_row(arm, st, counts, served, warmup + window),
                **_cache_row(loads.figures(results, warmup), results, warmup, window),
                "_ttft": [
                    r.ttft_ms for r in sweep.measured(results, warmup) if r.status == "ok" and r.ttft_ms is not None
                ],
            }
        )
        ctx.log(
            f"{arm} at {level:g}{' req/s' if p['mode'] == 'open' else ' users'}: ttft p95 "
            f"{st.ttft_p95_ms or 0:.0f} ms, goodput {st.goodput_rps:.2f} req/s"
            + (f"; invalid: {st.invalid}" if st.invalid else "")
            + (f"; saturated: {st.saturated}" if st.saturated else "")
        )
        if sweep.should_stop(points):
            break
    return rows


def _row(arm: str, st: sweep.PointStats, counts: engines.Counters, served: int, span_s: float) -> dict:
    return {
        "arm": arm,
        "level": st.level,
        "offered_rps": st.offered_rps,
        "sent_rps": st.sent_rps,
        "completed_rps": st.completed_rps,
        "goodput_rps": st.goodput_rps,
        "met_pct": st.met_pct,
        "late_p95_ms": st.late_p95_ms,
        "ttft_p50_ms": st.ttft_p50_ms,
        "ttft_p95_ms": st.ttft_p95_ms,
        "tpot_p95_ms": st.tpot_p95_ms,
        "ttft_growth_x": st.ttft_growth_x,
        "requests": st.requests,
        "invalid": st.invalid,
        "saturated": st.saturated,
        "slo_held": st.slo_held,
        "engine_hit_pct": engines.hit_pct(counts, served),
        "hit_tokens_per_s": counts.hits / span_s if counts.hits is not None and not counts.problem else None,
        "errors": st.errors,
        "_stats": st,
    }


def _cache_row(fig: dict, results: list[client.Result], warmup: float, window: float) -> dict:
    """A cache in front of the engine (the semantic arms): its correct hits (% of the point's
    measured requests), wrong hits, and the prompt tokens its hits kept from the engine per
    second (hits per second x the mean prompt the engine served at that point); None elsewhere."""
    if not fig:
        return {"cache_hit_pct": None, "wrong_hits": None, "cache_saved_tokens_per_s": None}
    served = [r.prompt_tokens for r in sweep.measured(results, warmup) if r.status == "ok" and r.prompt_tokens]
    saved = fig["cache_hits"] / window * (sum(served) / len(served)) if served else None
    return {"cache_hit_pct": fig["cache_hit_pct"], "wrong_hits": fig["wrong_hits"], "cache_saved_tokens_per_s": saved}


# ---- the case -------------------------------------------------------------------------------

ENGINE_OF = {"prefix.on": 0, "instrument.on": 0, "prefix.off": 1, "instrument.off": 1}


def engine_of(arm: str, on, off):
    """The engine an arm sends to: the semantic arms' is the one with prefix caching off where
    the run has one (so that the cache in front is the only cache between them), else the one
    there is."""
    if arm in semantic_arms.ARMS:
        return off or on
    return (on, off)[ENGINE_OF[arm]]


@engines.fails_when_down
def run(ctx: CaseContext) -> Record:
    p = ctx.params
    on, off = engines.pick_warm(ctx.target, ctx.raw_dir, ctx.log)
    block = replay_block(on, p)
    loads = Workloads(p)
    salt = p["seed"] * 1_000_003 + ctx.repetition
    rows: list[dict] = []
    skipped: dict[str, str] = {}
    front = semantic_arms.SemanticArms(ctx, p) if any(a in semantic_arms.ARMS for a in p["arms"]) else None
    try:
        for arm in p["arms"]:
            ep = engine_of(arm, on, off)
            if ep is None:
                skipped[arm] = "no engine with prefix caching off (a server the user points at has no off arm)"
                continue
            rows += sweep_arm(ctx, arm, ep, front if arm in semantic_arms.ARMS else loads, block, salt)
            try:
                engines.require(ep)
            except engines.EngineDown as e:
                return Record("failed", f"the engine stopped answering during {arm}: {e}")
    finally:
        if front is not None:
            front.close()
    return outcome(ctx, rows, skipped, loads)


def replay_block(ep, p: dict) -> int:
    cfg = serving_engine.cache_config(ep) or {}
    block = int(cfg.get("block_size") or p["engine_block"])
    replay.check_block(p["tokens_per_hash"], block, "", "sweep")
    return block


def outcome(ctx: CaseContext, rows: list[dict], skipped: dict, loads: Workloads) -> Record:
    p = ctx.params
    m: dict[str, Metric] = {}
    unit = "req/s" if p["mode"] == "open" else "users"
    by_arm: dict[str, list[sweep.PointStats]] = {}
    for r in rows:
        by_arm.setdefault(r["arm"], []).append(r["_stats"])
    for arm, pts in by_arm.items():
        best, k = sweep.highest_at_slo(pts), sweep.knee(pts)
        m[f"{arm}.max_at_slo"] = Metric(
            best.level if best else 0.0,
            unit,
            "higher",
            f"the highest {unit} at which {slo_of(p).text()} held (and at every "
            f"valid point below it); 0: at none"
            + ("" if _failed(pts) else "; it held at every load tried: the capacity is at least this"),
        )
        fail = next((x for x in sorted(pts, key=lambda x: x.level) if not x.invalid and not x.slo_held), None)
        if fail is not None:
            m[f"{arm}.slo_failed_at"] = Metric(fail.level, unit, None, "the lowest valid load at which the SLO failed")
        if k is not None:
            m[f"{arm}.knee"] = Metric(
                k.level, unit, None, f"the first load at which the server no longer kept up: {k.saturated}"
            )
        m[f"{arm}.points"] = Metric(len(pts), "points", None)
        m[f"{arm}.invalid_points"] = Metric(
            sum(bool(x.invalid) for x in pts), "points", "lower", "points whose load sent was not the load configured"
        )
    m.update(
        per_arm_pct(
            rows,
            "wrong_hits",
            "wrong_hit_pct",
            "wrong hits (answers of another question, served by the engine instead)",
        )
    )
    absent: dict[str, str] = {}  # a metric the ledger may ask for, and why this run has none
    for cache in ("prefix", "instrument", "semantic"):
        got = buys(cache, rows, by_arm, unit)
        m.update(got)
        why = no_capacity_why(cache, by_arm, unit)
        if why and f"{cache}.capacity_gain_x" not in got:
            absent[f"{cache}.capacity_gain_x"] = why
    versus, c3 = against_hash(rows, unit)
    m.update(c3)
    if "semantic.shared_levels" in c3 and "semantic.vs_hash.ttft_p95_change_pct" not in c3:
        absent["semantic.vs_hash.ttft_p95_change_pct"] = c3["semantic.shared_levels"].note
    # at a point past the knee, timeouts are what the server did; below it, a fault
    m.update(per_arm_pct(rows, "errors", "error_pct", "requests that did not complete"))
    for arm in dict.fromkeys(r["arm"] for r in rows if r["errors"] is not None):
        m[f"{arm}.requests"] = Metric(
            sum(r["requests"] for r in rows if r["arm"] == arm and r["errors"] is not None),
            "requests",
            None,
            "measured requests of the arm's points (the denominator of error_pct)",
        )
    points = [{c: v for c, v in r.items() if not c.startswith("_")} for r in rows]
    series = {POINTS.name: POINTS.rows(points, units={"level": unit})} if rows else {}
    if versus:
        series[SEMANTIC_VS_HASH.name] = SEMANTIC_VS_HASH.rows(versus, units={"level": unit})
    details = {
        "slo": slo_of(p).text(),
        "mode": p["mode"],
        "skipped_arms": skipped,
        "workload": p["workload"],
        "unit": unit,
    }
    if absent:
        details["absent_metrics"] = absent
    if p["workload"] == "sessions":
        details["session_generator"] = loads.session_spec(1.0, sum(timing(p, 1.0)), 0).record()
    facts = {"sweep_mode": p["mode"], "sweep_workload": p["workload"]}
    if not rows:
        return Record("failed", "no arm ran: " + "; ".join(f"{a}: {w}" for a, w in skipped.items()), m, details)
    return Record("ok", metrics=m, series=series, details=details, facts=facts)


def buys(cache: str, rows: list[dict], by_arm: dict, unit: str) -> dict[str, Metric]:
    """What the cache buys: capacity at the SLO (on over off), the TTFT P95 change at the
    highest load both arms ran validly, the engine's hit rate and the prefill tokens saved
    per second at the on arm's highest load at the SLO."""
    on, off = by_arm.get(f"{cache}.on"), by_arm.get(f"{cache}.off")
    if not on or not off:
        return {}
    m: dict[str, Metric] = {}
    best_on, best_off = sweep.highest_at_slo(on), sweep.highest_at_slo(off)
    # a capacity is found where the SLO failed at a valid point; an arm that held it at every
    # load tried has a capacity of at least its top load, and the off arm's must be found
    if best_on and best_off and _failed(off):
        m[f"{cache}.capacity_gain_x"] = Metric(
            best_on.level / best_off.level,
            "x",
            "higher",
            f"highest {unit} at the SLO, cache on over off"
            + ("" if _failed(on) else " (at least: the on arm held the SLO at every load tried)"),
        )
    both = sorted({x.level for x in on if not x.invalid} & {x.level for x in off if not x.invalid})
    if both:
        lv = both[-1]
        a = next(x for x in on if x.level == lv)
        b = next(x for x in off if x.level == lv)
        if a.ttft_p95_ms and b.ttft_p95_ms:
            m[f"{cache}.ttft_p95_change_pct"] = Metric(
                100.0 * (a.ttft_p95_ms - b.ttft_p95_ms) / b.ttft_p95_ms,
                "%",
                "lower",
                f"TTFT P95, cache on against off, at {lv:g} {unit} (the highest load both ran validly)",
            )
    front = cache == "semantic"  # a cache in front of the engine: its own hits, not the engine's
    col, saved = ("cache_hit_pct", "cache_saved_tokens_per_s") if front else ("engine_hit_pct", "hit_tokens_per_s")
    hits = [r[col] for r in rows if r["arm"] == f"{cache}.on" and r[col] is not None]
    if hits:
        m[f"{cache}.on.{col}"] = Metric(
            sum(hits) / len(hits),
            "%",
            None,
            ("the cache's correct hits" if front else "the engine's own prefix-cache hit rate")
            + ", mean over the on arm's points",
        )
    if best_on:
        row = next(r for r in rows if r["arm"] == f"{cache}.on" and r["_stats"] is best_on)
        if row[saved] is not None:
            m[f"{cache}.prefill_tokens_saved_per_s"] = Metric(
                row[saved],
                "tokens/s",
                "higher",
                (
                    "prompt tokens the cache's hits kept from the engine per second (hits x the mean prompt the engine "
                    "served)"
                    if front
                    else "prompt tokens the engine took from its cache per second"
                )
                + f", at {best_on.level:g} {unit}",
            )
    return m


def no_capacity_why(cache: str, by_arm: dict, unit: str) -> str:
    """Why `cache`'s capacity gain (on over off) cannot be measured from these points, or ''."""
    on, off = by_arm.get(f"{cache}.on"), by_arm.get(f"{cache}.off")
    if not on or not off:
        return ""
    lowest = min(x.level for x in on + off)
    held_on, held_off = sweep.highest_at_slo(on), sweep.highest_at_slo(off)
    if held_on is None and held_off is None:
        return (
            f"neither arm held the SLO at the lowest load tried ({lowest:g} {unit}): both capacities are below "
            f"the loads tried on this machine; give the sweep lower rates to measure them"
        )
    if held_off is None and held_on is not None:
        return (
            f"the off arm held the SLO at no load tried (the lowest, {lowest:g} {unit}), the on arm up to "
            f"{held_on.level:g}: the off arm's capacity is below the loads tried; give the sweep lower rates"
        )
    if held_on is None and held_off is not None:
        return (
            f"the on arm held the SLO at no load tried (the lowest, {lowest:g} {unit}), the off arm up to "
            f"{held_off.level:g}"
        )
    if not _failed(off):
        top = max(x.level for x in off)
        return (
            f"the off arm held the SLO at every load tried (up to {top:g} {unit}): its capacity was not found; "
            f"give the sweep higher rates"
        )
    return ""


def _failed(points: list[sweep.PointStats]) -> bool:
    """The SLO failed at a valid point: the arm's capacity was found."""
    return any(not x.invalid and not x.slo_held for x in points)


def per_arm_pct(rows: list[dict], col: str, name: str, what: str) -> dict[str, Metric]:
    """Per arm whose rows have `col`: its sum over every point's measured requests, as a share
    of them (`{arm}.{name}`)."""
    m: dict[str, Metric] = {}
    for arm in dict.fromkeys(r["arm"] for r in rows if r[col] is not None):
        mine = [r for r in rows if r["arm"] == arm and r[col] is not None]
        n = sum(r["requests"] for r in mine)
        if n:
            m[f"{arm}.{name}"] = Metric(
                100.0 * sum(r[col] for r in mine) / n,
                "%",
                "lower",
                f"{what}, of the {n} measured requests of the arm's points",
            )
    return m


def _steady(r: dict) -> bool:
    """A point whose P95 is a steady state: valid, not saturated (a queue's P95 grows with
    the window), every measured request completed."""
    return not r["invalid"] and not r["saturated"] and not r["errors"]


def _why_no_shared(rows: list[dict], arms: set[str]) -> str:
    """Why no load counts for C3: each arm's points that were not steady, and what they were."""
    bad = [
        f"{r['arm']} at {r['level']:g}: "
        + (r["invalid"] or r["saturated"] or f"{r['errors']} requests did not complete")
        for r in rows
        if r["arm"] in arms and not _steady(r)
    ]
    return "no load at which every semantic arm ran steadily (" + ("; ".join(bad) or "no common load") + ")"


def against_hash(rows: list[dict], unit: str) -> tuple[list[dict], dict[str, Metric]]:
    """C3 against the curve. Per load at which the semantic and the hash cache both ran
    steadily: their TTFT P95s and the change (the report's table). Judged: the change of the
    P95 over every measured request of those loads, pooled (a point's P95 of a dozen requests
    is nearly its slowest one, and the best of several such points would favour the claim);
    the controls (no cache, the oracle cache) pooled over the same loads."""
    arms = {a for a in semantic_arms.ARMS if any(r["arm"] == a for r in rows)}
    if not {"semantic.on", "semantic.hash"} <= arms:
        return [], {}
    steady = {a: {r["level"]: r for r in rows if r["arm"] == a and _steady(r)} for a in arms}
    pair = sorted(set(steady["semantic.on"]) & set(steady["semantic.hash"]))
    versus = [
        {
            "level": lv,
            "semantic_p95_ms": steady["semantic.on"][lv]["ttft_p95_ms"],
            "hash_p95_ms": steady["semantic.hash"][lv]["ttft_p95_ms"],
            "change_pct": 100.0
            * (steady["semantic.on"][lv]["ttft_p95_ms"] / steady["semantic.hash"][lv]["ttft_p95_ms"] - 1),
        }
        for lv in pair
        if steady["semantic.on"][lv]["ttft_p95_ms"] and steady["semantic.hash"][lv]["ttft_p95_ms"]
    ]
    shared = [lv for lv in pair if all(lv in steady[a] for a in arms)]  # where every semantic arm ran steadily
    if not shared:
        return versus, {"semantic.shared_levels": Metric(0, "loads", None, _why_no_shared(rows, arms))}
    where = f"{', '.join(f'{lv:g}' for lv in shared)} {unit}"
    m: dict[str, Metric] = {
        "semantic.shared_levels": Metric(
            len(shared), "loads", None, f"the loads every semantic arm ran steadily: {where}"
        )
    }
    for a in sorted(arms):
        ttft = [t for lv in shared for t in steady[a][lv]["_ttft"]]
        if ttft:
            m[f"{a}.ttft_p95_shared_ms"] = Metric(
                stats.percentile(ttft, 95), "ms", None, f"TTFT P95 over the {len(ttft)} measured requests at {where}"
            )
    on, hsh = m.get("semantic.on.ttft_p95_shared_ms"), m.get("semantic.hash.ttft_p95_shared_ms")
    if on and hsh and hsh.value:
        m["semantic.vs_hash.ttft_p95_change_pct"] = Metric(
            100.0 * (cast(float, on.value) / hsh.value - 1),  # on: set just above from a percentile
            "%",
            "lower",
            f"TTFT P95, semantic cache against the hash cache, over every measured request at {where} (each load's "
            f"own change: series semantic_vs_hash)",
        )
    return versus, m
