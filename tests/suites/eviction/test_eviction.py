"""Eviction experiment: traces, definitions, reference cross-check, the optimal bound,
INFO parsing against a real redis-server, and the refused spec."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.base.errors import BadInput
from harness.experiments.eviction.redis_replay import GET_OR_SET, key_names, parse_info, raw_info, replay
from harness.mechanisms.cache_policies import lruk, lruk_reference, reference, traces
from harness.mechanisms.cache_policies import sim as simulate
from tests import REPO


@pytest.fixture(scope="module")
def real20k():
    return traces.real_trace(20000, 1)


# ---- traces ---------------------------------------------------------------------------


def test_real_trace_is_seeded_and_reproducible(real20k):
    again = traces.real_trace(20000, 1)
    other = traces.real_trace(20000, 2)
    assert again.digest() == real20k.digest()
    assert other.digest() != real20k.digest()
    assert len(real20k) == 20000
    # the same token multiset per full pass: text order changes, the tokens do not
    assert real20k.meta["corpus_tokens"] > 50000 and real20k.meta["texts"] == 1998


def test_real_trace_uses_the_real_tokenizer_without_padding():
    tok = traces.load_tokenizer("minilm")
    ids = traces.tokenize(["the dataset is loaded"], tok)[0]
    assert [tok.id_to_token(int(i)) for i in ids] == ["the", "data", "##set", "is", "loaded"]


def test_zipf_trace_seed_and_fit():
    a = traces.zipf_trace(100000, 5000, 1.0, seed=7)
    b = traces.zipf_trace(100000, 5000, 1.0, seed=7)
    c = traces.zipf_trace(100000, 5000, 1.0, seed=8)
    assert np.array_equal(a.ids, b.ids) and not np.array_equal(a.ids, c.ids)
    assert abs(traces.fit_zipf(traces.rank_counts(a.ids)) - 1.0) < 0.05
    z = traces.zipf_trace(100000, 5000, 0.6, seed=7)
    assert abs(traces.fit_zipf(traces.rank_counts(z.ids)) - 0.6) < 0.05


def test_fit_zipf_on_exact_power_law():
    counts = np.round(1e6 * np.arange(1, 2001, dtype=float) ** -1.2)
    assert abs(traces.fit_zipf(counts) - 1.2) < 0.01


def test_real_trace_zipf_exponent_and_head_share(real20k):
    st = traces.trace_stats(real20k, 0.01)
    assert 0.8 < st["zipf_mle"] < 1.3
    assert st["head_size"] == int(np.ceil(0.01 * st["distinct"]))
    assert 0.3 < st["head_share"] < 0.7


def test_head_and_long_tail_definitions():
    ids = np.array([5, 5, 5, 3, 3, 3, 9, 1, 2, 4])  # 5 and 3 tie at 3 requests
    head = traces.head_ids(ids, 0.1)  # ceil(0.1 * 6 distinct) = 1 token; the tie goes to the smaller id
    assert head.tolist() == [3]
    tail = traces.tail_mask(ids, head)
    assert tail.tolist() == [True] * 3 + [False] * 3 + [True] * 4
    assert traces.head_share(ids, head) == pytest.approx(0.3)
    hits = np.array([1, 1, 0, 1, 1, 1, 0, 0, 0, 0], dtype=bool)
    hr, lt = traces.hit_rates(hits, tail)
    assert hr == pytest.approx(50.0) and lt == pytest.approx(100 * 2 / 7)
    with pytest.raises(BadInput):
        traces.head_ids(ids, 0)


def test_next_access():
    assert traces.next_access(np.array([1, 2, 1, 3, 2, 1])).tolist() == [2, 4, 5, -1, -1, -1]


# ---- references and the optimal bound -----------------------------------------------


def test_reference_lru_and_belady_by_hand():
    ids = [1, 2, 3, 1, 4, 1, 2]
    assert reference.run(reference.RefLRU(2), ids) == [False, False, False, False, False, True, False]
    nxt = traces.next_access(np.array(ids))
    # MIN with bypass, 2 slots: keeps 1 and 2; 3 and 4 are bypassed
    assert reference.run(reference.RefBelady(2), ids, nxt) == [False, False, False, True, False, True, True]


@pytest.mark.parametrize("policy", list(simulate.LIB_POLICIES) + ["hybrid", "opt"])
def test_library_matches_reference(real20k, policy):
    ids = real20k.ids[:6000]
    nxt = traces.next_access(ids)
    for cap in (25, 120):
        lib = simulate.policy_hits(policy, ids, nxt, cap)
        ref_obj = reference.RefHybrid(cap, 2) if policy == "hybrid" else reference.REFERENCES[policy](cap)
        ref = np.array(reference.run(ref_obj, ids, nxt))
        if policy == "wtinylfu":  # libCacheSim counts with a sketch; the reference counts exactly
            assert abs(int(lib.sum()) - int(ref.sum())) <= 0.02 * len(ids)
        else:
            assert np.array_equal(lib, ref), f"{policy} at {cap}: first difference at {np.nonzero(lib != ref)[0][:1]}"


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("admit_lfu", [False, True])
@pytest.mark.parametrize("ttl_ms", [None, 30.0])
def test_lruk_loop_matches_its_reference_with_every_option(k, admit_lfu, ttl_ms):
    """The LRU-K both suites share (harness/mechanisms/cache_policies/lruk.py): the fast loop and the scan
    reference give the same hits with and without a TTL and LFU admission (the hybrid)."""
    rng = np.random.default_rng(k + 10 * admit_lfu + (100 if ttl_ms else 0))
    ids = traces.zipf_trace(3000, 300, 0.9, int(rng.integers(1000))).ids.tolist()
    times = np.cumsum(rng.choice([0, 0, 1, 4, 25], size=len(ids))).astype(float).tolist()
    for cap in (1, 7, 60):
        fast = lruk.lruk_hits(ids, cap, k, times, ttl_ms, admit_lfu=admit_lfu)
        ref = lruk_reference.RefLRUK(cap, k, ttl_ms, admit_lfu=admit_lfu)
        slow = [ref.access(x, t, None, times[t]) for t, x in enumerate(ids)]
        assert fast.tolist() == slow, (cap, np.nonzero(fast != np.array(slow))[0][:1])
        assert 0 < sum(slow) < len(ids)


def test_shipped_wtinylfu_window_is_empty_below_100_objects(real20k):
    ids = real20k.ids[:3000]
    assert simulate.lib_hits_with("WTinyLFU", {"window_size": 0.01}, ids, 50).sum() == 0
    with pytest.raises(ValueError):
        simulate.lib_cache("s3fifo", 9)
    assert simulate.policy_hits("wtinylfu", ids, traces.next_access(ids), 50).sum() > 0


def test_optimal_bound_beats_every_policy_at_every_size():
    for trace in (traces.real_trace(15000, 3), traces.zipf_trace(15000, 3000, 0.9, 3)):
        ids, nxt = trace.ids, traces.next_access(trace.ids)
        for cap in simulate.capacities(trace.n_distinct, [0.005, 0.02, 0.1, 0.3]):
            opt = simulate.opt_hits(ids, nxt, cap).sum()
            for pol in list(simulate.LIB_POLICIES) + ["hybrid", simulate.LIB_BELADY]:
                assert simulate.policy_hits(pol, ids, nxt, cap).sum() <= opt, (trace.name, pol, cap)


def test_oracle_general_file_round_trips_through_libcachesim(tmp_path, real20k):
    ids, nxt = real20k.ids, traces.next_access(real20k.ids)
    path = simulate.write_oracle_general(tmp_path / "t.oracleGeneral.bin", ids, nxt)
    miss, rps = simulate.lib_process_trace("lru", path, 50)
    assert 1 - miss == pytest.approx(simulate.lib_hits("lru", ids, nxt, 50).mean())
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
    assert parse_info(b"# Stats\r\nkeyspace_hits:7\r\nmem_fragmentation_ratio:1.5\r\n") == {
        "keyspace_hits": 7,
        "mem_fragmentation_ratio": 1.5,
    }


def test_replay_under_maxmemory_evicts_and_noeviction_refuses(redis_server):
    ids = traces.zipf_trace(3000, 2000, 0.8, 1).ids
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
    return {
        "name": "ev",
        "description": "d",
        "claim": {"section": "4.2", "text": "t"},
        "target": "none",
        "cases": [{"name": "r", "driver": "eviction-redis", "params": params}],
        "profiles": {"local": {"repetitions": 1}},
    }


@pytest.mark.parametrize(
    "params",
    [
        {"runs": ["allkeys-lru-lfu"]},
        {"runs": [{"policy": "allkeys-lru", "lru-k-samples": 5}]},
        {"lru-k-samples": 5},
    ],
)
def test_spec_naming_invented_redis_names_is_refused(params):
    from harness.model.spec import parse_suite

    with pytest.raises(BadInput) as e:
        parse_suite(_suite(params))
    msg = str(e.value)
    assert "does not exist in Redis" in msg and "hybrid" in msg and "eviction-simulate" in msg


def test_real_policy_spec_is_accepted():
    from harness.model.spec import parse_suite

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
    from harness.model.spec import load_suite_file

    s = load_suite_file(REPO / "harness" / "experiments" / "eviction" / "suite.yaml")
    assert {c.name for c in s.cases} >= {"trace", "simulate", "crosscheck", "redis", "redis-cluster"}


def test_cluster_replay_sums_per_node_info_and_restores_config(cluster):
    from harness.experiments.eviction.redis_replay import RunSpec, replay_cluster

    ids = traces.zipf_trace(4000, 1500, 0.9, 2).ids
    before = {n.address: cluster.client(n).config_get("maxmemory*") for n in cluster.primaries}
    r = replay_cluster(
        RunSpec("allkeys-lru"),
        cluster,
        ids,
        1000,
        capacity_fraction=0.1,
        value_bytes=2000,
        ttl_s=0,
        batch=100,
        log=lambda m: None,
    )
    assert len(r.results) == 3000
    assert r.info_after["keyspace_hits"] == r.hits  # summed over the primaries
    assert r.info_after["keyspace_hits"] + r.info_after["keyspace_misses"] == 3000
    assert r.info_after["evicted_keys"] > 0 and r.filled
    assert len(r.raw_infos) == len(cluster.primaries)
    after = {n.address: cluster.client(n).config_get("maxmemory*") for n in cluster.primaries}
    assert after == before
    # the policy and maxmemory as every primary reported them during the run (read back, not asked for)
    from harness.experiments.eviction.redis_replay import config_facts

    assert {r["node"] for r in r.config_read} == {n.address for n in cluster.primaries}
    facts = config_facts("cluster.allkeys-lru", r.config_read, r.maxmemory)
    assert facts["cluster.allkeys-lru.maxmemory-policy"] == "allkeys-lru"
    assert (
        facts["cluster.allkeys-lru.maxmemory"] == r.maxmemory
        and facts["cluster.allkeys-lru.maxmemory_as_sized"] is True
    )


def test_standalone_replay_under_lfu_and_lru(tmp_path):
    from harness.experiments.eviction.redis_replay import RunSpec, replay_standalone

    ids = traces.zipf_trace(3000, 1000, 0.9, 4).ids
    for spec in (RunSpec("allkeys-lfu", {"lfu-log-factor": 10}), RunSpec("allkeys-lru", {"maxmemory-samples": 5})):
        r = replay_standalone(
            spec,
            key_names(ids),
            1000,
            tmp_path / spec.label,
            n_distinct=len(set(ids.tolist())),
            capacity_fraction=0.1,
            value_bytes=1000,
            ttl_s=0,
            batch=100,
        )
        assert r.filled and r.info_after["keyspace_hits"] == r.hits
        assert 0 < r.dbsize_median <= 2 * r.target_keys
        assert (r.idle_max_s is None) == (spec.policy == "allkeys-lfu")
        # read back from the server after the warm-up and after the measured replay
        assert [c["when"] for c in r.config_read] == ["after the warm-up", "after the measured replay"]
        assert all(
            c["maxmemory-policy"] == spec.policy
            and c["info.maxmemory_policy"] == spec.policy
            and c["maxmemory"] == r.maxmemory == c["info.maxmemory"]
            for c in r.config_read
        )


def test_a_server_running_another_policy_is_recorded_as_it_runs(tmp_path, monkeypatch):
    """The policy facts are the server's: a configuration that quietly gives the server another
    policy (or no maxmemory) than the run's label shows in the facts the ledger compares."""
    from harness.experiments.eviction import redis_replay
    from harness.experiments.eviction.redis_replay import RunSpec, config_facts, replay_standalone

    monkeypatch.setattr(redis_replay.RunSpec, "config", lambda self: {"maxmemory-policy": "allkeys-random"})
    ids = traces.zipf_trace(2000, 800, 0.9, 4).ids
    r = replay_standalone(
        RunSpec("allkeys-lru"),
        key_names(ids),
        800,
        tmp_path / "s",
        n_distinct=len(set(ids.tolist())),
        capacity_fraction=0.1,
        value_bytes=1000,
        ttl_s=0,
        batch=100,
    )
    facts = config_facts("redis.allkeys-lru", r.config_read, r.maxmemory)
    assert facts["redis.allkeys-lru.maxmemory-policy"] == "allkeys-random"
    assert facts["redis.allkeys-lru.maxmemory_as_sized"] is True
    # maxmemory read back unlike the one sized, or readings that disagree, are said as such
    off = [dict(c, maxmemory=0) for c in r.config_read]
    assert config_facts("x", off, r.maxmemory)["x.maxmemory_as_sized"] is False
    mixed = [
        r.config_read[0],
        dict(r.config_read[1], **{"maxmemory-policy": "allkeys-lfu", "info.maxmemory_policy": "allkeys-lfu"}),
    ]
    assert config_facts("x", mixed, r.maxmemory)["x.maxmemory-policy"] == "readings differ: allkeys-random, allkeys-lfu"
    assert config_facts("x", [], r.maxmemory)["x.maxmemory-policy"] == "not read"


