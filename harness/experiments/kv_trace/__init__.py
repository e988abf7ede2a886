"""Real KV-cache traffic (suite `kv-trace`): production traces of KV-block hashes, a
prefix-cache simulator, and the source's cache claims judged on real requests (C1, C5,
C17, C18, C19).

The simulator's core is a mechanism (harness/mechanisms/kv_blocks/), shared with the
serving suite:

- kv_blocks/trace.py: Mooncake-format JSONL, streamed and validated (BadInput naming file,
  line, field).
- kv_blocks/prefix.py: the prefix rule (a request's hit is the leading run of its blocks
  found in the cache) and the token / block weighting.
- kv_blocks/policies.py: per-block hits of every policy on the flat block stream:
  libCacheSim's LRU, LFU, ARC, S3-FIFO and LRU-K; its own: leaf-first LRU (vLLM / SGLang),
  LRU and LRU-K with TTL expiry on the trace's timestamps, seeded random eviction, Belady's
  MIN with the prefix rule, and the eviction suite's hybrid.
- kv_blocks/hit_prediction.py: predicted_hit_rate(), the prediction a real engine's prefix
  cache is held to.

This suite's own modules:

- reference.py: small scan-based references of the simulator's policies, request by request.
- tiers.py: the source's three tiers (L1 / L2 / L3 sized for a model shape, TTLs, LRU-K).
- analyses.py: the capacity curve, reuse (C1), the head share (C19) and their controls.
- recount.py: the independent reference of every judged number (reference.<metric>): the
  trace file read again, plain dict caches, nothing shared with the simulator.
- drivers.py: the harness drivers (kv-trace-simulate, kv-trace-crosscheck).

libcachesim is imported inside functions (kv_blocks/policies.py, cache_policies/sim.py).
"""
