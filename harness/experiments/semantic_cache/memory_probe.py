"""One serving mode in a fresh process, for claim C4's memory peaks.

`python -m harness.experiments.semantic_cache.memory_probe JOB.json OUT.json`: JOB names the
mode, the stream, the inserts' signatures, the radius and the target; the process loads
what the mode needs (all-MiniLM-L6-v2 for the semantic cache, up front), fills its cache in
Redis, serves the stream with the same decode work as every other mode, and writes its
peaks: RSS (sampled every 10 ms, and the kernel's ru_maxrss), and on a GPU torch's peak
allocation and NVML's used memory. The target's password comes in the environment
(harness.runner.PASSWORD_ENV), never on the command line.

SmolLM2 is loaded when the first request that the model must serve arrives (a miss, a wrong
hit, or any request without a cache), as a server that loads its model on demand would: a
process whose requests all hit the cache never holds the model. Its load falls inside the
sampled window, so a process that needs it reports its memory in the peak.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path


class LazyModel:
    """SmolLM2's tokenizer and model, loaded at the first get(): serve() asks for them only
    for a request the model serves."""

    def __init__(self, device: str):
        self.device = device
        self._tok = self._model = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def get(self):
        if self._model is None:
            from harness.models import smollm2

            self._tok, self._model = smollm2(self.device)
        return self._tok, self._model


def main(job_path: str, out_path: str) -> int:
    import numpy as np

    from harness.experiments.semantic_cache import keys
    from harness.experiments.semantic_cache.store import Entry, Store
    from harness.experiments.semantic_cache.ttft import PeakRSS, nvml_used_bytes, serve
    from harness.runner import PASSWORD_ENV
    from harness.target import Target
    from harness.toolkit import torch_threads

    job = json.loads(Path(job_path).read_text())
    mode, dev = job["mode"], job["device"]
    target = Target.from_json(job["target"])
    target.password = os.environ.get(PASSWORD_ENV) or None
    target.username = job.get("username")
    with torch_threads(job["torch_threads"]):
        import torch

        emb = proj = None
        if mode == "semantic_cache":
            from harness.experiments.semantic_cache.embed import Embedder

            emb = Embedder.load(dev)
            proj = keys.projection(emb.dim, job["lsh_seed"])
        client = target.cluster_client()
        store = Store(client, job["ttl_s"], job["bands"], prefix=job["prefix"])
        inserts = [(t, Entry(lab, f"[cached answer of entry {i}]")) for i, (t, lab) in enumerate(job["inserts"])]
        if mode == "hash_cache":
            store.put_many([(keys.exact_key(t, True), e) for t, e in inserts])
        elif mode == "semantic_cache":
            store.put_signatures(np.array(job["insert_sigs"], dtype=np.uint64), [e for _, e in inserts])
        outcomes = []
        lm = LazyModel(dev)
        try:
            with PeakRSS() as rss:
                for text, label in job["requests"]:
                    outcomes.append(serve(mode, text, label, lm.get, store, job["max_new_tokens"],
                                          emb=emb, proj=proj, radius=job["radius"],
                                          signature=job["signature"])[1])
        finally:
            store.clear()
            client.close()
        gpu = int(torch.cuda.max_memory_allocated()) if dev == "cuda" else None
    result = {"mode": mode, "model_loaded": lm.loaded, "rss_peak": rss.peak, "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "gpu_peak_alloc": gpu, "nvml_used": nvml_used_bytes() if dev == "cuda" else None, "outcomes": outcomes}
    Path(out_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
