"""A stated model shape -> KV bytes per token, and memory sizes -> cache capacities.

KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes per element, as a
model's config gives them (num_hidden_layers, num_key_value_heads, head_dim); for a
Llama-3-8B-shaped model in fp16: 2 x 32 x 8 x 128 x 2 = 131,072 bytes (128 KiB).
The KV capacity of a GPU = (memory x utilisation - weight bytes) / KV bytes per token, the
way vLLM sizes its KV cache (gpu_memory_utilization, default 0.9), activations ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.errors import BadInput
from harness.model.driver_contract import Param

GIB = 2**30
GB = 10**9

SHAPE_PARAMS = {
    "model_name": Param(str, "Llama-3-8B shape", "a name for the stated model shape (shown in the report)"),
    "model_layers": Param(int, 32, "num_hidden_layers of the model's config", min=1),
    "model_kv_heads": Param(int, 8, "num_key_value_heads (grouped-query attention; = heads without GQA)", min=1),
    "model_head_dim": Param(int, 128, "head_dim (hidden_size / num_attention_heads)", min=1),
    "kv_dtype_bytes": Param(int, 2, "bytes per K/V element (2 = fp16/bf16, 1 = fp8)", min=1, max=8),
    "model_params_b": Param(float, 8.03, "parameters, in billions (for the weights' bytes)", min=0),
    "weight_dtype_bytes": Param(float, 2.0, "bytes per weight (2 = bf16)", min=0.1, max=8),
    "gpu_memory_gib": Param(float, 80.0, "GPU memory in GiB (an A100 80GB has 80 GiB)", min=0.1),
    "gpu_memory_utilization": Param(
        float, 0.9, "share of GPU memory the engine may use (vLLM's default 0.9)", min=0.01, max=1.0
    ),
}


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    kv_heads: int
    head_dim: int
    kv_dtype_bytes: int
    params_b: float
    weight_dtype_bytes: float

    @classmethod
    def from_params(cls, p: dict) -> "ModelShape":
        return cls(
            p["model_name"],
            p["model_layers"],
            p["model_kv_heads"],
            p["model_head_dim"],
            p["kv_dtype_bytes"],
            p["model_params_b"],
            p["weight_dtype_bytes"],
        )

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.kv_dtype_bytes

    @property
    def weight_bytes(self) -> float:
        return self.params_b * 1e9 * self.weight_dtype_bytes

    def tokens_in(self, nbytes: float) -> int:
        """KV tokens that fit in `nbytes`."""
        return int(max(0.0, nbytes) // self.kv_bytes_per_token)

    def gpu_kv_tokens(self, gpu_memory_gib: float, utilization: float) -> int:
        free = gpu_memory_gib * GIB * utilization - self.weight_bytes
        if free <= 0:
            raise BadInput(
                f"a {self.name} ({self.weight_bytes / GIB:.1f} GiB of weights) leaves no room for a KV cache "
                f"in {utilization:g} x {gpu_memory_gib:g} GiB; give a larger GPU or a smaller model"
            )
        return self.tokens_in(free)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.layers} layers x {self.kv_heads} KV heads x {self.head_dim} head dim x "
            f"{self.kv_dtype_bytes} B x 2 (K, V) = {self.kv_bytes_per_token:,} B of KV per token; weights "
            f"{self.weight_bytes / GIB:.1f} GiB"
        )


def blocks_of(tokens: int, block_size: int) -> int:
    """Whole blocks that fit in `tokens`."""
    return int(tokens // block_size)
