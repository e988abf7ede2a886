"""engine-hotload's claim checks can come out the other way: the source's prewarm beside
every profile, restarts beside hot swaps, the compatibility check and the signature check
switched off; and the lab-a100 profile carries the source's setting verbatim."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from harness.experiments.engine_hotload.cases import prewarm_summary
from harness.experiments.engine_hotload.lifecycle import (
    Bucket,
    Profile,
    TensorSpec,
    first_request_order,
    implicit_profile,
    open_engine,
    prewarm_plan_for,
    source_prewarm_plan,
)
from harness.model.ledger_parse import load_claims
from harness.model.spec import load_all_suites
from harness.model.stored_run import Record, RunData
from harness.verdict.analysis import Outcome, analyze

BUCKETS = [Bucket(1, 16), Bucket(1, 64), Bucket(8, 16), Bucket(8, 64)]
IO = [
    TensorSpec("input_ids", "input", "int64", (-1, -1)),
    TensorSpec("attention_mask", "input", "int64", (-1, -1)),
    TensorSpec("sentence_embedding", "output", "float32", (-1, 384)),
]
SHORT, LONG = ((1, 1), (4, 16), (8, 32)), ((1, 1), (4, 64), (8, 128))
TWO = [
    Profile(0, {"input_ids": SHORT, "attention_mask": SHORT}),
    Profile(1, {"input_ids": LONG, "attention_mask": LONG}),
]


# ---- the source's prewarm and the first-request order (pure) ------------------------------


def test_source_prewarm_is_one_enqueue_on_profile_0_and_the_first_request_lies_outside_it():
    assert source_prewarm_plan(TWO, IO, BUCKETS) == [(0, Bucket(1, 16))]
    order = first_request_order(TWO, IO, BUCKETS)
    assert order[:2] == [Bucket(1, 64), Bucket(8, 64)]  # outside profile 0 (sequence > 32) first
    assert order[-1] == Bucket(1, 16) and sorted(order, key=str) == sorted(BUCKETS, key=str)
    assert prewarm_plan_for("cold", TWO, IO, BUCKETS) == []
    assert len(prewarm_plan_for("all", TWO, IO, BUCKETS)) == 6


def test_on_onnx_runtime_the_first_request_is_at_a_shape_the_source_call_did_not_run():
    one = [implicit_profile(IO)]
    assert source_prewarm_plan(one, IO, BUCKETS) == [(0, Bucket(1, 16))]
    assert first_request_order(one, IO, BUCKETS) == [Bucket(1, 64), Bucket(8, 16), Bucket(8, 64), Bucket(1, 16)]
    with pytest.raises(ValueError, match="not one of"):
        prewarm_plan_for("half", one, IO, BUCKETS)


def test_prewarm_summary_known_answer():
    def run(mode, first, steady):
        return {
            "mode": mode,
            "first": [{"bucket": "a", "ms": first[0]}, {"bucket": "b", "ms": first[1]}],
            "steady": {"a": steady, "b": [2 * v for v in steady]},
        }

    runs = [
        run("cold", (30, 8), [1, 2, 3]),
        run("cold", (50, 8), [1, 2, 3]),
        run("all", (2, 4), [1, 2, 3]),
        run("profile0", (20, 4), [1, 2, 3]),
    ]
    m, steady = prewarm_summary(runs, ["a", "b"])
    assert steady["a"]["p50"] == 2 and steady["b"]["p50"] == 4 and steady["a"]["n"] == 12
    assert m["cold.first_ms"] == 40 and m["prewarmed.first_ms"] == 2 and m["profile0.first_ms"] == 20
    assert m["cold.first_over_p50"] == 20 and m["prewarmed.first_over_p50"] == 1
    assert m["a.cold_first_ms"] == 40 and m["b.prewarmed_first_ms"] == 4


# ---- the ledger's checks flip when the mechanism is off -------------------------------------


@functools.lru_cache(maxsize=1)
def ledger():
    """The suite specs and the claims ledger as they are in harness/experiments/ (read once)."""
    suites = load_all_suites()
    return suites, load_claims(suites=suites)


def verdicts(claim_id: str, case: str, metrics: dict, profile: str = "local", suite: str = "engine-hotload", **kw):
    """The ledger's real checks of `claim_id` on `case`, judged on a run with these metrics
    (tests.ledger_helpers.verdicts; profile lab-a100 also measures the lab: an A100, six hosts)."""
    from tests import ledger_helpers

    if profile == "lab-a100" and "manifest" not in kw:
        kw["manifest"] = ledger_helpers.LAB
    return ledger_helpers.verdicts(claim_id, case, metrics, profile, suite, **kw)


PREWARM = {
    "profile0.first_over_p99": 0.9,
    "prewarmed.first_over_p99": 0.9,
    "cold.first_ms": 30.0,
    "prewarmed.first_ms": 6.0,
    "cold.first_over_p99": 4.5,
}


def test_prewarm_check_counts_only_when_the_control_shows_a_penalty():
    got = verdicts("C14", "prewarm", PREWARM)
    assert got["prewarmed.first_over_p99"].outcome is Outcome.REPRODUCED
    assert got["profile0.first_over_p99"].outcome is Outcome.REPRODUCED
    # prewarm off: no penalty for prewarm to remove -> the same ratios are inconclusive
    got = verdicts("C14", "prewarm", {**PREWARM, "cold.first_ms": 6.5})
    for cv in got.values():
        assert cv.outcome is Outcome.INCONCLUSIVE and "prewarm has nothing to remove" in cv.reason
    # the source's call leaves the shape outside profile 0 cold: its check fails while every-profile holds
    got = verdicts("C14", "prewarm", {**PREWARM, "profile0.first_over_p99": 4.0})
    assert got["profile0.first_over_p99"].outcome is Outcome.NOT_REPRODUCED
    assert got["prewarmed.first_over_p99"].outcome is Outcome.REPRODUCED


ORT = {"engine.execution_provider": "CPUExecutionProvider"}  # what ONNX Runtime reports for its sessions here
SWAPPED = {"swap.requests_across": 80, "swaps_done": 1, "swap.swaps_with_inflight": 1, "swap.swaps_answered_by_new": 1}
TRIED = {"swaps_attempted": 5, "expected_refusals": 4, "incompatible_loaded": 4, "accepted_answered_by_new": 1}


def test_swap_and_signature_checks_need_their_controls_to_fail():
    got = verdicts("C14", "hot-swap", {"failed_requests": 0, "control.failed_requests": 12, **SWAPPED}, facts=ORT)
    assert got["failed_requests"].outcome is Outcome.REPRODUCED
    got = verdicts("C14", "hot-swap", {"failed_requests": 0, "control.failed_requests": 0, **SWAPPED}, facts=ORT)
    assert got["failed_requests"].outcome is Outcome.INCONCLUSIVE
    got = verdicts("C14", "incompatible-swap", {"wrong_verdicts": 0, "control.wrong_verdicts": 4, **TRIED}, facts=ORT)
    assert got["wrong_verdicts"].outcome is Outcome.REPRODUCED
    ok = {
        "deserialized_refused": 0,
        "wrong_verdicts": 0,
        "runtime_recheck_detects_change": 1,
        "deserialized_intact": 2,
        "control.refused": 0,
        "control.deserialized_refused": 5,
        "control.wrong_verdicts": 5,
        "control.runtime_recheck_detects_change": 0,
        "refusal_cases": 5,
        "load_attempts": 8,
        "bad_files_confirmed": 5,
        "toctou.changed_after_check": 1,
    }
    assert {cv.outcome for cv in verdicts("C21", "signed-load", ok).values()} == {Outcome.REPRODUCED}
    # a blind deserializer counter (always 0) sees no intact file either: inconclusive, not attributable
    blind = {**ok, "deserialized_intact": 0, "control.deserialized_refused": 0}
    assert verdicts("C21", "signed-load", blind)["deserialized_refused"].outcome is Outcome.INCONCLUSIVE
    off = {**ok, "control.deserialized_refused": 0, "control.runtime_recheck_detects_change": 1}
    got = verdicts("C21", "signed-load", off)
    # the counter sees the intact files, yet nothing reached it with verification off either
    assert got["deserialized_refused"].outcome is Outcome.NOT_ATTRIBUTABLE
    # a mechanism-off control: the recheck flags a change just as much with verification off
    assert got["runtime_recheck_detects_change"].outcome is Outcome.NOT_ATTRIBUTABLE


def test_an_absence_without_its_situation_or_its_denominator_is_inconclusive():
    """0 failed requests with no request in flight across the switch, or no answer from the new
    engine, or out of no request at all; 0 wrong verdicts when no accepted swap put its model in
    service; 0 refused files deserialized when the bad files were not really bad; no file changed
    after its check; an engine that reports another execution provider than the check needs."""
    base = {"failed_requests": 0, "control.failed_requests": 12, **SWAPPED}
    for change, words in (
        ({"swap.swaps_with_inflight": 0}, "did not occur"),
        ({"swap.swaps_answered_by_new": 0}, "did not occur"),
        ({"swap.requests_across": 0}, "out of nothing"),
    ):
        cv = verdicts("C14", "hot-swap", {**base, **change}, facts=ORT)["failed_requests"]
        assert cv.outcome is Outcome.INCONCLUSIVE and words in cv.reason, (change, cv.reason)
    cv = verdicts("C14", "hot-swap", base, facts={"engine.execution_provider": "CUDAExecutionProvider"})[
        "failed_requests"
    ]
    assert cv.outcome is Outcome.INCONCLUSIVE and "CUDAExecutionProvider" in cv.reason, cv.reason
    cv = verdicts("C14", "hot-swap", base)["failed_requests"]  # the provider not read back at all
    assert cv.outcome is Outcome.INCONCLUSIVE and "not recorded" in cv.reason, cv.reason
    tried = {"wrong_verdicts": 0, "control.wrong_verdicts": 4, **TRIED}
    for change in ({"accepted_answered_by_new": 0}, {"incompatible_loaded": 3}):
        cv = verdicts("C14", "incompatible-swap", {**tried, **change}, facts=ORT)["wrong_verdicts"]
        assert cv.outcome is Outcome.INCONCLUSIVE, (change, cv.reason)
    ok = {
        "deserialized_refused": 0,
        "wrong_verdicts": 0,
        "deserialized_intact": 3,
        "control.refused": 0,
        "control.deserialized_refused": 5,
        "control.wrong_verdicts": 5,
        "refusal_cases": 5,
        "load_attempts": 8,
        "bad_files_confirmed": 5,
        "toctou.changed_after_check": 1,
    }
    got = verdicts("C21", "signed-load", {**ok, "bad_files_confirmed": 3})
    assert got["deserialized_refused"].outcome is Outcome.INCONCLUSIVE
    assert got["wrong_verdicts"].outcome is Outcome.INCONCLUSIVE
    got = verdicts("C21", "signed-load", {**ok, "toctou.changed_after_check": 0})
    assert (
        got["wrong_verdicts"].outcome is Outcome.INCONCLUSIVE
        and got["deserialized_refused"].outcome is Outcome.REPRODUCED
    )


def test_trt_checks_are_not_comparable_on_a_host_without_a_gpu():
    got = verdicts("C14", "trt-prewarm", PREWARM)
    assert all(
        cv.outcome is Outcome.NOT_COMPARABLE and "gpu: measured none, claim A100" in cv.reason for cv in got.values()
    )
    got = verdicts("C14", "trt-prewarm", PREWARM, profile="lab-a100")
    assert {cv.outcome for cv in got.values()} == {Outcome.REPRODUCED}


def test_trt_hot_swap_memory_check_needs_a_sampler_that_sees_the_second_engine():
    """No GPU here: the check's wiring on the lab profile. The statement judged is the
    source's 'the swap needs >= 2x the engine size': peak extra over the pre-swap baseline
    >= 1x the engine (a second engine beside the old one). The restart control frees the old
    one first; when it peaks as high as the swap the sampler could not tell them apart:
    inconclusive. A swap that needed less than one more engine: not reproduced."""
    chk = next(c for c in ledger()[1] if c.id == "C14").checks
    mem = next(c for c in chk if c.metric == "gpu_peak_extra_over_engine")
    assert (mem.op, mem.value) == (">=", 1.0) and "needs >= 2x" in mem.instruments[0].text
    on = {
        "failed_requests": 0,
        "control.failed_requests": 9,
        "gpu_peak_extra_over_engine": 1.2,
        "control.gpu_peak_extra_over_engine": 0.1,
        "swap.window_max_over_call": 0.05,
        "pause.window_max_over_call": 1.0,
        "in_place.window_max_over_call": 0.95,
        "swap.gap_over_steady": 1.5,
        "restart.outage_over_steady": 20.0,
        "in_place.gap_over_steady": 15.0,
        **SWAPPED,
    }
    got = verdicts("C14", "trt-hot-swap", on, profile="lab-a100")
    assert {cv.outcome for cv in got.values()} == {Outcome.REPRODUCED}
    got = verdicts("C14", "trt-hot-swap", {**on, "control.gpu_peak_extra_over_engine": 1.2}, profile="lab-a100")
    assert got["gpu_peak_extra_over_engine"].outcome is Outcome.INCONCLUSIVE
    assert got["failed_requests"].outcome is Outcome.REPRODUCED
    less = {**on, "gpu_peak_extra_over_engine": 0.6, "control.gpu_peak_extra_over_engine": 0.05}
    got = verdicts("C14", "trt-hot-swap", less, profile="lab-a100")
    assert got["gpu_peak_extra_over_engine"].outcome is Outcome.NOT_REPRODUCED
    got = verdicts("C14", "trt-hot-swap", on)
    assert {cv.outcome for cv in got.values()} == {Outcome.NOT_COMPARABLE}  # local: no GPU


# ---- the mechanisms themselves, switched off -----------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from harness.experiments.engine_hotload.incompatible_swap_case import incompatible_variants

    return {w: p for w, p, _ in incompatible_variants(tmp_path_factory.mktemp("tiny"))}


def _ones(engine, bucket):
    from harness.experiments.engine_hotload.workload import feeds_for_shapes

    return feeds_for_shapes(engine.io(), bucket, {})


def _window(kind, rep, t0):
    return {"kind": kind, "t_start_s": rep.started - t0, "t_released_s": rep.released - t0}


def test_failures_are_attributed_by_the_time_window_they_fall_in_not_by_their_text():
    from harness.experiments.engine_hotload.swap_service import attribute_failures
    from harness.experiments.engine_hotload.workload import Request

    acts = [
        {"kind": "swap", "t_start_s": 1.0, "t_released_s": 2.0},
        {"kind": "restart", "t_start_s": 3.0, "t_released_s": 4.0},
    ]
    closed = "EngineError: engine v0 is closed"
    recs = [
        Request(1.5, 1.0, False, 0, "b", error=closed),  # inside the swap: the swap's, whatever it says
        Request(0.999, 5.0, False, 0, "b", error=closed),  # started before, failed inside the swap
        Request(3.5, 1.0, False, 0, "b", error=closed),
        Request(2.5, 1.0, False, 0, "b", error=closed),
        Request(3.6, 1.0, True, 0, "b"),
    ]
    assert attribute_failures(recs, acts) == {"swap": 2, "restart": 1, "outside": 1}


def test_a_restart_fails_requests_where_a_hot_swap_fails_none(tiny):
    """And with the drain removed (the old engine closed under a call in flight) the hot
    swap's own window has the failures, not the restart's."""
    from harness.experiments.engine_hotload.swap import EngineSlot
    from harness.experiments.engine_hotload.swap_service import attribute_failures
    from harness.experiments.engine_hotload.workload import RequestStream

    same = next(p for w, p in tiny.items() if w.startswith("same IO"))
    buckets = [Bucket(1, 16)]
    slot = EngineSlot(open_engine("ort", same, label="v0"))
    t0 = time.perf_counter()
    stream = RequestStream(lambda b, i: slot.infer(_ones(slot.engine, b))[1], buckets, 2, 1.0, t0)

    def slow_open():  # the new engine takes a while to load, as a real model does
        time.sleep(0.3)
        return open_engine("ort", same, label="new")

    acts = []
    stream.start()
    try:
        time.sleep(0.1)
        acts.append(_window("swap", slot.swap(slow_open, buckets, lambda b: _ones(slot.engine, b)), t0))
        time.sleep(0.1)
        acts.append(_window("restart", slot.restart(slow_open), t0))
        time.sleep(0.1)
        broken = slot.swap(slow_open, buckets, lambda b: _ones(slot.engine, b), drain="broken")
        time.sleep(0.1)
    finally:
        records = stream.stop()
        slot.engine.close()
    assert attribute_failures(records, acts)["swap"] == 0  # the hot swap with its drain: no failure
    got = attribute_failures(records, acts + [_window("swap", broken, t0)])
    assert got["restart"] > 0 and got["outside"] == 0
    assert broken.inflight_at_switch >= 1 and got["swap"] >= 1  # the broken drain's own window
    assert slot.version == 3 and threading.active_count() >= 1


def _hot_swap_run(tmp_path, drain: str):
    """The hot-swap case as the local profile runs it (real MiniLM on ONNX Runtime, a real
    request stream, one swap and one restart), with `drain`; its C14 ledger verdict."""
    from harness.experiments.engine_hotload.hot_swap_case import hot_swap
    from harness.model.driver_contract import CaseContext, Target
    from tests import ledger_helpers

    suites, claims = ledger()
    suite = suites["engine-hotload"]
    params = suite.case_params(suite.case("hot-swap"), "local", {"drain": drain})
    out = hot_swap(
        CaseContext(
            "engine-hotload",
            "hot-swap",
            1,
            "local",
            params,
            tmp_path / drain,
            Target("none", "none", []),
            log=lambda m: None,
        )
    )
    assert out.status == "ok", out.reason
    rec = Record(
        suite="engine-hotload",
        case="hot-swap",
        repetition=1,
        metrics=out.metrics,
        series=out.series,
        params=params,
        facts=out.facts,
    )
    srun = suite.as_run("local", 1, {c.name: {} for c in suite.cases})
    run = RunData(tmp_path, dict(ledger_helpers.HERE), [rec], {"engine-hotload": srun}, claims)
    claim = next(c for c in analyze(run).claims if c.id == "C14")
    cv = next(cv for cv in claim.checks if (cv.check.case, cv.check.metric) == ("hot-swap", "failed_requests"))
    return {k: v.value for k, v in out.metrics.items()}, cv


def test_a_swap_switches_once_the_drivers_condition_holds_and_not_after_its_limit(tiny):
    """switch_when: the swap waits, warm, until the driver says a request it sent is in flight
    (the straddle), shown as switch_wait_ms apart from the lock's switch time; a condition that
    never holds costs at most switch_wait_s, then the swap switches anyway."""
    from harness.experiments.engine_hotload.swap import EngineSlot

    same = next(p for w, p in tiny.items() if w.startswith("same IO"))
    buckets = [Bucket(1, 16)]
    slot = EngineSlot(open_engine("ort", same, label="v0"))
    asked = []

    def after(n):  # true from the n-th time it is asked
        asked.append(1)
        return len(asked) >= n

    rep = slot.swap(
        lambda: open_engine("ort", same, label="v1"),
        buckets,
        lambda b: _ones(slot.engine, b),
        switch_when=lambda: after(20),
    )
    assert slot.version == 1 and len(asked) == 20 and rep.durations_ms()["switch_wait_ms"] > 0
    assert rep.durations_ms()["switch_ms"] < rep.durations_ms()["switch_wait_ms"]
    t = time.perf_counter()
    rep = slot.swap(
        lambda: open_engine("ort", same, label="v2"),
        buckets,
        lambda b: _ones(slot.engine, b),
        switch_when=lambda: False,
        switch_wait_s=0.2,
    )
    assert slot.version == 2 and 200 <= rep.durations_ms()["switch_wait_ms"] < 1000 and time.perf_counter() - t < 5
    slot.engine.close()


def test_hot_swap_check_is_not_reproduced_when_the_drain_is_removed(tmp_path):
    """The mechanism removed: the old engine closed at the switch, under a call in flight.
    Its failures fall in the hot swap's window, so they count against the hot swap (not as
    the restart control's) and the ledger says `not reproduced`; the restart control still
    sees its outage (instrument held). With the drain, the same run is `reproduced`."""
    m, cv = _hot_swap_run(tmp_path, "broken")
    assert m["swap_window.failed_requests"] >= 1 and m["failed_requests"] >= 1, m
    assert m["control.failed_requests"] > 0, m
    assert cv.controls[0].held is True and cv.outcome is Outcome.NOT_REPRODUCED, cv.reason
    m, cv = _hot_swap_run(tmp_path, "wait")
    assert m["failed_requests"] == 0 and m["control.failed_requests"] > 0, m
    assert m["swap.swaps_with_inflight"] == m["swaps_done"] == m["swap.swaps_answered_by_new"], m
    assert cv.outcome is Outcome.REPRODUCED, cv.reason


def test_prewarm_checks_on_onnx_runtime_are_inconclusive_with_both_numbers(tmp_path):
    """The prewarm case as the local profile runs it (fresh processes, real MiniLM on ONNX
    Runtime): here a fresh engine's first request costs about what a prewarmed one's does,
    so the instrument (no prewarm must be >= 1.5x slower at its first request) does not see
    a penalty and both prewarm checks are `inconclusive`, naming both first-request times."""
    from harness.experiments.engine_hotload.cases import prewarm
    from harness.model.driver_contract import CaseContext, Target
    from tests import ledger_helpers

    suites, claims = ledger()
    suite = suites["engine-hotload"]
    params = suite.case_params(suite.case("prewarm"), "local")
    out = prewarm(
        CaseContext(
            "engine-hotload", "prewarm", 1, "local", params, tmp_path, Target("none", "none", []), log=lambda m: None
        )
    )
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    rec = Record(
        suite="engine-hotload", case="prewarm", repetition=1, metrics=out.metrics, series=out.series, params=params
    )
    run = RunData(
        tmp_path,
        dict(ledger_helpers.HERE),
        [rec],
        {"engine-hotload": suite.as_run("local", 1, {c.name: {} for c in suite.cases})},
        claims,
    )
    claim = next(c for c in analyze(run).claims if c.id == "C14")
    got = {cv.check.metric: cv for cv in claim.checks if cv.check.case == "prewarm"}
    assert m["cold.first_ms"] < 1.5 * m["prewarmed.first_ms"], m  # no first-request penalty on ORT here
    for cv in got.values():
        assert cv.outcome is Outcome.INCONCLUSIVE and cv.controls[0].held is False, cv.reason
        assert f"{m['cold.first_ms']:.4g}" in cv.reason, cv.reason


def test_incompatible_swap_check_on_a_real_run_and_with_the_check_removed(tmp_path):
    """The incompatible-swap case as the local profile runs it (the served MiniLM, small
    ONNX models with other IO, a request stream): every incompatible model refused, and its
    own control (the check off) swaps them in. With the check removed from the measured side
    (its wrong verdicts are the control's) the ledger says `not reproduced`."""
    from harness.experiments.engine_hotload.incompatible_swap_case import incompatible_swap
    from harness.model.driver_contract import CaseContext, Target
    from tests import ledger_helpers

    suites, claims = ledger()
    suite = suites["engine-hotload"]
    params = suite.case_params(suite.case("incompatible-swap"), "local")
    out = incompatible_swap(
        CaseContext(
            "engine-hotload",
            "incompatible-swap",
            1,
            "local",
            params,
            tmp_path,
            Target("none", "none", []),
            log=lambda m: None,
        )
    )
    assert out.status == "ok", out.reason

    def judged(metrics):
        rec = Record(
            suite="engine-hotload",
            case="incompatible-swap",
            repetition=1,
            metrics=metrics,
            series=out.series,
            facts=out.facts,
        )
        run = RunData(
            tmp_path,
            dict(ledger_helpers.HERE),
            [rec],
            {"engine-hotload": suite.as_run("local", 1, {c.name: {} for c in suite.cases})},
            claims,
        )
        claim = next(c for c in analyze(run).claims if c.id == "C14")
        return next(cv for cv in claim.checks if cv.check.case == "incompatible-swap")

    assert out.metrics["wrong_verdicts"].value == 0 and out.metrics["control.wrong_verdicts"].value > 0
    assert out.metrics["accepted_answered_by_new"].value == 1, "the accepted model's answers were not seen"
    assert out.metrics["incompatible_loaded"].value == out.metrics["expected_refusals"].value
    assert judged(out.metrics).outcome is Outcome.REPRODUCED
    off = {**out.metrics, "wrong_verdicts": out.metrics["control.wrong_verdicts"]}
    assert judged(off).outcome is Outcome.NOT_REPRODUCED


def test_with_the_check_off_an_incompatible_engine_is_swapped_in(tiny):
    from harness.experiments.engine_hotload.swap import EngineSlot, IncompatibleEngine

    same = next(p for w, p in tiny.items() if w.startswith("same IO"))
    other = next(p for w, p in tiny.items() if "256 values" in w)
    buckets = [Bucket(1, 16)]
    slot = EngineSlot(open_engine("ort", same))
    try:
        with pytest.raises(IncompatibleEngine):
            slot.swap(lambda: open_engine("ort", other), buckets, lambda b: _ones(slot.engine, b))
        assert slot.version == 0
        slot.swap(lambda: open_engine("ort", other), buckets, lambda b: _ones(slot.engine, b), check=False)
        assert slot.version == 1 and slot.engine.io()[-1].shape == (-1, 256)
    finally:
        slot.engine.close()
    from harness.base.errors import BadInput

    assert issubclass(IncompatibleEngine, BadInput)


def test_with_verification_off_a_tampered_file_reaches_the_deserializer(tmp_path, tiny):
    from harness.base.errors import BadInput
    from harness.experiments.engine_hotload.signed_load import load_attempt, summarize
    from harness.experiments.engine_hotload.signing import ModelRefused, write_manifest

    good = next(p for w, p in tiny.items() if w.startswith("same IO"))
    manifest = write_manifest([good], tmp_path / "manifest.json")
    bad = tmp_path / "bad" / good.name
    bad.parent.mkdir()
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 1
    bad.write_bytes(bytes(data))
    attempts = [
        load_attempt("intact", "loaded", (manifest,), good),
        load_attempt("intact", "loaded", None, good),
        load_attempt("tampered", "refused", (manifest,), bad),
        load_attempt("tampered", "refused", None, bad),
    ]
    counts = summarize(attempts)
    assert counts["deserialized_refused"] == 0 and counts["wrong_verdicts"] == 0
    assert counts["control.deserialized_refused"] == 1 and counts["control.wrong_verdicts"] == 1
    assert issubclass(ModelRefused, BadInput)


# ---- the lab profile carries the source's setting -------------------------------------------


def test_lab_a100_profile_carries_the_source_setting_and_fails_on_skips():
    suite = load_all_suites()["engine-hotload"]
    lab, local = suite.profile("lab-a100"), suite.profile("local")
    assert lab.skipped_fails and not local.skipped_fails
    assert lab.conditions["gpu"] == "A100" and lab.conditions["backend"] == "TensorRT 8.6+"
    assert local.conditions["gpu"] == "none"
    for case in ("trt-cold-start", "trt-prewarm", "trt-hot-swap"):
        assert suite.case_params(suite.case(case), "lab-a100")["backend"] == "trt"
    profiles = suite.case_params(suite.case("trt-prewarm"), "lab-a100")["trt_profiles"]
    assert len(profiles) == 2  # profile 0 alone (the source's prewarm) does not cover every bucket
    text = suite.claim.text
    assert "optimization profile 0 selected, one enqueue" in text and "2x the engine size" in text
