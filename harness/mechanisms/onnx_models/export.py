"""ONNX files for the engine experiments, built once and kept under the cache folder.

- `minilm_onnx()`: all-MiniLM-L6-v2 (from harness.infra.model_wheels.minilm_path()) with its mean
  pooling and L2 normalisation, exported by the torch.export-based exporter
  (`dynamo=True`; the TorchScript exporter fails on BERT with transformers 5) with dynamic
  batch and sequence axes. Inputs `input_ids` and `attention_mask` (int64, [batch,
  sequence]); output `sentence_embedding` (float32, [batch, 384]). The file name carries
  the SHA-256 of the weights and the export recipe, so a new model or recipe gets a new
  file and an old one is never reused by mistake.
- `tiny_onnx()`: a small model built with onnx.helper whose inputs and outputs can be
  made to differ from MiniLM's (another input name, dtype or a fixed dimension), for the
  refused-swap case. It runs, it is just not a replacement for MiniLM.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.base.files import build_once
from harness.base.paths import CACHE_DIR
from harness.infra.model_wheels import minilm_path

EXPORT_RECIPE = "minilm-meanpool-l2-v1-opset18"  # change when the exported graph changes
OPSET = 18
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "sentence_embedding"
HIDDEN = 384


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def model_key(model_dir: Path, recipe: str = EXPORT_RECIPE, extra: tuple[str, ...] = ()) -> str:
    """A short key naming the weights, the config, the export recipe (and `extra`, e.g. tool versions)."""
    h = hashlib.sha256()
    h.update(recipe.encode())
    for v in extra:
        h.update(v.encode())
    for name in ("model.safetensors", "config.json"):
        h.update(name.encode())
        h.update(sha256_file(model_dir / name).encode())
    return h.hexdigest()[:16]


def engine_cache_dir(cache_dir: Path | None = None) -> Path:
    d = Path(cache_dir or CACHE_DIR) / "engine"
    d.mkdir(parents=True, exist_ok=True)
    return d


def minilm_onnx(cache_dir: Path | None = None, log=lambda m: None) -> Path:
    """The exported MiniLM ONNX file; exported on the first call (about 7 s), then kept."""

    src = minilm_path()
    out = engine_cache_dir(cache_dir) / f"minilm-{model_key(src)}.onnx"

    def build(tmp: Path) -> None:
        _export_minilm(src, tmp)
        _check_export(tmp)

    return build_once(
        out, build, lambda: log(f"exporting all-MiniLM-L6-v2 to ONNX once ({out.name}); later runs reuse it")
    )


DYNAMIC_AXES = {
    "input_ids": {0: "batch", 1: "sequence"},
    "attention_mask": {0: "batch", 1: "sequence"},
    OUTPUT: {0: "batch"},
}


def pooled_embedder(model_dir: Path, **load_kwargs):
    """(module, example inputs): the transformer with mean pooling and L2 normalisation, as
    sentence-transformers computes all-MiniLM-L6-v2's vectors; ready for torch.onnx.export."""
    import torch
    from transformers import AutoModel

    class Embedder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    bert = AutoModel.from_pretrained(str(model_dir), **load_kwargs).eval()
    example = (torch.ones((2, 8), dtype=torch.int64), torch.ones((2, 8), dtype=torch.int64))
    return Embedder(bert).eval(), example


def _export_minilm(model_dir: Path, path: Path) -> None:
    import torch

    model, example = pooled_embedder(model_dir)
    with torch.no_grad():
        torch.onnx.export(
            model,
            example,
            str(path),
            input_names=list(INPUTS),
            output_names=[OUTPUT],
            dynamic_axes=DYNAMIC_AXES,
            opset_version=OPSET,
            dynamo=True,
            external_data=False,
        )


def _check_export(path: Path) -> None:
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    onnx.checker.check_model(m)
    names = [i.name for i in m.graph.input]
    if names != list(INPUTS):
        raise RuntimeError(f"exported ONNX has inputs {names}, expected {list(INPUTS)}")


def tiny_onnx(
    path: Path,
    *,
    inputs: tuple[tuple[str, str, tuple], ...] | None = None,
    output: tuple[str, str, tuple] = (OUTPUT, "float32", ("batch", HIDDEN)),
    scale: float = 1.0,
) -> Path:
    """A small runnable model: output = mean over the sequence of (input_ids * the other
    inputs) projected to as many values as the output's last dimension (HIDDEN by default). `inputs` are (name, dtype, shape) with dims as ints
    (fixed) or strings (symbolic); the default mirrors MiniLM's inputs. `scale` multiplies the
    projection's weights: another `scale` is another model with the same IO and other answers."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inputs = inputs or (
        ("input_ids", "int64", ("batch", "sequence")),
        ("attention_mask", "int64", ("batch", "sequence")),
    )
    types = {"int64": TensorProto.INT64, "int32": TensorProto.INT32, "float32": TensorProto.FLOAT}
    vis = [helper.make_tensor_value_info(n, types[t], list(s)) for n, t, s in inputs]
    out_name, out_type, out_shape = output
    nodes, names = [], []
    for n, _dtype, _ in inputs:
        nodes.append(helper.make_node("Cast", [n], [f"{n}_f"], to=TensorProto.FLOAT))
        names.append(f"{n}_f")
    prod = names[0]
    for i, other in enumerate(names[1:]):
        nodes.append(helper.make_node("Mul", [prod, other], [f"prod{i}"]))
        prod = f"prod{i}"
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    width = out_shape[-1] if isinstance(out_shape[-1], int) else HIDDEN
    w = numpy_helper.from_array((np.arange(width, dtype=np.float32) * np.float32(scale) / width).reshape(1, width), "w")
    nodes.append(helper.make_node("ReduceMean", [prod, "axes"], ["pooled"], keepdims=1))
    nodes.append(helper.make_node("MatMul", ["pooled", "w"], ["proj"]))
    nodes.append(helper.make_node("Cast", ["proj"], [out_name], to=types[out_type]))
    graph = helper.make_graph(
        nodes,
        "tiny",
        vis,
        [helper.make_tensor_value_info(out_name, types[out_type], list(out_shape))],
        initializer=[axes, w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


VARIANT_SEED = 20240314  # the second model version's weights: the first's, with this seed's noise added


def perturbed_onnx(src: Path, dst: Path, rel_noise: float = 0.05) -> Path:
    """A second version of the model in `src` (written once to `dst`): the same graph and IO,
    its largest float weight tensor with seeded Gaussian noise added (rel_noise x that tensor's
    standard deviation), as a retrained model would differ. Its answers differ from the
    original's, so a client can tell which of the two served a request (the hot swap's
    output fingerprint); a uniform scale would not do (layer and L2 norms cancel it)."""

    def build(tmp: Path) -> None:
        import numpy as np
        import onnx
        from onnx import numpy_helper

        m = onnx.load(str(src), load_external_data=True)
        floats = [t for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
        if not floats:
            raise RuntimeError(f"{Path(src).name} has no float weights to make a second version of")
        big = max(floats, key=lambda t: int(np.prod(t.dims)) if t.dims else 1)
        w = numpy_helper.to_array(big)
        noise = np.random.default_rng(VARIANT_SEED).standard_normal(w.shape).astype(w.dtype)
        big.CopyFrom(numpy_helper.from_array(w + noise * np.float32(rel_noise * float(w.std() or 1.0)), big.name))
        onnx.save(m, str(tmp))

    return build_once(Path(dst), build)
