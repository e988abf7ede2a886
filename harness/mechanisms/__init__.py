"""The mechanisms under test and the simulators that predict or check them, shared by the suites.

Below the suites, above the verdicts: a suite imports these, nothing here imports a suite
(tests/unit/test_architecture.py). Not a suite: no suite.yaml, no drivers.

- kv_blocks/: the Mooncake-format KV block trace, the prefix rule, the block-level policies,
  their compiled loops and the simulator's prediction of an engine's hit rate (the kv-trace
  and serving suites);
- cache_policies/: key-value traces, the cache simulator, LRU-K and the independent reference
  simulators (the eviction, kv-trace and cold-start suites);
- onnx_models/: the MiniLM export and the tiny graphs, ONNX Runtime with its telemetry off
  (the engine-hotload and semantic-cache suites);
- semantic/: the semantic cache itself: data sets, keys, embeddings, the Redis store, serving
  a request in each mode and the TTFT stream (the semantic-cache and serving suites and
  tools/gpu_check).
"""
