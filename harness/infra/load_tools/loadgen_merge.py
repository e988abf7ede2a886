"""Several load generators, one measurement: their windows checked to overlap, their
throughput summed over the common window, their latency histograms merged.

Each load generator runs its own memtier_benchmark; each process reports its own start
and finish (its JSON's Runtime, by its host's clock), its operations per second of the run
(Time-Serie) and an HDR histogram of every request (microseconds, at the histogram's own precision).

- **Overlap.** The common window runs from the last start to the first finish. A run whose
  common window is shorter than `min_share` of the longest process's window is not one load
  at one time: it is refused, with the numbers (`Overlap.problem`).
- **Throughput** is the operations every process completed inside the common window, over
  the window's length. A second that straddles the window's edge counts in proportion to the
  part of it inside (memtier reports whole seconds).
- **Clocks**: each process's times are its host's clock; each host's offset from the
  harness's clock is measured before the run and taken off (`HostRun.offset_ms`).
- **Percentiles** come from the hosts' histograms added together (HdrHistogram's `add`): the
  P99 of all requests, never an average or a maximum of the hosts' P99s, which is not a
  percentile of anything. Each host's own figures are kept beside the merged ones.

Pure functions over parsed memtier results (harness.infra.load_tools.memtier): nothing here runs anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from harness.infra.load_tools.memtier import HDR_KINDS, HISTOGRAM_US_PER_MS, MemtierResult, merge_histograms

MS_PER_S = 1000.0


@dataclass(frozen=True)
class HostRun:
    """One load generator's memtier process: who ran it, what it reported, and how far its
    clock is ahead of the harness's (`offset_ms`, measured before the run): its start and
    finish are read on the harness's clock."""

    host: str
    result: MemtierResult
    offset_ms: float = 0.0

    @property
    def section(self):
        return self.result.sections[self.result.chosen]

    @property
    def start_ms(self) -> float:
        return self.section.start_ms - self.offset_ms

    @property
    def finish_ms(self) -> float:
        return self.section.finish_ms - self.offset_ms


@dataclass(frozen=True)
class Overlap:
    start_ms: float  # the last start
    finish_ms: float  # the first finish
    longest_ms: float  # the longest process's window
    min_share: float

    @property
    def common_ms(self) -> float:
        return max(0.0, self.finish_ms - self.start_ms)

    @property
    def share(self) -> float:
        return self.common_ms / self.longest_ms if self.longest_ms > 0 else 0.0

    @property
    def problem(self) -> str:
        """'' when the windows overlap for at least min_share of the longest, else why not."""
        if self.share >= self.min_share:
            return ""
        return (
            f"the load generators ran together for {self.common_ms / MS_PER_S:.2f} s of the longest one's "
            f"{self.longest_ms / MS_PER_S:.2f} s ({self.share:.0%}, at least {self.min_share:.0%} needed): "
            f"their throughputs were not offered at the same time, so their sum is no rate the cluster saw"
        )


def window_problems(runs: list[HostRun]) -> list[str]:
    """Why a host's window cannot be used: no start or finish time, no per-second counts, or
    counts for more or fewer seconds than its runtime lasted (more than one apart: memtier
    counts a last partial second)."""
    out = []
    for r in runs:
        s = r.section
        if s.start_ms is None or s.finish_ms is None or s.finish_ms <= s.start_ms:
            out.append(f"{r.host}: memtier's JSON has no usable Runtime start and finish ({s.start_ms}, {s.finish_ms})")
        elif not s.per_second:
            out.append(f"{r.host}: memtier's JSON has no per-second counts (Totals Time-Serie)")
        elif abs(len(s.per_second) - math.ceil((s.finish_ms - s.start_ms) / MS_PER_S)) > 1:
            out.append(
                f"{r.host}: memtier counted {len(s.per_second)} seconds in a run of "
                f"{(s.finish_ms - s.start_ms) / MS_PER_S:.1f} s; its window cannot be placed"
            )
    return out


def overlap(runs: list[HostRun], min_share: float) -> Overlap:
    """The common window of the hosts' runs (window_problems must be empty)."""
    starts = [r.start_ms for r in runs]
    finishes = [r.finish_ms for r in runs]
    longest = max(f - s for s, f in zip(starts, finishes))
    return Overlap(max(starts), min(finishes), longest, min_share)


def ops_in_window(run: HostRun, start_ms: float, finish_ms: float) -> float:
    """The host's operations inside [start_ms, finish_ms]: each second of its run counted in
    proportion to the part of it inside the window (its last second ends at its finish)."""
    total = 0.0
    for k, count in enumerate(run.section.per_second):
        lo = run.start_ms + k * MS_PER_S
        hi = min(lo + MS_PER_S, run.finish_ms)
        if hi <= lo:
            continue
        inside = min(hi, finish_ms) - max(lo, start_ms)
        if inside > 0:
            total += count * inside / (hi - lo)
    return total


def summed_rate(runs: list[HostRun], window: Overlap) -> float:
    """Operations per second of all hosts together over the common window."""
    if window.common_ms <= 0:
        return 0.0
    ops = sum(ops_in_window(r, window.start_ms, window.finish_ms) for r in runs)
    return ops / (window.common_ms / MS_PER_S)


@dataclass(frozen=True)
class Merged:
    kind: str  # Totals, Gets or Sets
    requests: int
    percentiles: dict[float, float]  # q -> ms
    histogram: str  # the merged histogram, compressed as memtier writes one


def merged(runs: list[HostRun], qs) -> dict[str, Merged]:
    """Per kind of request: the hosts' histograms added, its percentiles and the histogram.
    A kind that some host has no histogram for is left out (a partial merge is no P99 of
    all requests). Raises ValueError on a histogram that does not decode."""
    out = {}
    for kind in HDR_KINDS:
        encoded = [r.result.histograms.get(kind) for r in runs]
        if not all(encoded):
            continue
        h = merge_histograms(cast(list[str], encoded))  # none missing: checked just above
        if h is None:
            continue
        text = h.encode()
        out[kind] = Merged(
            kind,
            h.get_total_count(),
            {q: h.get_value_at_percentile(q) / HISTOGRAM_US_PER_MS for q in qs},
            text.decode() if isinstance(text, bytes) else text,
        )
    return out


def host_rows(runs: list[HostRun], qs, origin_ms: float) -> dict[str, list]:
    """The `loadgens` series: each host's own window (seconds from `origin_ms`), requests,
    throughput and percentiles (from its own histogram), as it reported them."""
    cols: dict[str, list] = {
        "load_generator": [],
        "start_s": [],
        "finish_s": [],
        "requests": [],
        "ops_per_sec": [],
        **{f"p{q:g}_ms": [] for q in qs},
    }
    for r in runs:
        own = merge_histograms([r.result.histograms["Totals"]]) if r.result.histograms.get("Totals") else None
        cols["load_generator"].append(r.host)
        cols["start_s"].append(round((r.start_ms - origin_ms) / MS_PER_S, 3))
        cols["finish_s"].append(round((r.finish_ms - origin_ms) / MS_PER_S, 3))
        cols["requests"].append(own.get_total_count() if own else None)
        ops = r.result.metrics.get("Totals.ops_per_sec")
        cols["ops_per_sec"].append(ops.value if ops else None)
        for q in qs:
            cols[f"p{q:g}_ms"].append(own.get_value_at_percentile(q) / HISTOGRAM_US_PER_MS if own else None)
    return cols
