"""KV-cache tiers (L1 in-process, L2 Redis Cluster, L3 LMDB) and chunk codecs, measured
with the real KV cache of SmolLM2-135M-Instruct (source sections 3.2 and 4.1)."""
