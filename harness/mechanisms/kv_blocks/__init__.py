"""KV blocks: the Mooncake-format trace and its loader (trace.py), the prefix rule (prefix.py),
the block-level policies (policies.py) and their numba loops (compiled.py), and the simulator's
prediction of an engine's prefix-cache hit rate (hit_prediction.py)."""
