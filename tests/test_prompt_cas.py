"""Version-vector CAS of prompt/response pairs (C20): the pure parts, the Lua rules on the
real cluster, and a short concurrent run whose control must show what the CAS rules prevent."""

from __future__ import annotations

import json
import time

import pytest
import redis

from harness.driver_contract import CaseContext
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


# ---- C20 judged on real runs: readers that read too little, and the mechanisms removed ------

def test_mixups_are_not_measured_when_a_reader_read_too_little():
    base = {"attempts": 10, "applied": 5, "lost_updates": 0, "mixups_read": 0, "replica_mixups_read": 0,
            "mixups_final": 0, "replica_mixups_final": 0, "replica_diverged_keys": 0, "errors": 0,
            "p50_ms": 1.0, "p99_ms": 2.0, "reader_errors": 0}
    m = cas.rule_metrics({**base, "reader_min_reads": 20, "reader_min_replica_reads": 20}, 20, True)
    assert m["mixups_read"].value == 0 and m["replica_mixups_read"].value == 0
    m = cas.rule_metrics({**base, "reader_min_reads": 19, "reader_min_replica_reads": 400}, 20, True)
    assert "mixups_read" not in m and m["replica_mixups_read"].value == 0 and m["reader_min_reads"].value == 19
    m = cas.rule_metrics({**base, "reader_min_reads": 400, "reader_min_replica_reads": 0}, 20, False)
    assert "replica_mixups_read" not in m  # no replicas: nothing read there, nothing measured
    assert cas.reads_per_reader({0: {"reads": 30, "replica_reads": 31}}, 2) == {
        "reader_min_reads": 0, "reader_min_replica_reads": 0}  # reader 1 never started


def _c20(out, tmp_path, metrics=None):
    """C20's checks judged by harness.analysis on a run with this outcome's metrics."""
    from harness.analysis import analyze
    from harness.results import Record, RunData
    from harness.spec import load_all_suites, load_claims
    from tests import ledger_helpers

    suites = load_all_suites()
    suite = suites["prompt-cas"]
    rec = Record("prompt-cas", "cas", 1, "ok", metrics=metrics or out.metrics, series=out.series)
    run = RunData(tmp_path, dict(ledger_helpers.HERE), [rec],
                  {"prompt-cas": suite.as_run("local", 1, {c.name: {} for c in suite.cases})},
                  load_claims(suites=suites))
    claim = next(c for c in analyze(run).claims if c.id == "C20")
    return {cv.check.metric: cv for cv in claim.checks}


def test_readers_that_die_leave_the_mixups_not_measured(cluster, tmp_path):
    """Every reader's client points at a port where nothing listens: each dies at its first
    read (no traceback: it is counted) and reads nothing. Its '0 mix-ups' is not a
    measurement: the mix-up metrics are left out and the ledger says `not measured`."""
    import dataclasses
    import threading

    from tests.conftest import free_port

    dead = free_port()

    @dataclasses.dataclass
    class DeadReaders(type(cluster)):
        def client(self, node, **kw):
            if threading.current_thread().name.startswith("prompt-cas-reader"):
                node = dataclasses.replace(node, port=dead)
            return super().client(node, **kw)

    target = DeadReaders(**{f.name: getattr(cluster, f.name) for f in dataclasses.fields(cluster)})
    params = {k: p.default for k, p in cas.PARAMS.items()}
    params.update(seconds=0.5, writers=2, readers=2, keys=2, modes=["plain", "incremented"])
    out = cas.run(CaseContext("prompt-cas", "cas", 1, "local", params, tmp_path, target, log=lambda m: None))
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    for mode in ("plain", "incremented"):
        assert f"{mode}.mixups_read" not in m and f"{mode}.replica_mixups_read" not in m
        assert m[f"{mode}.reader_errors"] == 2 and m[f"{mode}.reader_min_reads"] == 0
        assert m[f"{mode}.attempts"] > 0  # the writers ran
    assert "Connection" in " ".join(out.details["mixups_not_measured"])
    got = _c20(out, tmp_path)
    assert got["incremented.mixups_read"].outcome.value == "not measured"
    assert got["incremented.replica_mixups_read"].outcome.value == "not measured"


