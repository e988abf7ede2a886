"""One serving mode in a fresh process, for claim C4's memory peaks.

Run through `harness.model.child` (`child.run(MODULE, job, ...)`): the job names the mode, the stream, the inserts' signatures, the radius and the target; the process loads
what the mode needs (all-MiniLM-L6-v2 for the semantic cache, up front), fills its cache in
Redis, serves the stream with the same decode work as every other mode, and writes its
peaks: RSS (sampled every 10 ms, and the kernel's ru_maxrss), and on a GPU torch's peak
allocation and NVML's used memory. The target's password comes in the environment
(harness.infra.target.Target.to_env()), never on the command line.

Every mode holds SmolLM2 (and the semantic cache all-MiniLM-L6-v2) from its start, and runs
one warm-up generation before the sampled window opens (the weights are memory-mapped: only
a forward pass makes them resident), whether or not any request reaches the model later: a
process whose requests all hit still holds the model, as a server that has served before, so
a difference between the modes is the cache's (a hit spares a generation's working memory).
Mode "extra_allocation" is the instrument: the no-cache mode holding a known extra
allocation (`extra_mb`, written so that every page is resident; on a GPU a tensor of that
size on the device), which the probe must see. The peaks come back as the child's outcome.
"""

from __future__ import annotations

import resource
import sys

from harness.infra.model_wheels import smollm2
from harness.infra.target import Target
from harness.mechanisms.semantic import keys
from harness.mechanisms.semantic.embed import Embedder
from harness.mechanisms.semantic.serve import PeakRSS, generate, nvml_used_bytes, serve
from harness.mechanisms.semantic.store import Entry, Store
from harness.model import child
from harness.model.driver_helpers import torch_threads

MODULE = "harness.experiments.semantic_cache.memory_probe"


def extra_allocation(mb: int, device: str):
    """`mb` MiB held for the process's life: written bytes in host memory (every page
    resident), and on a GPU the same size on the device as well."""
    import numpy as np

    host = np.ones(mb * 2**20, dtype=np.uint8)
    if device != "cuda":
        return host
    import torch

    return host, torch.ones(mb * 2**20, dtype=torch.uint8, device="cuda")


def main(job: dict, log) -> dict:
    """The child's work: serve the job's stream in its mode and return the peaks."""
    import numpy as np

    mode, dev = job["mode"], job["device"]
    target = Target.from_env(job["target"])
    target.username = job.get("username")
    with torch_threads(job["torch_threads"]):
        import torch

        tok, model = smollm2(dev)  # every mode holds the model from its start
        generate(tok, model, job["requests"][0][0], job["max_new_tokens"])  # its weights resident, as a server's
        held = extra_allocation(job["extra_mb"], dev) if mode == "extra_allocation" else None
        emb = proj = None
        if mode == "semantic_cache":
            emb = Embedder.load(dev)
            proj = keys.projection(emb.dim, job["lsh_seed"])
        client = target.cluster_client()
        store = Store(client, job["ttl_s"], job["bands"], prefix=job["prefix"])
        inserts = [(t, Entry(lab, f"[cached answer of entry {i}]")) for i, (t, lab) in enumerate(job["inserts"])]
        if mode == "hash_cache":
            store.put_many([(keys.exact_key(t, True), e) for t, e in inserts])
        elif mode == "semantic_cache":
            store.put_signatures(np.array(job["insert_sigs"], dtype=np.uint64), [e for _, e in inserts])
        serve_as = "no_cache" if mode == "extra_allocation" else mode
        outcomes = []
        try:
            with PeakRSS() as rss:
                for text, label in job["requests"]:
                    outcomes.append(
                        serve(
                            serve_as,
                            text,
                            label,
                            lambda: (tok, model),
                            store,
                            job["max_new_tokens"],
                            emb=emb,
                            proj=proj,
                            radius=job["radius"],
                            signature=job["signature"],
                        )[1]
                    )
        finally:
            store.clear()
            client.close()
        gpu = int(torch.cuda.max_memory_allocated()) if dev == "cuda" else None
        nvml = nvml_used_bytes() if dev == "cuda" else None
        del held
    return {
        "mode": mode,
        "rss_peak": rss.peak,
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "gpu_peak_alloc": gpu,
        "nvml_used": nvml,
        "outcomes": outcomes,
    }


if __name__ == "__main__":
    sys.exit(child.serve(main))
