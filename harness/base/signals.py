"""Interrupts: SIGTERM and SIGHUP raised like Ctrl-C, cleanup that a second interrupt cannot
cut short, and output that a closed terminal or pipe cannot stop.

`harness.cli.main` calls `install()`: SIGTERM then raises `Terminated` and SIGHUP (the
terminal or the ssh session closed) raises `HungUp`, both KeyboardInterrupts that name their
signal, so that every `finally` that stops servers runs for them as for Ctrl-C. A SIGHUP
that is ignored when the harness starts (`nohup harness run ...`) stays ignored: the user
asked the run to outlive the terminal. Code that stops what the harness started runs inside
`deferred_interrupts()`: a SIGINT, SIGTERM or SIGHUP that arrives meanwhile is remembered and
raised when the block is done, so that a second Ctrl-C never leaves half the processes running.

`guard_output()` (also called by `main`): after a hang-up the terminal is gone, and a reader
of a pipe (`harness run ... | head -1`) may go away; a write to stdout or stderr then raises
EIO or EPIPE. The guarded streams drop what cannot be written instead (and send the rest of
that stream to /dev/null, so that Python's last flush at exit says nothing), and the run goes
on to write its results folder, report and JUnit file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # in this order (SIGINT first)
GONE = (errno.EPIPE, errno.EIO, errno.ENXIO, errno.ECONNRESET)  # the reader or the terminal went away
# stdout or stderr sent to a full disk (`>/dev/full`, a log file on a full disk): the run's
# own files may be on another disk, so its output is dropped as for a reader gone, with one
# line on the other stream, never taken for a full results folder
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python raises KeyboardInterrupt for SIGINT."""

    signal_name = "SIGTERM"


class HungUp(Terminated):
    """SIGHUP (the terminal or the ssh session closed), handled as SIGTERM is."""

    signal_name = "SIGHUP"


def interrupt_for(signum: int) -> KeyboardInterrupt:
    """The exception a signal is raised as: HungUp, Terminated or KeyboardInterrupt."""
    if signum == signal.SIGHUP:
        return HungUp()
    if signum == signal.SIGTERM:
        return Terminated()
    return KeyboardInterrupt()


def _raise_interrupt(signum, frame):
    raise interrupt_for(signum)


def install() -> dict:
    """SIGTERM raises Terminated and SIGHUP HungUp (main thread only); a SIGHUP ignored from
    the start (nohup) stays ignored. Returns the handlers it replaced, for restore()."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    old = {s: signal.getsignal(s) for s in HANDLED}
    signal.signal(signal.SIGTERM, _raise_interrupt)
    if old[signal.SIGHUP] is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _raise_interrupt)
    return old


def settle() -> None:
    """Everything is written and the process is leaving: a Ctrl-C, SIGTERM or SIGHUP from now
    on is ignored (it would only turn a finished run into a traceback or exit -2)."""
    if threading.current_thread() is threading.main_thread():
        for s in HANDLED:
            signal.signal(s, signal.SIG_IGN)  # SIG_IGN survives interpreter shutdown (a Python handler does not)


def restore(old: dict) -> None:
    for s, h in old.items():
        if h is not None:
            signal.signal(s, h)


def signal_name(exc: BaseException) -> str:
    return getattr(exc, "signal_name", "SIGINT")


def exit_code(exc: BaseException) -> int:
    """128 + the signal's number, as a shell reports a process the signal ended: 130 for
    SIGINT, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + int(getattr(signal, signal_name(exc)))


