"""Version-vector CAS of prompt/response pairs (C20): the pure parts, the Lua rules on the
real cluster, and a short concurrent run whose control must show what the CAS rules prevent."""

from __future__ import annotations

import json

import pytest
import redis

from harness.drivers import CaseContext
from harness.errors import BadInput
from harness.experiments.prompt_cas import drivers as cas


def test_vectors_round_trip():
    assert cas.encode([3, 0, 12]) == "3,0,12"
    assert cas.decode(b"3,0,12", 3) == [3, 0, 12]
    assert cas.decode(None, 2) == [0, 0]


def test_pairs_drop_prompts_without_a_single_partner(tmp_path):
    f = tmp_path / "pairs.json"
    f.write_text(json.dumps([{"origin": "a", "similar": "A"}, {"origin": "b", "similar": "B"},
                             {"origin": "a", "similar": "A2"}, {"origin": "c", "similar": "C"}]))
    assert cas.load_pairs(str(f)) == {"b": "B", "c": "C"}


def test_shipped_pairs_load():
    pairs = cas.load_pairs(cas.PARAMS["pairs"].default)
    assert len(pairs) > 900


def test_bad_pairs_and_params_are_refused(tmp_path):
    f = tmp_path / "one.json"
    f.write_text(json.dumps([{"origin": "a", "similar": "A"}]))
    with pytest.raises(BadInput, match="fewer than 2 prompts"):
        cas.load_pairs(str(f))
    good = {k: p.default for k, p in cas.PARAMS.items()}
    with pytest.raises(BadInput, match="writers: must be at least 1"):
        cas._check("cases[0].params", dict(good, writers=0))
    with pytest.raises(BadInput, match="seconds: must be positive"):
        cas._check("cases[0].params", dict(good, seconds=0.0))


def test_lua_rules_on_the_cluster(cluster, cluster_client):
    key = "pp:{lua-test}"
    cluster_client.hset(key, mapping={"prompt": "p0", "response": "r0", "vv": "0,0"})
    script = cluster_client.register_script(cas.CAS_LUA)

    def call(rule, sent, w=1):
        return script(keys=[key], args=[rule, sent, "p", "r", w])

    assert call("dominated", "0,0") == 0  # the source's rule with the vector the client read
    assert cluster_client.hget(key, "prompt") == b"p0"
    assert call("dominated", "1,0") == 1  # with the writer's counter incremented
    assert cluster_client.hgetall(key) == {b"prompt": b"p", b"response": b"r", b"vv": b"1,0"}
    assert call("dominated", "0,1", w=2) == 0  # concurrent with the stored vector
    assert call("equal", "0,0", w=2) == 0  # stale read
    assert call("equal", "1,0", w=2) == 1
    assert cluster_client.hget(key, "vv") == b"1,1"  # the server incremented writer 2
    with pytest.raises(redis.ResponseError, match="2 counters stored, 3 sent"):
        call("equal", "1,1,0")


def test_concurrent_writers_cas_loses_and_mixes_nothing(cluster, cluster_client, tmp_path):
    params = {k: p.default for k, p in cas.PARAMS.items()}
    params.update(seconds=1.5, writers=4, readers=2, keys=2, modes=["plain", "as-written", "incremented", "equal"])
    out = cas.run(CaseContext("prompt-cas", "cas", 1, "local", params, tmp_path, cluster, log=lambda m: None))
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    # the control: without CAS, concurrent writers lose updates and readers see mixed pairs
    assert m["plain.lost_updates"] > 0 and m["plain.mixups_read"] + m["plain.replica_mixups_read"] > 0
    assert m["as-written.applied_pct"] == 0 and m["as-written.attempts"] > 0
    for mode in ("incremented", "equal"):
        assert m[f"{mode}.applied_pct"] > 0
        for metric in ("lost_updates", "mixups_read", "replica_mixups_read", "mixups_final",
                       "replica_mixups_final", "replica_diverged_keys", "errors"):
            assert m[f"{mode}.{metric}"] == 0, (mode, metric)
    # the replicas were read, not skipped
    assert m["equal.replica_mixups_read"] == 0
    assert out.details["tables"][0]["rows"][0][0] == "plain"
    assert int(out.details["tables"][0]["rows"][3][6].split(" / ")[1]) > 0  # replica reads under 'equal'
