"""engine-hotload's "no interruption" is judged on service, from request timestamps alone:
a swap that makes requests wait for the new engine's load (the issue's swap that loads and
warms under the slot's lock) fails no request, yet its worst request is as long as the swap
and the clients go without an answer for as long; the hot swap that loads aside does not.
Failures alone (the old check) cannot tell them apart."""

from __future__ import annotations

import time

import pytest

from harness.experiments.engine_hotload.gpu import Sample
from harness.experiments.engine_hotload.hot_swap_metrics import swap_metrics
from harness.experiments.engine_hotload.lifecycle import Bucket, open_engine
from harness.experiments.engine_hotload.swap_service import action_rows, service_metrics
from harness.experiments.engine_hotload.workload import Request, answer_gaps, steady_gap_ms

# ---- the measures, on synthetic request records (known answers) -------------------------


def test_answer_gaps_are_between_successful_answers_in_the_order_they_came():
    recs = [
        Request(0.0, 10.0, True, 0, "b"),
        Request(0.05, 10.0, True, 1, "b"),
        Request(0.1, 5.0, False, 0, "b"),  # a failure is no answer
        Request(0.3, 20.0, True, 0, "b"),
    ]
    gaps = answer_gaps(recs)
    assert [x for g in gaps for x in g] == pytest.approx([0.01, 0.06, 0.06, 0.32])
    assert steady_gap_ms(gaps, []) == pytest.approx(260.0)
    assert steady_gap_ms(gaps, [(0.2, 0.25)]) == pytest.approx(50.0)  # the long gap overlaps the window
    assert steady_gap_ms(gaps, [(0.0, 1.0)]) is None


def _stream(stall: tuple[float, float] | None, fail_in: tuple[float, float] | None = None) -> list[Request]:
    """Two threads, one 10 ms request each every 50 ms for 3 s; a request arriving inside
    `stall` waits until its end (as on a held lock); one inside `fail_in` fails at once."""
    recs = []
    for k in range(2):
        t = 0.025 * k
        while t < 3.0:
            ms, ok = 10.0, True
            if stall and stall[0] <= t < stall[1]:
                ms = (stall[1] - t) * 1e3 + 10.0
            if fail_in and fail_in[0] <= t < fail_in[1]:
                ms, ok = 1.0, False
            recs.append(Request(t, ms, ok, k, "b"))
            t = max(t + 0.05, t + ms / 1e3)
    return sorted(recs, key=lambda r: r.t)


def _acts(*spans: tuple[str, float, float]) -> list[dict]:
    return [{"kind": k, "t_start_s": a, "t_released_s": b, "call_ms": (b - a) * 1e3} for k, a, b in spans]


def test_a_swap_that_makes_requests_wait_is_seen_though_it_fails_nothing():
    acts = _acts(("swap", 1.0, 1.4), ("restart", 2.0, 2.4))
    good = service_metrics(_stream(None, fail_in=(2.0, 2.4)), acts)
    held = service_metrics(_stream((1.0, 1.4), fail_in=(2.0, 2.4)), acts)
    v = lambda m, k: m[k].value  # noqa: E731
    assert v(good, "swap.window_max_over_call") < 0.1 and v(held, "swap.window_max_over_call") > 0.9
    assert v(good, "swap.gap_over_steady") < 1.5 and v(held, "swap.gap_over_steady") > 4
    assert v(good, "restart.outage_ms") == pytest.approx(v(held, "restart.outage_ms"))
    assert 400 <= v(good, "restart.outage_ms") <= 460  # the restart: 0.4 s of failures plus the pacing
    assert v(held, "swap.gap_over_restart_outage") > 0.8 > 0.3 > v(good, "swap.gap_over_restart_outage")
    assert v(good, "steady.p99_ms") == pytest.approx(10.0)


def test_a_request_or_a_gap_belongs_to_the_latest_window_it_overlaps():
    """Adjacent windows (a swap that ran long, the restart right after it): the restart's
    outage is the restart's, not also the swap's."""
    acts = _acts(("swap", 1.0, 2.0), ("restart", 2.0, 2.4))
    m = service_metrics(_stream(None, fail_in=(2.0, 2.4)), acts)
    assert m["swap.gap_ms"].value < 100 and m["restart.outage_ms"].value > 400


