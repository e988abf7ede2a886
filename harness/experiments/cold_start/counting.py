"""Pure counting for the cold-start experiment: per-second counts around the flush, the
growth factor of a series, when a warming cache is steady, pool occupancy per second."""

from __future__ import annotations

import math


def per_second(times: list[float], t_flush: float, before: int, after: int) -> list[int]:
    """Counts per whole second, from `before` seconds before the flush to `after` seconds
    after it: index 0 is [-before, -before+1), index `before` is [0, 1) after the flush."""
    out = [0] * (before + after)
    for t in times:
        k = math.floor(t - t_flush) + before
        if 0 <= k < len(out):
            out[k] += 1
    return out


def weighted_per_second(items: list[tuple[float, float]], t_flush: float, before: int, after: int) -> list[float]:
    """Like per_second, summing each (time, weight)'s weight instead of counting it."""
    out: list[float] = [0] * (before + after)
    for t, w in items:
        k = math.floor(t - t_flush) + before
        if 0 <= k < len(out):
            out[k] += w
    return out


def growth_per_second(series: list[float]) -> float | None:
    """Geometric mean of the second-to-second ratios: (last / first) ^ (1 / (n - 1)).
    A series a x g^t gives g. None when the first value is not positive or n < 2;
    0 when the last is not positive."""
    if len(series) < 2 or series[0] <= 0:
        return None
    if series[-1] <= 0:
        return 0.0
    return (series[-1] / series[0]) ** (1 / (len(series) - 1))


def predicted_hit_rates(keys: list, rate: int, ttl_s: float) -> list[float]:
    """Hit rate (%) per second of schedule of a cache that starts empty, stores every miss
    for `ttl_s` and never evicts: what the cluster sees when every store read succeeds.
    Second k holds requests k*rate .. (k+1)*rate - 1; a trailing partial second is dropped."""
    stored: dict = {}  # key -> index of the request that stored it
    ttl_requests = ttl_s * rate
    out = []
    hits = 0
    for i, k in enumerate(keys):
        j = stored.get(k)
        if j is not None and i - j < ttl_requests:
            hits += 1
        else:
            stored[k] = i
        if (i + 1) % rate == 0:
            out.append(100.0 * hits / rate)
            hits = 0
    return out


def steady_second(hit_rates: list[float], window: int, tol_pp: float, min_s: int, max_s: int) -> tuple[int, bool]:
    """The warm-up length in whole seconds: the first s >= max(window, min_s) such that the
    hit rates of seconds s-window+1 .. s (1-based) lie within `tol_pp` percentage points of
    each other (max - min <= tol_pp). Returns (s, True), or (max_s, False) when no s <= max_s
    qualifies (the cap: the flush happens at max_s, and the run records that the cache was
    not steady)."""
    for s in range(max(window, min_s), min(max_s, len(hit_rates)) + 1):
        w = hit_rates[s - window : s]
        if max(w) - min(w) <= tol_pp:
            return s, True
    return max_s, False


def occupancy_per_second(
    busy: list[tuple[float, float]], t_flush: float, before: int, after: int, size: int
) -> list[float]:
    """Mean pool occupancy (%) per second: connection-seconds in use within the second over
    `size` connection-seconds; seconds indexed as in per_second."""
    out = [0.0] * (before + after)
    t0 = t_flush - before
    for a, b in busy:
        if b <= a:
            continue
        k = max(0, math.floor(a - t0))
        while k < len(out) and t0 + k < b:
            lo, hi = max(a, t0 + k), min(b, t0 + k + 1)
            if hi > lo:
                out[k] += hi - lo
            k += 1
    return [100.0 * v / size for v in out]


def minus(a: list[float], b: list[float]) -> list[float]:
    """a - b, second by second (the flush run minus its paired control)."""
    return [x - y for x, y in zip(a, b)]


def mean_service_s(busy: list[tuple[float, float]]) -> float | None:
    """The mean time a read held its connection (seconds), from the measured busy intervals."""
    spans = [b - a for a, b in busy if b >= a]
    return sum(spans) / len(spans) if spans else None


def offered_pct(attempts: list[float], service_s: float | None, size: int) -> list[float | None]:
    """The load offered to the pool per second (%): store attempts (queries and refusals)
    times the mean service time over the pool's connection-seconds. Unlike occupancy it can
    pass 100%: a pool 'over 100%' is asked for more connection-time than it has."""
    if service_s is None:
        return [None] * len(attempts)
    return [100.0 * a * service_s / size for a in attempts]