def _readings(**change) -> list[dict]:
    """Two readings of one server as read_config() gives them (CONFIG GET and INFO memory), agreeing
    unless `change` alters the second."""
    one = {
        "maxmemory-policy": "allkeys-lru",
        "maxmemory": 1000000,
        "maxmemory-samples": 5,
        "lfu-log-factor": 10,
        "lfu-decay-time": 1,
        "info.maxmemory": 1000000,
        "info.maxmemory_policy": "allkeys-lru",
        "sized": 1000000,
        "node": "127.0.0.1:1",
    }
    return [dict(one, when="after the warm-up"), dict(one, when="after the measured replay", **change)]


def test_config_get_and_info_that_disagree_are_recorded_as_differing():
    """The policy (and maxmemory) are read by CONFIG GET and by INFO: when the two commands disagree
    the fact says so, naming both, instead of taking CONFIG GET's, so the ledger's `configured`
    (which needs allkeys-lru) reads inconclusive."""
    from harness.experiments.eviction.redis_replay import config_facts

    agree = config_facts("redis.allkeys-lru", _readings(), 1000000)
    assert agree["redis.allkeys-lru.maxmemory-policy"] == "allkeys-lru"
    assert agree["redis.allkeys-lru.maxmemory"] == 1000000 and agree["redis.allkeys-lru.maxmemory_as_sized"] is True
    assert _judged_configured(agree) == []
    info_other = config_facts("redis.allkeys-lru", _readings(**{"info.maxmemory_policy": "allkeys-random"}), 1000000)
    assert info_other["redis.allkeys-lru.maxmemory-policy"] == (
        "readings differ: CONFIG GET maxmemory-policy allkeys-lru; INFO info.maxmemory_policy allkeys-lru, allkeys-random"
    )
    assert any("maxmemory-policy" in d for d in _judged_configured(info_other))
    no_info = config_facts("redis.allkeys-lru", _readings(**{"info.maxmemory_policy": None}), 1000000)
    assert no_info["redis.allkeys-lru.maxmemory-policy"].startswith("readings differ: ")
    # maxmemory: INFO's unlike CONFIG GET's is said in the fact, and as_sized is False
    mem = config_facts("redis.allkeys-lru", _readings(**{"info.maxmemory": 800000}), 1000000)
    assert mem["redis.allkeys-lru.maxmemory"] == (
        "readings differ: CONFIG GET maxmemory 1000000; INFO info.maxmemory 1000000, 800000"
    )
    assert mem["redis.allkeys-lru.maxmemory_as_sized"] is False
    assert any("maxmemory_as_sized" in d for d in _judged_configured(mem))


