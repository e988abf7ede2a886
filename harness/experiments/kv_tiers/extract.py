"""The KV cache of real prompts from SmolLM2-135M-Instruct, cut into prefix-keyed chunks.

A *chunk* is a fixed span of `chunk_tokens` tokens (32 by default) of every layer's K and
V: one float32 tensor of shape [layers, 2, kv_heads, chunk_tokens, head_dim]
(SmolLM2-135M: [30, 2, 3, 32, 64], 1,474,560 bytes), index 0 of the second axis is K,
index 1 is V. Chunk i of a prompt is keyed by a chained SHA-256 over the token ids of
the prefix it ends (tokens 0 .. (i+1)*chunk_tokens - 1): key_i = sha256(key_{i-1} ||
int32-LE token ids of chunk i), key_{-1} = b"smollm2-kv". Two prompts that share a
prefix therefore share the keys (and the bytes) of every whole chunk in it. Only whole
chunks are cut; the tail shorter than a chunk is never stored.

Prompts are real text: the `origin` sentences of data/gptcache_mock_data.json joined
in file order, tokenized, and cut to the wanted length (a prompt of N tokens is the first
N tokens, so prompts of different lengths share their prefixes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.errors import BadInput
from harness.base.paths import DATA_DIR
from harness.base.text_data import texts_from_records

DEFAULT_CHUNK_TOKENS = 32
DEFAULT_TEXT = DATA_DIR / "gptcache_mock_data.json"
KEY_SEED = b"smollm2-kv"


def chunk_keys(token_ids: list[int], chunk_tokens: int) -> list[str]:
    """Hex keys of the whole chunks of `token_ids`: chained SHA-256 of each prefix."""
    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be at least 1")
    import struct

    keys, h = [], KEY_SEED
    for start in range(0, len(token_ids) - chunk_tokens + 1, chunk_tokens):
        span = token_ids[start : start + chunk_tokens]
        h = hashlib.sha256(h + struct.pack(f"<{len(span)}i", *span)).digest()
        keys.append(h.hex())
    return keys


def prompt_text(path: Path = DEFAULT_TEXT) -> str:
    """The real text prompts are cut from: every `origin` of a GPTCache mock-data file."""
    return " ".join(texts_from_records(path, ("origin",), "kv-tiers prompts"))


def prompt_ids(tokenizer, n_tokens: int, path: Path = DEFAULT_TEXT) -> list[int]:
    """The first `n_tokens` token ids of the real text (BadInput when it is too short)."""
    ids = tokenizer(prompt_text(path), add_special_tokens=False)["input_ids"]
    if len(ids) < n_tokens:
        raise BadInput(f"{path}: the text has {len(ids)} tokens, fewer than the {n_tokens} asked for")
    return list(ids[:n_tokens])


@dataclass
class Chunk:
    key: str
    tensor: Any  # torch.Tensor [layers, 2, kv_heads, chunk_tokens, head_dim] (torch is imported lazily)


def cache_layers(cache) -> list[tuple]:
    """(K, V) per layer of a transformers DynamicCache (5.x: `.layers[i].keys/.values`)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return [(k, v) for k, v in cache]  # older tuple-style caches


def prefill(model, token_ids: list[int]):
    """Run the model over `token_ids`; returns (logits of the last position, DynamicCache)."""
    import torch

    with torch.inference_mode():
        x = torch.tensor([token_ids], dtype=torch.long, device=model.device)
        out = model(x, use_cache=True, logits_to_keep=1)
    cache = getattr(out, "cache", None)
    return out.logits[0, -1], (cache if cache is not None else out.past_key_values)


def split_chunks(cache, token_ids: list[int], chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> list[Chunk]:
    """Cut a cache of `token_ids` into whole chunks, each one contiguous tensor."""
    import torch

    layers = cache_layers(cache)
    keys = chunk_keys(token_ids, chunk_tokens)
    out = []
    for i, key in enumerate(keys):
        s = slice(i * chunk_tokens, (i + 1) * chunk_tokens)
        t = torch.stack([torch.stack([k[0, :, s, :], v[0, :, s, :]]) for k, v in layers]).contiguous()
        out.append(Chunk(key, t))
    return out


def assemble_cache(tensors: list, config=None):
    """A DynamicCache holding the concatenation of chunk tensors (in prefix order)."""
    import torch
    from transformers import DynamicCache

    whole = torch.cat(list(tensors), dim=3) if len(tensors) > 1 else tensors[0]
    cache = DynamicCache(config=config)
    for layer in range(whole.shape[0]):
        cache.update(whole[layer, 0].unsqueeze(0), whole[layer, 1].unsqueeze(0), layer)
    return cache


def continue_from(model, cache, suffix_ids: list[int]):
    """Logits of the last position after feeding `suffix_ids` on top of a restored cache."""
    import torch

    with torch.inference_mode():
        x = torch.tensor([suffix_ids], dtype=torch.long, device=model.device)
        out = model(x, cache=cache, use_cache=True, logits_to_keep=1)
    return out.logits[0, -1]
