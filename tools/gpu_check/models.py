"""The GPU host's models and cache store, from the carry folder (tools/gpu_check/prepare.py).

- all-MiniLM-L6-v2 in the shape harness's Embedder reads (`model[0].tokenizer`,
  `.auto_model`, `.max_seq_length`), so the embedding code is the harness's own; its weights
  were stored in float16 to fit the carry and are computed in float32.
- SmolLM2-135M-Instruct: its real weights when a converted folder is there (the harness's
  .harness/cache build, or GPU_CHECK_SMOLLM2_DIR), else a model built from its config with
  seeded random weights: the same layers, shapes, dtype and decode work, so its GPU memory
  and its time per token are SmolLM2's; its text is not.
- DictRedis: the few Redis commands harness's Store sends, in this process (no Redis on the
  host). A hit's time here has no network round trip in it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.base.paths import REPO_ROOT

CARRY = REPO_ROOT / ".harness" / "gpu-carry"
MINILM = "minilm"
SMOLLM2 = "smollm2"
SMOLLM2_ENV = "GPU_CHECK_SMOLLM2_DIR"


class MiniLM:
    """all-MiniLM-L6-v2 from the carry, as the SentenceTransformer that Embedder expects."""

    def __init__(self, carry: Path, device: str):
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = Path(carry) / MINILM
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.auto_model = AutoModel.from_pretrained(str(path)).float().to(device).eval()
        self.max_seq_length = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.device = torch.device(device)

    def __getitem__(self, i: int) -> MiniLM:
        if i != 0:
            raise IndexError(i)
        return self

    def get_embedding_dimension(self) -> int:
        return int(self.auto_model.config.hidden_size)


def embedder(carry: Path, device: str):
    from harness.mechanisms.semantic.embed import Embedder

    return Embedder(MiniLM(carry, device))


def real_smollm2_dir() -> Path | None:
    """A transformers folder of SmolLM2 with its weights, when this host has one."""
    named = os.environ.get(SMOLLM2_ENV)
    if named:
        return Path(named)
    found = sorted((REPO_ROOT / ".harness" / "cache").glob("smollm2-*-hf/model.safetensors"))
    return found[0].parent if found else None


def smollm2(carry: Path, device: str, seed: int = 0):
    """(tokenizer, model, what the weights are) of SmolLM2-135M-Instruct on `device`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    real = real_smollm2_dir()
    if real is not None:
        tok = AutoTokenizer.from_pretrained(str(real))
        model = AutoModelForCausalLM.from_pretrained(str(real))
        weights = f"real: {real}"
    else:
        path = Path(carry) / SMOLLM2
        tok = AutoTokenizer.from_pretrained(str(path))
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(path)))
        weights = (
            f"seeded random weights (seed {seed}) in SmolLM2-135M-Instruct's layers and shapes: the real "
            f"weights do not fit the carry; GPU memory and time per token are the model's, its text is not"
        )
    return tok, model.float().to(device).eval(), weights


class DictRedis:
    """The Redis commands harness's Store uses (GET; pipelined SET, SADD, EXPIRE, SMEMBERS,
    DEL), kept in this process: the GPU host has no Redis. TTLs are not kept (a check
    lasts minutes, the entries' TTL is longer)."""

    def __init__(self):
        self.kv: dict[str, bytes] = {}
        self.sets: dict[str, set] = {}

    def get(self, key: str):
        return self.kv.get(key)

    def pipeline(self, transaction: bool = False) -> _Pipe:
        return _Pipe(self)


class _Pipe:
    def __init__(self, r: DictRedis):
        self.r, self.ops = r, []

    def set(self, key, value, ex=None, nx=False):
        self.ops.append(lambda: None if nx and key in self.r.kv else self.r.kv.__setitem__(key, value) or True)

    def sadd(self, key, member):
        self.ops.append(lambda: self.r.sets.setdefault(key, set()).add(member))

    def expire(self, key, seconds):
        self.ops.append(lambda: True)

    def smembers(self, key):
        self.ops.append(lambda: set(self.r.sets.get(key, ())))

    def delete(self, key):
        self.ops.append(lambda: int(self.r.kv.pop(key, None) is not None or self.r.sets.pop(key, None) is not None))

    def execute(self) -> list:
        out = [op() for op in self.ops]
        self.ops = []
        return out
