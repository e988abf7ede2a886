"""One way to run work in a child process: a job in, a typed outcome or a typed error out.

Parent side: `run(module, job)` (or `start(...)` and later `.result()`, for a child that runs
beside the parent's own work) writes the job file (its format version, the job, where the
outcome goes), starts `python -m MODULE JOB.json` in a session of its own, passes the
child's log lines on as they come and reads the outcome file back. Child side: the module's
`__main__` calls `serve(work)`, which reads the job, calls `work(job, log)` and writes what
it returns (JSON data) or the error it raised.

Errors come back typed: BadInput, EnvironmentProblem (any HarnessError) as themselves; any
other exception as ChildCrashed, with the child's traceback; a child that exits without an
outcome (killed, out of memory, a crash in C code) or runs past its timeout as
EnvironmentProblem, naming its exit code and its last stderr lines. Interrupts: a Ctrl-C,
SIGTERM or SIGHUP while the child runs kills the child's whole process group and is raised on,
so no child is left running (the child, in a session of its own, gets no hang-up of its own
from the terminal). Secrets never go in the job file or the argv: pass them in `env`
(harness.infra.target.Target.to_env()).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Sequence, cast

from harness.base.errors import BadInput, EnvironmentProblem, HarnessError
from harness.base.format_versions import CHILD_FORMAT
from harness.base.paths import REPO_ROOT
from harness.base.safe_text import NAME, for_terminal
from harness.base.signals import deferred_interrupts
from harness.infra.redaction import redact
from harness.model.stored_run import atomic_write_json

LOG_PREFIX = "LOG "
TAIL_LINES = 20
ERRORS: dict[str, type[HarnessError]] = {
    "BadInput": BadInput,
    "EnvironmentProblem": EnvironmentProblem,
    "HarnessError": HarnessError,
}


class ChildCrashed(RuntimeError):
    """The child's work raised something other than a HarnessError (a bug, a library's
    error): its message, and the child's traceback in `.traceback`."""

    def __init__(self, message: str, traceback_text: str = ""):
        super().__init__(message)
        self.traceback = traceback_text


