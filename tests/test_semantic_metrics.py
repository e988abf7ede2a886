"""Metric arithmetic of the semantic-cache experiment on small labelled examples."""

import pytest

from harness.experiments.semantic_cache import metrics as M


def test_cache_counts_on_a_labelled_example():
    # 6 queries: 4 should hit (labels a, a, b, c are inserted), 2 must miss (x, y)
    hit = [True, True, False, True, True, False]
    matched = ["a", "b", None, "c", "a", None]
    query = ["a", "a", "b", "c", "x", "y"]
    should = [True, True, True, True, False, False]
    c = M.cache_counts(hit, matched, query, should)
    assert (c.queries, c.hits, c.correct, c.wrong, c.misses) == (6, 4, 2, 2, 2)
    assert c.should_hit == 4 and c.false_hits_on_new == 1
    assert c.hit_rate == pytest.approx(4 / 6)
    assert c.precision == pytest.approx(2 / 4)
    assert c.recall == pytest.approx(2 / 4)


def test_cache_counts_empty_denominators_and_lengths():
    c = M.cache_counts([False, False], [None, None], ["a", "b"], [False, False])
    assert c.hit_rate == 0 and c.precision == 0 and c.recall == 0
    with pytest.raises(ValueError):
        M.cache_counts([True], ["a", "b"], ["a"], [True])


def test_pair_counts():
    pc = M.pair_counts([True, True, False, False, True], [1, 0, 1, 0, 1])
    assert (pc.tp, pc.fp, pc.fn, pc.tn) == (2, 1, 1, 1)
    assert pc.precision == pytest.approx(2 / 3)
    assert pc.recall == pytest.approx(2 / 3)
    assert pc.hit_rate == pytest.approx(3 / 5)
    assert pc.f1 == pytest.approx(2 / 3)


def test_roc_auc_rank_formula():
    assert M.roc_auc([0.9, 0.8, 0.3, 0.1], [1, 1, 0, 0]) == 1.0
    assert M.roc_auc([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0]) == 0.0
    assert M.roc_auc([0.5, 0.5], [1, 0]) == 0.5
    # one positive above one of two negatives: 1 of 2 pairs ordered
    assert M.roc_auc([0.2, 0.5, 0.7], [0, 1, 0]) == 0.5


def test_dynamic_threshold_formula_and_inputs():
    assert M.dynamic_threshold(0.0, 0.0) == pytest.approx(0.85)
    assert M.dynamic_threshold(3.2, 0.0) == pytest.approx(0.51)  # what the source's 0.51 needs
    assert M.dynamic_threshold(16.0, 0.0) == 0.4
    assert M.shannon_entropy_bits([1, 2, 3, 4]) == pytest.approx(2.0)
    assert M.shannon_entropy_bits([7, 7, 7]) == 0
    assert M.lag1_pearson([1, 2, 3, 4, 5]) == pytest.approx(1.0)
    assert M.lag1_pearson([1, -1, 1, -1, 1, -1]) == pytest.approx(-1.0)
    assert M.lag1_pearson([2, 2, 2, 2]) == 0.0
