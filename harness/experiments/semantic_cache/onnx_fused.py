"""The lookup's own ONNX file of all-MiniLM-L6-v2: one graph of fused transformer kernels.

`minilm_onnx_fused()` exports the model (mean pooling and L2 normalisation in the graph, the
same module as the engine suite's export) with torch's TorchScript exporter and eager
attention, then runs ONNX Runtime's transformer optimizer on it (`model_type="bert"`, FP32):
the embeddings become one EmbedLayerNormalization, each layer's attention one Attention
kernel, residual + LayerNorm SkipLayerNormalization, bias + GELU BiasGelu. The optimizer
recognises these patterns in the TorchScript graph only (on the engine suite's dynamo export it
fuses BiasGelu alone), so this file is its own export; the engine suite's `minilm_onnx` and
what it measures are untouched. 96 nodes instead of 324.

The file lives beside the engine suite's export under the cache folder, built once (about
10 s). Its name carries a key over the weights, the config, this recipe and the versions of
torch, transformers and onnxruntime that made it, so a change to any of them builds a new
file. A file whose fusion did not happen (a future exporter or optimizer) is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.base.files import build_once
from harness.infra.model_wheels import minilm_path
from harness.mechanisms.onnx_models.export import (
    DYNAMIC_AXES,
    INPUTS,
    OUTPUT,
    engine_cache_dir,
    model_key,
    pooled_embedder,
)
from harness.mechanisms.onnx_models.runtime import onnxruntime

FUSED_RECIPE = "minilm-meanpool-l2-torchscript-eager-ortfuse-bert-fp32-v1-opset17"
OPSET = 17
FUSED_OPS = ("EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu")


def fused_key(model_dir: Path) -> str:
    """A short key over the weights, the config, the recipe and the tool versions."""
    import torch
    import transformers

    return model_key(model_dir, FUSED_RECIPE, (torch.__version__, transformers.__version__, onnxruntime().__version__))


def minilm_onnx_fused(cache_dir: Path | None = None, log=lambda m: None) -> Path:
    """The fused MiniLM ONNX file; built on the first call, then kept."""
    src = minilm_path()
    out = engine_cache_dir(cache_dir) / f"minilm-fused-{fused_key(src)}.onnx"

    def build(tmp: Path) -> None:
        raw = out.with_name(out.name + ".export.tmp")
        try:
            _export_torchscript(src, raw)
            _fuse(raw, tmp, json.loads((src / "config.json").read_text()))
            check_fused(tmp)
        finally:
            raw.unlink(missing_ok=True)

    return build_once(
        out,
        build,
        lambda: log(f"exporting all-MiniLM-L6-v2 to a fused ONNX graph once ({out.name}); later runs reuse it"),
    )


def _export_torchscript(model_dir: Path, path: Path) -> None:
    import warnings

    import torch

    model, example = pooled_embedder(model_dir, attn_implementation="eager")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on python-side shape checks
        torch.onnx.export(
            model,
            example,
            str(path),
            input_names=list(INPUTS),
            output_names=[OUTPUT],
            dynamic_axes=DYNAMIC_AXES,
            opset_version=OPSET,
            dynamo=False,
        )


def _fuse(src: Path, dst: Path, config: dict) -> None:
    import logging

    onnxruntime()  # imported with its telemetry off before its optimizer package loads it
    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    model = optimize_model(
        str(src),
        model_type="bert",
        num_heads=int(config["num_attention_heads"]),
        hidden_size=int(config["hidden_size"]),
        opt_level=0,
        use_gpu=False,
    )
    model.save_model_to_file(str(dst))


def fused_counts(path: Path) -> dict[str, int]:
    """How many nodes of each fused kernel the graph has."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    ops = [n.op_type for n in m.graph.node]
    return {op: ops.count(op) for op in FUSED_OPS}


def check_fused(path: Path, layers: int = 6) -> None:
    """The graph checks, has MiniLM's inputs and output, and every layer was fused."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    onnx.checker.check_model(m)
    names = [i.name for i in m.graph.input]
    outs = [o.name for o in m.graph.output]
    if names != list(INPUTS) or outs != [OUTPUT]:
        raise RuntimeError(f"fused ONNX has inputs {names} and outputs {outs}, expected {list(INPUTS)} and {[OUTPUT]}")
    counts = fused_counts(path)
    want = {"EmbedLayerNormalization": 1, "Attention": layers, "SkipLayerNormalization": 2 * layers, "BiasGelu": layers}
    if counts != want:
        raise RuntimeError(f"ONNX Runtime's optimizer fused {counts}, expected {want}: the export's patterns changed")