def _judged_configured(facts: dict) -> list[str]:
    """The doubts the analysis raises on C18's allkeys-lru check from its `configured` settings
    (the allkeys-random server's facts given as needed, so that only these readings matter)."""
    from types import SimpleNamespace

    from harness.model import ledger_parse
    from harness.verdict import analysis

    chk = next(
        c
        for c in next(c for c in ledger_parse.load_claims() if c.id == "C18").checks
        if c.metric == "redis.allkeys-lru.hit_rate_pct"
    )
    facts = {
        **facts,
        "redis.allkeys-random.maxmemory-policy": "allkeys-random",
        "redis.allkeys-random.maxmemory_as_sized": True,
    }
    chk = SimpleNamespace(of=None, configured=chk.configured, stand_ins=[], reference=None)
    return analysis._evidence(None, None, chk, facts)


# ---- the controls and the ledger's checks ------------------------------------------------


def test_random_eviction_is_seeded_and_has_known_answers():
    ids = np.array([1, 2, 1, 3, 2, 1, 4, 4])
    big = simulate.random_hits(ids, 10)
    assert big.tolist() == [False, False, True, False, True, True, False, True]  # nothing is ever evicted
    one = simulate.random_hits(ids, 1)
    assert one.tolist() == [False] * 7 + [True]  # one slot: only an immediate repeat hits
    z = traces.zipf_trace(20000, 3000, 0.9, 5).ids
    assert np.array_equal(simulate.random_hits(z, 100, seed=3), simulate.random_hits(z, 100, seed=3))
    assert not np.array_equal(simulate.random_hits(z, 100, seed=3), simulate.random_hits(z, 100, seed=4))


