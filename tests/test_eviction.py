"""Eviction experiment: traces, definitions, reference cross-check, the optimal bound,
INFO parsing against a real redis-server, and the refused spec."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.errors import BadInput
from harness.experiments.eviction import reference as R
from harness.experiments.eviction import simulate as S
from harness.experiments.eviction import traces as T
from harness.experiments.eviction.redis_replay import GET_OR_SET, key_names, parse_info, raw_info, replay

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def real20k():
    return T.real_trace(20000, 1)


# ---- traces ---------------------------------------------------------------------------

def test_real_trace_is_seeded_and_reproducible(real20k):
    again = T.real_trace(20000, 1)
    other = T.real_trace(20000, 2)
    assert again.digest() == real20k.digest()
    assert other.digest() != real20k.digest()
    assert len(real20k) == 20000
    # the same token multiset per full pass: text order changes, the tokens do not
    assert real20k.meta["corpus_tokens"] > 50000 and real20k.meta["texts"] == 1998


def test_real_trace_uses_the_real_tokenizer_without_padding():
    tok = T.load_tokenizer("minilm")
    ids = T.tokenize(["the dataset is loaded"], tok)[0]
    assert [tok.id_to_token(int(i)) for i in ids] == ["the", "data", "##set", "is", "loaded"]


def test_zipf_trace_seed_and_fit():
    a = T.zipf_trace(100000, 5000, 1.0, seed=7)
    b = T.zipf_trace(100000, 5000, 1.0, seed=7)
    c = T.zipf_trace(100000, 5000, 1.0, seed=8)
    assert np.array_equal(a.ids, b.ids) and not np.array_equal(a.ids, c.ids)
    assert abs(T.fit_zipf(T.rank_counts(a.ids)) - 1.0) < 0.05
    z = T.zipf_trace(100000, 5000, 0.6, seed=7)
    assert abs(T.fit_zipf(T.rank_counts(z.ids)) - 0.6) < 0.05


def test_fit_zipf_on_exact_power_law():
    counts = np.round(1e6 * np.arange(1, 2001, dtype=float) ** -1.2)
    assert abs(T.fit_zipf(counts) - 1.2) < 0.01


def test_real_trace_zipf_exponent_and_head_share(real20k):
    st = T.trace_stats(real20k, 0.01)
    assert 0.8 < st["zipf_mle"] < 1.3
    assert st["head_size"] == int(np.ceil(0.01 * st["distinct"]))
    assert 0.3 < st["head_share"] < 0.7


def test_head_and_long_tail_definitions():
    ids = np.array([5, 5, 5, 3, 3, 3, 9, 1, 2, 4])  # 5 and 3 tie at 3 requests
    head = T.head_ids(ids, 0.1)  # ceil(0.1 * 6 distinct) = 1 token; the tie goes to the smaller id
    assert head.tolist() == [3]
    tail = T.tail_mask(ids, head)
    assert tail.tolist() == [True] * 3 + [False] * 3 + [True] * 4
    assert T.head_share(ids, head) == pytest.approx(0.3)
    hits = np.array([1, 1, 0, 1, 1, 1, 0, 0, 0, 0], dtype=bool)
    hr, lt = T.hit_rates(hits, tail)
    assert hr == pytest.approx(50.0) and lt == pytest.approx(100 * 2 / 7)
    with pytest.raises(BadInput):
        T.head_ids(ids, 0)


def test_next_access():
    assert T.next_access(np.array([1, 2, 1, 3, 2, 1])).tolist() == [2, 4, 5, -1, -1, -1]


# ---- references and the optimal bound -----------------------------------------------

def test_reference_lru_and_belady_by_hand():
    ids = [1, 2, 3, 1, 4, 1, 2]
    assert R.run(R.RefLRU(2), ids) == [False, False, False, False, False, True, False]
    nxt = T.next_access(np.array(ids))
    # MIN with bypass, 2 slots: keeps 1 and 2; 3 and 4 are bypassed
    assert R.run(R.RefBelady(2), ids, nxt) == [False, False, False, True, False, True, True]


@pytest.mark.parametrize("policy", list(S.LIB_POLICIES) + ["hybrid", "opt"])
def test_library_matches_reference(real20k, policy):
    ids = real20k.ids[:6000]
    nxt = T.next_access(ids)
    for cap in (25, 120):
        lib = S.policy_hits(policy, ids, nxt, cap)
        ref_obj = R.RefHybrid(cap, 2) if policy == "hybrid" else R.REFERENCES[policy](cap)
        ref = np.array(R.run(ref_obj, ids, nxt))
        if policy == "wtinylfu":  # libCacheSim counts with a sketch; the reference counts exactly
            assert abs(int(lib.sum()) - int(ref.sum())) <= 0.02 * len(ids)
        else:
            assert np.array_equal(lib, ref), f"{policy} at {cap}: first difference at {np.nonzero(lib != ref)[0][:1]}"


def test_shipped_wtinylfu_window_is_empty_below_100_objects(real20k):
    ids = real20k.ids[:3000]
    assert S.lib_hits_with("WTinyLFU", {"window_size": 0.01}, ids, 50).sum() == 0
    with pytest.raises(ValueError):
        S.lib_cache("s3fifo", 9)
    assert S.policy_hits("wtinylfu", ids, T.next_access(ids), 50).sum() > 0


def test_optimal_bound_beats_every_policy_at_every_size():
    for trace in (T.real_trace(15000, 3), T.zipf_trace(15000, 3000, 0.9, 3)):
        ids, nxt = trace.ids, T.next_access(trace.ids)
        for cap in S.capacities(trace.n_distinct, [0.005, 0.02, 0.1, 0.3]):
            opt = S.opt_hits(ids, nxt, cap).sum()
            for pol in list(S.LIB_POLICIES) + ["hybrid", S.LIB_BELADY]:
                assert S.policy_hits(pol, ids, nxt, cap).sum() <= opt, (trace.name, pol, cap)


def test_oracle_general_file_round_trips_through_libcachesim(tmp_path, real20k):
    ids, nxt = real20k.ids, T.next_access(real20k.ids)
    path = S.write_oracle_general(tmp_path / "t.oracleGeneral.bin", ids, nxt)
    miss, rps = S.lib_process_trace("lru", path, 50)
    assert 1 - miss == pytest.approx(S.lib_hits("lru", ids, nxt, 50).mean())
    assert rps > 0


# ---- real Redis ------------------------------------------------------------------------

def test_parse_info_against_a_real_redis_server(redis_server):
    srv = redis_server({"maxmemory": "2mb", "maxmemory-policy": "allkeys-lru"})
    c = srv.client()
    keys = key_names(np.array([1, 2, 1, 3, 1, 2]))
    res = replay(c, keys, 100, 0, batch=4)
    assert res.tolist() == [0, 0, 1, 0, 1, 1]  # GET before SET per key, even inside one pipeline
    info = parse_info(raw_info(c))
    assert info["keyspace_hits"] == 3 and info["keyspace_misses"] == 3
    assert info["evicted_keys"] == 0 and info["maxmemory"] == 2 * 1024 * 1024
    assert info["maxmemory_policy"] == "allkeys-lru"
    assert info["db0"]["keys"] == 3
    assert parse_info(b"# Stats\r\nkeyspace_hits:7\r\nmem_fragmentation_ratio:1.5\r\n") == \
        {"keyspace_hits": 7, "mem_fragmentation_ratio": 1.5}


def test_replay_under_maxmemory_evicts_and_noeviction_refuses(redis_server):
    ids = T.zipf_trace(3000, 2000, 0.8, 1).ids
    for policy, evicts in (("allkeys-lru", True), ("noeviction", False)):
        srv = redis_server({"maxmemory-policy": policy})
        c = srv.client()
        c.script_load(GET_OR_SET)
        base = parse_info(raw_info(c, "memory"))["used_memory"]
        c.config_set("maxmemory", base + 300 * 1200)
        res = replay(c, key_names(ids), 1000, 0, batch=100)
        info = parse_info(raw_info(c))
        assert bool(info["evicted_keys"] > 0) is evicts
        assert bool((res == -1).sum() > 0) is (not evicts)
        assert info["keyspace_hits"] == int((res == 1).sum())


# ---- the refused spec ------------------------------------------------------------------

def _suite(params: dict) -> dict:
    return {"name": "ev", "description": "d", "claim": {"section": "4.2", "text": "t"}, "target": "none",
            "cases": [{"name": "r", "driver": "eviction-redis", "params": params}],
            "profiles": {"local": {"repetitions": 1}}}


@pytest.mark.parametrize("params", [
    {"runs": ["allkeys-lru-lfu"]},
    {"runs": [{"policy": "allkeys-lru", "lru-k-samples": 5}]},
    {"lru-k-samples": 5},
])
def test_spec_naming_invented_redis_names_is_refused(params):
    from harness.spec import parse_suite

    with pytest.raises(BadInput) as e:
        parse_suite(_suite(params))
    msg = str(e.value)
    assert "does not exist in Redis" in msg and "hybrid" in msg and "eviction-simulate" in msg


def test_real_policy_spec_is_accepted():
    from harness.spec import parse_suite

    s = parse_suite(_suite({"runs": ["allkeys-lru", {"policy": "allkeys-lfu", "lfu-log-factor": 10}]}))
    assert s.cases[0].driver == "eviction-redis"


def test_cli_validate_refuses_the_invented_policy(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(_suite({"runs": ["allkeys-lru", "allkeys-lru-lfu"]})))
    p = subprocess.run([str(REPO / ".venv/bin/harness"), "validate", str(spec)], capture_output=True, text=True)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert "'allkeys-lru-lfu' does not exist in Redis" in lines[0]


def test_the_suite_validates():
    from harness.spec import load_suite_file

    s = load_suite_file(REPO / "suites" / "eviction.yaml")
    assert {c.name for c in s.cases} >= {"trace", "simulate", "crosscheck", "redis", "redis-cluster"}


def test_cluster_replay_sums_per_node_info_and_restores_config(cluster):
    from harness.experiments.eviction.redis_replay import RunSpec, replay_cluster

    ids = T.zipf_trace(4000, 1500, 0.9, 2).ids
    before = {n.address: cluster.client(n).config_get("maxmemory*") for n in cluster.primaries}
    r = replay_cluster(RunSpec("allkeys-lru"), cluster, ids, 1000, capacity_fraction=0.1,
                       value_bytes=2000, ttl_s=0, batch=100, log=lambda m: None)
    assert len(r.results) == 3000
    assert r.info_after["keyspace_hits"] == r.hits  # summed over the primaries
    assert r.info_after["keyspace_hits"] + r.info_after["keyspace_misses"] == 3000
    assert r.info_after["evicted_keys"] > 0 and r.filled
    assert len(r.raw_infos) == len(cluster.primaries)
    after = {n.address: cluster.client(n).config_get("maxmemory*") for n in cluster.primaries}
    assert after == before


def test_standalone_replay_under_lfu_and_lru(tmp_path):
    from harness.experiments.eviction.redis_replay import RunSpec, replay_standalone

    ids = T.zipf_trace(3000, 1000, 0.9, 4).ids
    for spec in (RunSpec("allkeys-lfu", {"lfu-log-factor": 10}), RunSpec("allkeys-lru", {"maxmemory-samples": 5})):
        r = replay_standalone(spec, key_names(ids), 1000, tmp_path / spec.label, n_distinct=len(set(ids.tolist())),
                              capacity_fraction=0.1, value_bytes=1000, ttl_s=0, batch=100)
        assert r.filled and r.info_after["keyspace_hits"] == r.hits
        assert 0 < r.dbsize_median <= 2 * r.target_keys
        assert (r.idle_max_s is None) == (spec.policy == "allkeys-lfu")
