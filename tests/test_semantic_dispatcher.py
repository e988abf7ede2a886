"""The section 3.3 dispatcher (real threads, real sleeps): which requests share a batch under
each rule, how long the rule makes them wait, and the C16 latency check's control."""

import time

import pytest

from harness.experiments.semantic_cache import dispatcher, entity_keys
from tests.test_semantic_spec import check_verdict

WAIT = 0.040  # a window long enough to tell apart from thread wake-up noise on a busy host


def _run(rule, texts, offsets, max_batch=64, wait=WAIT, work_s=0.0, key_of=lambda t: t):
    batches = []

    def run_batch(batch):
        batches.append(sorted(r.index for r in batch))
        time.sleep(work_s)

    reqs = dispatcher.replay(rule, texts, offsets, key_of=key_of, run_batch=run_batch,
                             max_wait_s=wait, max_batch=max_batch)
    return reqs, sorted(batches)


def test_dynamic_rule_batches_only_equal_keys_within_the_window():
    reqs, batches = _run("dynamic", ["a", "b", "a", "a"], [0.0, 0.002, 0.004, 0.2])
    assert batches == [[0, 2], [1], [3]]  # the late "a" opens a new window
    assert all(r.batch_size == len(next(b for b in batches if r.index in b)) for r in reqs)
    assert reqs[1].added_ms >= 1000 * WAIT * 0.9  # a lone key waits its whole window
    assert reqs[2].added_ms < reqs[0].added_ms  # a joiner waits only the rest of the window


def test_dynamic_rule_dispatches_a_full_batch_at_once():
    reqs, batches = _run("dynamic", ["k"] * 3, [0.0, 0.001, 0.002], max_batch=2)
    assert batches == [[0, 1], [2]]
    assert reqs[1].added_ms < 1000 * WAIT / 2


def test_static_rule_ignores_keys_and_none_dispatches_on_arrival():
    _, batches = _run("static", ["a", "b", "c", "d", "e"], [0.0, 0.001, 0.002, 0.003, 0.3], max_batch=2)
    assert batches == [[0, 1], [2, 3], [4]]
    reqs, batches = _run("none", ["a", "a", "a"], [0.0, 0.001, 0.002])
    assert batches == [[0], [1], [2]]
    assert max(r.added_ms for r in reqs) < 1000 * WAIT / 2


def test_poisson_offsets_are_seeded_and_have_the_rate():
    a = dispatcher.poisson_offsets(2000, 100.0, seed=3)
    assert a == dispatcher.poisson_offsets(2000, 100.0, seed=3) != dispatcher.poisson_offsets(2000, 100.0, seed=4)
    assert a == sorted(a) and 2000 / a[-1] == pytest.approx(100, rel=0.1)


def test_the_c16_latency_check_sees_the_batching_wait_and_loses_its_control_without_it(tmp_path):
    """Disabling the mechanism (the dynamic arm dispatching on arrival) makes its added latency
    fall to the no-batching control's, and the check inconclusive."""
    texts = [f"Compare Paris and Berlin in {2000 + i % 7}" for i in range(24)]
    offsets = dispatcher.poisson_offsets(len(texts), 200.0, seed=1)

    def mean_added(rule):
        reqs, _ = _run(rule, texts, offsets, wait=0.005, key_of=entity_keys.entity_key)
        return sum(r.added_ms for r in reqs) / len(reqs)

    on = {"dynamic_batch_entity_key.added_ms_mean": mean_added("dynamic"),
          "control.no_batching.added_ms_mean": mean_added("none")}
    off = {**on, "dynamic_batch_entity_key.added_ms_mean": mean_added("none")}
    before = check_verdict("C16", "entity-keys", "dynamic_batch_entity_key.added_ms_mean", on, tmp_path)
    after = check_verdict("C16", "entity-keys", "dynamic_batch_entity_key.added_ms_mean", off, tmp_path)
    assert before.control_held is True and after.control_held is False
    assert str(before.outcome) != str(after.outcome) and str(after.outcome) == "inconclusive"