def test_ordering_holds_only_when_strictly_increasing():
    from harness.experiments.eviction.simulate_case import ordering_holds

    assert ordering_holds({"lru": 50, "lfu": 55, "hybrid": 60}, ("lru", "lfu", "hybrid"))
    assert not ordering_holds({"lru": 50, "lfu": 55, "hybrid": 55}, ("lru", "lfu", "hybrid"))
    assert not ordering_holds({"lru": 56, "lfu": 55, "hybrid": 60}, ("lru", "lfu", "hybrid"))


def test_run_labels_name_knobs_only_when_they_differ_from_redis_defaults():
    from harness.experiments.eviction.redis_replay import RunSpec, parse_runs

    assert RunSpec("allkeys-lru", {"maxmemory-samples": 5}).label == "allkeys-lru"
    assert RunSpec("allkeys-lfu", {"lfu-log-factor": 10, "lfu-decay-time": 1}).label == "allkeys-lfu"
    assert RunSpec("allkeys-lru", {"maxmemory-samples": 10}).label == "allkeys-lru.s10"
    with pytest.raises(BadInput, match="listed twice"):
        parse_runs("runs", ["allkeys-lru", {"policy": "allkeys-lru", "maxmemory-samples": 5}])


def _ledger_checks(claim_id: str) -> list:
    from harness.model.ledger import ClaimCheck
    from harness.model.yaml_fields import load_yaml

    claims = load_yaml(REPO / "harness" / "experiments" / "claims.yaml", "claims ledger")["claims"]
    return [ClaimCheck.from_json(c) for c in next(c for c in claims if c["id"] == claim_id)["checks"]]


