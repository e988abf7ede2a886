"""ONNX Runtime (CPU) behind the engine interface.

`InferenceSession` is created from the verified bytes (never from the path, so the bytes
that were checked are the bytes that run). ONNX Runtime has no execution context: a
session's `run()` may be called from several threads at once, so "create contexts" only
makes the RunOptions the calls use, and there is one implicit profile (dynamic
dimensions unbounded).

Telemetry: ONNX Runtime (1.2x+, non-Windows) writes a device id and an event queue under
~/.cache/Microsoft/DeveloperTools/ when it is imported, outside the run. `onnxruntime()`
imports it with its telemetry off: ORT_TELEMETRY_DISABLED=1 (its documented opt-out, full
from the releases after 1.32), a CI marker set for the import alone (1.32 writes nothing
under CI; `disable_telemetry_events()` alone still writes the id), then
`disable_telemetry_events()` before any session is made. Every import here goes through it.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.files import build_once
from harness.experiments.engine_hotload.lifecycle import (
    Engine,
    EngineError,
    Profile,
    TensorSpec,
    implicit_profile,
    register_backend,
)

OPT_LEVELS = ("disabled", "basic", "extended", "all")
_ORT_TYPES = {"tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(float)": "float32",
              "tensor(float16)": "float16", "tensor(double)": "float64", "tensor(bool)": "bool",
              "tensor(int8)": "int8", "tensor(uint8)": "uint8"}


TELEMETRY_OFF_ENV = "ORT_TELEMETRY_DISABLED"
_CI_MARKER = "TF_BUILD"  # one of the CI variables ONNX Runtime 1.32 checks before it writes its device id
_import_lock = threading.Lock()


def onnxruntime():
    """The onnxruntime module, imported with its telemetry off (see the module's docstring)."""
    with _import_lock:
        first = "onnxruntime" not in sys.modules
        os.environ.setdefault(TELEMETRY_OFF_ENV, "1")
        had = os.environ.get(_CI_MARKER)
        if first and had is None:
            os.environ[_CI_MARKER] = "1"
        try:
            import onnxruntime as ort
        finally:
            if first and had is None:
                os.environ.pop(_CI_MARKER, None)
        if first and hasattr(ort, "disable_telemetry_events"):
            ort.disable_telemetry_events()
        return ort


def _level(name: str):
    ort = onnxruntime()

    return {"disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[name]


def session_options(intra_op_threads: int = 1, opt_level: str = "all", optimized_path: Path | None = None):
    ort = onnxruntime()

    so = ort.SessionOptions()
    so.intra_op_num_threads = intra_op_threads  # 0 = ONNX Runtime's default (all cores)
    so.inter_op_num_threads = 1
    so.graph_optimization_level = _level(opt_level)
    so.log_severity_level = 3
    if optimized_path is not None:
        so.optimized_model_filepath = str(optimized_path)
    return so


def _dims(shape) -> tuple:
    return tuple(d if isinstance(d, int) and d >= 0 else -1 for d in shape)


@register_backend("ort")
@dataclass
class OrtEngine(Engine):
    intra_op_threads: int = 1
    opt_level: str = "all"
    _session: object = field(default=None, init=False, repr=False)
    _io: list = field(default_factory=list, init=False, repr=False)
    _out_names: list = field(default_factory=list, init=False, repr=False)
    _run_options: object = field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.backend = "onnxruntime"
        if self.opt_level not in OPT_LEVELS:
            raise ValueError(f"opt_level must be one of {OPT_LEVELS}")

    def _deserialize(self, data: bytes, path: Path) -> None:
        ort = onnxruntime()

        try:
            self._session = ort.InferenceSession(data, session_options(self.intra_op_threads, self.opt_level),
                                                 providers=["CPUExecutionProvider"])
        except Exception as e:  # ORT raises its own Fail/InvalidGraph/... types
            raise EngineError(f"ONNX Runtime could not load {path.name}: {type(e).__name__}: {e}") from None
        s = self._session
        self._io = ([TensorSpec(i.name, "input", _ORT_TYPES.get(i.type, i.type), _dims(i.shape)) for i in s.get_inputs()]
                    + [TensorSpec(o.name, "output", _ORT_TYPES.get(o.type, o.type), _dims(o.shape)) for o in s.get_outputs()])
        self._out_names = [o.name for o in s.get_outputs()]

    def _create_contexts(self) -> None:
        ort = onnxruntime()

        self._run_options = ort.RunOptions()
        self._run_options.log_severity_level = 3

    def io(self) -> list[TensorSpec]:
        return list(self._io)

    def profiles(self) -> list[Profile]:
        return [implicit_profile(self._io)]

    def reported(self) -> dict:
        s = self._session
        if s is None:
            return {}
        so = s.get_session_options()
        return {"execution_provider": s.get_providers()[0], "intra_op_threads": so.intra_op_num_threads}

    def _run(self, feeds, profile):
        session = self._session  # one read: a concurrent close() cannot pull it away mid-call
        if session is None:
            raise EngineError(f"engine {self.label} is not loaded or was closed")
        outs = session.run(self._out_names, feeds, self._run_options)
        return dict(zip(self._out_names, outs))

    def _close(self) -> None:
        self._session = None
        self._run_options = None


def save_optimized(src: Path, dst: Path, opt_level: str = "extended") -> Path:
    """Write ONNX Runtime's optimized graph of `src` to `dst` once (a second version of the
    same model with the same IO tensors, used as the swap's new engine file)."""
    ort = onnxruntime()
    return build_once(Path(dst), lambda tmp: ort.InferenceSession(str(src), session_options(1, opt_level, tmp),
                                                                  providers=["CPUExecutionProvider"]))
