"""The prefix-cache simulator of the kv-trace suite (issue 22): the prefix rule (a hit after
a gap is not a hit), TTL expiry on the trace's timestamps, every policy against the
scan-based references request by request, the ceiling, the tiers, the controls, and
predicted_hit_rate for the engine suite."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import BadInput
from harness.base.paths import REPO_ROOT
from harness.experiments.kv_trace import analyses, crosscheck, reference, tiers
from harness.mechanisms.kv_blocks import policies, prefix
from harness.mechanisms.kv_blocks import trace as T
from harness.mechanisms.kv_blocks.hit_prediction import predicted_hit_rate, predicted_rates

TRACE = REPO_ROOT / "data/mooncake/conversation_trace.jsonl"


def rec(t_s: float, blocks: list, bs: int = 4) -> dict:
    return {"timestamp": int(t_s * 1000), "input_length": len(blocks) * bs, "output_length": 1, "hash_ids": blocks}


def tiny(requests: list, bs: int = 4) -> T.KVTrace:
    return T.records_trace(requests, bs, name="tiny")


def hits_of(t: T.KVTrace, name: str, cap: int, ttl_s=None) -> np.ndarray:
    return policies.block_hits(policies.Stream(t), name, cap, ttl_s=ttl_s)


@pytest.fixture(scope="module")
def mooncake():
    return T.load_trace(TRACE, 512)


@pytest.fixture(scope="module")
def sample(mooncake):
    return T.session_sample(mooncake, 0.01, 3)


# ---- the trace ----------------------------------------------------------------------------


def test_the_shared_trace_loads_fast_and_is_the_mooncake_release(mooncake):
    import time

    t0 = time.perf_counter()
    t = T.load_trace(TRACE, 512)
    assert time.perf_counter() - t0 < 1.0
    assert t.is_mooncake_conversation and t.n_requests == 12031 and t.n_blocks == 288500
    assert t.n_mismatched == 0
    assert int(t.block_tokens().sum()) == int(t.input_len.sum())  # the last block holds the remainder


def test_sharing_removed_and_duplicated_traces(mooncake):
    s = mooncake.slice(0, 50)
    u = T.unique_blocks(s)
    assert len(np.unique(u.blocks)) == u.n_blocks == s.n_blocks
    d = T.duplicated(s)
    assert d.n_requests == 100 and np.array_equal(
        d.blocks[d.offsets[0] : d.offsets[1]], d.blocks[d.offsets[1] : d.offsets[2]]
    )


# ---- the prefix rule ------------------------------------------------------------------------


def test_leading_runs_stop_at_the_first_miss():
    offsets = np.array([0, 3, 3, 6])  # the second request has no block
    hits = np.array([True, False, True, True, True, False])
    assert prefix.leading_runs(hits, offsets).tolist() == [1, 0, 2]


def test_a_hit_after_a_gap_is_not_a_hit():
    # A -> B; B alone is used once more, so LRU drops A (the least recent) and keeps B
    t = tiny([rec(0, [1, 2]), rec(1, [3]), rec(2, [2]), rec(3, [4]), rec(4, [1, 2])])
    lru = hits_of(t, "lru", 3)
    assert lru.tolist() == [False, False, False, True, False, False, True]  # the policy found B again...
    r = prefix.rates(t, lru)
    assert r.runs.tolist() == [0, 0, 1, 0, 0]  # ...but B after the missing A is not a hit
    assert r.raw_block == pytest.approx(2 / 7) and r.block == pytest.approx(1 / 7)
    leaf = prefix.rates(t, hits_of(t, "leaf-lru", 3))  # A has a cached child: not evictable, 3 goes
    assert leaf.runs.tolist() == [0, 0, 1, 0, 2]
    for name in ("lru", "leaf-lru"):
        assert reference.run(reference.make(name, 3), policies.Stream(t)).tolist() == hits_of(t, name, 3).tolist()


def test_token_weighting_counts_the_last_partial_block():
    t = T.records_trace(
        [
            {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, 2, 3]},
            {"timestamp": 1, "input_length": 9, "output_length": 1, "hash_ids": [1, 2, 3]},
        ],
        4,
    )
    r = prefix.rates(t, analyses.infinite_hits(t))
    assert r.hit_tokens.tolist() == [0, 9] and r.token == pytest.approx(9 / 19) and r.block == pytest.approx(0.5)


# ---- TTL expiry on the trace's timestamps -----------------------------------------------


@pytest.mark.parametrize("name", policies.TTL_POLICIES)
def test_ttl_expires_idle_blocks(name):
    t = tiny([rec(0, [1]), rec(10, [1]), rec(40, [1]), rec(70.001, [1])])
    assert hits_of(t, name, 8, ttl_s=30).tolist() == [False, True, True, False]  # idle 30 s is kept, 30.001 s not
    assert hits_of(t, name, 8).tolist() == [False, True, True, True]  # without a TTL it stays
    ref = reference.run(reference.make(name, 8, 30), policies.Stream(t))
    assert ref.tolist() == [False, True, True, False]


def test_a_ttl_frees_room_before_the_lookup():
    # room for two; block 1 (used twice, so LRU-2 would keep it over a young block) expires
    # before block 2 arrives: 3 then fits without evicting 2, and 2 hits
    t = tiny([rec(0, [1]), rec(1, [1]), rec(60, [2]), rec(61, [3]), rec(62, [2])])
    assert hits_of(t, "lru-2", 2, ttl_s=50).tolist() == [False, True, False, False, True]
    assert reference.run(reference.make("lru-2", 2, 50), policies.Stream(t)).tolist() == [
        False,
        True,
        False,
        False,
        True,
    ]
    assert hits_of(t, "lru-2", 2).tolist() == [False, True, False, False, False]  # no TTL: 1 stays, 2 goes


def test_libcachesim_policies_refuse_a_ttl():
    t = tiny([rec(0, [1])])
    with pytest.raises(BadInput, match="has no TTL here"):
        hits_of(t, "arc", 8, ttl_s=5)


# ---- the simulator against the references --------------------------------------------------


def test_every_policy_matches_its_reference_request_by_request(sample):
    rows = crosscheck.compare_all(sample, list(policies.ALL_POLICIES), [24, 96], 120.0, 0)
    bad = [r for r in rows if r["verdict"] != "match"]
    assert not bad, bad
    assert len(rows) == 2 * (len(policies.ALL_POLICIES) + len(policies.TTL_POLICIES)) + 1
    assert all(r["hits"] > 0 for r in rows)  # the sample has reuse: the comparison is not of zeros


def test_a_broken_policy_is_caught_by_the_crosscheck(sample):
    st_ = policies.Stream(sample)
    fast = policies.block_hits(st_, "lru", 16)
    wrong = policies.block_hits(st_, "lru", 17)  # a capacity off by one
    row = crosscheck._row("lru", 16, None, sample, wrong, fast)
    assert row["verdict"] == "MISMATCH" and row["differing_requests"] > 0


@st.composite
def prefix_traces(draw):
    """Random traces with prefix structure: each request extends a random earlier request's
    prefix (or starts fresh), so equal ids mean equal prefixes, as in Mooncake's."""
    n = draw(st.integers(2, 25))
    chains, reqs, next_id = [], [], 0
    for i in range(n):
        base = draw(st.sampled_from(chains)) if chains and draw(st.booleans()) else []
        keep = draw(st.integers(0, len(base)))
        new = draw(st.integers(0 if keep else 1, 4))
        blocks = base[:keep] + list(range(next_id, next_id + new))
        next_id += new
        chains.append(blocks)
        reqs.append(rec(i * draw(st.integers(0, 20)) / 2, blocks))
    reqs.sort(key=lambda r: r["timestamp"])
    return tiny(reqs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=prefix_traces(), cap=st.integers(10, 14))
