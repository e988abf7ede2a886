"""The simulator against the scan-based references, request by request.

A pair matches when the per-block hits (what the policy found) and the per-request
leading runs (the prefix rule) are the same for every block and every request.
"""

from __future__ import annotations

import numpy as np

from harness.experiments.kv_trace import reference, tiers
from harness.mechanisms.kv_blocks import policies, prefix
from harness.mechanisms.kv_blocks.policies import Stream
from harness.mechanisms.kv_blocks.trace import KVTrace


def _row(name: str, cap, ttl_s, t: KVTrace, fast: np.ndarray, ref: np.ndarray) -> dict:
    rf, rr = prefix.leading_runs(fast, t.offsets), prefix.leading_runs(ref, t.offsets)
    diff_req = np.nonzero(rf != rr)[0]
    diff_blocks = int((fast != ref).sum())
    return {
        "policy": name,
        "capacity_blocks": cap,
        "ttl_s": ttl_s,
        "hits": int(rf.sum()),
        "reference_hits": int(rr.sum()),
        "differing_blocks": diff_blocks,
        "differing_requests": int(len(diff_req)),
        "first_differing_request": int(diff_req[0]) if len(diff_req) else None,
        "verdict": "match" if not diff_blocks and not len(diff_req) else "MISMATCH",
    }


def reference_tiers(t: KVTrace, stream: Stream, specs: list) -> np.ndarray:
    """Served tier per block, request by request: each tier looked up then touched or
    inserted; the highest tier holding a block serves it while the leading run lasts."""
    refs = [reference.make(s.policy, s.capacity_blocks, s.ttl_s) for s in specs]
    served = np.zeros(t.n_blocks, dtype=np.int8)
    for i in range(t.n_requests):
        run = True
        for j in range(int(t.offsets[i]), int(t.offsets[i + 1])):
            args = (stream.ids[j], j, stream.times[j], stream.parents[j], stream.next_use[j], stream.depths[j])
            held = [r.access(*args) for r in refs]
            tier = next((k + 1 for k, h in enumerate(held) if h), 0)
            if run and tier:
                served[j] = tier
            else:
                run = False
    return served


def compare_all(t: KVTrace, names: list[str], caps: list[int], ttl_s: float, seed: int) -> list[dict]:
    stream = Stream(t)
    rows = []
    for cap in caps:
        for name in names:
            fast = policies.block_hits(stream, name, cap, seed=seed)
            ref = reference.run(reference.make(name, cap, n=t.n_blocks, seed=seed), stream)
            rows.append(_row(name, cap, None, t, fast, ref))
        for name in policies.TTL_POLICIES:
            if name in names:
                fast = policies.block_hits(stream, name, cap, ttl_s=ttl_s)
                ref = reference.run(reference.make(name, cap, ttl_s), stream)
                rows.append(_row(name, cap, ttl_s, t, fast, ref))
    specs = [
        tiers.TierSpec("L1", min(caps), ttl_s / 2, "lru"),
        tiers.TierSpec("L2", max(caps), ttl_s, "lru"),
        tiers.TierSpec("L3", 4 * max(caps), 4 * ttl_s, "lru-3"),
    ]
    fast = tiers.simulate(stream, specs).served
    ref = reference_tiers(t, stream, specs)
    diff = np.nonzero(fast != ref)[0]
    req = t.block_request()
    rows.append(
        {
            "policy": "tiers (L1 lru, L2 lru, L3 lru-3)",
            "capacity_blocks": f"{min(caps)}/{max(caps)}/{4 * max(caps)}",
            "ttl_s": f"{ttl_s / 2:g}/{ttl_s:g}/{4 * ttl_s:g}",
            "hits": int((fast > 0).sum()),
            "reference_hits": int((ref > 0).sum()),
            "differing_blocks": int(len(diff)),
            "differing_requests": int(len(np.unique(req[diff]))),
            "first_differing_request": int(req[diff[0]]) if len(diff) else None,
            "verdict": "match" if not len(diff) else "MISMATCH",
        }
    )
    return rows