@dataclass
class Child:
    """A started child process; `result()` waits for its outcome, `stop()` ends it."""

    what: str
    proc: subprocess.Popen
    outcome_path: Path
    tmp: tempfile.TemporaryDirectory
    stderr_path: Path | None = None
    tail: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def result(self, timeout: float | None = None) -> dict:
        """The child's outcome (what its work returned), or its error raised here."""
        try:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.stop()
                raise EnvironmentProblem(
                    f"{self.what} did not finish within {timeout:g} s{self._tail_text()}"
                ) from None
            if self.reader is not None:
                self.reader.join()
            return self._outcome()
        except BaseException:
            self.stop()
            raise
        finally:
            self.tmp.cleanup()

    def stop(self) -> None:
        """Kill the child's process group (whatever it started too) and reap it."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.reader is not None:
            self.reader.join(timeout=5)
        self.tmp.cleanup()  # the job and outcome files (result() has read the outcome, if any)

    def _tail_text(self) -> str:
        tail = " | ".join(self.tail[-3:])
        return f": {tail}" if tail else ""

    def _outcome(self) -> dict:
        if not self.outcome_path.exists():
            if self.stderr_path is not None:
                self.stderr_path.write_text("\n".join(self.tail) + "\n")
            where = f" ({self.stderr_path.name} in raw/)" if self.stderr_path is not None else ""
            raise EnvironmentProblem(
                f"{self.what} exited with code {self.proc.returncode} and no outcome: "
                f"{' | '.join(self.tail[-3:]) or '(no output)'}{where}"
            )
        data = json.loads(self.outcome_path.read_text())
        if data.get("format_version") != CHILD_FORMAT:
            raise EnvironmentProblem(
                f"{self.what} wrote an outcome of format {data.get('format_version')!r}, "
                f"this harness reads {CHILD_FORMAT}; the child runs another harness version"
            )
        error = data.get("error")
        if error:
            kind = ERRORS.get(error.get("kind", ""))
            if kind is not None:
                raise kind(error["message"], exit_code=error.get("exit_code"))
            raise ChildCrashed(error["message"], error.get("traceback", ""))
        return data["outcome"]


def start(
    module: str,
    job: dict,
    *,
    what: str = "the child process",
    env: dict | None = None,
    log: Callable[[str], None] | None = None,
    stderr_path: Path | None = None,
    prefix: Sequence[str] = (),
) -> Child:
    """Start `python -m module JOB.json` (after `prefix`, e.g. `ip netns exec NS`) in its own
    session, from the repository (so `harness` imports whatever the current folder). Lines the
    child logs go to `log` as they come; its other stderr lines are kept (the last ones name
    a failure; all of them go to `stderr_path` when it ends without an outcome)."""
    tmp = tempfile.TemporaryDirectory(prefix="harness-child-")
    job_path, outcome = Path(tmp.name) / "job.json", Path(tmp.name) / "outcome.json"
    job_path.write_text(json.dumps({"format_version": CHILD_FORMAT, "job": job, "outcome": str(outcome)}))
    run_env = dict(os.environ if env is None else env)
    run_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), run_env.get("PYTHONPATH", "")) if p)
    proc = None
    try:
        with deferred_interrupts():  # a Ctrl-C now waits until proc exists, so that it can be stopped
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", module, str(job_path)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=run_env,
                start_new_session=True,
                cwd=str(REPO_ROOT),
            )
    except BaseException:
        tmp.cleanup()
        raise
    child = Child(what, proc, outcome, tmp, stderr_path)
    child.reader = threading.Thread(target=_read_stderr, args=(child, log), daemon=True)
    child.reader.start()
    return child


def _read_stderr(child: Child, log: Callable[[str], None] | None) -> None:
    for line in cast(IO[str], child.proc.stderr):  # start() opened it as a text PIPE
        line = redact(line.rstrip("\n"))  # the tail goes into raw/*.stderr and error lines
        if line.startswith(LOG_PREFIX):
            if log is not None:
                log(line[len(LOG_PREFIX) :])
        else:
            child.tail[:] = (child.tail + [line])[-TAIL_LINES:]


def run(module: str, job: dict, *, timeout: float | None = None, **kwargs) -> dict:
    """start() and result(): the child's outcome, or its error raised here."""
    return start(module, job, **kwargs).result(timeout)


def serve(work: Callable[[dict, Callable[[str], None]], dict], argv: list[str] | None = None) -> int:
    """The child's side, called by the module's `__main__`: read the job, run `work(job,
    log)`, write its outcome or its error. Returns the exit code (0: an outcome was written)."""
    argv = sys.argv[1:] if argv is None else argv
    envelope = json.loads(Path(argv[0]).read_text())
    if envelope.get("format_version") != CHILD_FORMAT:
        print(
            f"job format {for_terminal(repr(envelope.get('format_version')), NAME)}, this harness reads {CHILD_FORMAT}",
            file=sys.stderr,
        )
        return 2
    try:
        result = {"outcome": work(envelope["job"], log)}
    except HarnessError as e:
        kind = next((name for name, cls in ERRORS.items() if type(e) is cls), "HarnessError")
        result = {"error": {"kind": kind, "message": str(e), "exit_code": e.exit_code}}
    except Exception as e:  # noqa: BLE001 - reported to the parent with its traceback
        result = {
            "error": {
                "kind": type(e).__name__,
                "message": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(),
            }
        }
    atomic_write_json(Path(envelope["outcome"]), {"format_version": CHILD_FORMAT, **result})
    return 0


def log(msg: str) -> None:
    """In a child: one or more log lines, passed on to the parent's log."""
    for line in str(msg).splitlines() or [""]:
        print(LOG_PREFIX + line, file=sys.stderr, flush=True)
