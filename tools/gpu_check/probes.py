"""What the GPU check's steps run, each in a fresh process (`python -m tools.gpu_check
--probe KIND --job JOB.json --result OUT.json`): the query stream, one C4 memory mode, the
in-process TTFT case, one CUDA-graph prewarm cold start. Each takes its job (a dict) and
returns a JSON-able dict; the parent times it out and writes what it returns."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from harness.mechanisms.semantic import keys
from harness.mechanisms.semantic import stream as semantic_stream
from harness.mechanisms.semantic.serve import MODES, generate, serve
from harness.mechanisms.semantic.store import Entry, Store
from tools.gpu_check import models

MIB = 2**20


def case_params(**over) -> dict:
    """The TTFT/memory cases' parameters at their defaults, on CUDA, with `over`."""
    p = {k: v.default for k, v in semantic_stream.STREAM_PARAMS.items()}
    p.update({"device": "cuda", "torch_threads": 1}, **over)
    return p


def stream(job: dict) -> dict:
    """The cases' query stream, the inserts' LSH signatures and the calibrated radius
    (semantic_stream.prepare, all-MiniLM-L6-v2 on CUDA)."""
    p = case_params(**job["params"])
    emb = models.embedder(Path(job["carry"]), job.get("device", "cuda"))
    s = semantic_stream.prepare(p, emb, lambda m: None)
    return {
        "params": p,
        "requests": [list(x) for x in s.requests],
        "inserts": [list(x) for x in s.workload.inserts],
        "insert_sigs": [int(x) for x in s.insert_sigs],
        "radius": s.radius,
        "calibration_queries": s.calibration_queries,
    }