MEMORY = [Sample(0.0, 100 * 2**20), Sample(10.0, 100 * 2**20)]  # the RSS sampler's (not judged here)


class _Rep:
    """What a SwapReport gives action_rows (the mechanism's own report: shown, not judged)."""

    def __init__(self, t: float, kind: str):
        self.started, self.switched, self.released = t, t + 0.001, t + 0.002  # claims to be instant
        self.inflight_at_switch, self.old_label, self.new_label = 0, "a", "b"

    def durations_ms(self):
        return {
            k: 1.0
            for k in ("load_ms", "check_ms", "prewarm_ms", "switch_ms", "drain_ms", "release_ms", "to_serving_ms")
        }


def test_the_windows_are_the_drivers_not_the_mechanisms_report():
    """A mechanism that reports a 2 ms swap while the driver's call took 0.4 s, during which
    every request waited: judged on the driver's window, not on the report."""
    done = [("swap", _Rep(1.0, "swap"), 1.0, 1.4), ("restart", _Rep(2.0, "restart"), 2.0, 2.4)]
    acts = action_rows(done, MEMORY, 0.0, False)
    assert [(a["t_start_s"], a["t_released_s"]) for a in acts] == [(1.0, 1.4), (2.0, 2.4)]
    m = swap_metrics(_stream((1.0, 1.4), fail_in=(2.0, 2.4)), acts, 80.0, False)
    assert m["swap.window_max_over_call"].value > 0.9 and m["failed_requests"].value == 0
    assert m["control.failed_requests"].value > 0 and "restart.no_engine_ms" in m


# ---- the same on a real engine slot (a tiny ONNX model, real request threads) -------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from harness.mechanisms.onnx_models.export import tiny_onnx

    return tiny_onnx(tmp_path_factory.mktemp("svc") / "same-io.onnx")


def test_loading_aside_serves_on_where_loading_under_the_lock_and_a_pause_stall(tiny):
    from harness.experiments.engine_hotload.swap import EngineSlot
    from harness.experiments.engine_hotload.workload import RequestStream, feeds_for_shapes

    buckets = [Bucket(1, 16)]
    slot = EngineSlot(open_engine("ort", tiny, label="v0"))
    ones = lambda b: feeds_for_shapes(slot.engine.io(), b, {})  # noqa: E731

    def slow_open():  # a new engine that takes 0.3 s to load, as a real model does
        time.sleep(0.3)
        return open_engine("ort", tiny, label="new")

    t0 = time.perf_counter()
    stream = RequestStream(lambda b, i: slot.infer(ones(b))[1], buckets, 2, 5.0, t0).start()
    done = []
    try:
        for kind, act in (
            ("swap", lambda: slot.swap(slow_open, buckets, ones)),
            ("in-place", lambda: slot.swap(slow_open, buckets, ones, aside=False)),
            ("pause", lambda: slot.hold(0.3)),
            ("restart", lambda: slot.restart(slow_open)),
        ):
            time.sleep(0.15)
            called = time.perf_counter()
            done.append((kind, act(), called, time.perf_counter()))
        time.sleep(0.15)
    finally:
        records = stream.stop()
        slot.engine.close()
    m = {k: v.value for k, v in swap_metrics(records, action_rows(done, MEMORY, t0, False), 1.0, False).items()}
    assert m["failed_requests"] == 0 and m["in_place.failed_requests"] == 0 and m["control.failed_requests"] > 0, m
    assert m["swap.window_max_over_call"] < 0.5, m
    assert m["in_place.window_max_over_call"] > 0.7 and m["pause.window_max_over_call"] > 0.7, m
    assert m["in_place.gap_ms"] > 250 and m["restart.outage_ms"] > 250 and m["swap.gap_ms"] < 150, m


# ---- the ledger judges the hot swap on service (harness/experiments/claims.yaml, C14) -------------------

