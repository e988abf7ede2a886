"""Engine hot-loading, prewarming and signed models (source sections 3.1 and 4.4).

One engine lifecycle (load, contexts, prewarm, infer, swap, close) behind one interface,
with an ONNX Runtime CPU backend and a TensorRT backend; a SHA-256 manifest with an
optional Ed25519 signature checked before any file is deserialized; NVML telemetry.

Modules stay cheap to import: onnxruntime, torch, tensorrt and pynvml are imported inside
functions.
"""

# The backends register themselves with lifecycle.open_engine (lifecycle imports none of them).
from harness.experiments.engine_hotload import backend_ort, backend_trt  # noqa: E402,F401
