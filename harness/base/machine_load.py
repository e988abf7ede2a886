"""The machine's load around each case: the 1-minute load average (os.getloadavg) when the
case starts and when it ends, the logical cores, and the share of CPU time the hypervisor
took (steal, from /proc/stat) while it ran. Stored with each record (`machine_load`), shown
in the report's header, and named in a threshold's failure line when the machine was
loaded: the load average at the case's start above the cores (other processes, or what ran
just before, competed with it) or steal above STEAL_PCT. The verdict stays what was
measured; the line says why it may differ from a quiet machine's."""

from __future__ import annotations

import math
import os
import time

STEAL_PCT = 5.0  # past this share of CPU time taken by the hypervisor, a latency is not this machine's alone


def _cpu_jiffies() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs since boot, or None where /proc/stat is not there."""
    try:
        with open("/proc/stat", "rb") as f:
            first = f.readline().split()
    except OSError:
        return None
    if len(first) < 9 or first[0] != b"cpu":
        return None
    try:
        values = [int(x) for x in first[1:9]]  # user nice system idle iowait irq softirq steal
    except ValueError:
        return None
    return values[7], sum(values)


def _load1() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def sample() -> dict:
    """The readings at one moment (for `during`)."""
    return {"load1": _load1(), "cpu": _cpu_jiffies(), "t": time.time()}


def during(before: dict, after: dict) -> dict:
    """What a record keeps: load1_start, load1_end, cores, steal_pct (None where not readable)."""
    steal = None
    if before.get("cpu") and after.get("cpu"):
        d_steal, d_total = after["cpu"][0] - before["cpu"][0], after["cpu"][1] - before["cpu"][1]
        steal = round(100.0 * d_steal / d_total, 2) if d_total > 0 and d_steal >= 0 else None
    return {
        "load1_start": before.get("load1"),
        "load1_end": after.get("load1"),
        "cores": os.cpu_count(),
        "steal_pct": steal,
    }


def _num(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        return float(x) if math.isfinite(x) else None
    except OverflowError:  # an integer past a float's range (an edited file)
        return None


def is_loaded(m) -> bool:
    """Whether a record's machine_load says the machine was loaded while it ran."""
    if not isinstance(m, dict):
        return False
    load, cores, steal = _num(m.get("load1_start")), _num(m.get("cores")), _num(m.get("steal_pct"))
    return bool((load is not None and cores and load > cores) or (steal is not None and steal > STEAL_PCT))


def summary(loads: list) -> dict | None:
    """The largest readings over records' machine_load (dicts; others are left out), or None."""
    loads = [m for m in loads if isinstance(m, dict)]
    if not loads:
        return None

    def top(key):
        vals = [v for v in (_num(m.get(key)) for m in loads) if v is not None]
        return max(vals) if vals else None

    return {
        "load1_start": top("load1_start"),
        "load1_end": top("load1_end"),
        "cores": top("cores"),
        "steal_pct": top("steal_pct"),
        "loaded": sum(is_loaded(m) for m in loads),
        "of": len(loads),
    }


def _fmt(x, unit: str = "") -> str:
    return "?" if x is None else f"{x:g}{unit}"


def note(loads: list) -> str:
    """'' when no record was loaded; else the few words a failure line carries."""
    s = summary(loads)
    if not s or not s["loaded"]:
        return ""
    return (
        f"the machine was loaded during {s['loaded']} of {s['of']} repetition(s) (load average "
        f"{_fmt(s['load1_start'])} at a start on {_fmt(s['cores'])} cores, CPU steal up to "
        f"{_fmt(s['steal_pct'], '%')}): re-run on a quiet machine"
    )


def header_line(loads: list) -> str:
    """The report header's line on the machine's load over every case ('' when none was recorded)."""
    s = summary(loads)
    if not s:
        return ""
    line = (
        f"Machine load during the cases: load average (1 min) up to {_fmt(s['load1_start'])} at a case's "
        f"start and {_fmt(s['load1_end'])} at its end, on {_fmt(s['cores'])} logical cores; CPU steal up to "
        f"{_fmt(s['steal_pct'], '%')}."
    )
    if s["loaded"]:
        line += (
            f" Loaded (load above the cores at a start, or steal over {STEAL_PCT:g}%) during "
            f"{s['loaded']} of {s['of']} repetitions: their thresholds may fail for that reason."
        )
    return line
