"""ONNX Runtime (CPU) behind the engine interface.

`InferenceSession` is created from the verified bytes (never from the path, so the bytes
that were checked are the bytes that run). ONNX Runtime has no execution context: a
session's `run()` may be called from several threads at once, so "create contexts" only
makes the RunOptions the calls use, and there is one implicit profile (dynamic
dimensions unbounded).

Telemetry: every import of ONNX Runtime goes through harness.mechanisms.onnx_models.runtime
(its telemetry off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base.files import build_once
from harness.experiments.engine_hotload.lifecycle import (
    Engine,
    EngineError,
    Profile,
    TensorSpec,
    implicit_profile,
    register_backend,
)
from harness.mechanisms.onnx_models.runtime import OPT_LEVELS, onnxruntime, session_options

_ORT_TYPES = {
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(bool)": "bool",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
}


def _dims(shape) -> tuple:
    return tuple(d if isinstance(d, int) and d >= 0 else -1 for d in shape)


@register_backend("ort")
@dataclass
class OrtEngine(Engine):
    intra_op_threads: int = 1
    opt_level: str = "all"
    _session: Any = field(default=None, init=False, repr=False)  # an onnxruntime.InferenceSession (untyped)
    _io: list = field(default_factory=list, init=False, repr=False)
    _out_names: list = field(default_factory=list, init=False, repr=False)
    _run_options: Any = field(default=None, init=False, repr=False)  # an onnxruntime.RunOptions (untyped)

    def __post_init__(self):
        self.backend = "onnxruntime"
        if self.opt_level not in OPT_LEVELS:
            raise ValueError(f"opt_level must be one of {OPT_LEVELS}")

    def _deserialize(self, data: bytes, path: Path) -> None:
        ort = onnxruntime()

        try:
            self._session = ort.InferenceSession(
                data, session_options(self.intra_op_threads, self.opt_level), providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # ORT raises its own Fail/InvalidGraph/... types
            raise EngineError(f"ONNX Runtime could not load {path.name}: {type(e).__name__}: {e}") from None
        s = self._session
        self._io = [
            TensorSpec(i.name, "input", _ORT_TYPES.get(i.type, i.type), _dims(i.shape)) for i in s.get_inputs()
        ] + [TensorSpec(o.name, "output", _ORT_TYPES.get(o.type, o.type), _dims(o.shape)) for o in s.get_outputs()]
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
    return build_once(
        Path(dst),
        lambda tmp: ort.InferenceSession(
            str(src), session_options(1, opt_level, tmp), providers=["CPUExecutionProvider"]
        ),
    )
