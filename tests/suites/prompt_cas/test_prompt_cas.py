"""Version-vector CAS of prompt/response pairs (C20): the pure parts, the Lua rules on the
real cluster, and a short concurrent run whose control must show what the CAS rules prevent."""

from __future__ import annotations

import json
import time

import pytest
import redis

from harness.base.errors import BadInput
from harness.experiments.prompt_cas import drivers as cas
from harness.model.driver_contract import CaseContext


def test_vectors_round_trip():
    assert cas.encode([3, 0, 12]) == "3,0,12"
    assert cas.decode(b"3,0,12", 3) == [3, 0, 12]
    assert cas.decode(None, 2) == [0, 0]


def test_pairs_drop_prompts_without_a_single_partner(tmp_path):
    f = tmp_path / "pairs.json"
    f.write_text(
        json.dumps(
            [
                {"origin": "a", "similar": "A"},
                {"origin": "b", "similar": "B"},
                {"origin": "a", "similar": "A2"},
                {"origin": "c", "similar": "C"},
            ]
        )
    )
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
        return script(keys=[key], args=[rule, sent, "p", "r", w, f"w{w}.{sent}"])

    assert call("dominated", "0,0") == 0  # the source's rule with the vector the client read
    assert cluster_client.hget(key, "prompt") == b"p0"
    assert call("dominated", "1,0") == 1  # with the writer's counter incremented
    # the write's id is stored with the pair: what the read-back follows, whatever the vector says
    assert cluster_client.hgetall(key) == {b"prompt": b"p", b"response": b"r", b"vv": b"1,0", b"wid": b"w1.1,0"}
    assert call("dominated", "0,1", w=2) == 0  # concurrent with the stored vector
    assert call("equal", "0,0", w=2) == 0  # stale read
    assert call("equal", "1,0", w=2) == 1
    assert cluster_client.hget(key, "vv") == b"1,1"  # the server incremented writer 2
    with pytest.raises(redis.ResponseError, match="2 counters stored, 3 sent"):
        call("equal", "1,1,0")


def ledger_checks(claim_id: str, suite: str) -> dict:
    from harness.base.paths import SUITES_DIR
    from harness.model.ledger import ClaimCheck
    from harness.model.yaml_fields import load_yaml

    claims = load_yaml(SUITES_DIR / "claims.yaml", "claims ledger")["claims"]
    raw = next(c for c in claims if c["id"] == claim_id)["checks"]
    return {c["metric"]: ClaimCheck.from_json(c) for c in raw if c["suite"] == suite}


@pytest.fixture(scope="module")
def concurrent_run(cluster, tmp_path_factory):
    params = {k: p.default for k, p in cas.PARAMS.items()}
    params.update(seconds=1.5, writers=4, readers=2, keys=2, modes=list(cas.MODES))
    out = cas.run(
        CaseContext(
            "prompt-cas", "cas", 1, "local", params, tmp_path_factory.mktemp("cas"), cluster, log=lambda m: None
        )
    )
    assert out.status == "ok", out.reason
    return out, {k: v.value for k, v in out.metrics.items()}