def test_references_agree_and_opt_is_the_ceiling_on_random_prefix_traces(t, cap):
    s = policies.Stream(t)
    opt = prefix.rates(t, policies.block_hits(s, "opt", cap))
    for name in policies.ALL_POLICIES:
        h = policies.block_hits(s, name, cap)
        assert h.tolist() == reference.run(reference.make(name, cap, n=t.n_blocks), s).tolist(), name
        assert prefix.rates(t, h).block <= opt.block + 1e-12, name
    assert opt.block == pytest.approx(opt.raw_block)  # opt's cache stays prefix-closed: no gaps


def test_opt_is_the_ceiling_on_the_trace(mooncake):
    s = mooncake.slice(0, 3000)
    rows, _ = analyses.curve(s, policies.Stream(s), [10**5, 10**6], list(policies.ALL_POLICIES), log=lambda m: None)
    assert analyses.opt_violations(rows) == []
    lru = {r["capacity_tokens"]: r["token_hit_pct"] for r in rows if r["policy"] == "lru"}
    assert 0 < lru[10**5] < lru[10**6]  # more capacity, more hits


# ---- the controls -------------------------------------------------------------------------


def test_instrument_and_mechanism_off_controls_of_reuse(mooncake):
    s = mooncake.slice(0, 2000)
    m = analyses.reuse(s, 912, "leaf-lru")
    assert m["reuse.dup.gpu.token_hit_pct"].value >= 50  # the known reuse is seen
    assert m["reuse.nosharing.max.token_hit_pct"].value == 0  # no sharing, no reuse
    assert 0 < m["reuse.gpu.token_hit_pct"].value <= m["reuse.max.token_hit_pct"].value
    # a blind simulator (never a hit) passes the mechanism-off control but fails the instrument
    blind = prefix.rates(T.duplicated(s), np.zeros(2 * s.n_blocks, dtype=bool))
    assert blind.token == 0 < m["reuse.dup.max.token_hit_pct"].value


