"""The int8 arm's parts that need no model (issue 45): the agreement of two arms' answers query
by query, the instrument's known turn of the vectors, the concurrent pass, and the case's
parameters."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from harness.base.errors import BadInput
from harness.experiments.semantic_cache import drivers  # noqa: F401  (registers the drivers)
from harness.experiments.semantic_cache.gptcache_accuracy import agreement, answers_of, perturbed
from harness.experiments.semantic_cache.lookup_latency import concurrent
from harness.model import driver_contract


def test_agreement_counts_same_decisions_and_same_answers_on_the_given_queries():
    fp32 = ["a", None, "b", "c", None]
    int8 = ["a", "x", "d", None, None]  # same answer; decision flipped; hit on another answer; flipped; same miss
    got = agreement(fp32, int8, [0, 1, 2, 3, 4])
    assert got == {"queries": 5, "same_decision_pct": 60.0, "same_answer_pct": 40.0}
    assert agreement(fp32, int8, [0, 4]) == {"queries": 2, "same_decision_pct": 100.0, "same_answer_pct": 100.0}
    assert np.isnan(agreement(fp32, int8, [])["same_answer_pct"])


def test_answers_are_the_nearest_label_at_or_over_the_threshold_else_none():
    acc = {"threshold": 0.8, "nearest": np.array([1, 0, 2]), "cosine": np.array([0.8, 0.79, 0.95])}
    assert answers_of(acc, ["x", "y", "z"]) == ["y", None, "z"]


def test_perturbed_vectors_are_unit_vectors_at_exactly_the_known_cosine():
    rng = np.random.default_rng(1)
    v = rng.standard_normal((50, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    p = perturbed(v, 0.95, seed=3)
    assert np.allclose(np.linalg.norm(p, axis=1), 1, atol=1e-5)
    assert np.allclose((p * v).sum(1), 0.95, atol=1e-4)
    assert np.array_equal(p, perturbed(v, 0.95, seed=3)) and not np.array_equal(p, perturbed(v, 0.95, seed=4))
    assert np.allclose(perturbed(v, 1.0, seed=3), v, atol=1e-6)


def test_concurrent_runs_the_clients_at_once_and_returns_answers_in_order():
    inflight, peak, lock = [0], [0], threading.Lock()

    def lookup(t):
        with lock:
            inflight[0] += 1
            peak[0] = max(peak[0], inflight[0])
        time.sleep(0.02)  # a wait that releases the GIL, as a session run or a Redis GET does
        with lock:
            inflight[0] -= 1
        return t.upper()

    texts = [f"q{i}" for i in range(32)]
    qps, answers = concurrent(lookup, texts, 8)
    assert answers == [t.upper() for t in texts] and peak[0] == 8
    assert qps > 4 / 0.02  # 32 lookups of 20 ms from 8 clients: about 0.08 s, far from one client's 0.64 s
    one, _ = concurrent(lookup, texts[:8], 1)
    assert one < qps


def test_a_lookup_that_raises_stops_the_concurrent_pass():
    def lookup(t):
        if t == "bad":
            raise ValueError("boom")
        return t

    with pytest.raises(ValueError, match="boom"):
        concurrent(lookup, ["a", "bad", "c"], 2)


def test_the_int8_arm_is_off_by_default_and_chosen_with_a_parameter():
    drv = driver_contract.REGISTRY["semantic-cache-gptcache"]
    p = drv.resolve_params("t", {})
    assert p["int8_arm"] is False and p["concurrent_clients"] == 8 and p["fast_embedding"] == "onnx"
    assert drv.resolve_params("t", {"int8_arm": True})["int8_arm"] is True
    with pytest.raises(BadInput, match="int8_arm"):
        drv.resolve_params("t", {"int8_arm": "yes"})
    with pytest.raises(BadInput, match="concurrent_clients"):
        drv.resolve_params("t", {"concurrent_clients": 0})


def test_the_local_profile_runs_the_int8_arm():
    from harness.model import spec

    suite = spec.load_all_suites()["semantic-cache"]
    assert suite.profiles["local"].params["gptcache"]["int8_arm"] is True