def test_concurrent_writers_cas_loses_and_mixes_nothing(concurrent_run):
    out, m = concurrent_run
    # the controls: three HSETs mix pairs; one atomic HSET without CAS mixes nothing but loses updates
    assert m["plain.lost_updates"] > 0 and m["plain.mixups_read"] + m["plain.replica_mixups_read"] > 0
    assert m["atomic.lost_updates"] > 0
    assert m["atomic.mixups_read"] == 0 and m["atomic.replica_mixups_read"] == 0 and m["atomic.mixups_final"] == 0
    # the rule as written applies nothing, and refuses writes nothing conflicted with
    assert m["as-written.applied_pct"] == 0 and m["as-written.attempts"] > 0
    assert m["as-written.unjustified_refusals"] == m["as-written.attempts"]
    for mode in ("incremented", "equal"):
        assert m[f"{mode}.applied_pct"] > 0
        # a CAS: what the writers were told applied is what the read-back finds, and nothing more
        assert m[f"{mode}.applied_pct"] == pytest.approx(m[f"mechanism.{mode}.told_applied_pct"])
        for metric in (
            "lost_updates",
            "unjustified_refusals",
            "refused_but_applied",
            "foreign_final_keys",
            "mixups_read",
            "replica_mixups_read",
            "mixups_final",
            "replica_mixups_final",
            "replica_diverged_keys",
            "errors",
        ):
            assert m[f"{mode}.{metric}"] == 0, (mode, metric)
    for mode in cas.MODES:  # the instruments' canary, in every rule: seen mixed on every read, one write lost
        assert m[f"{mode}.canary_lost_updates"] == 1 and m[f"{mode}.canary_unjustified_refusals"] == 1, mode
        assert m[f"{mode}.canary_refused_but_applied"] == 1, mode
        assert m[f"{mode}.replica_connections_not_replica"] == 0, mode
        assert m[f"{mode}.canary_mixups_read"] == m[f"{mode}.canary_reads"] > 0, mode
        assert m[f"{mode}.canary_replica_mixups_read"] == m[f"{mode}.canary_replica_reads"] > 0, mode
    rules = out.series["rules"]
    assert rules.column("rule") == list(cas.MODES) and "tables" not in out.details
    assert rules.column("replica_reads")[cas.MODES.index("equal")] > 0  # the replicas were read, not skipped


def test_each_c20_check_flips_when_its_mechanism_is_removed(concurrent_run):
    """CAS off (one atomic HSET, no version check) -> lost updates appear; atomicity off
    (three HSETs) -> mix-ups appear; the rule as written -> nothing applied, the increment
    makes it apply. Each ledger check holds on one side and fails on the other."""
    _, m = concurrent_run
    checks = ledger_checks("C20", "prompt-cas")
    lost, mixed, replica = (
        checks["incremented.lost_updates"],
        checks["incremented.mixups_read"],
        checks["incremented.replica_mixups_read"],
    )
    assert lost.in_claim(m["incremented.lost_updates"]) and not lost.in_claim(m["atomic.lost_updates"])
    assert mixed.in_claim(m["incremented.mixups_read"]) and not mixed.in_claim(m["plain.mixups_read"])
    assert replica.in_claim(m["incremented.replica_mixups_read"])
    applied = checks["as-written.applied_pct"]
    assert not applied.in_claim(m["as-written.applied_pct"]) and applied.in_claim(m["incremented.applied_pct"])
    refusals = checks["incremented.unjustified_refusals"]
    assert refusals.in_claim(m["incremented.unjustified_refusals"])
    assert not refusals.in_claim(m["as-written.unjustified_refusals"])
    for chk in checks.values():  # every check's controls name metrics this run produced
        assert chk.controls
        for c in chk.controls:
            assert c.metric in m and (c.than is None or c.than in m), (chk.metric, c.metric)


def test_lab_profile_carries_the_source_claim_and_fails_on_skips():
    """The source gives the rule and 'no response mix-ups' (no writers, keys or duration):
    the lab profile checks exactly that, beside both controls, and a skip fails it."""
    from harness.base.paths import suite_spec
    from harness.model.yaml_fields import load_yaml

    lab = load_yaml(suite_spec("prompt-cas"), "spec")["profiles"]["lab-a100"]
    assert lab["skipped_fails"] is True
    limits = {(t["metric"], t["op"], t["value"]) for t in lab["thresholds"]}
    assert {
        ("incremented.mixups_read", "<=", 0),
        ("incremented.replica_mixups_read", "<=", 0),
        ("plain.mixups_read", ">", 0),
        ("atomic.lost_updates", ">", 0),
    } <= limits


