"""What several suites share, below the suites: no suite imports another, and nothing here
imports a suite (tests/unit/test_architecture.py). Not a suite: no suite.yaml, no drivers.

- KV blocks: the Mooncake-format trace (kv_block_trace), the prefix rule (kv_prefix), the
  block-level policies (kv_policies) and the simulator's prediction of an engine's hit rate
  (kv_hit_prediction): the kv-trace and serving suites;
- key-value traces and cache simulation: eviction_traces, eviction_sim and the independent
  reference simulators (eviction_reference): the eviction, kv-trace and cold-start suites;
- ONNX: the MiniLM export and the tiny graphs (onnx_export), ONNX Runtime with its telemetry
  off (onnx_runtime): the engine-hotload and semantic-cache suites;
- the semantic cache itself: data sets, keys, embeddings, the Redis store, serving a request
  in each mode and the TTFT stream (semantic_*): the semantic-cache and serving suites and
  tools/gpu_check.
"""
