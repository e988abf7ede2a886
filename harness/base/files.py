"""Reading and writing files whatever a user, a damaged folder or a full disk puts there.

Reading: `read_bounded` refuses anything that is not a regular file (a folder, a device, a
FIFO, a socket: checked before it is opened and again on the open file, which is opened
without blocking, so a FIFO never hangs the harness) and never reads more than its limit
(a link to /dev/zero or a 300 GB file is refused, not read until memory runs out).

Writing: `write_atomic` writes a new temporary file in the target's folder and renames it
over the target: a reader sees the old file or the new one, never half of one. A link at
the target is replaced by the new file (what it points to is never written through); a
folder or a special file there is refused (exit 2). A full disk is an environment problem
(exit 3: one line naming the folder, the space needed and the space free) and the
temporary file is removed. A folder may hold a space reserve (`reserve_space`): when its
disk fills up, the reserve is given up for the write. A run folder keeps one as large as
its results.json and a quarter (`reserve_for`, after every save), so the records already
measured are written whatever a case's output did to the disk.

Building once: `build_once` makes a kept artefact (a converted model, an exported graph) the
first time it is asked for, one builder at a time across threads and processes (two runs,
two test workers), and renames it into place only when it is whole.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from harness.base.errors import BadInput, EnvironmentProblem

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
RESERVE_NAME = ".harness-space-reserve"
RESERVE_BYTES = 1 << 20  # at most 1 MiB, at most a quarter of what is free when the folder is made


def loads_json(text: str | bytes):
    """json.loads for a file the user gives or may have edited: an integer of more than
    Python's 4300 digits (a ValueError of its own) is a JSONDecodeError like any other
    damage, so that every reader's one-line refusal catches it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as e:
        raise json.JSONDecodeError(str(e).split(";")[0], text if isinstance(text, str) else "", 0) from None


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # once, at import: a new file gets the mode open() would give it


class NoSpace(EnvironmentProblem):
    """The disk of a folder the harness writes to is full (exit 3)."""