def test_view_presents_every_rule_across_repetitions(concurrent_run, tmp_path):
    from harness.experiments import views
    from harness.model.spec import Case, SuiteClaim, SuiteRun
    from harness.model.stored_run import Record, RunData
    from harness.verdict.analysis import analyze

    out, _ = concurrent_run
    recs = [
        Record(suite="prompt-cas", case="cas", repetition=rep, metrics=out.metrics, series=out.series) for rep in (1, 2)
    ]
    suite = SuiteRun(
        "prompt-cas", "", SuiteClaim("4.3", "t"), "cluster", "local", "", 2, [Case("cas", "prompt-cas-rules")], []
    )
    run = RunData(tmp_path, {}, recs, {"prompt-cas": suite}, [])
    (table,) = views.build(run, analyze(run), "prompt-cas")
    assert [r[0] for r in table.rows] == list(cas.MODES) and table.columns[:2] == ["rule", "what"]
    assert "one HSET" in table.rows[1][1]


# ---- C20 judged on real runs: readers that read too little, and the mechanisms removed ------


def test_mixups_are_not_measured_when_a_reader_read_too_little():
    base = {
        "attempts": 10,
        "told_applied": 5,
        "chain": 5,
        "lost": 0,
        "unjustified_refusals": 0,
        "refused_but_applied": 0,
        "foreign_final_keys": 0,
        "mixups_read": 0,
        "replica_mixups_read": 0,
        "canary_mixups_read": 3,
        "canary_replica_mixups_read": 3,
        "canary_reads": 3,
        "canary_replica_reads": 3,
        "canary_lost_updates": 1,
        "canary_unjustified_refusals": 1,
        "canary_refused_but_applied": 1,
        "mixups_final": 0,
        "replica_mixups_final": 0,
        "replica_diverged_keys": 0,
        "replica_connections_not_replica": 0,
        "errors": 0,
        "p50_ms": 1.0,
        "p99_ms": 2.0,
        "reader_errors": 0,
        "vv_lost_updates": 0,
        "reads": 40,
        "replica_reads": 40,
        "acked_writes": 5,
        "refused_writes": 5,
        "conflicting_writes": 5,
        "conflicts_refused": 5,
        "reads_of_new_writes": 30,
        "replica_reads_of_new_writes": 30,
        "replica_copies_read_back": 2,
    }
    m = cas.rule_metrics({**base, "reader_min_reads": 20, "reader_min_replica_reads": 20}, 20, True)
    assert m["mixups_read"].value == 0 and m["replica_mixups_read"].value == 0
    m = cas.rule_metrics({**base, "reader_min_reads": 19, "reader_min_replica_reads": 400}, 20, True)
    assert "mixups_read" not in m and m["replica_mixups_read"].value == 0 and m["reader_min_reads"].value == 19
    m = cas.rule_metrics({**base, "reader_min_reads": 400, "reader_min_replica_reads": 0}, 20, False)
    assert "replica_mixups_read" not in m  # no replicas: nothing read there, nothing measured
    assert cas.reads_per_reader({0: {"reads": 30, "replica_reads": 31}}, 2) == {
        "reader_min_reads": 0,
        "reader_min_replica_reads": 0,
    }  # reader 1 never started


def _c20(out, tmp_path, metrics=None):
    """C20's checks judged by harness.verdict.analysis on a run with this outcome's metrics."""
    from harness.model.ledger_parse import load_claims
    from harness.model.spec import load_all_suites
    from harness.model.stored_run import Record, RunData
    from harness.verdict.analysis import analyze
    from tests import ledger_helpers

    suites = load_all_suites()
    suite = suites["prompt-cas"]
    rec = Record(suite="prompt-cas", case="cas", repetition=1, metrics=metrics or out.metrics, series=out.series)
    run = RunData(
        tmp_path,
        dict(ledger_helpers.HERE),
        [rec],
        {"prompt-cas": suite.as_run("local", 1, {c.name: {} for c in suite.cases})},
        load_claims(suites=suites),
    )
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
    params.update(
        seconds=0.3, writers=2, readers=1, keys=2, modes=["as-written", "incremented"], min_reads_per_reader=1
    )
    out = cas.run(
        CaseContext("prompt-cas", "cas", 1, "local", params, tmp_path, _slow_target(cluster, slow), log=lambda m: None)
    )
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
    out = cas.run(
        CaseContext(
            "prompt-cas", "cas", 1, "local", params, tmp_path, _slow_target(cluster, refuse), log=lambda m: None
        )
    )
    assert out.status == "failed"
    assert (
        out.reason
        == "plain: no writer made an update; first error: ConnectionError: Connection refused (a test's writer)"
    )


