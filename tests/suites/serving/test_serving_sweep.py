"""A load sweep's judgement of its points (harness.experiments.serving.sweep) and the
multi-turn session traffic (harness.experiments.serving.sessions), on constructed Results:
the client's own measuring is tested in tests/suites/serving/test_serving_client.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from harness.base.errors import BadInput
from harness.experiments.serving import sessions, sweep
from harness.experiments.serving.client import Result
from tests import TESTS

SLO = sweep.Slo(ttft_p95_ms=200, tpot_p95_ms=50, min_met_pct=90)
RULES = sweep.Rules(margin=0.1, max_late_ms=50, growth=2.0)


def _results(n: int, rate: float, ttft, late: float = 1.0, ok_share: float = 1.0, tpot: float = 20.0):
    """n requests scheduled at `rate`, TTFT ttft(i) (a number or a function of i)."""
    out = []
    for i in range(n):
        status = "ok" if i < n * ok_share else "timeout"
        t = ttft(i) if callable(ttft) else ttft
        out.append(
            Result(
                i,
                "a",
                i / rate,
                status,
                ttft_ms=t if status == "ok" else None,
                tpot_ms=tpot if status == "ok" else None,
                late_ms=late,
                e2e_ms=t + 50.0 if status == "ok" else None,
            )
        )
    return out


def _point(level, results, window=10.0):
    return sweep.point_stats(results, level, 0.0, window, SLO, RULES, offered_rps=level)


def test_a_point_that_keeps_up_is_valid_unsaturated_and_meets_the_slo():
    p = _point(2.0, _results(20, 2.0, 100.0))
    assert (p.invalid, p.saturated, p.slo_held) == ("", "", True)
    assert p.sent_rps == 2.0 and p.completed_rps == 2.0 and p.goodput_rps == 2.0 and p.met_pct == 100


def test_a_client_that_cannot_send_the_load_makes_the_point_invalid_with_the_numbers():
    late = _point(4.0, _results(40, 4.0, 100.0, late=400.0))
    assert "ran 400 ms late at P95 (over 50 ms)" in late.invalid and not late.slo_held
    short = _results(40, 4.0, 100.0)
    for r in short[20:]:
        r.late_ms = None  # never dispatched
    p = _point(4.0, short)
    assert "the client sent 2.00 req/s of the 4.00 configured (under 90%)" in p.invalid


def test_a_server_that_stops_keeping_up_is_saturated():
    queue = _point(8.0, _results(80, 8.0, lambda i: 100.0 + 50 * i))  # TTFT grows through the point
    assert "TTFT grew" in queue.saturated and not queue.invalid
    drops = _point(8.0, _results(80, 8.0, 100.0, ok_share=0.5))
    assert "completed 4.00 req/s of the 8.00 sent" in drops.saturated
    steady = _point(8.0, _results(80, 8.0, 4000.0))  # a high latency that does not grow: no queue, no knee
    assert steady.saturated == "" and not steady.slo_held  # (it misses the SLO instead)
    calm = _point(2.0, _results(20, 2.0, lambda i: 5.0 + i))  # 5x TTFT growth, but by 14 ms: no queue
    assert calm.ttft_growth_x > 2 and calm.saturated == ""


def test_the_knee_the_stop_and_the_highest_rate_at_the_slo():
    pts = [
        _point(1.0, _results(10, 1.0, 80.0)),
        _point(2.0, _results(20, 2.0, 150.0)),
        _point(4.0, _results(40, 4.0, lambda i: 150.0 + 40 * i)),
        _point(8.0, _results(80, 8.0, 3000.0)),
    ]
    assert sweep.knee(pts).level == 4.0
    assert sweep.should_stop(pts) and not sweep.should_stop(pts[:3])
    assert sweep.highest_at_slo(pts).level == 2.0


def test_a_point_that_passes_above_a_failing_one_is_not_capacity():
    pts = [
        _point(1.0, _results(10, 1.0, 80.0)),
        _point(2.0, _results(20, 2.0, 900.0)),
        _point(3.0, _results(30, 3.0, 80.0)),
    ]
    assert sweep.highest_at_slo(pts).level == 1.0
    invalid_between = [pts[0], _point(2.0, _results(20, 2.0, 80.0, late=500.0)), pts[2]]
    assert sweep.highest_at_slo(invalid_between).level == 3.0  # an invalid point says nothing either way


def test_the_warm_up_is_kept_out():
    rs = _results(20, 2.0, 100.0)
    assert [r.index for r in sweep.measured(rs, 5.0)] == list(range(10, 20))


def test_generated_sessions_share_the_system_prompt_and_grow_their_history():
    spec = sessions.SessionSpec(
        users=4, users_per_s=1.0, turns=(3, 3), system_tokens=64, user_tokens=10, answer_tokens=5, think_s=1.0, seed=3
    )
    reqs = sessions.generate(spec)
    assert reqs == sessions.generate(spec) and len(reqs) == 12  # seeded: the same traffic
    assert [r.at_s for r in reqs] == sorted(r.at_s for r in reqs)
    system = reqs[0].prompt[:64]
    assert all(r.prompt[:64] == system for r in reqs)
    by_user: dict = {}
    for r in reqs:
        by_user.setdefault(r.tag.split("/")[0], []).append(r)
    for turns in by_user.values():
        lengths = [len(t.prompt) for t in turns]
        assert lengths == [74, 89, 104]  # system + each turn's user tokens + the answers before it
        assert turns[1].prompt[:74] == turns[0].prompt and turns[2].prompt[:89] == turns[1].prompt
    shared = sessions.shared_prefix_tokens(reqs)
    # a later user's first turn reuses the system prompt; a later turn the whole prompt before it
    assert shared == 3 * 64 + 4 * (74 + 89)


def test_a_long_history_keeps_the_system_prompt():
    spec = sessions.SessionSpec(
        users=1, turns=(6, 6), system_tokens=30, user_tokens=20, answer_tokens=20, max_prompt_tokens=100, seed=1
    )
    reqs = sessions.generate(spec)
    assert all(len(r.prompt) <= 100 and r.prompt[:30] == reqs[0].prompt[:30] for r in reqs)


def test_the_users_sessions_from_jsonl(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text(
        json.dumps({"session": "a", "at_s": 1.5, "prompt": "hi", "max_tokens": 4})
        + "\n"
        + json.dumps({"session": "a", "at_s": 0.0, "prompt": [1, 2, 3]})
        + "\n"
    )
    reqs = sessions.from_jsonl(f)
    assert [(r.at_s, r.prompt, r.max_tokens) for r in reqs] == [(0.0, [1, 2, 3], 16), (1.5, "hi", 4)]
    f.write_text('{"session": "a", "prompt": "x"}\n')
    with pytest.raises(BadInput, match="line 1: not a session turn"):
        sessions.from_jsonl(f)


# ---- the sweep against a server made slow on purpose (tests/serving_fakes.FakeServer) ----


def _ctx(tmp_path, url: str, **params):
    from harness.infra.target import LlmEndpoint, Target
    from harness.model.driver_contract import CaseContext, get

    p = {name: prm.default for name, prm in get("serving-sweep").params.items()}
    p.update(params)
    tgt = Target("local", engines={"cached": LlmEndpoint(url, "smollm2", True, True)})
    return CaseContext("serving", "sweep", 1, "local", p, tmp_path, tgt, log=lambda _: None)


def test_the_sweep_stops_one_point_past_saturation(tmp_path):
    """A server that streams one request at a time (about 13 per second) swept at 2, 5, 25, 50
    and 100 req/s: 2 and 5 keep up, 25 is the knee, 50 the one point past it, 100 is never sent."""
    from harness.experiments.serving import sweep_case
    from tests.serving_fakes import FakeServer

    with FakeServer(gap_s=0.012, tokens=4, slots=1) as srv:
        ctx = _ctx(
            tmp_path,
            srv.url,
            rates=[2.0, 5.0, 25.0, 50.0, 100.0],
            point_requests=0,
            warmup_s=1.0,
            window_s=4.0,
            slo_ttft_p95_ms=600.0,
            workload="sessions",
            session_system_tokens=16,
            session_user_tokens=8,
            session_answer_tokens=4,
            session_think_s=0.3,
            max_prompt_tokens=64,
        )
        rows = sweep_case.sweep_arm(
            ctx, "prefix.on", ctx.target.engines["cached"], sweep_case.Workloads(ctx.params), 128, 1
        )
    levels = [r["level"] for r in rows]
    pts = [r["_stats"] for r in rows]
    knee = sweep.knee(pts)
    shown = [(r["level"], r["saturated"], r["invalid"]) for r in rows]
    # its capacity (about 13 req/s) lies between 5 and 25: the knee is there (a loaded machine
    # may see it one point early), the sweep ran exactly one point past it and never sent 100
    assert knee is not None and knee.level in (5.0, 25.0), shown
    assert levels[-1] == levels[levels.index(knee.level) + 1] and 100.0 not in levels, shown
    assert not rows[0]["saturated"] and not rows[0]["invalid"], shown
    best = sweep.highest_at_slo(pts)
    assert best is not None and best.level < knee.level, shown


def test_a_client_that_cannot_send_the_load_gives_an_invalid_point(tmp_path):
    """8000 requests a second from one Python process: the schedule falls behind, and the point
    says so with the numbers instead of reporting what the client managed as the server's."""
    from harness.experiments.serving import sweep_case
    from tests.serving_fakes import FakeServer

    with FakeServer(gap_s=0.001, tokens=2) as srv:
        ctx = _ctx(
            tmp_path,
            srv.url,
            rates=[8000.0],
            point_requests=0,
            warmup_s=0.2,
            window_s=1.0,
            instrument_prefix_tokens=64,
            timeout_s=10.0,
        )
        (row,) = sweep_case.sweep_arm(
            ctx, "instrument.on", ctx.target.engines["cached"], sweep_case.Workloads(ctx.params), 128, 1
        )
    assert "late at P95" in row["invalid"] or "the client sent" in row["invalid"], row
    assert not row["slo_held"]


