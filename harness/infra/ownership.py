"""Which processes and files are the harness's own: proof, never a name a file supplies.

A process is the harness's only when it is provably the one it started. The state files of
a cluster, an engine and a monitoring stack record each process as a `Proc`: its pid, its
start time (field 22 of /proc/PID/stat, clock ticks since boot, read right after the spawn)
and the boot it belongs to (/proc/sys/kernel/random/boot_id). Before any signal the live
process must have that same start time in the same boot, and its working folder must be
the folder the harness started it in (every server is spawned with its own state folder as
cwd, so a process the user started elsewhere never matches, whatever its name or command
line says). A pid reused after a reboot, a container restart or a wrap-around, a user's own
redis-server or vLLM named in a forged state file, and an entry without a start time (a
state file of an older harness) are left alone. Signals go through a pidfd opened before
the check, so the process checked is the process signalled; a process group is never
signalled as a whole.

State files are the harness's own: `write_private` writes a whole file through a temporary
file and a rename inside a folder opened without following links (never through a link at
the target or at the folder), `open_log` makes a new log file for a child (a link, a FIFO or
a file at its name is removed first, never opened), and `read_state_file` reads at most
STATE_LIMIT bytes of a regular file opened with O_NONBLOCK|O_NOFOLLOW (a FIFO never blocks,
a link to /dev/zero is refused). A damaged state file is `DamagedState` (exit 3): one line
naming the file, what is wrong and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from harness.base.errors import EnvironmentProblem
from harness.base.safe_text import LINE, for_terminal

STATE_LIMIT = 1 << 20  # a state file of the harness is a few kB
MAX_ENTRIES = 4096  # processes named in one state file
START_LIMIT = 1 << 62  # clock ticks since boot: anything above is no start time
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _pid_limit() -> int:
    try:
        return max(int(Path("/proc/sys/kernel/pid_max").read_text().strip()), 2**22)
    except (OSError, ValueError):
        return 2**22


PID_LIMIT = _pid_limit()


class DamagedState(EnvironmentProblem):
    """A state file of the harness that cannot be used as it is (exit 3)."""


def note(msg: str) -> None:
    """One line on stderr: something the user should know, that is no error."""
    print(f"note: {for_terminal(msg, LINE)}", file=sys.stderr, flush=True)


def is_pid(value) -> bool:
    """A process id the kernel can hand out (2 .. pid_max): never a bool, never 1 (init)."""
    return type(value) is int and 2 <= value <= PID_LIMIT


def boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


# ---- processes ----------------------------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on; None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text.rsplit(") ", 1)[-1].split()
    return fields if len(fields) > 19 else None


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), None when it is gone or a zombie."""
    if not is_pid(pid):
        return None
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


@dataclass(frozen=True)
class Proc:
    """A process as a state file records it. `start` None: an older harness's entry (no
    start time), never provably the harness's."""

    pid: int
    start: int | None = None
    port: int | None = None
    name: str = ""

    def as_json(self) -> dict:
        out: dict[str, int | str | None] = {"pid": self.pid, "start": self.start}
        if self.port is not None:
            out["port"] = self.port
        if self.name:
            out["name"] = self.name
        return out


def spawned(pid: int, *, port: int | None = None, name: str = "") -> Proc:
    """The Proc of a process this harness has just started (read right after the spawn)."""
    return Proc(pid, start_time(pid), port, name)


def _folder_real(folder: Path | str) -> str | None:
    """The real path of `folder` when it is a folder and not itself a link; else None."""
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return os.path.realpath(folder)


