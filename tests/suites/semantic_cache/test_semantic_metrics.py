"""Metric arithmetic of the semantic-cache experiment on small labelled examples."""

import pytest

from harness.mechanisms.semantic import metrics


def test_cache_counts_on_a_labelled_example():
    # 6 queries: 4 should hit (labels a, a, b, c are inserted), 2 must miss (x, y)
    hit = [True, True, False, True, True, False]
    matched = ["a", "b", None, "c", "a", None]
    query = ["a", "a", "b", "c", "x", "y"]
    should = [True, True, True, True, False, False]
    c = metrics.cache_counts(hit, matched, query, should)
    assert (c.queries, c.hits, c.correct, c.wrong, c.misses) == (6, 4, 2, 2, 2)
    assert c.should_hit == 4 and c.false_hits_on_new == 1
    assert c.hit_rate == pytest.approx(4 / 6)
    assert c.precision == pytest.approx(2 / 4)
    assert c.recall == pytest.approx(2 / 4)


def test_cache_counts_empty_denominators_and_lengths():
    c = metrics.cache_counts([False, False], [None, None], ["a", "b"], [False, False])
    assert c.hit_rate == 0 and c.precision == 0 and c.recall == 0
    with pytest.raises(ValueError):
        metrics.cache_counts([True], ["a", "b"], ["a"], [True])


def test_pair_counts():
    pc = metrics.pair_counts([True, True, False, False, True], [1, 0, 1, 0, 1])
    assert (pc.tp, pc.fp, pc.fn, pc.tn) == (2, 1, 1, 1)
    assert pc.precision == pytest.approx(2 / 3)
    assert pc.recall == pytest.approx(2 / 3)
    assert pc.hit_rate == pytest.approx(3 / 5)
    assert pc.f1 == pytest.approx(2 / 3)


def test_roc_auc_rank_formula():
    assert metrics.roc_auc([0.9, 0.8, 0.3, 0.1], [1, 1, 0, 0]) == 1.0
    assert metrics.roc_auc([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0]) == 0.0
    assert metrics.roc_auc([0.5, 0.5], [1, 0]) == 0.5
    # one positive above one of two negatives: 1 of 2 pairs ordered
    assert metrics.roc_auc([0.2, 0.5, 0.7], [0, 1, 0]) == 0.5


def test_dynamic_threshold_formula_and_inputs():
    assert metrics.dynamic_threshold(0.0, 0.0) == pytest.approx(0.85)
    assert metrics.dynamic_threshold(3.2, 0.0) == pytest.approx(0.51)  # what the source's 0.51 needs
    assert metrics.dynamic_threshold(16.0, 0.0) == 0.4
    assert metrics.shannon_entropy_bits([1, 2, 3, 4]) == pytest.approx(2.0)
    assert metrics.shannon_entropy_bits([7, 7, 7]) == 0
    assert metrics.lag1_pearson([1, 2, 3, 4, 5]) == pytest.approx(1.0)
    assert metrics.lag1_pearson([1, -1, 1, -1, 1, -1]) == pytest.approx(-1.0)
    assert metrics.lag1_pearson([2, 2, 2, 2]) == 0.0


def test_correct_hits_count_and_wrong_hits_are_errors():
    c = metrics.cache_counts(
        [True, True, True, False], ["a", "b", "c", None], ["a", "x", "c", "d"], [True, True, True, True]
    )
    assert c.correct_hit_rate == pytest.approx(2 / 4) and c.wrong_hit_rate == pytest.approx(1 / 4)
    assert c.f1 == pytest.approx(2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4))


def test_best_setting_takes_the_best_f1_and_the_first_on_ties():
    strict = metrics.cache_counts([True, False, False], ["a", None, None], ["a", "b", "c"], [True] * 3)
    loose = metrics.cache_counts([True, True, True], ["a", "b", "x"], ["a", "b", "c"], [True] * 3)
    assert metrics.best_setting([0, 5], [strict, loose]) == 1  # F1 0.5 vs 0.67
    assert metrics.best_setting([0, 5], [strict, strict]) == 0
    with pytest.raises(ValueError):
        metrics.best_setting([0], [])


def test_c7_streams_and_their_thresholds():
    ids = list(range(100, 400))
    streams = metrics.c7_streams(ids, vocab_size=30000, period=8, seed=0)
    assert {len(s) for s in streams.values()} == {300}
    assert streams["periodic_tokens"][:8] == streams["periodic_tokens"][8:16] == ids[:8]
    assert sorted(streams["control.periodic_shuffled"]) == sorted(streams["periodic_tokens"])
    h, r, thr = metrics.stream_threshold(streams["periodic_tokens"])
    assert h == pytest.approx(3.0, abs=0.01)  # 8 (nearly) equally likely tokens
    assert thr == pytest.approx(metrics.dynamic_threshold(h, r))
    assert metrics.stream_threshold(streams["control.constant"])[2] == pytest.approx(0.85)  # H = 0
    assert metrics.stream_threshold(streams["uniform_tokens"])[2] == 0.4  # H ~ 8 bits: clamped
    # a ramp 0..7 repeated: lag-1 r = 0.34, so 0.85 (1 - 3/8 (1 - 0.34)) = 0.64; shuffled, r ~ 0
    ramp = metrics.periodic_sequence(list(range(8)), 400)
    assert metrics.stream_threshold(ramp)[2] == pytest.approx(0.64, abs=0.005)
    shuffled = metrics.c7_streams(ramp, 8, 8, 1)["control.periodic_shuffled"]
    assert metrics.stream_threshold(shuffled)[2] < 0.6


def test_static_loss():
    assert metrics.static_loss_pct(100, 68) == pytest.approx(32)
    assert metrics.static_loss_pct(0, 0) is None