def test_a_trace_point_larger_than_the_sample_repeats_it_with_tokens_of_its_own():
    """The trace sample (60 requests) at 32 req/s over 5.5 s: 176 requests in three copies, the
    sample's timing scaled to the rate, each copy's prompts sharing nothing with another's."""
    from harness.experiments.serving import sweep_case
    from harness.model.driver_contract import get

    p = {name: prm.default for name, prm in get("serving-sweep").params.items()}
    reqs = sweep_case.Workloads(p).requests("prefix.on", 32.0, 5.5, 11, 128)
    assert len(reqs) == 176
    span = max(r.at_s for r in reqs) - min(r.at_s for r in reqs)
    assert 176 / 32 * 0.8 < span < 176 / 32 * 1.2
    first = {tuple(r.prompt[:16]) for r in reqs[:60]}  # the trace's first block: one shared system prompt
    third = {tuple(r.prompt[:16]) for r in reqs[120:]}
    assert len(first) == 1 and first.isdisjoint(third)
    assert len({tuple(r.prompt) for r in reqs}) == 176


def test_the_semantic_arms_answer_hits_from_the_cache_and_send_the_rest_to_the_engine(cluster, tmp_path):
    """The semantic arms on a real Redis Cluster, the real embedding, and a server standing in
    for the engine: the oracle arm answers every request from the cache (the engine sees none
    of them, each TTFT is the lookup alone), the off arm sends every request to the engine,
    and every semantic point starts from the same cache contents."""
    from dataclasses import replace

    from harness.experiments.serving import semantic_arms, sweep_case
    from harness.infra.target import LlmEndpoint
    from tests.serving_fakes import FakeServer

    fix = str(TESTS / "fixtures" / "semantic" / "gptcache_small.json")
    with FakeServer(gap_s=0.05, tokens=2) as srv:
        ep = LlmEndpoint(srv.url, "smollm2", False, True)
        ctx = _ctx(
            tmp_path,
            srv.url,
            rates=[4.0],
            point_requests=0,
            warmup_s=0.5,
            window_s=2.0,
            dataset=fix,
            insert_fraction=1.0,
            radii=[0, 1, 2],
            timeout_s=10.0,
        )
        ctx = replace(ctx, target=replace(cluster, engines={"uncached": ep}))
        front = semantic_arms.SemanticArms(ctx, ctx.params)
        try:
            (oracle,) = sweep_case.sweep_arm(ctx, "semantic.oracle", ep, front, 128, 1)
            after_oracle = srv.served
            (off,) = sweep_case.sweep_arm(ctx, "semantic.off", ep, front, 128, 2)
            (on,) = sweep_case.sweep_arm(ctx, "semantic.on", ep, front, 128, 3)
        finally:
            front.close()
    assert after_oracle == 0 and oracle["cache_hit_pct"] == 100.0 and oracle["wrong_hits"] == 0, oracle
    # The engine saw none of the oracle's requests (above): that is what proves a lookup only. The
    # TTFT is bounded loosely, far above a loaded 2-core host's lookup (124 ms seen in CI), so only
    # a lookup that waits on something else (a timeout, a retry) fails it.
    assert 0 < oracle["ttft_p95_ms"] < 1000.0 and not oracle["invalid"], oracle
    assert off["cache_hit_pct"] == 0.0 and srv.served >= off["requests"] > 0, off
    assert on["cache_hit_pct"] is not None and on["wrong_hits"] is not None, on