def nvml_process_bytes() -> int | None:
    """GPU memory NVML counts for this process (None where NVML cannot say)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
            return next((int(x.usedGpuMemory) for x in procs if x.pid == os.getpid() and x.usedGpuMemory), None)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def _stores(s: dict, p: dict, prefix: str) -> dict:
    entries = [Entry(lab, f"[cached answer of entry {i}]") for i, (_, lab) in enumerate(s["inserts"])]
    client = models.DictRedis()
    hash_store = Store(client, p["ttl_s"], p["bands"], prefix=prefix)
    hash_store.put_many([(keys.exact_key(t, True), e) for (t, _), e in zip(s["inserts"], entries)])
    sem = Store(client, p["ttl_s"], p["bands"], prefix=prefix)
    sem.put_signatures(np.array(s["insert_sigs"], dtype=np.uint64), entries)
    return {
        "hash_cache": hash_store,
        "semantic_cache": sem,
        "oracle_cache": Store(client, p["ttl_s"], p["bands"], prefix="orc"),
    }


def memory(job: dict) -> dict:
    """One mode of claim C4's memory case (memory_probe's work, on CUDA, the store in this
    process): SmolLM2 held from the start, one warm-up generation, the mode's model (the
    semantic cache also holds all-MiniLM-L6-v2), the stream served; torch's peak allocation
    and what NVML counts for this process."""
    import torch

    s, mode, dev = job["stream"], job["mode"], job.get("device", "cuda")
    p = s["params"]
    tok, model, weights = models.smollm2(Path(job["carry"]), dev)
    generate(tok, model, s["requests"][0][0], p["max_new_tokens"])
    held = torch.ones(job["extra_mb"] * MIB, dtype=torch.uint8, device=dev) if mode == "extra_allocation" else None
    emb = models.embedder(Path(job["carry"]), dev) if mode == "semantic_cache" else None
    proj = keys.projection(emb.dim, p["lsh_seed"]) if emb is not None else None
    store = _stores(s, p, "mem").get(mode)
    serve_as = "no_cache" if mode == "extra_allocation" else mode
    outcomes = [
        serve(
            serve_as,
            text,
            label,
            lambda: (tok, model),
            store,
            p["max_new_tokens"],
            emb=emb,
            proj=proj,
            radius=s["radius"],
            signature=p["signature"],
        )[1]
        for text, label in s["requests"]
    ]
    cuda = dev == "cuda"  # (cpu: the CPU self-test of tests/suites/engine_hotload/test_gpu_check.py)
    if cuda:
        torch.cuda.synchronize()
    out = {
        "mode": mode,
        "gpu_peak_alloc": int(torch.cuda.max_memory_allocated()) if cuda else None,
        "gpu_peak_reserved": int(torch.cuda.max_memory_reserved()) if cuda else None,
        "nvml_process": nvml_process_bytes() if cuda else None,
        "outcomes": outcomes,
        "smollm2_weights": weights,
    }
    del held
    return out


class _Ctx:
    """What semantic_stream.outcome_of reads of a CaseContext: where its raw CSV goes."""

    def __init__(self, folder: Path):
        self.folder = folder

    def raw_path(self, name: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder / name


def ttft(job: dict) -> dict:
    """The in-process TTFT case (semantic-cache/ttft, claim C3) on CUDA: the four modes
    interleaved per query in rotating order, its own metrics (semantic_stream.outcome_of)."""
    s, dev = job["stream"], job.get("device", "cuda")
    p = s["params"]
    carry = Path(job["carry"])
    tok, model, weights = models.smollm2(carry, dev)
    emb = models.embedder(carry, dev)
    proj = keys.projection(emb.dim, p["lsh_seed"])
    stores = _stores(s, p, "sem")
    generate(tok, model, s["requests"][0][0], 2)  # warm-up
    emb.encode_one(s["requests"][0][0])
    semantic_stream.fill_oracle(stores["oracle_cache"], [tuple(r) for r in s["requests"]], emb, proj)
    rows, deadline = [], time.monotonic() + job["serve_s"]
    for n, (text, label) in enumerate(s["requests"]):
        if time.monotonic() > deadline:
            break
        k = n % len(MODES)
        for pos, mode in enumerate(MODES[k:] + MODES[:k]):
            t, outcome = serve(
                mode,
                text,
                label,
                lambda: (tok, model),
                stores.get(mode),
                p["max_new_tokens"],
                emb=emb,
                proj=proj,
                radius=s["radius"],
                signature=p["signature"],
            )
            rows.append([n, pos, mode, 1000 * t, outcome])
    served = rows[-1][0] + 1 if rows else 0
    st = semantic_stream.Stream(
        _Workload([tuple(x) for x in s["inserts"]]),
        [tuple(r) for r in s["requests"][:served]],
        None,
        s["radius"],
        s["calibration_queries"],
    )
    out = semantic_stream.outcome_of(_Ctx(Path(job["out"])), p, st, rows, dev)
    return {
        "metrics": {k: {"value": m.value, "unit": m.unit} for k, m in out.metrics.items()},
        "requests_served": served,
        "requests_planned": len(s["requests"]),
        "smollm2_weights": weights,
    }


class _Workload:
    def __init__(self, inserts: list):
        self.inserts = inserts


def graph_prewarm(job: dict) -> dict:
    """One fresh engine of the CUDA-graph prewarm arm (engine-hotload's prewarm case, torch on
    CUDA): SmolLM2 loaded, then the arm's prewarm (cold: none; eager: one forward; graph: the
    forward captured as a CUDA graph at the bucket's shape), then the first request and the
    steady ones at that shape, each synchronised."""
    import torch

    arm, batch, seq = job["arm"], job["batch"], job["seq"]
    t0 = time.perf_counter()
    tok, model, weights = models.smollm2(Path(job["carry"]), "cuda")
    torch.cuda.synchronize()
    load_ms = 1000 * (time.perf_counter() - t0)
    gen = torch.Generator().manual_seed(job["seed"])
    vocab = model.config.vocab_size
    reqs = [torch.randint(0, vocab, (batch, seq), generator=gen).cuda() for _ in range(job["steady"] + 1)]
    step, prewarm_ms = _prewarm(arm, model, reqs[0])
    times = []
    for r in reqs:
        t = time.perf_counter()
        step(r)
        torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - t))
    return {
        "arm": arm,
        "load_ms": load_ms,
        "prewarm_ms": prewarm_ms,
        "first_ms": times[0],
        "steady_ms": times[1:],
        "smollm2_weights": weights,
    }


def _prewarm(arm: str, model, example):
    """(one request's step, the prewarm's time in ms) for the arm."""
    import torch

    def eager(ids):
        with torch.no_grad():
            return model(input_ids=ids, use_cache=False).logits[:, -1].argmax(-1)

    t = time.perf_counter()
    if arm == "cold":
        return eager, 0.0
    if arm == "eager":
        eager(example)
        torch.cuda.synchronize()
        return eager, 1000 * (time.perf_counter() - t)
    static_in = example.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up on a side stream before capture, as torch's docs ask
            eager(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = eager(static_in)
    torch.cuda.synchronize()

    def replay(ids):
        static_in.copy_(ids)
        graph.replay()
        return static_out.clone()

    return replay, 1000 * (time.perf_counter() - t)


PROBES = {"stream": stream, "memory": memory, "ttft": ttft, "graph_prewarm": graph_prewarm}
