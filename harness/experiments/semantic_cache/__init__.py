"""Semantic cache keys (source section 1) and template/entity keys (section 3.3).

Modules: datasets (GPTCache JSON, JSONL {query, group}, labelled pairs TSV), embed
(all-MiniLM-L6-v2), keys (exact hash, 64-bit random-hyperplane LSH, cosine NN), store
(entries in the Redis Cluster), metrics (hit rate, precision, recall), ttft (SmolLM2 time
to first token), entity_keys (template id + entity set, equal-key batching), drivers.
Heavy libraries (torch, transformers, sentence-transformers) are imported inside functions.
"""