def kind_of(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a link"),
        (stat.S_ISREG, "a file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n / 1024:.0f} KB" if n < 10 << 20 else f"{n / (1 << 20):.0f} MB"


def read_bounded(path: Path | str, limit: int, what: str, fix: str = "", *, follow: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is BadInput
    (one line: the path, what is wrong, and `fix`). `follow=False` (a file of a results
    folder, which the harness wrote itself): a link there is refused, never read through."""
    path = Path(path)
    tail = f"; {fix}" if fix else ""
    try:
        # follow: what a link points to must be a regular file; otherwise the link itself is refused
        st = os.stat(path) if follow else os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise BadInput(
                f"{path}: is a link; {what} is read only as a regular file the harness wrote, "
                f"never through a link{tail}"
            )
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{path}: is {kind_of(st.st_mode)}, not a regular file; {what} must be a file{tail}")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file ({what}){tail}") from None
    except BadInput:
        raise
    except (OSError, ValueError) as e:
        if getattr(e, "errno", None) == errno.ELOOP and not follow:  # swapped for a link after the lstat
            raise BadInput(f"{path}: is a link; {what} is never read through a link{tail}") from None
        raise BadInput(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e}){tail}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)  # the file that was opened, whatever was swapped in since the stat
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{path}: is {kind_of(st.st_mode)}, not a regular file; {what} must be a file{tail}")
        if st.st_size > limit:
            raise BadInput(f"{path}: {_size(st.st_size)} is too large for {what} (at most {_size(limit)}){tail}")
        try:
            data = _read_upto(f, limit + 1, st.st_size + 1)
        except OSError as e:
            raise BadInput(f"{path}: cannot be read ({e.strerror or e}){tail}") from None
    if len(data) > limit:
        raise BadInput(f"{path}: grew past {_size(limit)} while it was read; {what} is too large{tail}")
    return data


def _read_upto(f, most: int, first: int) -> bytes:
    """At most `most` bytes of `f`: first what its size says (plus one, to see it grew), then
    in chunks of 1 MiB. A file of 20 KB never reserves the whole limit (256 MiB for results.json),
    which a process under a memory limit cannot have."""
    chunks, total, want = [], 0, min(most, first)
    while total < most:
        chunk = f.read(min(want, most - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = 1 << 20
    return b"".join(chunks)


def _check_target(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise BadInput(f"{path}: cannot be written ({e.strerror or e}); give a path in a writable folder") from None
    if stat.S_ISDIR(st.st_mode):
        raise BadInput(
            f"{path}: is a folder, not a file; remove it (the harness writes a file there) or give another path"
        )
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise BadInput(f"{path}: is {kind_of(st.st_mode)}, not a regular file; remove it or give another path")


def _output_path(path: Path, follow: bool) -> Path:
    """The path that is written: `path` itself, or (follow=True, a path the user named) what
    its links lead to, which must be a regular file or nothing yet."""
    if not follow:
        return path
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as e:
        raise BadInput(f"{path}: cannot be resolved ({e}); give a plain file path") from None
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{path}: is {kind_of(st.st_mode)}, not a regular file; give a file path")
    return real


def write_atomic(path: Path | str, data: str | bytes, *, follow: bool = False) -> Path:
    """Write `data` to `path` through a temporary file in the same folder and a rename.
    `follow`: the path was named by the user (--output): its links are followed to a
    regular file; otherwise (files of a results folder) a link there is replaced."""
    path = _output_path(Path(path), follow)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise BadInput(f"{path}: its folder {folder} {what}; give a path in an existing folder")
    _check_target(path)
    try:
        _write_replace(path, raw)
    except OSError as e:
        if e.errno not in NO_SPACE:
            raise BadInput(f"{path}: cannot be written ({e.strerror or e}); give a path in a writable folder") from None
        if not release_reserve(folder):
            raise _no_space(folder, len(raw)) from None
        try:
            _write_replace(path, raw)
        except OSError as e2:
            if e2.errno in NO_SPACE:
                raise _no_space(folder, len(raw)) from None
            raise BadInput(f"{path}: cannot be written ({e2.strerror or e2})") from None
    return path


def _write_replace(path: Path, raw: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _no_space(folder: Path, needed: int) -> NoSpace:
    return NoSpace(no_space_line(folder, needed))


def no_space_line(folder: Path | str, needed: int | None = None) -> str:
    """One line: which folder's disk is full, how much was needed and how much is free."""
    try:
        free = _size(shutil.disk_usage(folder).free)
    except OSError:
        free = "?"
    need = f"writing {_size(needed)} needs more than the {free} free" if needed else f"{free} free"
    return (
        f"{folder}: no space left on its disk ({need}); free some space there or give a folder on "
        f"another disk (--results-dir)"
    )


def reserve_space(folder: Path, size: int | None = None) -> int:
    """Keep a reserve of `size` bytes in `folder` (made, or grown: never shrunk), growing by
    at most half of what the disk has free; without `size`, a first reserve of at most
    RESERVE_BYTES and a quarter of what is free. Returns the bytes reserved (0 when the disk has no room or the folder
    refuses)."""
    path = Path(folder) / RESERVE_NAME
    try:
        have = os.lstat(path).st_size
    except OSError:
        have = 0
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return 0
    want = min(RESERVE_BYTES, free // 4) if size is None else size
    want = min(want, have + free // 2) // 4096 * 4096  # never more than half of what is left: cases need room too
    if want <= have:
        return have
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return 0
    try:
        os.posix_fallocate(fd, 0, want)
    except OSError:
        return have
    finally:
        os.close(fd)
    return want


def reserve_for(path: Path) -> int:
    """Keep room in `path`'s folder for one more copy of `path` (and a little growth): the
    next atomic write of it then succeeds even when the disk has filled up meanwhile."""
    try:
        size = os.lstat(path).st_size
    except OSError:
        return 0
    return reserve_space(Path(path).parent, size + size // 4 + (16 << 10))


def release_reserve(folder: Path) -> bool:
    """Give the folder's reserve back to its disk; True when there was one."""
    try:
        os.unlink(Path(folder) / RESERVE_NAME)
    except OSError:
        return False
    return True


_BUILD_LOCK = threading.RLock()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def build_once(out: Path | str, build, announce=lambda: None) -> Path:
    """`out` (a file or a folder), made by `build(tmp)` on the first call and kept. tmp is a
    new path beside out that ends in out's name (its suffix too), renamed onto out when build
    returns; a build that fails leaves nothing. One builder at a time: a lock in this process and an flock on a
    file beside out across processes, so that a second process waits and then takes the
    first one's result (two builders once wrote the same temporary file)."""
    out = Path(out)
    with _BUILD_LOCK:
        if out.exists():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out.parent / f".{out.name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not out.exists():
                    announce()
                    tmp = out.with_name(f".tmp-{os.getpid()}-{out.name}")
                    _remove(tmp)
                    try:
                        build(tmp)
                        tmp.rename(out)
                    finally:
                        _remove(tmp)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return out