def test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed(concurrent_run, tmp_path):
    """The ledger's verdicts on the real concurrent run, then with each mechanism removed:
    the measured side replaced by the same run's arm without it (non-atomic writes: plain;
    no version check: atomic; the rule as written), and each instrument blinded (its canary
    seen as nothing)."""
    out, _ = concurrent_run
    got = _c20(out, tmp_path)
    assert got["as-written.applied_pct"].outcome.value == "not reproduced"  # the rule as written applies nothing
    for metric in (
        "incremented.mixups_read",
        "incremented.replica_mixups_read",
        "incremented.lost_updates",
        "incremented.unjustified_refusals",
    ):
        assert got[metric].outcome.value == "reproduced", (metric, got[metric].reason)

    def removed(**swap):
        return _c20(out, tmp_path, {**out.metrics, **{k.replace("__", "."): out.metrics[v] for k, v in swap.items()}})

    def blinded(metric):
        from harness.model.driver_contract import Metric

        return _c20(out, tmp_path, {**out.metrics, metric: Metric(0, out.metrics[metric].unit)})

    assert (
        removed(incremented__mixups_read="plain.mixups_read")["incremented.mixups_read"].outcome.value
        == "not reproduced"
    )
    assert (
        removed(incremented__lost_updates="atomic.lost_updates")["incremented.lost_updates"].outcome.value
        == "not reproduced"
    )
    assert (
        removed(incremented__unjustified_refusals="as-written.unjustified_refusals")[
            "incremented.unjustified_refusals"
        ].outcome.value
        == "not reproduced"
    )
    assert blinded("incremented.canary_mixups_read")["incremented.mixups_read"].outcome.value == "inconclusive"
    assert (
        blinded("incremented.canary_replica_mixups_read")["incremented.replica_mixups_read"].outcome.value
        == "inconclusive"
    )
    assert blinded("incremented.canary_lost_updates")["incremented.lost_updates"].outcome.value == "inconclusive"
    assert (
        blinded("incremented.canary_unjustified_refusals")["incremented.unjustified_refusals"].outcome.value
        == "inconclusive"
    )
    assert (
        blinded("incremented.canary_refused_but_applied")["incremented.refused_but_applied"].outcome.value
        == "inconclusive"
    )
    # issue 52: a zero counts only where its situation arose in the judged arm (races that reached the CAS,
    # reads served after a write of the run), and out of something: either at 0 reads inconclusive
    for metric, situation, denominator in (
        ("incremented.mixups_read", "incremented.reads_of_new_writes", "incremented.reads"),
        ("incremented.replica_mixups_read", "incremented.replica_reads_of_new_writes", "incremented.replica_reads"),
        ("incremented.lost_updates", "incremented.conflicting_writes", "incremented.acked_writes"),
        ("incremented.refused_but_applied", "incremented.conflicts_refused", "incremented.refused_writes"),
        ("incremented.unjustified_refusals", "incremented.conflicting_writes", "incremented.refused_writes"),
    ):
        assert out.metrics[situation].value >= 50 and out.metrics[denominator].value > 0, metric
        assert blinded(situation)[metric].outcome.value == "inconclusive", (metric, situation)
        assert blinded(denominator)[metric].outcome.value == "inconclusive", (metric, denominator)
    # a script that applies every write and replies 'refused': nothing told applied is lost, but
    # the read-back finds the refused writes applied
    lying = {**out.metrics, "incremented.refused_but_applied": out.metrics["incremented.attempts"]}
    assert _c20(out, tmp_path, lying)["incremented.refused_but_applied"].outcome.value == "not reproduced"