def _spec():
    return yaml.safe_load((REPO / "harness" / "experiments" / "eviction" / "suite.yaml").read_text())


def test_every_profile_produces_the_metrics_the_ledger_checks():
    """The lab's Redis runs (the source's knobs, which are Redis's defaults) carry the labels
    the ledger's checks and controls name, and so do the local runs."""
    from harness.experiments.eviction.redis_replay import parse_runs

    spec = _spec()
    for profile in ("local", "lab-a100"):
        for case in ("redis", "redis-cluster"):
            runs = spec["profiles"][profile]["params"][case]["runs"]
            labels = {r.label for r in parse_runs("runs", runs)}
            assert {"allkeys-lru", "allkeys-lfu", "allkeys-random"} <= labels, (profile, case)
    for chk in _ledger_checks("C18"):
        if chk.case in ("redis", "redis-cluster"):
            names = [chk.metric, chk.control.metric] + ([chk.control.than] if chk.control.than else [])
            for name in names:
                assert name.split(".")[1] in {"allkeys-lru", "allkeys-lfu", "allkeys-random"}, name


def test_lab_profile_carries_the_source_numbers_as_bands():
    """A point is a band: every claimed figure has both ends, judged where exact LRU hits the
    source's LRU figure (so LRU's own hit rate, 68.2% there by construction, is no threshold)."""
    spec = _spec()
    lab = spec["profiles"]["lab-a100"]
    assert lab["skipped_fails"] is True
    limits = {(t["metric"], t["op"], t["value"]) for t in lab["thresholds"]}
    bands = {chk.metric: chk.band for chk in _ledger_checks("C18") if chk.band is not None}
    assert len(bands) == 7
    for metric, (lo, hi) in bands.items():
        assert (metric, ">=", lo) in limits and (metric, "<=", hi) in limits, metric
    assert not any(m == "sim.lru.hit_rate_pct" or m.endswith("calibrated.lru.hit_rate_pct") for m, _, _ in limits)
    cases = {c["name"]: c for c in spec["cases"]}
    assert cases["simulate"]["params"]["calibrate_lru_hit_pct"] == 68.2  # the source's LRU figure
    assert cases["redis"]["params"]["calibrate_lru_hit_pct"] == 68.2
    runs = lab["params"]["redis"]["runs"]
    assert {"policy": "allkeys-lru", "maxmemory-samples": 5} in runs
    assert {"policy": "allkeys-lfu", "lfu-log-factor": 10, "lfu-decay-time": 1} in runs


def test_lru_stack_distances_give_libcachesims_lru_at_every_size(real20k):
    ids = real20k.ids[:8000]
    d = simulate.lru_stack_distances(ids)
    nxt = traces.next_access(ids)
    for cap in (20, 77, 300):
        assert np.array_equal(simulate.policy_hits("lru", ids, nxt, cap), (d >= 1) & (d <= cap)), cap
    assert simulate.lru_stack_distances(np.array([1, 2, 1, 1, 3, 2])).tolist() == [0, 0, 2, 1, 0, 3]
    cap = simulate.lru_capacity_for(d, 60.0)
    assert (
        simulate.policy_hits("lru", ids, nxt, cap).mean() >= 0.6 > simulate.policy_hits("lru", ids, nxt, cap - 1).mean()
    )
    assert simulate.lru_capacity_for(d, 99.9) is None  # first requests always miss


def _ctx(tmp_path, case: str, params: dict, repetition: int = 1):
    from harness.model.driver_contract import CaseContext, Target

    return CaseContext("eviction", case, repetition, "local", params, tmp_path, Target("none"), log=lambda m: None)


@pytest.fixture(scope="module")
def small_simulation(tmp_path_factory):
    from harness.experiments.eviction import simulate_case

    p = {k: v.default for k, v in simulate_case.SIM_PARAMS.items()}
    p.update(
        n_requests=20000,
        rps_requests=0,
        policies=["lru", "lfu", "hybrid", "lru-2"],
        size_fractions=[0.01, 0.02, 0.05, 0.1, 0.2],
        calibrate_lru_hit_pct=68.2,
    )
    out = simulate_case.run_simulate(_ctx(tmp_path_factory.mktemp("sim"), "simulate", p))
    assert out.status == "ok", out.reason
    assert "tables" not in out.details and "charts" not in out.details
    return out, {k: v.value for k, v in out.metrics.items()}


