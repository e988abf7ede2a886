"""The lookup's int8 ONNX file of all-MiniLM-L6-v2: a dynamic per-channel int8 quantization of
the fused FP32 graph (`onnx_fused.minilm_onnx_fused`), the int8 arm of the `gptcache` case.

ONNX Runtime's `quantize_dynamic` (per_channel=True, signed int8 weights) stores every weight
matrix as int8 with one scale per output channel and quantizes the activations at run time:
each fused Attention becomes a QAttention, each other MatMul a DynamicQuantizeLinear +
MatMulInteger; the embeddings, LayerNorms and GELUs stay FP32. The same tokenizer, inputs and
output (the pooled, L2-normalised vector) as the FP32 graph, so `OnnxEmbedder.load(graph=
"int8")` runs it unchanged. A file without these integer kernels (a quantizer that did
nothing) is refused.

Built once from the fused file (about 2 s) and kept beside it under the cache folder; its
name carries a key over the weights, the config, both recipes and the tool versions.
"""

from __future__ import annotations

from pathlib import Path

from harness.base.files import build_once
from harness.experiments.semantic_cache.onnx_fused import FUSED_RECIPE, minilm_onnx_fused
from harness.infra.model_wheels import minilm_path
from harness.mechanisms.onnx_models.export import model_key
from harness.mechanisms.onnx_models.runtime import onnxruntime

INT8_RECIPE = "ort-quantize-dynamic-per-channel-qint8-v1"
INT8_OPS = ("DynamicQuantizeLinear", "MatMulInteger", "QAttention", "MatMul")


def int8_key(model_dir: Path) -> str:
    """A short key over the weights, the config, the fused and the int8 recipes and the tool versions."""
    import torch
    import transformers

    return model_key(
        model_dir,
        f"{FUSED_RECIPE}+{INT8_RECIPE}",
        (torch.__version__, transformers.__version__, onnxruntime().__version__),
    )


def minilm_onnx_int8(cache_dir: Path | None = None, log=lambda m: None) -> Path:
    """The int8 MiniLM ONNX file; quantized from the fused FP32 file on the first call, then kept."""
    fused = minilm_onnx_fused(cache_dir, log)
    out = fused.with_name(f"minilm-int8-{int8_key(minilm_path())}.onnx")

    def build(tmp: Path) -> None:
        quantize(fused, tmp)
        check_int8(tmp)

    return build_once(
        out,
        build,
        lambda: log(f"quantizing the fused all-MiniLM-L6-v2 graph to int8 once ({out.name}); later runs reuse it"),
    )


def quantize(src: Path, dst: Path) -> None:
    """Dynamic per-channel int8 quantization of `src` into `dst` (ONNX Runtime's quantizer)."""
    import logging

    import onnx

    onnxruntime()  # imported with its telemetry off before its quantization package loads it
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its advice to pre-process the model first, printed on every call
    try:
        # the fused kernels (com.microsoft domain) have no shape inference: their outputs are FP32
        quantize_dynamic(
            str(src),
            str(dst),
            per_channel=True,
            weight_type=QuantType.QInt8,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        quiet.setLevel(level)


def int8_counts(path: Path) -> dict[str, int]:
    """How many nodes of each integer kernel (and of FP32 MatMul) the graph has."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    ops = [n.op_type for n in m.graph.node]
    return {op: ops.count(op) for op in INT8_OPS}


def check_int8(path: Path, layers: int = 6) -> None:
    """The graph checks, and every layer's matrix products run on int8: one QAttention per
    layer, three MatMulInteger (attention output, both feed-forward products), no FP32 MatMul."""
    import onnx

    onnx.checker.check_model(onnx.load(str(path), load_external_data=False))
    counts = int8_counts(path)
    want = {
        "DynamicQuantizeLinear": counts["DynamicQuantizeLinear"] or 1,
        "MatMulInteger": 3 * layers,
        "QAttention": layers,
        "MatMul": 0,
    }
    if counts != want or not counts["DynamicQuantizeLinear"]:
        raise RuntimeError(
            f"the int8 graph has {counts}, expected {want} (with at least one DynamicQuantizeLinear): "
            f"the quantizer left FP32 matrix products"
        )
