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


def eta(done: int, total: int, elapsed: float) -> str:
    """The time left if the remaining repetitions take as long as the finished ones on
    average; '?' before any has finished."""
    if done <= 0:
        return "?"
    return duration(elapsed / done * max(total - done, 0))


def progress(done: int, total: int, elapsed: float) -> str:
    """'[3/12, 1 min 02 s, about 3 min 06 s left]' for the repetition about to start
    (done = how many have finished)."""
    return f"[{done + 1}/{total}, {duration(elapsed)}, " + (
        f"about {eta(done, total, elapsed)} left]" if done else "estimating the time left]")


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
