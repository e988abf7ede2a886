"""Small pure statistics, each naming its method."""

from __future__ import annotations

import math
import statistics
from statistics import median as _median
from typing import Sequence


def median(values: Sequence[float]) -> float:
    """The middle value; the mean of the two middle values for an even count."""
    if not values:
        raise ValueError("median of no values")
    return float(_median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks
    (numpy.percentile's default 'linear' method): the one percentile function."""
    import numpy as np

    if len(values) == 0:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError("q must be in [0, 100]")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / |median|: the spread of repetitions relative to their median.
    0 for one value; inf when the median is 0 and the values differ."""
    m = median(values)
    width = max(values) - min(values)
    if width == 0:
        return 0.0
    return math.inf if m == 0 else width / abs(m)


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample stdev / |mean|: 0 for one value or none that differ; inf when the mean is 0."""
    if len(values) < 2:
        return 0.0
    sd = statistics.stdev(values)
    if sd == 0:
        return 0.0
    mean = statistics.fmean(values)
    return math.inf if mean == 0 else sd / abs(mean)


def is_noisy(values: Sequence[float], limit: float = 0.10) -> bool:
    """A metric is noisy when its repetitions spread over more than `limit` of the median."""
    return len(values) > 1 and relative_spread(values) > limit


def relative_change(old: float, new: float) -> float:
    """(new - old) / |old|; inf when old is 0 and new differs."""
    if old == new:
        return 0.0
    return math.inf if old == 0 else (new - old) / abs(old)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test, exact by enumerating rank
    assignments for small samples (len(a) + len(b) <= 16), normal approximation with
    tie correction otherwise. Returns 1.0 when either sample is empty."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    combined = sorted((v, i) for i, v in enumerate(list(a) + list(b)))
    ranks = [0.0] * (n1 + n2)
    i = 0
    while i < len(combined):  # average ranks over ties
        j = i
        while j + 1 < len(combined) and combined[j + 1][0] == combined[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[combined[k][1]] = (i + j) / 2 + 1
        i = j + 1
    r1 = sum(ranks[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2
    mean_u = n1 * n2 / 2
    if n1 + n2 <= 16:
        from itertools import combinations

        total, extreme = 0, 0
        d_obs = abs(u1 - mean_u)
        for idx in combinations(range(n1 + n2), n1):
            u = sum(ranks[k] for k in idx) - n1 * (n1 + 1) / 2
            total += 1
            if abs(u - mean_u) >= d_obs - 1e-12:
                extreme += 1
        return extreme / total
    ties: dict[float, int] = {}
    for v, _ in combined:
        ties[v] = ties.get(v, 0) + 1
    n = n1 + n2
    tie_term = sum(t**3 - t for t in ties.values()) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - mean_u) - 0.5) / sigma
    return math.erfc(max(z, 0) / math.sqrt(2))


def change_interval(
    a: Sequence[float], b: Sequence[float], q: float, *, level: float = 95.0, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """The percentile-bootstrap interval (`level` %) of the relative change, in %, of the q-th
    percentile from sample `a` to sample `b`: each sample resampled with replacement on its
    own, `resamples` times from a fixed seed (the same data give the same interval). Resampled
    apart even when a[i] and b[i] were measured on the same item: a tail percentile rests on a
    few items, and pairing them would take their own noise for a difference. An interval that
    holds 0 means the two percentiles differ no more than resampling the samples makes them."""
    import numpy as np

    if len(a) < 2 or len(b) < 2:
        raise ValueError("two samples of at least 2 values each are needed")
    if not 0 < level < 100:
        raise ValueError("level must be in (0, 100)")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    pa = np.percentile(xa[rng.integers(0, len(xa), size=(resamples, len(xa)))], q, axis=1)
    pb = np.percentile(xb[rng.integers(0, len(xb), size=(resamples, len(xb)))], q, axis=1)
    if np.any(pa <= 0):
        raise ValueError("the percentile of the first sample must be above 0 for a relative change")
    change = 100 * (pb - pa) / pa
    tail = (100 - level) / 2
    lo, hi = np.percentile(change, [tail, 100 - tail])
    return float(lo), float(hi)
