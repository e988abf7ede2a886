"""ONNX: the MiniLM export and the tiny graphs (export.py), and ONNX Runtime imported with its
telemetry off (runtime.py)."""
