"""C16's stand-in (the dynamic rule with keys never shared) and its own instrument (issue 52):
its window is a case parameter (the ledger fixes it) and its mean added latency over that window
is about 1x; a stand-in that holds its requests longer than its window reads more."""

from __future__ import annotations

import pytest

from harness.experiments.semantic_cache import entity_case
from harness.experiments.semantic_cache.dispatcher import Request

P = {
    "max_wait_ms": 5.0,
    "standin_max_wait_ms": 5.0,
    "max_batch": 64,
    "static_batch_size": 8,
    "static_max_wait_ms": 50.0,
    "instrument_wait_ms": 10.0,
    "batching": "on",
}


def _arm(added_ms: float, n: int = 20) -> list[list[Request]]:
    reqs = [
        Request(
            i,
            "t",
            arrival=i * 0.01,
            dispatch=i * 0.01 + added_ms / 1000,
            start=i * 0.01 + added_ms / 1000,
            done=i * 0.01 + added_ms / 1000 + 0.001,
            batch=i,
            batch_size=1,
        )
        for i in range(n)
    ]
    return [reqs]


def _metrics(stand_in_ms: float) -> dict:
    per_arm = {arm: _arm(1.0) for arm in entity_case.ARMS}
    per_arm[entity_case.STAND_IN] = _arm(stand_in_ms)
    return entity_case._batching_metrics(P, per_arm)


def test_stand_in_arm_uses_its_own_window_parameter():
    assert entity_case.PARAMS["standin_max_wait_ms"].default == 5.0
    rule, wait, size, key = entity_case._arm_rule(entity_case.STAND_IN, {**P, "standin_max_wait_ms": 7.0})
    assert (rule, wait, key) == ("dynamic", 7.0, "unique")
    assert entity_case._arm_rule("dynamic_batch_entity_key", P)[1] == 5.0


@pytest.mark.parametrize("held_ms, ok", [(5.3, True), (10.0, False)])
def test_wait_vs_window_sees_a_stand_in_that_waits_longer(held_ms, ok):
    m = _metrics(held_ms)
    assert m["standin.dynamic_unique_key.window_ms"].value == 5.0
    assert m["standin.dynamic_unique_key.wait_vs_window"].value == pytest.approx(held_ms / 5.0)
    assert (m["standin.dynamic_unique_key.wait_vs_window"].value <= 1.5) is ok  # the ledger's bound