def _slow_target(cluster, connect):
    """The real cluster, with each writer thread's cluster client made by `connect(real)`."""
    import dataclasses
    import threading

    @dataclasses.dataclass
    class Slow(type(cluster)):
        def cluster_client(self, **kw):
            real = super().cluster_client
            if not threading.current_thread().name.startswith("prompt-cas-writer"):
                return real(**kw)
            return connect(lambda: real(**kw))

    return Slow(**{f.name: getattr(cluster, f.name) for f in dataclasses.fields(cluster)})


def test_a_rules_seconds_start_when_its_writers_have_connected(cluster, tmp_path):
    """Writers whose cluster clients take 1.5 s to connect (a loaded machine: CI once saw a
    1.5 s rule end with no attempt made) still run the rule's 0.3 s: its clock starts at the
    gate, after every thread has connected."""
    def slow(real):
        time.sleep(1.5)
        return real()

    params = {k: p.default for k, p in cas.PARAMS.items()}
    params.update(seconds=0.3, writers=2, readers=1, keys=2, modes=["as-written", "incremented"],
                  min_reads_per_reader=1)
    out = cas.run(CaseContext("prompt-cas", "cas", 1, "local", params, tmp_path, _slow_target(cluster, slow),
                              log=lambda m: None))
    assert out.status == "ok", out.reason
    assert out.metrics["as-written.attempts"].value > 0 and out.metrics["as-written.applied_pct"].value == 0
    assert out.metrics["incremented.applied_pct"].value > 0


def test_a_rule_with_no_update_made_fails_the_case_with_the_first_error(cluster, tmp_path):
    """No writer can connect: the rule made no update, and the case fails saying why rather
    than leaving its metrics out as if nothing were wrong."""
    def refuse(real):
        raise ConnectionError("Connection refused (a test's writer)")

    params = {k: p.default for k, p in cas.PARAMS.items()}
    params.update(seconds=0.2, writers=2, readers=1, keys=2, modes=["plain"])
    out = cas.run(CaseContext("prompt-cas", "cas", 1, "local", params, tmp_path, _slow_target(cluster, refuse),
                              log=lambda m: None))
    assert out.status == "failed"
    assert out.reason == "plain: no writer made an update; first error: ConnectionError: Connection refused (a test's writer)"


def test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed(concurrent_run, tmp_path):
    """The ledger's verdicts on the real concurrent run, then with each mechanism removed:
    the measured side replaced by the same run's arm without it (non-atomic writes: plain;
    no version check: atomic), and the instrument broken (the plain arm made to mix nothing)."""
    out, _ = concurrent_run
    got = _c20(out, tmp_path)
    assert got["as-written.applied_pct"].outcome.value == "not reproduced"  # the rule as written applies nothing
    for metric in ("incremented.mixups_read", "incremented.replica_mixups_read", "incremented.lost_updates"):
        assert got[metric].outcome.value == "reproduced", (metric, got[metric].reason)

    def removed(**swap):
        return _c20(out, tmp_path, {**out.metrics, **{k.replace("__", "."): out.metrics[v] for k, v in swap.items()}})

    assert removed(incremented__mixups_read="plain.mixups_read")["incremented.mixups_read"].outcome.value \
        == "not reproduced"
    assert removed(incremented__lost_updates="atomic.lost_updates")["incremented.lost_updates"].outcome.value \
        == "not reproduced"
    blind = removed(plain__mixups_read="atomic.mixups_read")  # the instrument broken: no mix-ups to see
    assert blind["incremented.mixups_read"].outcome.value == "inconclusive"
