"""The semantic-cache suite: semantic cache keys (source section 1, claims C2-C4), the
dynamic threshold (section 2.2, C7) and template/entity keys with equal-key batching
(section 3.3, C16).

Modules: datasets (GPTCache JSON, JSONL {query, group}, labelled pairs TSV), embed
(all-MiniLM-L6-v2), keys (exact hash, 64-bit random-hyperplane LSH, cosine NN), store
(entries in the Redis Cluster), metrics (correct/wrong hits, precision, recall, calibration,
the C7 formula), c7_reference (C7's reference threshold, the formula written again
without the stream and without metrics.py), ttft (serving one request of SmolLM2),
entity_keys (template id + entity set), dispatcher (a real batching dispatcher), memory_probe (one serving mode in a fresh
process), onnx_embed (the query embedding from ONNX Runtime), onnx_fused (its fused graph),
gptcache_subject (GPTCache 0.1.44 as a subject), gptcache_accuracy (its calibration and test
counts beside the harness's exact NN), lookup_latency (one lookup at a time through every
subject, interleaved), gptcache_report (that case's metrics and series). The cases:
keys_case (semantic-cache-keys), gptcache_case (-gptcache), ttft_case (-ttft), memory_case
(-memory), perf_case (-embed-perf), entity_case (-entity-keys); drivers.py registers their
drivers (every driver of the suite is registered there). Heavy libraries (torch,
transformers, sentence-transformers) are imported inside functions.
"""