def _judged(claim_id: str, case: str, metrics: dict, facts: dict | None = None) -> dict:
    """The ledger's real checks of `claim_id` on `case`, judged on these measured metrics (and
    the case's facts: the server settings read back)."""
    from tests.ledger_helpers import verdicts

    return {k: str(v.outcome) for k, v in verdicts(claim_id, case, metrics, suite="eviction", facts=facts).items()}


def test_c18_simulated_checks_on_a_real_simulation(small_simulation):
    """The simulated checks, judged at the size where exact LRU hits the source's 68.2% on this
    trace (the simulation is seeded: these verdicts are this trace's, exactly)."""
    out, m = small_simulation
    assert m["sim.calibrated.lru.hit_rate_pct"] == pytest.approx(68.2, abs=0.2)  # the size is fixed by it
    assert 0 < m["sim.calibrated.size_fraction_pct"] < 20
    for x in ("lru", "lfu", "hybrid"):
        assert m["sim.calibrated.random.hit_rate_pct"] < m[f"sim.calibrated.{x}.hit_rate_pct"]
    # the LRU-K stand-in's strength as the runner gives it (the ledger fixes it: Record.params)
    assert out.facts == {"standin_capacity_ratio": 1.0}  # the LRU-K stand-in ran at the calibrated size
    v = _judged("C18", "simulate", m, facts={"standin_lruk_k": 2, **out.facts})
    # LRU keeps far more of the tail here than the source's 12.5%: the band refutes it (a one-sided
    # >= 12.5 passed it); so do the hybrid's figures
    assert v["sim.calibrated.lru.long_tail_pct"] == "not reproduced", m["sim.calibrated.lru.long_tail_pct"]
    assert v["sim.calibrated.hybrid.long_tail_pct"] == "not reproduced"
    assert v["sim.calibrated.hybrid.hit_rate_pct"] in ("direction reproduced, magnitude differs", "not reproduced")
    assert v["sim.ordering_sizes_pct"] == "reproduced"
    assert "held at: 1%, 2%, 5%, 10%, 20%" in out.metrics["sim.ordering_sizes_pct"].note
    assert out.series["ordering"].column("size_fraction") == [0.01, 0.02, 0.05, 0.1, 0.2]
    assert 0 < m["sim.corpus_passes"] < 1  # 20k tokens of a corpus of more than 50k


def test_c18_mechanism_removed_every_simulated_check_is_not_reproduced(tmp_path):
    """LRU, LFU and the hybrid simulated as seeded random eviction under their own names (the
    mechanism removed; the calibrated size still comes from exact LRU): no ordering is left
    (not reproduced, the ordering's instrument still works), and no calibrated figure is
    reproduced: each disagrees with the pure-Python reference of the policy it is named for,
    and the LRU instrument no longer reads the 68.2% the stack distances give, so every one
    is inconclusive. (Before the reference, random eviction's 39.7% of the tail sat inside
    LFU's band and read not attributable.)"""
    from harness.experiments.eviction import simulate_case

    p = {k: v.default for k, v in simulate_case.SIM_PARAMS.items()}
    p.update(
        n_requests=20000,
        rps_requests=0,
        policies=["lru", "lfu", "hybrid"],
        size_fractions=[0.01, 0.02, 0.05, 0.1, 0.2],
        calibrate_lru_hit_pct=68.2,
        as_random=["lru", "lfu", "hybrid"],
    )
    out = simulate_case.run_simulate(_ctx(tmp_path, "simulate", p))
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["sim.calibrated.lfu.hit_rate_pct"] == m["sim.calibrated.random.hit_rate_pct"]
    assert m["sim.ordering_sizes_pct"] == 0 and out.details["as_random"] == ["lru", "lfu", "hybrid"]
    v = _judged("C18", "simulate", m)
    assert v.pop("sim.ordering_sizes_pct") == "not reproduced"
    assert set(v.values()) == {"inconclusive"}, v


