import math

import pytest

from harness.base import stats


def test_median_odd_and_even():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5


def test_percentile_linear_interpolation_matches_numpy_default():
    np = pytest.importorskip("numpy")
    xs = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 10, 50, 95, 99, 100):
        assert stats.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_relative_spread_and_noise_flag():
    assert stats.relative_spread([10.0]) == 0.0
    assert stats.relative_spread([9.0, 10.0, 11.0]) == pytest.approx(0.2)
    assert stats.is_noisy([9.0, 10.0, 11.0])
    assert not stats.is_noisy([9.8, 10.0, 10.2])
    assert math.isinf(stats.relative_spread([-1.0, 0.0, 1.0]))


def test_relative_change():
    assert stats.relative_change(100, 110) == pytest.approx(0.10)
    assert stats.relative_change(100, 90) == pytest.approx(-0.10)
    assert stats.relative_change(0, 0) == 0.0


def test_mann_whitney_exact_small_samples():
    # fully separated 3 vs 3: the smallest two-sided p is 2 / C(6,3) = 0.1
    assert stats.mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    # identical samples: no evidence of a difference
    assert stats.mann_whitney_p([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)


def test_mann_whitney_normal_approximation_large_samples():
    a = list(range(20))
    b = [x + 100 for x in range(20)]
    assert stats.mann_whitney_p(a, b) < 1e-6
