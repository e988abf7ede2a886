"""The section 3.3 dispatcher (real threads, real sleeps): which requests share a batch under
each rule, how long the rule makes them wait, and the C16 latency check's control."""

import time

import pytest

from harness.experiments.semantic_cache import dispatcher, entity_keys
from tests.suites.semantic_cache.test_semantic_spec import check_verdict

WAIT = 0.040  # a window long enough to tell apart from thread wake-up noise on a busy host


def _run(rule, texts, offsets, max_batch=64, wait=WAIT, work_s=0.0, key_of=lambda t: t):
    batches = []

    def run_batch(batch):
        batches.append(sorted(r.index for r in batch))
        time.sleep(work_s)

    reqs = dispatcher.replay(
        rule, texts, offsets, key_of=key_of, run_batch=run_batch, max_wait_s=wait, max_batch=max_batch
    )
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


def _means(rule, texts, offsets, wait, size, key_of=entity_keys.entity_key):
    reqs, _ = _run(rule, texts, offsets, max_batch=size, wait=wait, key_of=key_of)
    return sum(r.added_ms for r in reqs) / len(reqs)


@pytest.mark.parametrize("rate, want", [(200.0, None), (100.0, "not attributable"), (4000.0, "not reproduced")])
def test_the_c16_cut_depends_on_how_fast_static_batches_fill(rate, want):
    """The cut (dynamic minus static added latency) is not bounded by construction: at 200
    requests/s a static batch of 8 fills in about 40 ms, so its requests wait about 17 ms
    against the dynamic rule's 5 ms window (inside the claim's band); at 4000 requests/s a batch
    of 8 fills in 2 ms, the static rule waits less than the window and the claim is not
    reproduced. Real dispatcher threads and sleeps, distinct keys (paraphrase-like traffic): no
    two requests share a key, so at 200 requests/s the cut is the window's alone, which the
    stand-in (the same window, keys never shared) shows: not attributable to equal-key batching
    (at 100 requests/s, where the cut is deep enough that the stand-in's 10% margin lies well
    beyond the timers' jitter on a busy host; at 200 requests/s only the effect is asserted)."""
    n = 80 if rate < 1000 else 400
    texts = [f"Compare Paris and Berlin in {2000 + i}" for i in range(n)]
    offsets = dispatcher.poisson_offsets(n, rate, seed=1)
    counter = iter(range(10**6))
    m = {
        "dynamic_batch_entity_key.added_ms_mean": _means("dynamic", texts, offsets, 0.005, 64),
        "static_batch_token_key.added_ms_mean": _means("static", texts, offsets, 0.050, 8),
        "control.static_batch_entity_key.added_ms_mean": _means("static", texts, offsets, 0.050, 8),
        "instrument.fixed_wait.added_ms_mean": _means(
            "dynamic", texts, offsets, 0.010, 1 << 30, key_of=lambda t: f"{t}#{next(counter)}"
        ),
        "instrument.fixed_wait.known_ms": 10.0,
        "standin.dynamic_unique_key.added_ms_mean": _means(
            "dynamic", texts, offsets, 0.005, 64, key_of=lambda t: f"{t}#u{next(counter)}"
        ),
    }
    m["batching.dynamic_vs_static_added_ms"] = (
        m["dynamic_batch_entity_key.added_ms_mean"] - m["static_batch_token_key.added_ms_mean"]
    )
    m["standin.unique_vs_static_added_ms"] = (
        m["standin.dynamic_unique_key.added_ms_mean"] - m["static_batch_token_key.added_ms_mean"]
    )
    m["control.static_vs_static_added_ms"] = (
        m["control.static_batch_entity_key.added_ms_mean"] - m["static_batch_token_key.added_ms_mean"]
    )
    # the stand-in's own instrument, as the case measures it: its mean added wait over its window
    m["standin.dynamic_unique_key.wait_vs_window"] = m["standin.dynamic_unique_key.added_ms_mean"] / 5.0
    v = check_verdict("C16", "entity-keys", "batching.dynamic_vs_static_added_ms", m)
    assert v.controls[0].held is True, v.reason  # the known 10 ms wait is seen
    if want is None:  # the cut is inside the claim's band, whatever the stand-in says
        assert v.check.in_claim(m["batching.dynamic_vs_static_added_ms"]), v.reason
        return
    assert str(v.outcome) == want, (round(m["batching.dynamic_vs_static_added_ms"], 2), v.reason)
