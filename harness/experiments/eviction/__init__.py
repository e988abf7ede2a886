"""Eviction policies under long-tailed token traffic (the source's section 4.2, claims C18/C19).

- drivers.py: the harness drivers (eviction-trace, eviction-simulate, ...), each calling its case's module:
  trace_case.py, simulate_case.py (with calibrated_size.py), crosscheck_case.py, redis_case.py;
  common.py: the trace parameters and the trace every case builds.
- redis_replay.py: the trace replayed against real redis-server processes.
- standin.py: the stand-ins and their instruments.
- metrics.py, series.py, view.py: what the drivers declare and write, and its view.

The traces (token traces from real text through a real tokenizer, synthetic Zipf traces, the
Zipf fit, head and tail), the libCacheSim runs, the hybrid's and OPT's fast loops and the
pure-Python references that cross-check them are in harness/mechanisms/cache_policies/, shared
with the kv-trace and cold-start suites.

Heavy imports (libcachesim, tokenizers, redis) stay inside functions.
"""