def test_c18_redis_checks_on_real_redis_servers(tmp_path):
    """The Redis checks on a real replay at the calibrated size (standalone redis-servers); with
    the policy removed (the allkeys-random replay's real numbers in the policy's place) each
    check is not reproduced."""
    from harness.experiments.eviction import redis_case

    p = {k: v.default for k, v in redis_case.REDIS_PARAMS.items()}
    p.update(
        n_requests=12000,
        warmup_requests=4000,
        runs=["allkeys-lru", "allkeys-lfu", "allkeys-random"],
        calibrate_lru_hit_pct=68.2,
    )
    out = redis_case.run_redis(_ctx(tmp_path, "redis", p))
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["redis.calibrated.capacity_objects"] > 0
    assert m["redis.allkeys-random.hit_rate_pct"] < m["redis.allkeys-lfu.hit_rate_pct"]
    for policy in ("allkeys-lru", "allkeys-lfu", "allkeys-random"):  # what the servers said they ran
        assert out.facts[f"redis.{policy}.maxmemory-policy"] == policy
        assert out.facts[f"redis.{policy}.maxmemory_as_sized"] is True
    v = _judged("C18", "redis", m, out.facts)
    assert "inconclusive" not in (v["redis.allkeys-lfu.hit_rate_pct"], v["redis.allkeys-lru.hit_rate_pct"]), v
    for policy in ("allkeys-lfu", "allkeys-lru"):
        off = dict(
            m,
            **{
                k.replace("allkeys-random", policy): val
                for k, val in m.items()
                if k.startswith(("redis.allkeys-random.", "reference.redis.allkeys-random."))
            },
        )
        assert _judged("C18", "redis", off, out.facts)[f"redis.{policy}.hit_rate_pct"] == "not reproduced", policy
    # the same numbers from servers that said they ran another policy, or no facts at all: inconclusive
    for policy in ("allkeys-lfu", "allkeys-lru"):
        other = dict(out.facts, **{f"redis.{policy}.maxmemory-policy": "allkeys-random"})
        assert _judged("C18", "redis", m, other)[f"redis.{policy}.hit_rate_pct"] == "inconclusive", policy
    assert set(_judged("C18", "redis", m).values()) == {"inconclusive"}


def _trace_run(tmp_path, **over):
    from harness.experiments.eviction import common, trace_case

    p = {k: v.default for k, v in {**common.TRACE_PARAMS, **trace_case.TRACE_CASE_PARAMS}.items()}
    p.update(n_requests=50000, **over)
    out = trace_case.run_trace(_ctx(tmp_path, "trace", p))
    return out, {k: v.value for k, v in out.metrics.items()}


def test_c19_on_the_real_trace_and_with_the_skew_removed(tmp_path):
    """C19 on the real trace: the instrument (a Zipf(1) trace whose head share the law gives)
    reads right, the head takes far more than its size but not about 30% at 1%; the head size
    is swept. With the skew removed (uniform draws over the same tokens) it is not reproduced."""
    (chk,) = [c for c in _ledger_checks("C19") if c.suite == "eviction"]
    assert chk.band is not None and chk.band_reason and len(chk.instruments) == 2 and chk.mechanism_off
    out, m = _trace_run(tmp_path)
    assert m["real.zipf_control.head_share_pct"] == pytest.approx(
        m["real.zipf_control.expected_head_share_pct"], rel=0.05
    )
    assert m["real.uniform_head_share_pct"] < 5
    sweep = out.series["head_sweep"]
    shares = sweep.column("share_pct")
    assert shares == sorted(shares) and 0.01 in sweep.column("head_fraction")
    assert m["real.head0.1_share_pct"] < 25 < 35 < m["real.head1_share_pct"]  # ~30% lies between 0.1% and 1%
    assert _judged("C19", "trace", m)["real.head_share_pct"] == "exceeded"  # a higher share than claimed at 1%
    off, m_off = _trace_run(tmp_path, skew=False)
    assert m_off["real.head_share_pct"] < 5 and off.details["trace"]["meta"]["skew"].startswith("removed")
    assert _judged("C19", "trace", m_off)["real.head_share_pct"] == "not reproduced"
    assert m["real.corpus_passes"] > 0 and out.series["top_tokens"].column("rank")[:3] == [1, 2, 3]


def test_c19_with_a_broken_instrument_is_inconclusive(tmp_path):
    """The instrument broken (what the head-share meter reads on the Zipf trace no longer
    agrees with the law's share: here the expected share doubled): inconclusive, no verdict."""
    _, m = _trace_run(tmp_path)
    broken = dict(m, **{"real.zipf_control.expected_head_share_pct": 2 * m["real.zipf_control.head_share_pct"]})
    assert _judged("C19", "trace", broken)["real.head_share_pct"] == "inconclusive"


def test_view_builds_tables_from_records_across_repetitions(small_simulation, tmp_path):
    from harness.experiments import views
    from harness.model.ledger import Claim
    from harness.model.spec import Case, SuiteClaim, SuiteRun
    from harness.model.stored_run import Record, RunData
    from harness.verdict.analysis import analyze

    out, _ = small_simulation
    recs = [
        Record(suite="eviction", case="simulate", repetition=rep, metrics=out.metrics, series=out.series)
        for rep in (1, 2)
    ]
    suite = SuiteRun(
        "eviction", "", SuiteClaim("4.2", "t"), "none", "local", "", 2, [Case("simulate", "eviction-simulate")], []
    )
    figures = {"lru_hit_rate_pct": 68.2, "lfu_hit_rate_pct": 71.9, "hybrid_hit_rate_pct": 79.6}
    run = RunData(tmp_path, {}, recs, {"eviction": suite}, [Claim("C18", "4.2", "t", [], figures=figures)])
    blocks = views.build(run, analyze(run), "eviction")
    titles = [b.title for b in blocks]
    assert any(t.startswith("Source table vs simulated") for t in titles)
    source = next(b for b in blocks if b.title.startswith("Source table"))
    assert source.rows[0][2] == 68.2 and source.rows[-1][0].startswith("(control)")
    assert "The source's ordering at several cache sizes (hit rate %)" in titles


