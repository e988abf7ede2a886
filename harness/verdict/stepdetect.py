"""Step detection in a metric's history: where did the level of a series change?

The method follows asv (airspeed velocity), asv/step_detect.py: a metric's history is
modelled as piecewise constant plus noise, and the fit minimises

    sum over segments of sum_k |y_k - median(segment)|  +  gamma * (number of segments)

(the L1 "Potts" problem of Friedrich et al. 2008, "Complexity penalized M-estimation",
which asv solves approximately). A history of up to EXACT_MAX runs is solved exactly by
dynamic programming (O(n^2 log n): every segment's cost). A longer one is solved as asv
does (`solve_potts_approx`): exactly with segments of at most WINDOW runs, then adjacent
segments merged, the merge that lowers the cost most first, while one does; this is
O(n * WINDOW log WINDOW) plus the merges, so 3,000 runs cost milliseconds a metric where
the exact fit took seconds (and the history of 3,000 runs with tens of metrics minutes).
As in asv, the noise level is not
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

from harness.base import stats

MIN_SIZE = 2  # runs on each side of a step
EXACT_MAX = 200  # histories up to this long are fitted exactly
WINDOW = 30  # longer ones: exact with segments of at most this many runs, then merged
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
        return {
            "index": self.index,
            "before": self.before,
            "after": self.after,
            "change": None if math.isinf(self.change) else self.change,
            "p": self.p,
        }


def noise_sigma(values: Sequence[float]) -> float:
    """Robust noise estimate: median |y[k+1] - y[k]| / (0.6745 * sqrt 2)."""
    if len(values) < 2:
        return 0.0
    diffs = [abs(b - a) for a, b in zip(values, values[1:])]
    return stats.median(diffs) / (0.6745 * math.sqrt(2))


def _segment_costs(y: list[float], max_size: int | None = None) -> list[list[float]]:
    """cost[i][j - i - 1] = sum |y[k] - median(y[i:j])| for every segment (of at most
    max_size values), O(n^2 log n): for each start the segment grows one value at a time,
    its median kept by two heaps with their sums (the L1 cost about the median is
    sum(upper) - sum(lower) - (odd: median))."""
    n = len(y)
    longest = n if max_size is None else max_size
    out = []
    for i in range(n):
        lo: list[float] = []  # max-heap (negated): the lower half, holds the median when odd
        hi: list[float] = []  # min-heap: the upper half
        s_lo = s_hi = 0.0
        row = []
        for j in range(i, min(n, i + longest)):
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


def _window_costs(y: list[float], max_size: int) -> list[list[float]]:
    """The same costs as _segment_costs(y, max_size), for every segment of at most max_size
    values, computed a segment length at a time over sliding windows (numpy)."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    a = np.asarray(y, dtype=float)
    n = len(a)
    table = np.full((n, max_size), np.nan)
    for length in range(1, min(max_size, n) + 1):
        win = sliding_window_view(a, length)
        table[: n - length + 1, length - 1] = np.abs(win - np.median(win, axis=1)[:, None]).sum(axis=1)
    return [row[: min(max_size, n - i)] for i, row in enumerate(table.tolist())]


def potts_l1(values: Sequence[float], gamma: float, min_size: int = 1) -> list[int]:
    """The minimiser of sum of L1 segment costs + gamma per segment: the start indices of
    the segments after the first (the change points), in order. Exact up to EXACT_MAX
    values; beyond, windowed and merged (see the module's docstring)."""
    y = [float(v) for v in values]
    if len(y) <= EXACT_MAX:
        return _potts_dp(y, gamma, min_size, len(y))
    return merge_segments(y, _potts_dp(y, gamma, min_size, max(WINDOW, 2 * min_size)), gamma)


def _potts_dp(y: list[float], gamma: float, min_size: int, max_size: int) -> list[int]:
    """The exact minimiser among fits whose segments hold min_size..max_size values."""
    n = len(y)
    if n == 0:
        return []
    cost = _segment_costs(y) if max_size >= n else _window_costs(y, max_size)
    best = [0.0] + [math.inf] * n  # best[j]: cost of y[:j]
    back = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(max(0, j - max_size), j - min_size + 1):
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


def l1_cost(segment) -> float:
    """sum |y - median(y)| of one segment (numpy: its sort is the cost)."""
    import numpy as np

    a = np.asarray(segment, dtype=float)
    return float(np.abs(a - np.median(a)).sum()) if a.size else 0.0


def merge_segments(y: list[float], cuts: list[int], gamma: float) -> list[int]:
    """Merge adjacent segments of the fit `cuts` while a merge lowers the penalised cost,
    the merge that lowers it most first (asv's merge_pieces); returns the cuts left."""
    bounds = [0, *cuts, len(y)]
    starts = bounds[:-1]
    end = dict(zip(bounds[:-1], bounds[1:]))  # segment start -> its end
    prev = dict(zip(bounds[1:-1], bounds[:-2]))  # segment start -> the start of the one before
    cost = {s: l1_cost(y[s : end[s]]) for s in starts}
    heap: list[tuple[float, int, int, int]] = []

    def push(a: int) -> None:  # the merge of the segment at `a` with the next one
        b = end[a]
        if b in end:
            gain = l1_cost(y[a : end[b]]) - cost[a] - cost[b] - gamma
            heapq.heappush(heap, (gain, a, b, end[b]))

    for s in starts:
        push(s)
    while heap:
        gain, a, b, e = heapq.heappop(heap)
        if gain >= 0:
            break
        if end.get(a) != b or end.get(b) != e:  # stale: a neighbour merged since
            continue
        cost[a] = cost[a] + cost.pop(b) + gamma + gain
        end[a] = end.pop(b)
        prev.pop(b, None)
        if e in end:
            prev[e] = a
        push(a)
        if a in prev:
            push(prev[a])
    return sorted(s for s in end if s)


def detect_steps(
    values: Sequence[float],
    *,
    min_rel: float = MIN_REL,
    min_size: int = MIN_SIZE,
    gamma_sigmas: float = GAMMA_SIGMAS,
    alpha: float = 0.05,
) -> list[Step]:
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
        left, right = y[bounds[k] : cut], y[cut : bounds[k + 2]]
        before, after = stats.median(left), stats.median(right)
        if abs(after - before) <= max(min_rel * abs(before), 2 * sigma):
            continue
        p = stats.mann_whitney_p(left, right)
        if p >= alpha:
            continue
        out.append(Step(cut, before, after, p))
    return out
