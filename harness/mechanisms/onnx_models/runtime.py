"""ONNX Runtime for every suite that runs a graph on it (the engine-hotload suite's engine,
the semantic-cache suite's ONNX lookups): its import with telemetry off, and session options.

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
from pathlib import Path

OPT_LEVELS = ("disabled", "basic", "extended", "all")


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

    return {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[name]


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
