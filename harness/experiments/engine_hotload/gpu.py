"""Telemetry: NVML (GPU memory used/total, utilisation) and process RSS (psutil),
sampled in a background thread.

NVML failing (no driver: NVMLError_LibraryNotFound; no device; the nvidia-ml-py package
missing) is recorded as {"present": False, "reason": ...}, never raised. The NVML module
can be passed in (`nvml=`) so that callers and tests choose which one is used.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


def _nvml(nvml=None):
    if nvml is not None:
        return nvml, None
    try:
        import pynvml
    except ImportError:
        return None, "no GPU: nvidia-ml-py (module pynvml) is not installed"
    return pynvml, None


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def nvml_status(nvml=None) -> dict:
    """{"present": bool, "reason": str, "driver": str, "devices": [{index, name, memory_total_mib,
    memory_used_mib, util_gpu_pct}]}"""
    mod, why = _nvml(nvml)
    if mod is None:
        return {"present": False, "reason": why, "devices": []}
    try:
        mod.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
        return {"present": False, "reason": f"no GPU: NVML did not initialise ({type(e).__name__}: {e})", "devices": []}
    try:
        devices = []
        for i in range(mod.nvmlDeviceGetCount()):
            h = mod.nvmlDeviceGetHandleByIndex(i)
            mem = mod.nvmlDeviceGetMemoryInfo(h)
            try:
                util = mod.nvmlDeviceGetUtilizationRates(h).gpu
            except Exception:
                util = None
            devices.append(
                {
                    "index": i,
                    "name": _s(mod.nvmlDeviceGetName(h)),
                    "memory_total_mib": mem.total / 2**20,
                    "memory_used_mib": mem.used / 2**20,
                    "util_gpu_pct": util,
                }
            )
        try:
            driver = _s(mod.nvmlSystemGetDriverVersion())
        except Exception:
            driver = "unknown"
        if not devices:
            return {"present": False, "reason": "no GPU: NVML found no devices", "devices": [], "driver": driver}
        return {"present": True, "reason": "", "driver": driver, "devices": devices}
    except Exception as e:
        return {"present": False, "reason": f"no GPU: NVML error ({type(e).__name__}: {e})", "devices": []}
    finally:
        try:
            mod.nvmlShutdown()
        except Exception:
            pass


@dataclass
class Sample:
    t: float  # seconds since the sampler started (time.perf_counter based)
    rss_bytes: int
    gpu_used_bytes: int | None = None
    gpu_total_bytes: int | None = None
    gpu_util_pct: float | None = None


@dataclass
class MemorySampler:
    """Samples this process's RSS and, when NVML works, one GPU's memory and utilisation."""

    interval_s: float = 0.01
    gpu_index: int = 0
    nvml: object = None
    samples: list = field(default_factory=list)
    gpu: dict = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)

    def __post_init__(self):
        self._stop = threading.Event()
        self._thread = None
        self._handle = None
        self._mod = None

    def start(self) -> "MemorySampler":
        import psutil

        self._proc = psutil.Process()
        self.gpu = nvml_status(self.nvml)
        if self.gpu["present"]:
            mod, _ = _nvml(self.nvml)
            try:
                mod.nvmlInit()
                self._handle = mod.nvmlDeviceGetHandleByIndex(self.gpu_index)
                self._mod = mod
            except Exception as e:
                self.gpu = {"present": False, "reason": f"no GPU sampling: {type(e).__name__}: {e}", "devices": []}
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def sample(self) -> Sample:
        s = Sample(self.now(), self._proc.memory_info().rss)
        if self._handle is not None:
            try:
                mem = self._mod.nvmlDeviceGetMemoryInfo(self._handle)
                s.gpu_used_bytes, s.gpu_total_bytes = int(mem.used), int(mem.total)
                s.gpu_util_pct = float(self._mod.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            except Exception:
                pass
        self.samples.append(s)
        return s

    def _loop(self):
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sample()
        if self._mod is not None:
            try:
                self._mod.nvmlShutdown()
            except Exception:
                pass
        return self.samples


def peak_extra(samples: list[Sample], t_from: float, t_to: float, attr: str = "rss_bytes") -> tuple[float, float]:
    """(baseline, peak - baseline) of `attr` in [t_from, t_to]; the baseline is the last
    sample at or before t_from (the first sample when none is earlier)."""
    vals = [(s.t, getattr(s, attr)) for s in samples if getattr(s, attr) is not None]
    if not vals:
        raise ValueError(f"no samples of {attr}")
    before = [v for t, v in vals if t <= t_from]
    base = before[-1] if before else vals[0][1]
    inside = [v for t, v in vals if t_from <= t <= t_to] or [base]
    return float(base), float(max(inside) - base)
