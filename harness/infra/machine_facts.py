"""Host, tool and GPU facts for the run manifest.

Each collect_* function is small and never raises: a missing file, tool or device is
recorded as such, with the reason.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
import uuid
from importlib import metadata
from pathlib import Path

from harness import __version__
from harness.base.paths import REPO_ROOT

PACKAGES = (
    "redis",
    "click",
    "jinja2",
    "pyyaml",
    "psutil",
    "numpy",
    "torch",
    "transformers",
    "sentence-transformers",
    "onnxruntime",
    "onnx",
    "libcachesim",
    "lmdb",
    "nvidia-ml-py",
    "tensorrt",
    "prometheus-api-client",
    "cryptography",
    "gguf",
    "hdrhistogram",
)
TOOLS = {
    "redis-server": ["redis-server", "--version"],
    "redis-benchmark": ["redis-benchmark", "--version"],
    "redis-cli": ["redis-cli", "--version"],
    "memtier_benchmark": ["memtier_benchmark", "--version"],
    "prometheus": ["prometheus", "--version"],
}


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def _run(cmd: list[str], timeout: float = 10) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def collect_git() -> dict:
    rev = _run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"])
    dirty = _run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"])
    return {"revision": rev or "unknown", "dirty": bool(dirty)}


def collect_tools() -> dict:
    out = {}
    for name, cmd in TOOLS.items():
        path = shutil.which(cmd[0])
        out[name] = {
            "path": path,
            "version": _run(cmd) if path else None,
            "missing": None if path else f"{cmd[0]} not found on PATH",
        }
    return out


def collect_packages() -> dict:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def collect_host() -> dict:
    info: dict[str, object] = {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": _cpu_model(),
    }
    try:
        import psutil

        vm = psutil.virtual_memory()
        info.update(
            cpu_logical=psutil.cpu_count(),
            cpu_physical=psutil.cpu_count(logical=False),
            memory_total_gib=round(vm.total / 2**30, 2),
            boot_time=psutil.boot_time(),
        )
        freq = psutil.cpu_freq()
        if freq:
            info["cpu_mhz"] = round(freq.current)
    except Exception as e:  # psutil missing or broken: say so
        info["psutil_error"] = f"{type(e).__name__}: {e}"
        info["cpu_logical"] = os.cpu_count()
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def collect_gpu() -> dict:
    """GPU facts through NVML, or {'present': False, 'reason': ...}."""
    try:
        import pynvml
    except ImportError:
        return {"present": False, "reason": "nvidia-ml-py (pynvml) is not installed"}
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound and friends
        return {"present": False, "reason": f"no GPU: NVML did not initialise ({type(e).__name__}: {e})"}
    try:
        count = pynvml.nvmlDeviceGetCount()
        gpus = []
        for i in range(count):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            gpus.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "memory_total_mib": mem.total // 2**20,
                    "memory_used_mib": mem.used // 2**20,
                }
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {
            "present": count > 0,
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "gpus": gpus,
            "reason": "" if count else "NVML found no devices",
        }
    except Exception as e:
        return {"present": False, "reason": f"NVML error: {type(e).__name__}: {e}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


CONSTRAINTS = REPO_ROOT / "constraints.txt"


def collect_constraints(path: Path = CONSTRAINTS) -> dict:
    """The pinned versions (constraints.txt): its digest, and every installed version that
    differs from its pin (at most 20), so that a run says when it did not run as pinned."""
    import hashlib
    import re

    try:
        text = path.read_text()
    except OSError as e:
        return {"file": path.name, "sha256": None, "missing": f"{path.name}: {e.strerror or e}"}
    differs = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if not m:
            continue
        try:
            have = metadata.version(m.group(1))
        except metadata.PackageNotFoundError:
            have = None
        if have is None or have.split("+")[0] != m.group(2):
            differs[m.group(1)] = f"installed {have or 'nothing'}, pinned {m.group(2)}"
    return {
        "file": path.name,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "differs": dict(list(differs.items())[:20]),
        "differs_count": len(differs),
    }


def _block_device(path: Path) -> tuple[str, Path] | None:
    """The block device (name, /sys/block folder) holding `path`, through its mount, or None."""
    try:
        best = ("", "")
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            mount, source = fields[4], fields[fields.index("-") + 2]
            inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
            if inside and len(mount) > len(best[0]):
                best = (mount, source)
        name = Path(best[1]).name if best[1].startswith("/dev/") else ""
        sys_dir = Path("/sys/class/block") / name
        if not name or not sys_dir.exists():
            return None
        if (sys_dir / "partition").exists():  # a partition: its disk is the parent folder
            sys_dir = sys_dir.resolve().parent
        return sys_dir.name, sys_dir
    except (OSError, ValueError, IndexError):
        return None


def collect_storage(path: Path = REPO_ROOT) -> dict:
    """What kind of disk holds the harness's data (where LMDB and the results live):
    nvme, ssd, hdd or virtual (a VM's virtio or xen disk), from /sys/block."""
    dev = _block_device(path.resolve())
    if dev is None:
        return {"kind": "unknown", "reason": f"no block device found for {path}"}
    name, sys_dir = dev

    def read(rel: str) -> str:
        try:
            return (sys_dir / rel).read_text().strip()
        except OSError:
            return ""

    rotational = read("queue/rotational")
    if name.startswith("nvme"):
        kind = "nvme"
    elif name.startswith(("vd", "xvd")):
        kind = "virtual"
    elif rotational == "1":
        kind = "hdd"
    else:
        kind = "ssd"
    return {"device": name, "kind": kind, "rotational": rotational == "1", "model": read("device/model")}


def collect_all() -> dict:
    return {
        "harness_version": __version__,
        "git": collect_git(),
        "host": collect_host(),
        "tools": collect_tools(),
        "packages": collect_packages(),
        "gpu": collect_gpu(),
        "storage": collect_storage(),
        "constraints": collect_constraints(),
    }
