"""Step detection in a metric's history: where did the level of a series change?

The method follows asv (airspeed velocity), asv/step_detect.py: a metric's history is
modelled as piecewise constant plus noise, and the fit minimises

    sum over segments of sum_k |y_k - median(segment)|  +  gamma * (number of segments)

(the L1 "Potts" problem of Friedrich et al. 2008, "Complexity penalized M-estimation",
which asv solves approximately). Histories here are short (tens to a few hundred runs), so
this module solves it exactly by dynamic programming. As in asv, the noise level is not
known: it is estimated robustly from the successive differences (their median absolute
value / (0.6745 * sqrt 2), which one step barely moves), and gamma grows with it and with
log(n).

A fitted jump is reported as a step only when it is also clear of the noise: both sides
have at least MIN_SIZE runs, the levels differ by more than max(min_rel of the earlier
level, 2 sigma), and the runs on the two sides separate (two-sided Mann-Whitney p < 0.05).
Pure noise therefore gives no step; a step at the very last run is the job of
`harness compare`, which has the repetitions of both sides.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

from harness import stats

MIN_SIZE = 2  # runs on each side of a step
MIN_REL = 0.05  # a level change under 5% is not a step
GAMMA_SIGMAS = 3.0  # gamma = GAMMA_SIGMAS * sigma * ln(n)


@dataclass(frozen=True)
class Step:
    index: int  # the first run at the new level
    before: float  # median level before
    after: float  # median level from index on
    p: float  # Mann-Whitney p of the two sides

    @property
    def change(self) -> float:
        return stats.relative_change(self.before, self.after)

    def to_json(self) -> dict:
        return {"index": self.index, "before": self.before, "after": self.after,
                "change": None if math.isinf(self.change) else self.change, "p": self.p}


def noise_sigma(values: Sequence[float]) -> float:
    """Robust noise estimate: median |y[k+1] - y[k]| / (0.6745 * sqrt 2)."""
    if len(values) < 2:
        return 0.0
    diffs = [abs(b - a) for a, b in zip(values, values[1:])]
    return stats.median(diffs) / (0.6745 * math.sqrt(2))


def _segment_costs(y: list[float]) -> list[list[float]]:
    """cost[i][j - i - 1] = sum |y[k] - median(y[i:j])| for every segment, O(n^2 log n): for
    each start the segment grows one value at a time, its median kept by two heaps with
    their sums (the L1 cost about the median is sum(upper) - sum(lower) - (odd: median))."""
    n = len(y)
    out = []
    for i in range(n):
        lo: list[float] = []  # max-heap (negated): the lower half, holds the median when odd
        hi: list[float] = []  # min-heap: the upper half
        s_lo = s_hi = 0.0
        row = []
        for j in range(i, n):
            v = y[j]
            if lo and v > -lo[0]:
                heapq.heappush(hi, v)
                s_hi += v
            else:
                heapq.heappush(lo, -v)
                s_lo += v
            if len(lo) > len(hi) + 1:
                x = -heapq.heappop(lo)
                s_lo -= x
                heapq.heappush(hi, x)
                s_hi += x
            elif len(hi) > len(lo):
                x = heapq.heappop(hi)
                s_hi -= x
                heapq.heappush(lo, -x)
                s_lo += x
            m = -lo[0]
            row.append((s_hi - m * len(hi)) + (m * len(lo) - s_lo))
        out.append(row)
    return out


def potts_l1(values: Sequence[float], gamma: float, min_size: int = 1) -> list[int]:
    """The exact minimiser of sum of L1 segment costs + gamma per segment: the start
    indices of the segments after the first (the change points), in order."""
    y = [float(v) for v in values]
    n = len(y)
    if n == 0:
        return []
    cost = _segment_costs(y)
    best = [0.0] + [math.inf] * n  # best[j]: cost of y[:j]
    back = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(0, j - min_size + 1):
            if (i and i < min_size) or best[i] == math.inf:
                continue
            c = best[i] + cost[i][j - i - 1] + gamma
            if c < best[j] - 1e-12:
                best[j], back[j] = c, i
    cuts, j = [], n
    while j > 0:
        i = back[j]
        if i > 0:
            cuts.append(i)
        j = i
    return sorted(cuts)


def detect_steps(values: Sequence[float], *, min_rel: float = MIN_REL, min_size: int = MIN_SIZE,
                 gamma_sigmas: float = GAMMA_SIGMAS, alpha: float = 0.05) -> list[Step]:
    """Steps in a series (oldest first); [] for pure noise or fewer than 2 * min_size values."""
    y = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(y)
    if n < 2 * min_size:
        return []
    scale = max(abs(stats.median(y)), 1e-12)
    sigma = max(noise_sigma(y), 1e-9 * scale)
    cuts = potts_l1(y, gamma_sigmas * sigma * math.log(n), min_size)
    bounds = [0, *cuts, n]
    out = []
    for k, cut in enumerate(cuts):
        left, right = y[bounds[k]:cut], y[cut:bounds[k + 2]]
        before, after = stats.median(left), stats.median(right)
        if abs(after - before) <= max(min_rel * abs(before), 2 * sigma):
            continue
        p = stats.mann_whitney_p(left, right)
        if p >= alpha:
            continue
        out.append(Step(cut, before, after, p))
    return out