def cwd_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def is_ours(proc: Proc, folder: Path | str) -> bool:
    """Whether the live process `proc.pid` is the one the harness recorded: the same start
    time, and its working folder is `folder` (the state folder it was started in, not a link)."""
    if proc.start is None or not is_pid(proc.pid) or start_time(proc.pid) != proc.start:
        return False
    real = _folder_real(folder)
    return real is not None and cwd_of(proc.pid) == real


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def send(proc: Proc, folder: Path | str, sig: int, check: Callable[[Proc], bool] | None = None) -> bool:
    """Send `sig` to `proc` if it is the harness's (is_ours, or `check`); True when sent.
    The pidfd is opened before the check: the process checked is the one signalled."""
    fd = _pidfd(proc.pid)
    try:
        if not (check(proc) if check else is_ours(proc, folder)):
            return False
        try:
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    finally:
        if fd is not None:
            os.close(fd)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def terminate(
    procs: Iterable[Proc],
    folder_of: Callable[[Proc], Path],
    timeout: float = 5.0,
    check: Callable[[Proc], bool] | None = None,
) -> int:
    """SIGTERM every process of `procs` that is the harness's, SIGKILL those still there after
    `timeout`; returns how many were signalled. Others are never signalled."""

    def ours(p: Proc) -> bool:
        return check(p) if check else is_ours(p, folder_of(p))

    hit = [p for p in procs if send(p, folder_of(p), signal.SIGTERM, ours)]
    left = _still_there(hit, timeout)
    for p in left:
        send(p, folder_of(p), signal.SIGKILL, ours)
    _still_there(left, 5.0)
    return len(hit)


def _still_there(procs: list[Proc], timeout: float) -> list[Proc]:
    """Reap and wait up to `timeout` s for `procs` to end; those still running then."""
    deadline = time.monotonic() + timeout
    left = procs
    while left and time.monotonic() < deadline:
        for p in left:
            _reap(p.pid)
        left = [p for p in left if start_time(p.pid) == p.start]
        if left:
            time.sleep(0.05)
    return left


def scan() -> list[tuple[int, int, int, int]]:
    """(pid, ppid, pgid, start) of every live process that is not a zombie."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None or fields[0] in ("Z", "X"):
            continue
        with contextlib.suppress(ValueError):
            out.append((int(name), int(fields[1]), int(fields[2]), int(fields[19])))
    return out


def descendants(roots: list[Proc], group_leaders: Iterable[Proc] = ()) -> list[Proc]:
    """Live processes descended from `roots` (the harness's, checked by the caller), and the
    members of the process groups whose leaders are in `group_leaders` (checked too): a
    process can only join a group of its own session, which the leader made."""
    table = scan()
    known = {p.pid for p in roots}
    starts = {p.pid: p.start for p in roots}
    leaders = {p.pid: p.start for p in group_leaders}
    found: list[Proc] = []
    changed = True
    while changed:
        changed = False
        for pid, ppid, pgid, start in table:
            if pid in known:
                continue
            parent_start = starts.get(ppid)
            lead_start = leaders.get(pgid)
            if (parent_start is not None and start >= parent_start) or (lead_start is not None and start >= lead_start):
                known.add(pid)
                starts[pid] = start
                found.append(Proc(pid, start))
                changed = True
    return found


# ---- state files --------------------------------------------------------------------------
def _open_dir(folder: Path) -> int:
    """An fd of `folder`, opened without following a link there."""
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def own_dir(folder: Path | str) -> Path:
    """Make `folder` (and its parents) and check that it is a folder, not a link to one:
    the harness's state folders are its own. EnvironmentProblem (exit 3) otherwise."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass
    except OSError as e:
        raise EnvironmentProblem(
            f"{folder}: the harness cannot make its state folder ({e.strerror or e}); make its parent writable"
        ) from None
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode):
        what = "a link" if stat.S_ISLNK(st.st_mode) else "not a folder"
        raise EnvironmentProblem(
            f"{folder}: is {what}; the harness keeps its own state there and never writes "
            f"through a link: remove it (rm {folder}) and try again"
        )
    return folder


def _folder_fd(path: Path, what: str) -> int:
    """The folder of `path`, opened without following a link (for the *at() calls)."""
    try:
        return _open_dir(path.parent)
    except OSError as e:
        raise EnvironmentProblem(
            f"{path.parent}: is not a folder the harness can write {what} to "
            f"({e.strerror or e}); remove it (a link there is refused) and try again"
        ) from None


