"""The kv-trace suite's independent reference (recount.py, issue 39): every number a ledger
check judges is counted again by code that shares nothing with the simulator, on the same
trace; the two agree on the shared trace and on random prefix traces, and a simulator that
forgets (remembers only the previous request, the issue's example: C1's upper bound kept
`reproduced` at 4.25%) disagrees with it and with the replayed-trace instrument."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.paths import REPO_ROOT
from harness.experiments.kv_trace import analyses, drivers, recount, shape
from harness.mechanisms.kv_blocks import policies, prefix
from harness.mechanisms.kv_blocks import trace as T

TRACE = REPO_ROOT / "data/mooncake/conversation_trace.jsonl"


def params(trace_file, **change) -> dict:
    p = {k: v.default for k, v in drivers.MAIN_PARAMS.items()}
    return {**p, "trace": str(trace_file), **change}


def write(t: T.KVTrace, path) -> None:
    """A trace as a Mooncake-format file."""
    with open(path, "w") as f:
        for i in range(t.n_requests):
            ids = t.blocks[t.offsets[i] : t.offsets[i + 1]].tolist()
            f.write(
                json.dumps(
                    {
                        "timestamp": int(t.timestamps_ms[i]),
                        "input_length": int(t.input_len[i]),
                        "output_length": int(t.output_len[i]),
                        "hash_ids": ids,
                    }
                )
                + "\n"
            )


def forgetful_infinite_hits(trace: T.KVTrace) -> np.ndarray:
    """The issue's broken simulator: a block hits only if the previous request used it."""
    hits, prev = np.zeros(trace.n_blocks, dtype=bool), set()
    for i in range(trace.n_requests):
        cur = trace.blocks[trace.offsets[i] : trace.offsets[i + 1]].tolist()
        hits[trace.offsets[i] : trace.offsets[i + 1]] = [b in prev for b in cur]
        prev = set(cur)
    return hits


@pytest.fixture(scope="module")
def sample_file(tmp_path_factory):
    """Whole conversations of the shared trace (2% of its sessions), as a file of its own."""
    t = T.session_sample(T.load_trace(TRACE, 512), 0.02, 0)
    path = tmp_path_factory.mktemp("kv") / "sample.jsonl"
    write(t, path)
    return T.load_trace(path, 512), path


def simulated(t: T.KVTrace, p: dict) -> dict[str, float]:
    """What the driver measures, from the simulator's modules."""
    m = shape.ModelShape.from_params(p)
    st_ = policies.Stream(t)
    gpu_blocks = shape.blocks_of(m.gpu_kv_tokens(p["gpu_memory_gib"], p["gpu_memory_utilization"]), t.block_size)
    out = analyses.reuse(t, gpu_blocks, p["gpu_policy"])
    rows, rps = analyses.curve(t, st_, p["capacities_tokens"], p["policies"], 0, p["hybrid_k"], log=lambda s: None)
    out.update(drivers._curve_metrics(rows, rps, t.n_blocks))
    out.update(analyses.head(t, p["head_fraction"], [0.01], 0)[0])
    out.update(drivers._tiers(t, st_, p, m)[0])
    return {k: v.value for k, v in out.items()}


def test_the_reference_agrees_with_the_simulator_on_whole_sessions(sample_file):
    """Tiers, GPU and capacities sized down so that every cache evicts and every TTL acts on
    the sample (a 2% sample holds too few blocks for the source's sizes to matter)."""
    t, path = sample_file
    p = params(
        path,
        gpu_memory_gib=18.0,
        capacities_tokens=[20000, 100000, 300000, 1000000],
        policies=["lru", "lfu", "hybrid", "random", "opt"],
        tier_gb=[1, 4, 20],
        tier_ttl_s=[5, 60, 600],
    )
    sim, ref = simulated(t, p), recount.recount(path, p, drivers.ORDER, analyses.label, log=lambda s: None)
    judged = [
        "reuse.max.token_hit_pct",
        "reuse.gpu.token_hit_pct",
        "curve.ordering_sizes_pct",
        "blocks.head_share_pct",
        "tiers.base.of_max_pct",
        "tiers.ttl_kept_pct",
        "tiers.L3.lruk_gain_pp",
    ]
    for name in judged:
        assert ref[f"reference.{name}"][0] == pytest.approx(sim[name], abs=1e-9), name
    curve = [k for k in ref if k.startswith("reference.curve.") and k.endswith(".token_hit_pct")]
    assert len(curve) == 3 * 4
    for k in curve:
        assert ref[k][0] == pytest.approx(sim[k[len("reference.") :]], abs=1e-9), k
    # the comparison is not of zeros or of numbers that cannot differ
    assert 0 < sim["reuse.gpu.token_hit_pct"] < sim["reuse.max.token_hit_pct"]
    assert sim["tiers.ttl_kept_pct"] < 100 and sim["tiers.L3.lruk_gain_pp"] != 0
    assert 0 < sim["curve.lru.at_20k.token_hit_pct"] < sim["curve.lru.at_1M.token_hit_pct"]


