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
    with pytest.raises(BadInput, match="writers: must be at least 1"):
        cas.PARAMS["writers"].check("cases[0].params.writers", 0)
    with pytest.raises(BadInput, match="seconds: must be at least 0.1"):
        cas.PARAMS["seconds"].check("cases[0].params.seconds", 0.0)
    with pytest.raises(BadInput, match="modes: give at least one"):
        cas._check("cases[0].params", {k: p.default for k, p in cas.PARAMS.items()} | {"modes": []})


def test_rule_order_rotates_per_repetition():
    modes = ["plain", "atomic", "incremented"]
    assert cas.order_for(modes, 1) == modes
    assert cas.order_for(modes, 2) == ["atomic", "incremented", "plain"]
    assert cas.order_for(modes, 4) == modes


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


def ledger_checks(claim_id: str, suite: str) -> dict:
    from harness.paths import SUITES_DIR
    from harness.spec import ClaimCheck, load_yaml

    claims = load_yaml(SUITES_DIR / "claims.yaml", "claims ledger")["claims"]
    raw = next(c for c in claims if c["id"] == claim_id)["checks"]
    return {c["metric"]: ClaimCheck.from_json(c) for c in raw if c["suite"] == suite}


@pytest.fixture(scope="module")
def concurrent_run(cluster, tmp_path_factory):
    params = {k: p.default for k, p in cas.PARAMS.items()}
    params.update(seconds=1.5, writers=4, readers=2, keys=2, modes=list(cas.MODES))
    out = cas.run(CaseContext("prompt-cas", "cas", 1, "local", params, tmp_path_factory.mktemp("cas"), cluster,
                              log=lambda m: None))
    assert out.status == "ok", out.reason
    return out, {k: v.value for k, v in out.metrics.items()}


def test_concurrent_writers_cas_loses_and_mixes_nothing(concurrent_run):
    out, m = concurrent_run
    # the controls: three HSETs mix pairs; one atomic HSET without CAS mixes nothing but loses updates
    assert m["plain.lost_updates"] > 0 and m["plain.mixups_read"] + m["plain.replica_mixups_read"] > 0
    assert m["atomic.lost_updates"] > 0
    assert m["atomic.mixups_read"] == 0 and m["atomic.replica_mixups_read"] == 0 and m["atomic.mixups_final"] == 0
    assert m["as-written.applied_pct"] == 0 and m["as-written.attempts"] > 0
    for mode in ("incremented", "equal"):
        assert m[f"{mode}.applied_pct"] > 0
        for metric in ("lost_updates", "mixups_read", "replica_mixups_read", "mixups_final",
                       "replica_mixups_final", "replica_diverged_keys", "errors"):
            assert m[f"{mode}.{metric}"] == 0, (mode, metric)
    rules = out.series["rules"]
    assert rules.column("rule") == list(cas.MODES) and "tables" not in out.details
    assert rules.column("replica_reads")[cas.MODES.index("equal")] > 0  # the replicas were read, not skipped


def test_each_c20_check_flips_when_its_mechanism_is_removed(concurrent_run):
    """CAS off (one atomic HSET, no version check) -> lost updates appear; atomicity off
    (three HSETs) -> mix-ups appear; the rule as written -> nothing applied, the increment
    makes it apply. Each ledger check holds on one side and fails on the other."""
    _, m = concurrent_run
    checks = ledger_checks("C20", "prompt-cas")
    lost, mixed, replica = (checks["incremented.lost_updates"], checks["incremented.mixups_read"],
                            checks["incremented.replica_mixups_read"])
    assert lost.in_claim(m["incremented.lost_updates"]) and not lost.in_claim(m["atomic.lost_updates"])
    assert mixed.in_claim(m["incremented.mixups_read"]) and not mixed.in_claim(m["plain.mixups_read"])
    assert replica.in_claim(m["incremented.replica_mixups_read"])
    applied = checks["as-written.applied_pct"]
    assert not applied.in_claim(m["as-written.applied_pct"]) and applied.in_claim(m["incremented.applied_pct"])
    for chk in checks.values():  # every check's control names a metric this run produced
        assert chk.control is not None and chk.control.metric in m


def test_lab_profile_carries_the_source_claim_and_fails_on_skips():
    """The source gives the rule and 'no response mix-ups' (no writers, keys or duration):
    the lab profile checks exactly that, beside both controls, and a skip fails it."""
    from harness.paths import SUITES_DIR
    from harness.spec import load_yaml

    lab = load_yaml(SUITES_DIR / "prompt-cas.yaml", "spec")["profiles"]["lab-a100"]
    assert lab["skipped_fails"] is True
    limits = {(t["metric"], t["op"], t["value"]) for t in lab["thresholds"]}
    assert {("incremented.mixups_read", "<=", 0), ("incremented.replica_mixups_read", "<=", 0),
            ("plain.mixups_read", ">", 0), ("atomic.lost_updates", ">", 0)} <= limits


def test_view_presents_every_rule_across_repetitions(concurrent_run, tmp_path):
    from harness.analysis import analyze
    from harness.report import views
    from harness.results import Record, RunData
    from harness.spec import Case, SuiteClaim, SuiteRun

    out, _ = concurrent_run
    recs = [Record("prompt-cas", "cas", rep, "ok", metrics=out.metrics, series=out.series) for rep in (1, 2)]
    suite = SuiteRun("prompt-cas", "", SuiteClaim("4.3", "t"), "cluster", "local", "", 2, [Case("cas", "prompt-cas-rules")], [])
    run = RunData(tmp_path, {}, recs, {"prompt-cas": suite}, [])
    (table,) = views.build(run, analyze(run), "prompt-cas")
    assert [r[0] for r in table.rows] == list(cas.MODES) and table.columns[:2] == ["rule", "what"]
    assert "one HSET" in table.rows[1][1]