@contextlib.contextmanager
def deferred_interrupts():
    """Run the block to its end: SIGINT, SIGTERM and SIGHUP arriving during it are held back
    and, once it is done, given to the handler in place before it (by default raised as
    KeyboardInterrupt / Terminated / HungUp; a run's gate raises only its first); a signal
    that is ignored (SIG_IGN: nohup, a background job) stays ignored. Outside the main thread
    the block simply runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum, frame):
        held.append(signum)

    old = {}
    try:  # an interrupt that lands while the handlers go in restores those already replaced
        for s in HANDLED:
            current = signal.getsignal(s)
            if current is signal.SIG_IGN:
                continue
            old[s] = current
            signal.signal(s, hold)
        yield
    finally:
        for s, h in old.items():
            if h is not None:  # None: a handler not set from Python; leave it
                signal.signal(s, h)
    if held:
        _replay(held[0], old.get(held[0]))


def _replay(signum: int, handler) -> None:
    """A held signal goes to the handler that was in place before the block (Python's
    Ctrl-C handler raises KeyboardInterrupt; a run's gate holds a second one); one not set
    from Python is raised as its interrupt."""
    if callable(handler):
        handler(signum, None)
        return
    raise interrupt_for(signum)


class Gate:
    """See `first_interrupt_only`. `closing` is set once the run's measuring is over: a
    signal from then on is held, never raised; `held` lists every signal that came, `raised`
    says whether the first was raised."""

    def __init__(self):
        self.closing = False
        self.raised = False
        self.held: list[int] = []

    def handle(self, signum, frame):
        self.held.append(signum)
        if len(self.held) == 1 and not self.closing:
            self.raised = True
            raise interrupt_for(signum)


@contextlib.contextmanager
def first_interrupt_only():
    """A run's measuring and closing: the first SIGINT, SIGTERM or SIGHUP is raised (the run
    stops); every later one is held, as is any that comes once `gate.closing` is set, so that
    a second Ctrl-C, or one landing between the last case and the writing of the report,
    never cuts the writing of what was measured short. Held signals add nothing: the run ends
    as it would have (interrupted by the first, or not at all). A signal ignored when the block
    starts (nohup) stays ignored; outside the main thread the block simply runs."""
    gate = Gate()
    if threading.current_thread() is not threading.main_thread():
        yield gate
        return
    old = {}
    try:
        for s in HANDLED:
            current = signal.getsignal(s)
            if current is signal.SIG_IGN:
                continue
            old[s] = current
            signal.signal(s, gate.handle)
        yield gate
    finally:
        for s, h in old.items():
            if h is not None:
                signal.signal(s, h)


class GuardedStream:
    """A text stream (sys.stdout, sys.stderr) whose writes never fail because its reader or
    terminal went away: the first write or flush that does (EPIPE, EIO) turns the stream
    off; what is written to it from then on is dropped. Any other error goes on."""

    def __init__(self, stream, name: str = ""):
        self.stream, self.name = stream, name
        self.gone = False

    def write(self, text):
        if self.gone:
            return len(text)
        try:
            return self.stream.write(text)
        except OSError as e:
            if e.errno not in GONE + FULL:
                raise
            self._went_away(e)
            return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if self.gone:
            return
        try:
            self.stream.flush()
        except OSError as e:
            if e.errno not in GONE + FULL:
                raise
            self._went_away(e)

    def _went_away(self, e: OSError) -> None:
        self.gone = True
        _to_devnull(self.stream)
        other = {"stdout": sys.stderr, "stderr": sys.stdout}.get(self.name)
        if e.errno in FULL and other is not None and other is not self:
            with contextlib.suppress(Exception):
                other.write(
                    f"note: {self.name}: no space left where it is written ({os.strerror(e.errno)}); "
                    f"its output is dropped from here on, the run goes on\n"
                )

    def __getattr__(self, name):  # encoding, isatty, fileno, buffer...: the stream's own
        return getattr(self.stream, name)


def _to_devnull(stream) -> None:
    """Point the stream's file descriptor at /dev/null (Python's advice for a broken pipe):
    the bytes still in its buffer, and its flush at exit, then go nowhere without an error.
    Processes started from now on inherit /dev/null there too."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)


def guard_output() -> dict:
    """Give fds 0-2 a /dev/null where they are closed (`harness run >&-`: else the first file
    the harness opens would take the place of stdout), and guard sys.stdout and sys.stderr
    (GuardedStream). Returns what it replaced, for unguard_output()."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_RDWR)  # the lowest free fd: this one
                if null != fd:
                    os.close(null)
    old = {}
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, GuardedStream):
            old[name] = stream
            setattr(sys, name, GuardedStream(stream, name))
    return old


def unguard_output(old: dict) -> None:
    for name, stream in old.items():
        if isinstance(getattr(sys, name), GuardedStream):
            setattr(sys, name, stream)