def test_head_share_controls(mooncake):
    m, sweep = analyses.head(mooncake, 0.01, [0.01, 0.1], 0)
    z, law = m["blocks.zipf_control.head_share_pct"].value, m["blocks.zipf_control.expected_head_share_pct"].value
    assert 0.9 * law < z < 1.1 * law
    assert m["blocks.uniform_head_share_pct"].value < 5 < m["blocks.head_share_pct"].value
    assert sweep.columns["share_pct"][0] < sweep.columns["share_pct"][1]


# ---- the tiers ----------------------------------------------------------------------------


def test_tiers_serve_from_the_highest_tier_and_move_bytes():
    t = tiny([rec(0, [1, 2]), rec(1, [3, 4]), rec(2, [1, 2])])
    specs = [
        tiers.TierSpec("L1", 2, None, "lru"),
        tiers.TierSpec("L2", 8, None, "lru"),
        tiers.TierSpec("L3", 8, None, "lru-3"),
    ]
    r = tiers.simulate(policies.Stream(t), specs)
    assert r.served.tolist() == [0, 0, 0, 0, 2, 2]  # 1 and 2 left L1 (2 blocks) but not L2
    moved = r.bytes_moved(10)
    assert moved["L2_to_L1"] == 8 * 10 and moved["L3_to_L1"] == 0
    assert moved["L1_to_L2"] == 4 * 4 * 10  # four distinct blocks written once each


def test_tiers_match_the_request_by_request_reference(sample):
    s = policies.Stream(sample)
    specs = [
        tiers.TierSpec("L1", 8, 30.0, "lru"),
        tiers.TierSpec("L2", 40, 120.0, "lru"),
        tiers.TierSpec("L3", 200, 900.0, "lru-3"),
    ]
    fast = tiers.simulate(s, specs).served
    assert (fast > 0).any() and (fast == 3).any()
    assert fast.tolist() == crosscheck.reference_tiers(sample, s, specs).tolist()


def test_tier_ttls_cost_hits_when_shorter_than_the_reuse():
    t = tiny([rec(0, [1]), rec(100, [1])])
    keep = [tiers.TierSpec("L1", 4, 200.0, "lru")]
    drop = [tiers.TierSpec("L1", 4, 50.0, "lru")]
    s = policies.Stream(t)
    assert tiers.simulate(s, keep).served.tolist() == [0, 1]
    assert tiers.simulate(s, drop).served.tolist() == [0, 0]


# ---- predicted_hit_rate (the engine suite's prediction) ---------------------------------------


def test_predicted_hit_rate_from_records():
    reqs = [rec(0, [1, 2, 3]), rec(1, [1, 2, 9])]
    assert predicted_hit_rate(reqs, 4, 10**6) == pytest.approx(8 / 24)  # infinite: 2 of 6 blocks, 8 tokens
    assert predicted_hit_rate(reqs, 4, 0) == 0.0
    assert predicted_hit_rate(reqs, 4, 12, policy="leaf-lru") == pytest.approx(8 / 24)  # 3 blocks: A, B kept


def test_predicted_hit_rate_from_the_shared_trace_file(mooncake):
    s = mooncake.slice(0, 1500)
    direct = predicted_rates(s, 512, 500_000, policy="leaf-lru")
    assert 0 < direct.token < 1 and direct.runs.shape == (1500,)
    assert predicted_hit_rate(TRACE, 512, 10**10) == pytest.approx(0.37362, abs=1e-4)  # the trace's maximum


def test_predicted_hit_rate_refuses_what_it_cannot_do():
    with pytest.raises(BadInput, match="unknown policy"):
        predicted_hit_rate([rec(0, [1])], 4, 100, policy="mru")
    with pytest.raises(BadInput, match="blocks of 4 tokens, not 16"):
        predicted_hit_rate(tiny([rec(0, [1])]), 16, 100)