def test_a_capacity_the_loads_tried_cannot_find_says_why():
    """I25's capacity gain needs the off arm's SLO to fail at a valid point and both arms to
    hold it somewhere: otherwise the record says why there is no gain (details.absent_metrics,
    which the ledger's 'not measured' quotes) and what to change."""
    from harness.experiments.serving import sweep_case

    def pts(*held):
        return [SimpleNamespace(level=lv, invalid="", slo_held=h) for lv, h in zip((4.0, 8.0), held)]

    why = sweep_case.no_capacity_why
    assert why("prefix", {"prefix.on": pts(False, False), "prefix.off": pts(False, False)}, "req/s").startswith(
        "neither arm held the SLO at the lowest load tried (4 req/s)"
    )
    assert "the off arm's capacity is below the loads tried" in why(
        "prefix", {"prefix.on": pts(True, False), "prefix.off": pts(False, False)}, "req/s"
    )
    assert "its capacity was not found; give the sweep higher rates" in why(
        "prefix", {"prefix.on": pts(True, True), "prefix.off": pts(True, True)}, "req/s"
    )
    assert why("prefix", {"prefix.on": pts(True, True), "prefix.off": pts(True, False)}, "req/s") == ""
    assert why("prefix", {"prefix.on": pts(True, True)}, "req/s") == ""  # no off arm: nothing to say