def write_private(path: Path | str, data: str | bytes, mode: int = 0o644) -> Path:
    """Write a whole file of the harness's state folder: a new temporary file, then a rename
    over `path` (a link or a FIFO there is replaced, never written through), all relative to
    the folder opened without following a link."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    tmp = f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    dfd = _folder_fd(path, "its state")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    except OSError as e:
        raise EnvironmentProblem(
            f"{path}: cannot be written ({e.strerror or e}); remove it if it is a folder, or free space on its disk"
        ) from None
    finally:
        os.close(dfd)
    return path


def open_log(path: Path | str):
    """A new, empty log file at `path` for a child's output (binary, write-only): whatever
    was there (an old log, a link, a FIFO) is removed first and the file is made with
    O_EXCL|O_NOFOLLOW, so nothing is ever written through a link."""
    path = Path(path)
    dfd = _folder_fd(path, "its log")
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=dfd)
        fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    except OSError as e:
        raise EnvironmentProblem(
            f"{path}: the log cannot be made ({e.strerror or e}); remove what is there (rm -r {path}) and try again"
        ) from None
    finally:
        os.close(dfd)
    return os.fdopen(fd, "wb")


def _damaged(path: Path, why: str, fix: str) -> DamagedState:
    return DamagedState(f"{path}: damaged state file of the harness ({why}); {fix or f'remove it (rm {path})'}")


def _read_raw(path: Path, fix: str) -> bytes | None:
    try:
        dfd = _open_dir(path.parent)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _damaged(path, f"its folder {path.parent} is a link or not a folder", fix) from None
        raise _damaged(path, f"its folder cannot be opened: {e.strerror or e}", fix) from None
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        why = "it is a link" if e.errno == errno.ELOOP else f"it cannot be opened: {e.strerror or e}"
        raise _damaged(path, why, fix) from None
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _damaged(path, "it is not a regular file (a FIFO, a folder, a device)", fix)
    with os.fdopen(fd, "rb") as f:
        if st.st_size > STATE_LIMIT:
            raise _damaged(path, f"{st.st_size} bytes, more than a state file's {STATE_LIMIT}", fix)
        try:
            data = f.read(STATE_LIMIT + 1)
        except OSError as e:
            raise _damaged(path, f"it cannot be read: {e.strerror or e}", fix) from None
    if len(data) > STATE_LIMIT:
        raise _damaged(path, f"it grew past {STATE_LIMIT} bytes while it was read", fix)
    return data


def read_state_file(path: Path | str, fix: str = "") -> dict | None:
    """The JSON object of a state file; None when there is none. Anything else (not a
    regular file, a link, too large, not JSON, not an object) is DamagedState naming the
    file and `fix` (default: remove it)."""
    path = Path(path)
    data = _read_raw(path, fix)
    if data is None:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise _damaged(path, "not valid JSON", fix) from None
    if not isinstance(doc, dict):
        raise _damaged(path, "not a JSON object", fix)
    return doc


# ---- validating a state's fields -----------------------------------------------------------
class Fields:
    """Field-by-field checks of one state file's object; the first bad field is DamagedState."""

    def __init__(self, path: Path | str, doc: dict, fix: str = ""):
        self.path, self.doc, self.fix = Path(path), doc, fix

    def bad(self, key: str, want: str) -> DamagedState:
        return _damaged(self.path, f"{key!r} is not {want}", self.fix)

    def pid(self, key: str) -> int | None:
        v = self.doc.get(key)
        if v is not None and not is_pid(v):
            raise self.bad(key, f"a process id (2-{PID_LIMIT}) or null")
        return v

    def integer(self, key: str, lo: int, hi: int) -> int | None:
        v = self.doc.get(key)
        if v is not None and not (type(v) is int and lo <= v <= hi):
            raise self.bad(key, f"a whole number from {lo} to {hi} or null")
        return v

    def number(self, key: str) -> float | None:
        v = self.doc.get(key)
        if v is not None and not (type(v) in (int, float) and abs(v) < 1e15):
            raise self.bad(key, "a number or null")
        return v

    def text(self, key: str, limit: int = 4096) -> str | None:
        v = self.doc.get(key)
        if v is not None and not (isinstance(v, str) and len(v) <= limit):
            raise self.bad(key, f"a string of at most {limit} characters or null")
        return v

    def texts(self, key: str, limit: int = 4096) -> list[str]:
        v = self.doc.get(key)
        if v is None:
            return []
        if not (
            isinstance(v, list) and len(v) <= MAX_ENTRIES and all(isinstance(s, str) and len(s) <= limit for s in v)
        ):
            raise self.bad(key, "a list of strings")
        return v

    def pids(self, key: str) -> list[int]:
        v = self.doc.get(key)
        if v is None:
            return []
        if not (isinstance(v, list) and len(v) <= MAX_ENTRIES and all(is_pid(p) for p in v)):
            raise self.bad(key, f"a list of process ids (2-{PID_LIMIT})")
        return v

    def procs(self, key: str, legacy: str | None = None) -> list[Proc]:
        """Process entries: {"pid", "start", ["port"], ["name"]}, or a bare pid (an older
        harness's: no start time). Without `key`, the bare pids of `legacy` (an older
        harness's list)."""
        v = self.doc.get(key)
        if legacy is not None:
            bare = self.pids(legacy)
            if v is None:
                return [Proc(p) for p in bare]
        if v is None:
            return []
        if not isinstance(v, list) or len(v) > MAX_ENTRIES:
            raise self.bad(key, f"a list of at most {MAX_ENTRIES} process entries")
        return [self._proc(key, e) for e in v]

    def _proc(self, key: str, e) -> Proc:
        if is_pid(e):
            return Proc(e)
        if not isinstance(e, dict) or not is_pid(e.get("pid")):
            raise self.bad(key, f'a list of process entries ({{"pid": 2-{PID_LIMIT}, "start": ticks}})')
        start, port, name = e.get("start"), e.get("port"), e.get("name", "")
        if start is not None and not (type(start) is int and 0 <= start <= START_LIMIT):
            raise self.bad(key, "a list of process entries with start times (whole numbers of clock ticks)")
        if port is not None and not (type(port) is int and 1 <= port <= 65535):
            raise self.bad(key, "a list of process entries with ports from 1 to 65535")
        if not (isinstance(name, str) and len(name) <= 200):
            raise self.bad(key, "a list of process entries with names of at most 200 characters")
        return Proc(e["pid"], start, port, name)

    def owned_procs(self) -> dict:
        """The processes the state records (`procs`, or an older harness's bare `pids`), their
        pids, and who started them on which boot."""
        procs = self.procs("procs", legacy="pids")
        return {
            "procs": procs,
            "pids": [p.pid for p in procs],
            "owner_pid": self.pid("owner_pid"),
            "owner_start": self.integer("owner_start", 0, START_LIMIT),
            "boot": self.text("boot", 100),
        }


