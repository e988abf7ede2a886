"""Eviction policies under long-tailed token traffic (the source's section 4.2, claims C18/C19).

- traces.py: token traces from real text (a real tokenizer) and synthetic Zipf traces,
  the Zipf fit, the head / long-tail definitions.
- reference.py: small pure-Python policies (LRU, LFU, LRU-K, ARC, S3-FIFO, W-TinyLFU, the
  hybrid, Belady/OPT) used to cross-check libCacheSim on short traces (LRU-K's and the
  hybrid's are ../lruk_reference.py's, shared with the kv-trace suite).
- simulate.py: libCacheSim runs (per-request hits, miss-ratio curves, requests/s) and
  the fast implementations of the hybrid (LRU-K's loop in ../lruk.py) and the optimal bound.
- redis_replay.py: the trace replayed against real redis-server processes.
- drivers.py: the harness drivers (eviction-trace, eviction-simulate, ...).

Heavy imports (libcachesim, tokenizers, redis) stay inside functions.
"""
