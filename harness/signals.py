"""Interrupts: SIGTERM raised like Ctrl-C, and cleanup that a second interrupt cannot cut short.

`harness.cli.main` calls `install()`: SIGTERM then raises `Terminated` (a KeyboardInterrupt
that names its signal), so that every `finally` that stops servers runs for it as for
Ctrl-C. Code that stops what the harness started runs inside `deferred_interrupts()`:
a SIGINT or SIGTERM that arrives meanwhile is remembered and raised when the block is done,
so that a second Ctrl-C never leaves half the processes running.
"""

from __future__ import annotations

import contextlib
import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python raises KeyboardInterrupt for SIGINT."""

    signal_name = "SIGTERM"


def _raise_terminated(signum, frame):
    raise Terminated()


def install() -> dict:
    """SIGTERM raises Terminated (main thread only). Returns the handlers it replaced, for
    restore()."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _raise_terminated)
    return old


def settle() -> None:
    """Everything is written and the process is leaving: a Ctrl-C or SIGTERM from now on is
    ignored (it would only turn a finished run into a traceback or exit -2)."""
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)  # SIG_IGN survives interpreter shutdown (a Python handler does not)


def restore(old: dict) -> None:
    for s, h in old.items():
        if h is not None:
            signal.signal(s, h)


def signal_name(exc: BaseException) -> str:
    return getattr(exc, "signal_name", "SIGINT")


@contextlib.contextmanager
def deferred_interrupts():
    """Run the block to its end: SIGINT and SIGTERM arriving during it are held back and
    raised (as KeyboardInterrupt / Terminated) once it is done. Outside the main thread the
    block simply runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum, frame):
        held.append(signum)

    old = {}
    try:  # an interrupt that lands while the handlers go in restores those already replaced
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.getsignal(s)
            signal.signal(s, hold)
        yield
    finally:
        for s, h in old.items():
            if h is not None:  # None: a handler not set from Python; leave it
                signal.signal(s, h)
    if held:
        raise Terminated() if held[0] == signal.SIGTERM else KeyboardInterrupt()