def test_a_simulator_that_forgets_disagrees_with_the_reference_and_the_replayed_instrument(sample_file, monkeypatch):
    t, path = sample_file
    honest = analyses.reuse(t, 912, "leaf-lru")
    monkeypatch.setattr(analyses, "infinite_hits", forgetful_infinite_hits)
    broken = analyses.reuse(t, 912, "leaf-lru")
    ref = recount.recount(path, params(path), drivers.ORDER, analyses.label, log=lambda s: None)
    truth = ref["reference.reuse.max.token_hit_pct"][0]
    assert truth == pytest.approx(honest["reuse.max.token_hit_pct"].value, abs=1e-9)
    assert broken["reuse.max.token_hit_pct"].value < truth - 10  # under-counts, and so is below 38%
    assert broken["reuse.dup.max.token_hit_pct"].value >= 50  # the old instrument is fooled
    assert broken["reuse.replayed.max.token_hit_pct"].value < 50 <= honest["reuse.replayed.max.token_hit_pct"].value


def test_replayed_trace_repeats_every_request_after_the_first_pass():
    t = T.records_trace(
        [
            {"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]},
            {"timestamp": 500, "input_length": 4, "output_length": 1, "hash_ids": [3]},
        ],
        4,
    )
    r = T.replayed(t)
    assert r.blocks.tolist() == [1, 2, 3, 1, 2, 3] and r.timestamps_ms.tolist() == [0, 500, 501, 1001]
    assert analyses.reuse(t, 10, "lru")["reuse.replayed.max.token_hit_pct"].value == pytest.approx(50.0)


@st.composite
def prefix_requests(draw):
    """Random requests with prefix structure (each extends a random earlier prefix or starts
    afresh), times in ms, some lengths that end inside a block."""
    n = draw(st.integers(2, 30))
    chains, reqs, next_id, now = [], [], 0, 0
    for _ in range(n):
        base = draw(st.sampled_from(chains)) if chains and draw(st.booleans()) else []
        keep = draw(st.integers(0, len(base)))
        new = draw(st.integers(0 if keep else 1, 4))
        blocks = base[:keep] + list(range(next_id, next_id + new))
        next_id += new
        chains.append(blocks)
        now += draw(st.integers(0, 3000))
        reqs.append(
            {
                "timestamp": now,
                "input_length": 4 * len(blocks) - draw(st.integers(0, 3)),
                "output_length": 1,
                "hash_ids": blocks,
            }
        )
    return reqs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=prefix_requests(),
    cap=st.integers(1, 12),
    ttl=st.sampled_from([None, 1.0, 4.0]),
    name=st.sampled_from(["lru", "lfu", "lru-2", "lru-3", "leaf-lru", "hybrid"]),
)
def test_every_reference_cache_counts_what_the_simulator_counts(reqs, cap, ttl, name):
    """Prefix-rule hit tokens of each recount cache against the simulator's policy of the same
    name, capacity and TTL (LFU and the hybrid have no TTL)."""
    if name in ("lfu", "hybrid"):
        ttl = None
    t = T.records_trace(reqs, 4)
    total = int(t.input_len.sum())
    sim = prefix.rates(t, policies.block_hits(policies.Stream(t), name, cap, ttl_s=ttl, hybrid_k=2)).token * total
    mine = recount.replay(
        [(r["timestamp"], r["input_length"], r["hash_ids"]) for r in reqs],
        4,
        [recount.make(name, cap, ttl, hybrid_k=2)],
    )
    assert mine == pytest.approx(sim, abs=1e-6)