def test_calibrated_hit_rates_have_an_independent_reference(monkeypatch):
    """At the calibrated size lru, lfu and the hybrid are simulated again by the pure-Python
    references on the same trace (reference.* metrics, the ledger's cross-check): they agree
    with the fast simulators exactly, and a hybrid simulator that forgets an evicted key's
    count (the LFU admission's history) no longer agrees with its reference."""
    from harness.experiments.eviction import calibrated_size, simulate_case

    p = {k: v.default for k, v in simulate_case.SIM_PARAMS.items()}
    p.update(calibrate_lru_hit_pct=50.0)
    ids = traces.zipf_trace(6000, 800, 1.0, seed=3).ids
    nxt = traces.next_access(ids)
    tail = traces.tail_mask(ids, traces.head_ids(ids, 0.01))
    ctx = _ctx(Path("/nonexistent"), "simulate", p)
    m = {
        k: v.value
        for k, v in simulate_case._calibrated_metrics(ctx, p, ids, nxt, tail, ["lru", "lfu", "hybrid"], "sim").items()
    }
    for x in calibrated_size.REFERENCE_POLICIES:
        for what in ("hit_rate_pct", "long_tail_pct"):
            assert m[f"reference.sim.calibrated.{x}.{what}"] == m[f"sim.calibrated.{x}.{what}"], (x, what)
    assert m["sim.calibrated.lru.hit_rate_pct"] >= 50.0

    def forgetting(ids, capacity, k=2):  # the hybrid without its counts: LRU-K alone
        return simulate.lib_hits("lru-2", ids, None, capacity)

    monkeypatch.setattr(simulate, "hybrid_hits", forgetting)
    m2 = {
        k: v.value
        for k, v in simulate_case._calibrated_metrics(ctx, p, ids, nxt, tail, ["lru", "lfu", "hybrid"], "sim").items()
    }
    assert m2["sim.calibrated.hybrid.hit_rate_pct"] != m2["reference.sim.calibrated.hybrid.hit_rate_pct"]
    assert m2["reference.sim.calibrated.hybrid.hit_rate_pct"] == m["sim.calibrated.hybrid.hit_rate_pct"]
    p["reference_at_calibrated"] = False
    assert not any(
        k.startswith("reference.") for k in simulate_case._calibrated_metrics(ctx, p, ids, nxt, tail, ["lru"], "sim")
    )


def test_every_reference_number_is_computed_in_the_reference_module(monkeypatch):
    """The reference.* metrics of the simulate case are reference.calibrated_rates's numbers, stored
    as they are (the driver computes none of them), and reference.rates counts exactly what
    traces.hit_rates does: the module whose imports each run checks is the one producing them."""
    from harness.experiments.eviction import calibrated_size, simulate_case
    from harness.mechanisms.cache_policies import reference

    ids = traces.zipf_trace(5000, 700, 1.0, seed=4).ids
    nxt = traces.next_access(ids)
    tail = traces.tail_mask(ids, traces.head_ids(ids, 0.01))
    for pol in ("lru", "lfu", "hybrid"):
        hits = simulate.policy_hits(pol, ids, nxt, 60)
        assert reference.rates(hits, tail) == traces.hit_rates(hits, tail)
    assert reference.rates([True, False], [False, False]) == (50.0, 0.0)
    p = {k: v.default for k, v in simulate_case.SIM_PARAMS.items()}
    ctx = _ctx(Path("/nonexistent"), "simulate", p)
    got = reference.calibrated_rates(["lru", "lfu", "hybrid"], ids, nxt, tail, 60, 2)
    m = calibrated_size.reference_metrics(ctx, p, ids, nxt, tail, 60, ["lru", "lfu", "hybrid"], "sim")
    assert {k: v.value for k, v in m.items()} == {
        f"reference.sim.calibrated.{x}.{w}": got[x][w] for x in got for w in ("hit_rate_pct", "long_tail_pct")
    }
    assert got["hybrid"]["reference"] == "RefHybrid"
    # the driver asks the reference module for every number: with it answering 1.0, every metric reads 1.0
    monkeypatch.setattr(reference, "rates", lambda hits, tail: (1.0, 1.0))
    m = calibrated_size.reference_metrics(ctx, p, ids, nxt, tail, 60, ["lru", "lfu", "hybrid"], "sim")
    assert {v.value for v in m.values()} == {1.0}