def open_state(path: Path | str, what: str) -> Fields | None:
    """The state file at `path` for its fields' checks; None when there is none. A damaged
    one's message tells to remove it once no `what` runs."""
    fix = f"remove it (rm {path}) once no {what} runs"
    doc = read_state_file(path, fix)
    return None if doc is None else Fields(path, doc, fix)


def same_boot(doc: dict) -> bool:
    """Whether a state was written in this boot (a state without a boot id: an older harness's,
    whose entries have no start time either)."""
    return doc.get("boot") in (None, boot_id())


def split_owned(st: dict, key: str, ours: Callable[[Proc], bool]) -> tuple[list[Proc], list[int], bool]:
    """(the live processes of the state's list `key` that are provably ours (`ours`, and
    written in this boot), the live pids it names that are not, whether those have no start
    time: an older harness's state)."""
    mine, foreign, legacy = [], [], False
    this_boot = same_boot(st)
    for p in st.get(key, []):
        if this_boot and ours(p):
            mine.append(p)
        elif start_time(p.pid) is not None:
            foreign.append(p.pid)
            legacy = legacy or p.start is None
    return mine, foreign, legacy


def gone_owner(pid: int | None, start: int | None) -> str | None:
    """Which `harness run` started something and no longer runs; None when no run started it
    or that run still runs."""
    if not pid or owner_alive(pid, start):
        return None
    return f"started by harness run pid {pid}, which no longer runs"


def owner_alive(pid: int | None, start: int | None) -> bool:
    """Whether the run that started something (`pid`, started at `start`) still runs."""
    if pid is None:
        return False
    if start is None:  # an older harness's state: the pid alone
        return start_time(pid) is not None
    return start_time(pid) == start


def not_ours_note(path: Path | str, pids: list[int], legacy: bool, fix: str) -> str:
    """The one line for processes a state file names that are not provably the harness's."""
    names = ", ".join(map(str, pids[:8])) + (" ..." if len(pids) > 8 else "")
    if legacy:
        return (
            f"{path} names pid {names} without a start time (an older harness's state): not provably the "
            f"harness's, so nothing was signalled; {fix}"
        )
    return (
        f"pid {names} in {path} no longer is the harness's process (another start time or folder), "
        f"so nothing was signalled"
    )
