"""Where an engine's processes run and at what priority.

Cores. vLLM's own binding (VLLM_CPU_OMP_THREADS_BIND) is part of the key of its
torch.compile cache, so two engines bound to different cores compile the model twice, one
start each (~100 s apiece on this 2-core machine). An engine given a core list therefore
starts unbound (`nobind`, OMP_NUM_THREADS = the number of cores: neither is in the key) and
is pinned once it serves: every thread of every one of its processes gets the core list.
The engines then share one cache entry: the first compiles, the others load (~50 s). (An
eager engine, the default, compiles nothing; the binding is the same either way.)

Priority. An engine may start at SCHED_IDLE, the Linux policy that runs only on a core
nothing else wants, while other suites measure (a compile is CPU work it holds back; the
disk reads of an eager start it cannot, see for_run.RunEngines.background_allowed); once it
serves it is set back to SCHED_OTHER, nice 0, before anything is measured on it. Setting a
task back needs CAP_SYS_NICE (root here); without it the harness does not start engines
this way.
"""

from __future__ import annotations

import os
import re

from harness.base.errors import BadInput

CORE_LIST_RE = re.compile(r"[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?){0,63}")


def core_list(spec: str) -> set[int] | None:
    """The cores of a list such as "1" or "0-3,5"; None for "auto" and "nobind"."""
    if spec in ("auto", "nobind"):
        return None
    if not CORE_LIST_RE.fullmatch(spec):
        raise BadInput(
            f"--cpus: {spec[:40]!r} is not 'auto', 'nobind' or a core list such as 1 or 0-3,5; give one of those"
        )
    cores: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if b < a:
            raise BadInput(f"--cpus: {part!r} runs backwards; write the lower core first")
        cores |= set(range(a, b + 1))
    return cores


def binding_env(spec: str) -> dict[str, str]:
    """The engine's environment for a --cpus value: vLLM's own binding for auto/nobind; for a
    core list, unbound at start (the compile cache stays shared) with as many OpenMP
    threads as cores."""
    cores = core_list(spec)
    if cores is None:
        return {"VLLM_CPU_OMP_THREADS_BIND": spec}
    return {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": str(len(cores))}


def go_idle() -> None:
    """preexec_fn of an engine started in the background: SCHED_IDLE, inherited by its children."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def can_restore_priority() -> bool:
    """Whether this process may set an idle task back to SCHED_OTHER (CAP_SYS_NICE; root)."""
    return os.geteuid() == 0


def _tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def settle(pids: list[int], cores: set[int] | None, restore: bool) -> int:
    """Pin every thread of `pids` to `cores` (when given) and, with `restore`, set it back to
    SCHED_OTHER; returns how many threads were changed. A thread that ended meanwhile is skipped."""
    changed = 0
    for pid in pids:
        for tid in _tasks(pid):
            try:
                if cores:
                    os.sched_setaffinity(tid, cores)
                if restore and os.sched_getscheduler(tid) != os.SCHED_OTHER:
                    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                changed += 1
            except (ProcessLookupError, PermissionError, OSError):
                continue
    return changed


def policy_counts(pids: list[int]) -> dict[str, int]:
    """How many threads of `pids` run under each policy (for the record and the tests)."""
    names = {os.SCHED_OTHER: "other", os.SCHED_IDLE: "idle", os.SCHED_BATCH: "batch"}
    out: dict[str, int] = {}
    for pid in pids:
        for tid in _tasks(pid):
            try:
                name = names.get(os.sched_getscheduler(tid), "realtime")
            except OSError:
                continue
            out[name] = out.get(name, 0) + 1
    return out


def affinities(pids: list[int]) -> set[frozenset[int]]:
    """The distinct core sets the threads of `pids` may run on."""
    out = set()
    for pid in pids:
        for tid in _tasks(pid):
            try:
                out.add(frozenset(os.sched_getaffinity(tid)))
            except OSError:
                continue
    return out
