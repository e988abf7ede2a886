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


def test_change_interval_holds_zero_for_the_same_work_twice_and_excludes_it_for_a_real_drop():
    import random

    from harness.base.stats import change_interval

    rng = random.Random(1)
    slow = [400 + rng.expovariate(1 / 50) for _ in range(40)]
    noisy = [v * rng.uniform(0.7, 1.3) for v in slow]  # the same work, measured again
    lo, hi = change_interval(slow, noisy, 95)
    assert lo < 0 < hi
    fast = [60 + rng.expovariate(1 / 5) for _ in range(40)]  # every request a hit
    lo, hi = change_interval(slow, fast, 95)
    assert lo < hi < -70
    assert change_interval(slow, fast, 95) == (lo, hi)  # fixed seed: the same data, the same interval
    # CI's 12 requests: the same work in two modes, a 25% P95 drop by chance is inside the interval
    a = [380, 390, 395, 400, 405, 410, 420, 430, 440, 450, 470, 510]
    b = [380, 390, 395, 400, 405, 410, 420, 430, 440, 450, 470, 382]
    assert 100 * (stats.percentile(b, 95) - stats.percentile(a, 95)) / stats.percentile(a, 95) < -5
    lo, hi = change_interval(a, b, 95)
    assert lo < 0 <= hi


def test_change_interval_refuses_what_it_cannot_resample():
    from harness.base.stats import change_interval

    with pytest.raises(ValueError):
        change_interval([1], [1, 2], 95)
    with pytest.raises(ValueError):
        change_interval([0, 0, 0], [1, 2, 3], 95)
