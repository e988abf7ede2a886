"""One engine in a fresh process: load, prewarm in one mode, the first request of each
shape bucket, then steady-state requests.

A process pays first-use costs once (thread pools, allocators, lazily loaded code and
CUDA modules); an engine opened after another one in the same process never pays them,
so "cold" would be measured warm. Each cold or prewarmed engine of the prewarm and
cold-start cases therefore runs here, in its own interpreter:

    run_fresh(SPEC, work)   # python -m harness.experiments.engine_hotload.fresh, through harness.model.child

SPEC: {backend, file, manifest (or null), options, buckets, tokens (an .npz of tokenizer
outputs written by workload.save_tokens), mode (cold | profile0 | all), steady_requests}.
The parent (`run_fresh`) tokenizes the texts, so this process imports no tokenizer.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.base.errors import HarnessError
from harness.experiments.engine_hotload.lifecycle import EngineError, first_request_order, open_engine, parse_buckets
from harness.experiments.engine_hotload.signing import Verifier
from harness.experiments.engine_hotload.workload import feeds_from_tokens
from harness.model import child

MODULE = "harness.experiments.engine_hotload.fresh"


def measure(spec: dict) -> dict:
    """Run one engine through its lifecycle in this process; returns timings (ms)."""
    import numpy as np

    buckets = parse_buckets(spec["buckets"])
    with np.load(spec["tokens"]) as z:
        tokens = {k: z[k] for k in z.files}
    verifier = None
    if spec.get("manifest"):
        verifier = Verifier(Path(spec["manifest"]))
    t0 = time.perf_counter()
    eng = open_engine(
        spec["backend"], Path(spec["file"]), verifier=verifier, label=spec["mode"], **spec.get("options", {})
    )
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
        out = {
            "mode": spec["mode"],
            "timings": dict(eng.timings),
            "open_ms": (opened - t0) * 1e3,
            "prewarm": [{"profile": r.profile, "bucket": r.bucket, "ms": r.ms} for r in warm],
            "first": firsts,
            "to_first_result_ms": total_ms,
            "steady": steady,
            "engine_bytes": eng.size_bytes,
            "io": [t.to_json() for t in io],
            "profiles": [p.to_json() for p in eng.profiles()],
            "memory": eng.memory(),
        }
    finally:
        eng.close()
    return out


def run_fresh(spec: dict, work: Path, timeout_s: float = 300.0) -> dict:
    """measure(spec) in a new interpreter (harness.model.child); raises EngineError with the
    child's last words (its stderr goes to `work` when it ends without an outcome)."""
    what = f"a fresh {spec['backend']} engine ({spec['mode']})"
    work.mkdir(parents=True, exist_ok=True)
    try:
        return child.run(MODULE, spec, timeout=timeout_s, what=what, stderr_path=work / f"fresh-{spec['mode']}.stderr")
    except (HarnessError, child.ChildCrashed) as e:
        raise EngineError(f"{what} failed: {e}") from None


def work(spec: dict, log) -> dict:
    """The child's work: one engine's lifecycle."""
    return measure(spec)


if __name__ == "__main__":
    sys.exit(child.serve(work))