def test_no_load_every_semantic_arm_ran_steadily_says_which_points_were_not():
    """A loaded host can saturate some arm at every load: then C3 has nothing to judge (no
    change metric, so the ledger reads it missing), and shared_levels is 0 with each point that
    was not steady and why, rather than silence."""
    from harness.experiments.serving import sweep_case

    def row(arm, lv, saturated=""):
        return {
            "arm": arm,
            "level": lv,
            "invalid": "",
            "saturated": saturated,
            "errors": 0,
            "ttft_p95_ms": 100.0,
            "_ttft": [100.0],
        }

    rows = [row(a, lv) for a in ("semantic.on", "semantic.hash", "semantic.oracle") for lv in (2.0, 4.0)]
    rows += [row("semantic.off", 2.0, "a queue grew"), row("semantic.off", 4.0, "completed 1.0 of 4.0 req/s")]
    versus, m = sweep_case.against_hash(rows, "req/s")
    assert [v["level"] for v in versus] == [2.0, 4.0]  # the pair's own changes are still shown
    assert set(m) == {"semantic.shared_levels"} and m["semantic.shared_levels"].value == 0, m
    note = m["semantic.shared_levels"].note
    assert "semantic.off at 2: a queue grew" in note and "semantic.off at 4: completed 1.0 of 4.0 req/s" in note, note


def test_the_outcome_pools_c3_over_the_loads_every_semantic_arm_ran_steadily(tmp_path):
    """The case's outcome on constructed points: C3's change is the pooled P95s' (semantic
    against hash) over the loads where all four semantic arms ran steadily: a saturated point
    of one arm leaves its load out for all of them; wrong hits and errors are shares per arm."""
    from harness.experiments.serving import engines, sweep_case

    ctx = _ctx(tmp_path, "http://127.0.0.1:9")
    ttft = {"semantic.on": 100.0, "semantic.hash": 200.0, "semantic.off": 300.0, "semantic.oracle": 10.0}
    rows = []
    for arm, t in ttft.items():
        for lv in (4.0, 8.0):
            slow = arm == "semantic.off" and lv == 8.0  # saturated: load 8 is no one's
            res = _results(int(10 * lv), lv, 5000.0 if slow else t)  # the configured rate over the 10 s window
            st = _point(lv, res)
            st.saturated = "a queue" if slow else ""
            rows.append(
                {
                    **sweep_case._row(arm, st, engines.Counters(None, None), 0, 10.0),
                    **sweep_case._cache_row(
                        {"cache_hit_pct": 0.0, "wrong_hits": int(arm == "semantic.on"), "cache_hits": 0}, res, 0.0, 10.0
                    ),
                    "_ttft": [r.ttft_ms for r in res],
                }
            )
    m = sweep_case.outcome(ctx, rows, {}, sweep_case.Workloads(ctx.params)).metrics
    assert m["semantic.shared_levels"].value == 1
    assert m["semantic.vs_hash.ttft_p95_change_pct"].value == pytest.approx(-50.0)
    assert m["semantic.off.ttft_p95_shared_ms"].value == pytest.approx(300.0)
    assert (
        m["semantic.on.wrong_hit_pct"].value == pytest.approx(100 * 2 / 120) and m["semantic.on.error_pct"].value == 0
    )
