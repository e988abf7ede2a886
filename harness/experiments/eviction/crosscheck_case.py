"""eviction-crosscheck: libCacheSim and the fast hybrid/OPT against the pure-Python references
(mechanisms/cache_policies/reference.py), request by request, on a short trace."""

from __future__ import annotations

import numpy as np

from harness.mechanisms.cache_policies import reference, traces
from harness.mechanisms.cache_policies import sim as simulate
from harness.mechanisms.cache_policies.sim import ALL_POLICIES, LIB_BELADY
from harness.model.driver_contract import CaseContext, Metric, Param, Record
from harness.model.driver_helpers import write_csv

from .common import TRACE_PARAMS, build_trace
from .series import PAIRS

CROSS_PARAMS = {
    **TRACE_PARAMS,
    "n_requests": Param(int, 20000, "requests of the short trace", min=100),
    "size_fractions": Param(list, [0.01, 0.05], "cache sizes as fractions of the distinct tokens", min=1e-6, max=1),
    "hybrid_k": Param(int, 2, "K of the hybrid's LRU-K part", min=1),
}
CROSS_COLUMNS = [
    "implementation",
    "reference",
    "capacity",
    "hits",
    "reference_hits",
    "differing_requests",
    "first_difference",
    "verdict",
]
NOT_COUNTED = ("wtinylfu", "wtinylfu-shipped", LIB_BELADY)  # sketch-based or cannot bypass: shown, not counted


def run_crosscheck(ctx: CaseContext) -> Record:

    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    ids, nxt = trace.ids, traces.next_access(trace.ids)
    caps = simulate.capacities(trace.n_distinct, p["size_fractions"])
    rows, mism = [], 0
    per_pol: dict[str, int] = {}
    checks = [(x, x) for x in ALL_POLICIES] + [(LIB_BELADY, "opt"), ("wtinylfu-shipped", "wtinylfu")]
    for cap in caps:
        for lib_name, ref_name in checks:
            if lib_name == "wtinylfu-shipped":
                lib = simulate.lib_hits_with("WTinyLFU", {"window_size": 0.01}, ids, cap)
            else:
                lib = simulate.policy_hits(lib_name, ids, nxt, cap, p["hybrid_k"])
            ref_obj = (
                reference.RefHybrid(cap, p["hybrid_k"]) if ref_name == "hybrid" else reference.REFERENCES[ref_name](cap)
            )
            ref = np.array(reference.run(ref_obj, ids, nxt), dtype=bool)
            diff = np.nonzero(lib != ref)[0]
            rows.append(
                [
                    lib_name,
                    ref_name,
                    cap,
                    int(lib.sum()),
                    int(ref.sum()),
                    int(len(diff)),
                    int(diff[0]) if len(diff) else None,
                    "match" if not len(diff) else "MISMATCH",
                ]
            )
            if len(diff) and lib_name not in NOT_COUNTED:
                mism += 1
            per_pol[lib_name] = per_pol.get(lib_name, 0) + int(len(diff))
    write_csv(ctx.raw_path("crosscheck.csv"), CROSS_COLUMNS, rows)
    m = {
        "crosscheck.mismatched_pairs": Metric(
            mism,
            "pairs",
            "lower",
            "policy x size pairs whose hit/miss sequence differs from the reference (W-TinyLFU, "
            "which uses a sketch, and libCacheSim's Belady, which cannot bypass, are shown but "
            "not counted)",
        ),
        "crosscheck.pairs": Metric(
            sum(1 for r in rows if r[0] not in NOT_COUNTED),
            "pairs",
            None,
            "policy x size pairs compared request by request and counted (the denominator of mismatched_pairs)",
        ),
    }
    for k, v in per_pol.items():
        m[f"crosscheck.{k}.differing_requests"] = Metric(v, "requests", "lower")
    pairs = PAIRS.make({c: list(col) for c, col in zip(CROSS_COLUMNS, zip(*rows))})
    return Record(
        "ok",
        metrics=m,
        series={PAIRS.name: pairs},
        details={"trace": {"requests": len(ids), "seed": trace.seed, "digest": trace.digest()}},
    )
