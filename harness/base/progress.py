"""Progress lines of a run: elapsed time and an estimate of the time left, and colour for a
terminal (never when the stream is not a terminal, never when NO_COLOR is set:
https://no-color.org)."""

from __future__ import annotations

import os
import sys

COLOURS = {"ok": "32", "failed": "31", "invalid": "31", "skipped": "33"}


def duration(seconds: float) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min'."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def progress(done: int, total: int, elapsed: float, left_s: float | None) -> str:
    """'[3/12, 1 min 02 s, about 3 min 06 s left]' for the repetition about to start (done =
    how many have finished or were skipped); `left_s` is the estimate (time_left), None while
    there is none."""
    head = f"[{done + 1}/{total}, {duration(elapsed)}, "
    return head + ("estimating the time left]" if left_s is None else f"about {duration(left_s)} left]")


def time_left(finished: dict[str, list[float]], remaining: dict[str, int]) -> float | None:
    """Seconds left: each case's remaining repetitions at the mean of its own finished ones,
    a case not started yet at the mean of every finished repetition (a run's cases differ
    by 100x: one second of a simulation, a minute of a serving engine); None before any has
    finished. Keys are "suite/case"."""
    every = [d for ds in finished.values() for d in ds]
    if not every:
        return None
    overall = sum(every) / len(every)
    return sum(
        n * (sum(finished[c]) / len(finished[c]) if finished.get(c) else overall) for c, n in remaining.items() if n > 0
    )


def use_colour(stream=None) -> bool:
    stream = stream or sys.stderr
    if os.environ.get("NO_COLOR", "") != "":
        return False
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def colour(status: str, text: str, stream=None) -> str:
    code = COLOURS.get(status)
    return f"\033[{code}m{text}\033[0m" if code and use_colour(stream) else text
