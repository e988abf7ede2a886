"""Step detection (harness.verdict.stepdetect) on synthetic series with known answers."""

import random

import pytest

from harness.verdict.stepdetect import detect_steps, noise_sigma, potts_l1


def noisy(levels: list[float], rel_noise: float, seed: int) -> list[float]:
    rnd = random.Random(seed)
    return [v * (1 + rnd.gauss(0, rel_noise)) for v in levels]


def test_exact_step_is_found_where_it_is():
    steps = detect_steps([100.0] * 6 + [120.0] * 4)
    assert [(s.index, s.before, s.after) for s in steps] == [(6, 100.0, 120.0)]
    assert steps[0].change == pytest.approx(0.2)


@pytest.mark.parametrize("seed", range(20))
def test_a_20pct_step_in_2pct_noise_is_found_at_its_run(seed):
    y = noisy([1000.0] * 5 + [800.0] * 5, 0.02, seed)
    steps = detect_steps(y)
    assert [s.index for s in steps] == [5]
    assert steps[0].change == pytest.approx(-0.2, abs=0.05)


@pytest.mark.parametrize("seed", range(30))
def test_noise_alone_gives_no_step(seed):
    assert detect_steps(noisy([1000.0] * 10, 0.03, seed)) == []


@pytest.mark.parametrize("seed", range(10))
def test_heavy_noise_hides_a_small_step(seed):
    # a 3% change under 10% noise is not a step anyone could claim from ten runs
    assert detect_steps(noisy([100.0] * 5 + [103.0] * 5, 0.10, seed)) == []


def test_flat_and_short_series():
    assert detect_steps([5.0] * 10) == []
    assert detect_steps([1.0, 2.0, 3.0]) == []  # under two runs per side
    assert detect_steps([]) == []


def test_two_steps():
    steps = detect_steps([10.0] * 5 + [15.0] * 5 + [10.0] * 5)
    assert [s.index for s in steps] == [5, 10]


def test_potts_l1_known_answer_and_sigma():
    assert potts_l1([0, 0, 0, 5, 5, 5], gamma=1.0) == [3]
    assert potts_l1([0, 0, 0, 5, 5, 5], gamma=100.0) == []  # a huge penalty fits one level
    assert noise_sigma([1.0, 1.0, 1.0]) == 0.0


def test_segment_costs_are_the_l1_distance_to_the_median():
    import statistics

    from harness.verdict.stepdetect import _segment_costs

    rnd = random.Random(11)
    y = [rnd.random() for _ in range(25)]
    cost = _segment_costs(y)
    for i in range(25):
        for j in range(i + 1, 26):
            seg = y[i:j]
            m = statistics.median(seg)
            assert cost[i][j - i - 1] == pytest.approx(sum(abs(v - m) for v in seg), abs=1e-9)
