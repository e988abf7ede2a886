"""One engine in a fresh process: load, prewarm in one mode, the first request of each
shape bucket, then steady-state requests.

A process pays first-use costs once (thread pools, allocators, lazily loaded code and
CUDA modules); an engine opened after another one in the same process never pays them,
so "cold" would be measured warm. Each cold or prewarmed engine of the prewarm and
cold-start cases therefore runs here, in its own interpreter:

    python -m harness.experiments.engine_hotload.fresh SPEC.json   # prints one JSON line

SPEC: {backend, file, manifest (or null), options, buckets, tokens (an .npz of tokenizer
outputs written by workload.save_tokens), mode (cold | profile0 | all), steady_requests}.
The parent (`run_fresh`) tokenizes the texts, so this process imports no tokenizer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

MODULE = "harness.experiments.engine_hotload.fresh"


def measure(spec: dict) -> dict:
    """Run one engine through its lifecycle in this process; returns timings (ms)."""
    import numpy as np

    from harness.experiments.engine_hotload.lifecycle import first_request_order, open_engine, parse_buckets
    from harness.experiments.engine_hotload.workload import feeds_from_tokens

    buckets = parse_buckets(spec["buckets"])
    with np.load(spec["tokens"]) as z:
        tokens = {k: z[k] for k in z.files}
    verifier = None
    if spec.get("manifest"):
        from harness.experiments.engine_hotload.signing import Verifier

        verifier = Verifier(Path(spec["manifest"]))
    t0 = time.perf_counter()
    eng = open_engine(spec["backend"], Path(spec["file"]), verifier=verifier, label=spec["mode"],
                      **spec.get("options", {}))
    opened = time.perf_counter()
    io = eng.io()

    def feeds(bucket, variant):
        return feeds_from_tokens(io, bucket, tokens, variant)

    try:
        warm = eng.prewarm(buckets, lambda b: feeds(b, 0), spec["mode"])
        order = first_request_order(eng.profiles(), io, buckets)
        firsts = []
        for b in order:
            f = feeds(b, 1)
            t = time.perf_counter()
            eng.infer(f)
            firsts.append({"bucket": b.name, "ms": (time.perf_counter() - t) * 1e3})
        total_ms = (time.perf_counter() - t0) * 1e3
        steady: dict[str, list[float]] = {b.name: [] for b in buckets}
        for i in range(spec.get("steady_requests", 0)):
            for b in buckets:
                f = feeds(b, i + 2)
                t = time.perf_counter()
                eng.infer(f)
                steady[b.name].append((time.perf_counter() - t) * 1e3)
        out = {"mode": spec["mode"], "timings": dict(eng.timings), "open_ms": (opened - t0) * 1e3,
               "prewarm": [{"profile": r.profile, "bucket": r.bucket, "ms": r.ms} for r in warm],
               "first": firsts, "to_first_result_ms": total_ms, "steady": steady,
               "engine_bytes": eng.size_bytes, "io": [t.to_json() for t in io],
               "profiles": [p.to_json() for p in eng.profiles()], "memory": eng.memory()}
    finally:
        eng.close()
    return out


def run_fresh(spec: dict, work: Path, timeout_s: float = 300.0) -> dict:
    """measure(spec) in a new interpreter; raises EngineError with the child's last words."""
    from harness.experiments.engine_hotload.lifecycle import EngineError
    from harness.paths import REPO_ROOT

    work.mkdir(parents=True, exist_ok=True)
    path = work / f"fresh-{spec['mode']}-{os.getpid()}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, "-m", MODULE, str(path)], capture_output=True, text=True,
                              timeout=timeout_s, env=env, cwd=str(REPO_ROOT))
    except subprocess.TimeoutExpired:
        raise EngineError(f"a fresh {spec['backend']} engine ({spec['mode']}) did not finish within {timeout_s:g} s") from None
    finally:
        path.unlink(missing_ok=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise EngineError(f"a fresh {spec['backend']} engine ({spec['mode']}) failed (exit {proc.returncode}): "
                          + " | ".join(tail))
    return json.loads(lines[-1])


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    print(json.dumps(measure(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
