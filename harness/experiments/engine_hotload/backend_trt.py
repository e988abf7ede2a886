"""TensorRT behind the engine interface (TensorRT 10.x and 11.x; `tensorrt` imported lazily).

Build (once, cached): Builder -> create_network(0) (explicit batch is the only mode since
10.0; the EXPLICIT_BATCH flag is gone in 11) -> OnnxParser.parse_from_file -> builder
config with set_memory_pool_limit(WORKSPACE), a timing cache (create_timing_cache /
set_timing_cache, saved after the build) and one optimization profile per range
(set_shape(name, min, opt, max)) -> build_serialized_network. No precision flags: the
network is FP32 and BuilderFlag.FP16 no longer exists in 11 (strong typing only).

Run: Runtime.deserialize_cuda_engine(bytes) (None on failure) -> one execution context
per optimization profile (a profile is never shared by two contexts in flight), each with
its own CUDA stream and device buffers sized for the profile's max shapes ->
set_optimization_profile_async -> set_input_shape -> set_tensor_address ->
execute_async_v3(stream) -> stream synchronize. Teardown: synchronize streams, drop
contexts, then the engine, then free buffers and streams.

CUDA memory and streams come from the CUDA runtime library through ctypes (as Polygraphy
does), so no extra Python package is needed.

Not run on a GPU in this session (none was lent): written against the TensorRT Python
API (pyCore bindings, samples/python/common_runtime.py, Polygraphy's runner). Where
tensorrt or a GPU is missing the cases are skipped with `unavailable_reason()`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from harness.base.files import build_once
from harness.experiments.engine_hotload.gpu import nvml_status
from harness.experiments.engine_hotload.lifecycle import (
    Engine,
    EngineError,
    Profile,
    TensorSpec,
    covering_profiles,
    inputs_of,
    register_backend,
)

H2D, D2H = 1, 2  # cudaMemcpyKind


def import_trt():
    import tensorrt as trt  # noqa: PLC0415 (lazy on purpose)

    return trt


def trt_version() -> str | None:
    try:
        return str(import_trt().__version__)
    except Exception:
        pass
    try:
        from importlib import metadata

        for name in ("tensorrt", "tensorrt-cu12", "tensorrt-cu13", "tensorrt_cu12", "tensorrt-lean"):
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
    except Exception:
        pass
    return None


# ---- the CUDA runtime through ctypes ---------------------------------------------------


def _cudart_candidates() -> list[str]:
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    dirs += ["/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"]
    for p in sys.path:  # pip wheels: nvidia/cuda_runtime/lib (tensorrt and torch depend on them)
        dirs += glob.glob(os.path.join(p, "nvidia", "cuda_runtime", "lib"))
        dirs += glob.glob(os.path.join(p, "nvidia", "cu*", "lib"))
    found = []
    for d in dirs:
        found += sorted(glob.glob(os.path.join(d, "libcudart.so*")), reverse=True)
    lib = ctypes.util.find_library("cudart")
    return found + ([lib] if lib else []) + ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]


class CudaRuntime:
    """The few CUDA runtime calls the TensorRT runner needs."""

    _instance = None
    _lock = threading.Lock()

    def __init__(self):
        errors = []
        self.lib = None
        for cand in _cudart_candidates():
            try:
                self.lib = ctypes.CDLL(cand)
                self.path = cand
                break
            except OSError as e:
                errors.append(f"{cand}: {e}")
        if self.lib is None:
            raise EngineError("the CUDA runtime library (libcudart) was not found: " + "; ".join(errors[:3]))
        lib = self.lib
        for fn in (
            "cudaMalloc",
            "cudaFree",
            "cudaMemcpy",
            "cudaMemcpyAsync",
            "cudaStreamCreate",
            "cudaStreamSynchronize",
            "cudaStreamDestroy",
            "cudaGetDeviceCount",
            "cudaRuntimeGetVersion",
            "cudaDriverGetVersion",
        ):
            getattr(lib, fn).restype = ctypes.c_int
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        lib.cudaGetErrorString.argtypes = [ctypes.c_int]
        lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        lib.cudaFree.argtypes = [ctypes.c_void_p]
        lib.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        lib.cudaMemcpyAsync.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        lib.cudaStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
        lib.cudaStreamDestroy.argtypes = [ctypes.c_void_p]
        lib.cudaGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.cudaRuntimeGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.cudaDriverGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]

    @classmethod
    def get(cls) -> "CudaRuntime":
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def check(self, status: int, what: str) -> None:
        if status != 0:
            msg = self.lib.cudaGetErrorString(status)
            raise EngineError(f"CUDA error {status} in {what}: {msg.decode() if msg else '?'}")

    def device_count(self) -> int:
        n = ctypes.c_int(0)
        self.check(self.lib.cudaGetDeviceCount(ctypes.byref(n)), "cudaGetDeviceCount")
        return n.value

    def versions(self) -> dict:
        rt, drv = ctypes.c_int(0), ctypes.c_int(0)
        self.lib.cudaRuntimeGetVersion(ctypes.byref(rt))
        self.lib.cudaDriverGetVersion(ctypes.byref(drv))
        fmt = lambda v: f"{v // 1000}.{(v % 1000) // 10}"  # noqa: E731
        return {"cuda_runtime": fmt(rt.value), "cuda_driver_api": fmt(drv.value), "cudart": self.path}

    def malloc(self, nbytes: int) -> int:
        ptr = ctypes.c_void_p()
        self.check(self.lib.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1))), "cudaMalloc")
        return cast(int, ptr.value)  # checked above: cudaMalloc of >= 1 byte succeeded, never NULL

    def free(self, ptr: int) -> None:
        self.check(self.lib.cudaFree(ctypes.c_void_p(ptr)), "cudaFree")

    def stream(self) -> int:
        s = ctypes.c_void_p()
        self.check(self.lib.cudaStreamCreate(ctypes.byref(s)), "cudaStreamCreate")
        return s.value or 0

    def sync(self, stream: int) -> None:
        self.check(self.lib.cudaStreamSynchronize(ctypes.c_void_p(stream)), "cudaStreamSynchronize")

    def destroy_stream(self, stream: int) -> None:
        self.check(self.lib.cudaStreamDestroy(ctypes.c_void_p(stream)), "cudaStreamDestroy")

    def copy_async(self, dst: int, src: int, nbytes: int, kind: int, stream: int) -> None:
        self.check(
            self.lib.cudaMemcpyAsync(
                ctypes.c_void_p(dst), ctypes.c_void_p(src), ctypes.c_size_t(nbytes), kind, ctypes.c_void_p(stream)
            ),
            "cudaMemcpyAsync",
        )


def unavailable_reason(nvml=None) -> str | None:
    """Why the TensorRT backend cannot run here, or None when it can."""

    reasons = []
    try:
        import_trt()
    except ImportError as e:
        reasons.append(
            f"tensorrt is not installed ({e}); on a GPU host: pip install tensorrt (11.x) or 'tensorrt-cu12>=10,<11'"
        )
    except Exception as e:  # a broken install (missing libnvinfer)
        reasons.append(f"tensorrt does not import: {type(e).__name__}: {e}")
    gpu = nvml_status(nvml)
    if not gpu["present"]:
        reasons.append(gpu["reason"])
    elif not reasons:
        try:
            if CudaRuntime.get().device_count() < 1:
                reasons.append("the CUDA runtime sees no device")
        except EngineError as e:
            reasons.append(str(e))
    return "; ".join(reasons) or None


def environment() -> dict:
    """TensorRT, CUDA and GPU facts for the record (engines are tied to all three)."""

    out = {"tensorrt": trt_version(), "gpu": nvml_status()}
    try:
        out.update(CudaRuntime.get().versions())
    except EngineError as e:
        out["cuda"] = str(e)
    return out


# ---- building ----------------------------------------------------------------------------


def _logger(trt):
    return trt.Logger(trt.Logger.WARNING)


def profile_shapes(input_dims: tuple, rng: list) -> tuple[tuple, ...]:
    """(min, opt, max) of one input from a [[min_b, min_s], [opt_b, opt_s], [max_b, max_s]] range."""
    out = []
    for b, s in rng:
        fill = [b, s]
        out.append(tuple(fill.pop(0) if d < 0 else d for d in input_dims))
    return tuple(out)


def build_plan(
    onnx_path: Path, profiles: list, *, timing_cache: Path | None = None, workspace_mib: int = 1024, log=lambda m: None
) -> bytes:
    """Build a serialized engine from an ONNX file with one optimization profile per range."""
    trt = import_trt()
    logger = _logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errs = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise EngineError(f"TensorRT's ONNX parser refused {onnx_path.name}: {'; '.join(errs) or 'no message'}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mib << 20)
    cache_bytes = timing_cache.read_bytes() if timing_cache is not None and timing_cache.exists() else b""
    cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(cache, False)
    for rng in profiles:
        prof = builder.create_optimization_profile()
        for i in range(network.num_inputs):
            inp = network.get_input(i)
            lo, opt, hi = profile_shapes(tuple(inp.shape), rng)
            prof.set_shape(inp.name, lo, opt, hi)
        if config.add_optimization_profile(prof) < 0:
            raise EngineError(f"TensorRT rejected optimization profile {rng}")
    log(f"building a TensorRT engine from {onnx_path.name} with {len(profiles)} profile(s)")
    t0 = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise EngineError("build_serialized_network returned None (see the TensorRT log above)")
    log(f"built in {time.perf_counter() - t0:.1f} s")
    if timing_cache is not None:
        timing_cache.write_bytes(bytes(memoryview(config.get_timing_cache().serialize())))
    return bytes(memoryview(plan))


def plan_path(onnx_path: Path, profiles: list, cache_dir: Path) -> Path:
    """Engines are tied to the TensorRT version and the GPU model: both are in the name."""

    gpu = nvml_status()
    gpu_name = gpu["devices"][0]["name"] if gpu["present"] else "nogpu"
    key = hashlib.sha256(json.dumps([onnx_path.name, profiles, trt_version(), gpu_name]).encode()).hexdigest()[:12]
    slug = "".join(c if c.isalnum() else "-" for c in gpu_name).strip("-").lower()
    d = cache_dir / "trt"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{onnx_path.stem}-trt{trt_version()}-{slug}-{key}.plan"


def cached_plan(onnx_path: Path, profiles: list, cache_dir: Path, log=lambda m: None) -> Path:
    out = plan_path(onnx_path, profiles, cache_dir)
    timing = out.parent / f"timing-trt{trt_version()}.cache"
    return build_once(out, lambda tmp: tmp.write_bytes(build_plan(onnx_path, profiles, timing_cache=timing, log=log)))


# ---- running -----------------------------------------------------------------------------


@dataclass
class _Slot:
    profile: Profile
    context: object
    stream: int
    buffers: dict  # tensor name -> (device ptr, nbytes)
    lock: threading.Lock = field(default_factory=threading.Lock)


@register_backend("trt")
@dataclass
class TrtEngine(Engine):
    _runtime: Any = field(default=None, init=False, repr=False)  # tensorrt objects (imported lazily, untyped)
    _engine: Any = field(default=None, init=False, repr=False)
    _logger: Any = field(default=None, init=False, repr=False)
    _io: list = field(default_factory=list, init=False, repr=False)
    _profiles: list = field(default_factory=list, init=False, repr=False)
    _slots: list = field(default_factory=list, init=False, repr=False)
    _free: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)

    def __post_init__(self):
        self.backend = "tensorrt"

    def _deserialize(self, data: bytes, path: Path) -> None:
        trt = import_trt()
        CudaRuntime.get()
        self._logger = _logger(trt)
        self._runtime = trt.Runtime(self._logger)
        engine = self._runtime.deserialize_cuda_engine(data)
        if engine is None:
            raise EngineError(
                f"deserialize_cuda_engine returned None for {path.name} (built by another TensorRT "
                "version or for another GPU?)"
            )
        self._engine = engine
        e = engine
        io = []
        for i in range(e.num_io_tensors):
            name = e.get_tensor_name(i)
            mode = "input" if e.get_tensor_mode(name) == trt.TensorIOMode.INPUT else "output"
            import numpy as np

            dtype = np.dtype(trt.nptype(e.get_tensor_dtype(name))).name
            io.append(
                TensorSpec(
                    name,
                    mode,
                    dtype,
                    tuple(int(d) for d in e.get_tensor_shape(name)),
                    location=e.get_tensor_location(name).name,
                    format=e.get_tensor_format(name).name,
                )
            )
        self._io = io
        self._profiles = []
        for p in range(e.num_optimization_profiles):
            ranges = {
                t.name: tuple(tuple(int(d) for d in s) for s in e.get_tensor_profile_shape(t.name, p))
                for t in inputs_of(io)
            }
            self._profiles.append(Profile(p, ranges))

    def io(self) -> list[TensorSpec]:
        return list(self._io)

    def profiles(self) -> list[Profile]:
        return list(self._profiles)

    def memory(self) -> dict:
        e = self._engine
        if e is None:
            return {}
        dev: Any = getattr(e, "device_memory_size_v2", None)
        if dev is None:
            dev = getattr(e, "device_memory_size", 0)
        buffers = sum(n for s in self._slots for _, n in s.buffers.values())
        return {
            "context_device_memory_bytes": int(dev),
            "io_buffer_bytes": int(buffers),
            "contexts": len(self._slots),
            "plan_bytes": self.size_bytes,
        }

    def _create_contexts(self) -> None:
        import numpy as np

        cuda = CudaRuntime.get()
        for prof in self._profiles:
            ctx = self._engine.create_execution_context()
            if ctx is None:
                raise EngineError("create_execution_context returned None (out of GPU memory?)")
            stream = cuda.stream()
            if not ctx.set_optimization_profile_async(prof.index, stream):
                raise EngineError(f"set_optimization_profile_async({prof.index}) failed")
            cuda.sync(stream)
            for t in inputs_of(self._io):  # max shapes, to size the buffers
                if not ctx.set_input_shape(t.name, prof.ranges[t.name][2]):
                    raise EngineError(f"set_input_shape({t.name}, {prof.ranges[t.name][2]}) failed")
            buffers = {}
            for t in self._io:
                shape = tuple(ctx.get_tensor_shape(t.name))
                nbytes = int(np.prod(shape)) * np.dtype(t.dtype).itemsize
                ptr = cuda.malloc(nbytes)
                buffers[t.name] = (ptr, nbytes)
                if not ctx.set_tensor_address(t.name, ptr):
                    raise EngineError(f"set_tensor_address({t.name}) failed")
            self._slots.append(_Slot(prof, ctx, stream, buffers))

    def _acquire(self, shapes: dict, profile: int | None) -> _Slot:
        if profile is not None:
            cands = [s for s in self._slots if s.profile.index == profile]
        else:
            ok = {p.index for p in covering_profiles(self._profiles, shapes)}
            cands = [s for s in self._slots if s.profile.index in ok]
        if not cands:
            raise EngineError(f"no optimization profile covers input shapes {shapes}")
        with self._free:
            while True:
                for s in cands:
                    if s.lock.acquire(blocking=False):
                        return s
                self._free.wait()

    def _release(self, slot: _Slot) -> None:
        with self._free:  # under the condition's lock, so a waiter cannot miss the wake-up
            slot.lock.release()
            self._free.notify_all()

    def _run(self, feeds, profile):
        import numpy as np

        cuda = CudaRuntime.get()
        by_name = {t.name: t for t in self._io}
        arrays = {n: np.ascontiguousarray(a, dtype=by_name[n].dtype) for n, a in feeds.items()}
        slot = self._acquire({n: a.shape for n, a in arrays.items()}, profile)
        try:
            ctx = slot.context
            for n, a in arrays.items():
                if not ctx.set_input_shape(n, a.shape):
                    raise EngineError(f"set_input_shape({n}, {a.shape}) failed for profile {slot.profile.index}")
                cuda.copy_async(slot.buffers[n][0], a.ctypes.data, a.nbytes, H2D, slot.stream)
            outs = {}
            for t in self._io:
                if t.mode == "output":
                    outs[t.name] = np.empty(tuple(ctx.get_tensor_shape(t.name)), dtype=t.dtype)
            if not ctx.execute_async_v3(slot.stream):
                raise EngineError("execute_async_v3 returned False")
            for n, a in outs.items():
                cuda.copy_async(a.ctypes.data, slot.buffers[n][0], a.nbytes, D2H, slot.stream)
            cuda.sync(slot.stream)
            return outs
        finally:
            self._release(slot)

    def _close(self) -> None:
        cuda = CudaRuntime.get()
        for s in self._slots:  # streams first, then contexts, then the engine, then memory
            cuda.sync(s.stream)
        for s in self._slots:
            s.context = None
        memory = [(s.buffers, s.stream) for s in self._slots]
        self._slots = []
        self._engine = None
        self._runtime = None
        for buffers, stream in memory:
            for ptr, _ in buffers.values():
                cuda.free(ptr)
            cuda.destroy_stream(stream)