SOUND = {
    "swap.window_max_over_call": 0.09,
    "pause.window_max_over_call": 1.05,
    "in_place.window_max_over_call": 0.95,
    "swap.gap_over_steady": 1.8,
    "restart.outage_over_steady": 7.0,
    "in_place.gap_over_steady": 9.0,
    "failed_requests": 0,
    "control.failed_requests": 14,  # measured here, a sound hot swap (rounded)
    "swap.requests_across": 84,
    "swaps_done": 1,
    "swap.swaps_with_inflight": 1,
    "swap.swaps_answered_by_new": 1,
}
ORT = {"engine.execution_provider": "CPUExecutionProvider"}  # what ONNX Runtime reports for its sessions here


def _c14(metrics: dict, case: str = "hot-swap", **kw) -> dict:
    from tests.ledger_helpers import verdicts

    kw.setdefault("facts", ORT)
    return verdicts("C14", case, metrics, **kw)


def test_a_swap_that_holds_the_lock_is_not_reproduced_though_it_fails_nothing():
    """The issue's mutant: 0 failed requests, every request thread stalled for the load. The
    failures check still holds (it counts failures); the service checks do not."""
    from harness.verdict.analysis import Outcome

    got = _c14(SOUND)
    assert {cv.outcome for cv in got.values()} == {Outcome.REPRODUCED}, {k: cv.reason for k, cv in got.items()}
    held = _c14({**SOUND, "swap.window_max_over_call": 1.0, "swap.gap_over_steady": 13.0})
    assert held["swap.window_max_over_call"].outcome is Outcome.NOT_REPRODUCED
    assert held["swap.gap_over_steady"].outcome is Outcome.NOT_REPRODUCED
    assert held["failed_requests"].outcome is Outcome.REPRODUCED


def test_the_service_checks_need_an_instrument_that_sees_a_stall_and_a_stall_without_loading_aside():
    from harness.verdict.analysis import Outcome

    blind = _c14({**SOUND, "pause.window_max_over_call": 0.01})  # latencies that cannot show a wait
    assert blind["swap.window_max_over_call"].outcome is Outcome.INCONCLUSIVE
    no_outage = _c14({**SOUND, "restart.outage_over_steady": 1.1})  # a gap measure that misses the restart
    assert no_outage["swap.gap_over_steady"].outcome is Outcome.INCONCLUSIVE
    fast_load = _c14({**SOUND, "in_place.window_max_over_call": 0.2, "in_place.gap_over_steady": 1.5})
    assert fast_load["swap.window_max_over_call"].outcome is Outcome.NOT_ATTRIBUTABLE
    assert fast_load["swap.gap_over_steady"].outcome is Outcome.NOT_ATTRIBUTABLE


def test_the_trt_hot_swap_is_judged_the_same_way_on_the_lab_only():
    from harness.verdict.analysis import Outcome

    lab = {**SOUND, "gpu_peak_extra_over_engine": 1.2, "control.gpu_peak_extra_over_engine": 0.1}
    assert {cv.outcome for cv in _c14(lab, "trt-hot-swap").values()} == {Outcome.NOT_COMPARABLE}  # no GPU here
    from tests.ledger_helpers import LAB

    got = _c14({**lab, "swap.window_max_over_call": 0.98}, "trt-hot-swap", profile="lab-a100", manifest=LAB)
    assert got["swap.window_max_over_call"].outcome is Outcome.NOT_REPRODUCED
    assert got["gpu_peak_extra_over_engine"].outcome is Outcome.REPRODUCED


def test_a_refusal_counts_only_when_the_clients_still_get_the_served_models_answers():
    """incompatible-swap: the refusal the swap reports is not enough; the probe requests (the
    served model's inputs, every bucket) must still be answered as before."""
    from harness.experiments.engine_hotload.incompatible_swap_case import wrong

    refused = {"expected": "refused", "outcome": "refused", "serves_as_before": True}
    assert not wrong(refused)
    assert wrong({**refused, "serves_as_before": False})  # refused, yet the incompatible engine serves
    assert wrong({**refused, "outcome": "accepted"})
    assert not wrong({"expected": "accepted", "outcome": "accepted", "serves_as_before": True})
