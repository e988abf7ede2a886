"""The semantic cache: data sets (datasets.py), cache keys (keys.py), embeddings (embed.py), the
Redis store (store.py), serving a request in each mode (serve.py), the TTFT stream (stream.py),
its series (series.py), what its cases share (common.py) and its hit metrics (metrics.py)."""
