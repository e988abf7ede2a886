"""What was loaded from files, kept while the files stay as they were (the suite specs and the
claims ledger are read by every command and by many tests: parsing them again each time cost
seconds on a loaded machine).

A value is kept under a key with the stamp of the files it came from: each file's path, size,
mtime_ns and a digest of its bytes (the digest because a rewrite within one timestamp tick
keeps mtime_ns, and a test may rewrite a spec that fast). Every caller gets its own deep copy,
so nothing a caller changes reaches the cache or another caller. A file that cannot be
stamped (missing, not a regular file, over `max_bytes`) turns the cache off for that call:
the loader then runs and says what is wrong, as it always did. Errors are never kept.
"""

from __future__ import annotations

import copy
import hashlib
import os
import stat
import threading
from pathlib import Path
from typing import Callable, TypeVar, cast

T = TypeVar("T")

_KEPT: dict[tuple, tuple[tuple, object]] = {}
_LOCK = threading.Lock()


def stamp(paths: list[Path], max_bytes: int) -> tuple | None:
    """(path, size, mtime_ns, digest) of each file, in order; None when one cannot be read
    as a regular file of at most max_bytes."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                return None
            data = Path(p).read_bytes()
        except OSError:
            return None
        out.append((str(p), st.st_size, st.st_mtime_ns, hashlib.blake2b(data, digest_size=16).hexdigest()))
    return tuple(out)


def cached(key: tuple, paths: list[Path], load: Callable[[], T], max_bytes: int) -> T:
    """load()'s value, or a copy of the one kept for `key` while `paths` are unchanged.
    The stamp is taken before loading, so a file changed during the load is loaded again
    next time."""
    before = stamp(paths, max_bytes)
    if before is not None:
        with _LOCK:
            hit = _KEPT.get(key)
        if hit is not None and hit[0] == before:
            # kept below from a load() for this same key: each key has one loader, one type
            return cast(T, copy.deepcopy(hit[1]))
    value = load()
    if before is not None:
        with _LOCK:
            _KEPT[key] = (before, copy.deepcopy(value))
    return value


def clear() -> None:
    with _LOCK:
        _KEPT.clear()
