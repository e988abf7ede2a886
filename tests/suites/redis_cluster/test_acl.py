"""The source's read-only inference user (C21): NOPERM counted explicitly, on the real cluster."""

import pytest
import redis

from harness.base.errors import BadInput
from harness.base.paths import SUITES_DIR
from harness.experiments.redis_cluster import acl
from harness.model.driver_contract import CaseContext
from harness.model.ledger import ClaimCheck
from harness.model.yaml_fields import load_yaml


def ledger_checks(claim_id: str, suite: str) -> dict[str, ClaimCheck]:
    """The ledger's checks of one claim on one suite, by metric (read without loading every
    suite, so that this test depends on the ledger's text only)."""
    claims = load_yaml(SUITES_DIR / "claims.yaml", "claims ledger")["claims"]
    raw = next(c for c in claims if c["id"] == claim_id)["checks"]
    return {c["metric"]: ClaimCheck.from_json(c) for c in raw if c["suite"] == suite}


def _run(cluster, tmp_path, rules=None, repetition=1):
    params = {k: p.default for k, p in acl.PARAMS.items()}
    if rules is not None:
        params["rules"] = rules
    out = acl.run(
        CaseContext("redis-cluster", "acl", repetition, "local", params, tmp_path, cluster, log=lambda m: None)
    )
    assert out.status == "ok", out.reason
    return out, {k: v.value for k, v in out.metrics.items()}


def test_only_noperm_counts_as_refused():
    assert acl.classify(redis.exceptions.NoPermissionError("NOPERM this user has no permissions")) == "NOPERM"
    assert acl.classify(redis.ResponseError("WRONGTYPE Operation against a key")).startswith("error: ")
    assert acl.classify(redis.ResponseError("MOVED 3999 127.0.0.1:7001")).startswith("error: ")
    t = acl.tally(
        [
            ("read", "ok"),
            ("read", "NOPERM"),
            ("write", "NOPERM"),
            ("write", "ok"),
            ("other-key", "error: ResponseError: WRONGTYPE"),
            ("command", "ok (ACL DRYRUN: granted, not sent)"),
        ]
    )
    assert t == {
        "reads_allowed": 1,
        "forbidden_noperm": 1,
        "forbidden_executed": 2,
        "forbidden_other_error": 1,
        "forbidden_not_refused": 3,
        "writes_allowed": 1,
        "other_keys_allowed": 0,
        "forbidden_sent": 4,
        "forbidden_reached": 0,
        "writes_sent": 2,
        "other_keys_sent": 1,
    }
    # reached: only what the node's own counters saw (the third element), never the reply alone
    t = acl.tally([("write", "NOPERM", True), ("write", "NOPERM", False), ("command", "ok", True)])
    assert (t["forbidden_sent"], t["forbidden_reached"], t["forbidden_noperm"]) == (3, 2, 2)


def test_commandstats_entry_of_each_probe():
    assert acl.stat_name(("GET", "cache:x")) == "get"
    assert acl.stat_name(("CONFIG", "GET", "maxmemory")) == "config|get"
    assert acl.stat_name(("CLUSTER", "RESET", "SOFT")) == "cluster|reset"
    assert acl.stat_name(("EVAL", "return 1", "0")) == "eval"


def test_at_least_ten_forbidden_probes_of_every_kind_the_issue_names():
    assert acl.N_FORBIDDEN >= 10 and acl.N_ALLOWED == 2
    commands = {args[0] for _, args, kind in acl.PROBES if kind != "read"}
    assert {"SET", "DEL", "FLUSHALL", "CONFIG", "EVAL", "KEYS", "ACL", "CLUSTER"} <= commands
    assert sum(args[1].startswith("other:") for _, args, kind in acl.PROBES if kind == "other-key") == 2


def test_rules_carrying_passwords_are_refused():
    p = {k: v.default for k, v in acl.PARAMS.items()}
    with pytest.raises(BadInput, match="password"):
        acl._check("cases[2].params", dict(p, rules={"x": "on >secret +get ~cache:*"}))
    with pytest.raises(BadInput, match="at least one rule"):
        acl._check("cases[2].params", dict(p, rules={}))
    with pytest.raises(BadInput, match="rule name '../<script>' is not allowed"):
        acl._check("cases[2].params", dict(p, rules={"../<script>": acl.WORKING_RULE}))
    with pytest.raises(BadInput, match="remove 'reset'"):
        acl._check("cases[2].params", dict(p, rules={"x": "reset +get ~cache:*"}))


def test_trt_infer_as_written_grants_nothing_and_the_working_order_reads_only(cluster, tmp_path):
    out, m = _run(cluster, tmp_path)
    n = acl.N_FORBIDDEN
    # as written: the trailing -@all removes the reads; every forbidden probe is a NOPERM
    assert m["source.reads_allowed"] == 0 and m["source.forbidden_noperm"] == n
    # the working order: both reads work, and all forbidden probes get NOPERM (no other error)
    assert m["fixed.reads_allowed"] == 2
    assert m["fixed.forbidden_noperm"] == n and m["fixed.forbidden_not_refused"] == 0
    assert (
        m["fixed.writes_allowed"] == 0 and m["fixed.other_keys_allowed"] == 0 and m["read-all.other_keys_allowed"] == 2
    )
    # the refusal control: every read on every key lets reads of other prefixes, KEYS, SCAN and MGET run
    assert m["read-all.forbidden_executed"] >= 5 and m["read-all.forbidden_noperm"] < n
    replies = dict(
        zip(
            zip(out.series["probes"].column("rule"), out.series["probes"].column("probe")),
            out.series["probes"].column("reply"),
        )
    )
    assert replies[("read-all", "GET another prefix")] == "ok"
    assert replies[("read-all", "FLUSHALL")] == "NOPERM" and replies[("fixed", "CLUSTER RESET")] == "NOPERM"
    # the owning node's own counters saw every forbidden probe, and its ACL LOG every denial
    for rule in ("source", "fixed", "read-all"):
        assert m[f"{rule}.forbidden_sent"] == n and m[f"{rule}.forbidden_reached"] == n
        assert m[f"{rule}.writes_sent"] == acl.N_WRITES and m[f"{rule}.other_keys_sent"] == acl.N_OTHER_KEYS
    assert m["source.denials_logged"] == m["source.forbidden_noperm"] + 2  # the two reads are denied too
    assert m["fixed.denials_logged"] == n and m["read-all.denials_logged"] == m["read-all.forbidden_noperm"]
    assert set(out.series["probes"].column("node_saw")) == {"yes"}
    for n_ in cluster.nodes:  # the user is removed from every node afterwards
        users = redis.Redis(host=n_.host, port=n_.port, decode_responses=True).execute_command("ACL", "USERS")
        assert "trt-infer" not in users


def test_the_ledger_checks_flip_when_the_mechanism_is_removed(cluster, tmp_path):
    """C21's checks: reordering the rule (the trailing -@all removed from the end) turns the
    'as written reads nothing' outcome around, and a rule that grants reads on every key
    makes the refusal check fail."""
    checks = ledger_checks("C21", "redis-cluster")
    reads, refused = checks["source.reads_allowed"], checks["fixed.forbidden_not_refused"]
    source_refused = checks["source.forbidden_not_refused"]
    _, m = _run(cluster, tmp_path / "a")
    assert not reads.in_claim(m["source.reads_allowed"]) and refused.in_claim(m["fixed.forbidden_not_refused"])
    assert source_refused.in_claim(m["source.forbidden_not_refused"])
    _, flipped = _run(
        cluster, tmp_path / "b", rules={"source": acl.WORKING_RULE, "fixed": acl.READ_ALL_RULE}, repetition=2
    )
    assert reads.in_claim(flipped["source.reads_allowed"])
    assert not refused.in_claim(flipped["fixed.forbidden_not_refused"])
    # the source rule replaced by one that reads everything: its reads pass, its refusals do not
    _, loose = _run(
        cluster, tmp_path / "c", rules={**acl.PARAMS["rules"].default, "source": acl.READ_ALL_RULE}, repetition=3
    )
    assert reads.in_claim(loose["source.reads_allowed"])
    assert not source_refused.in_claim(loose["source.forbidden_not_refused"])


def test_probes_that_never_reach_the_owner_are_not_counted_as_reached(cluster, tmp_path, monkeypatch):
    """The exercise counter is the owning node's, not the client's: probes answered
    client-side (never sent) leave it at 0 while the refusal count still reads 'all refused'."""
    monkeypatch.setattr(acl, "_try", lambda node, user, password, args: "NOPERM")
    _, m = _run(cluster, tmp_path, rules={"fixed": acl.WORKING_RULE})
    assert m["fixed.forbidden_not_refused"] == 0 and m["fixed.forbidden_sent"] == acl.N_FORBIDDEN
    assert m["fixed.forbidden_reached"] == 0 and m["fixed.denials_logged"] == 0


def test_probes_sent_to_another_node_are_not_reached_and_not_logged_on_the_owner(cluster, tmp_path, monkeypatch):
    """Issue 52's blinded counter: probes sent to a node that does not own the keys are refused
    there (NOPERM: ACLs are checked before redirects), while the owner sees only the harness's own
    INFO and ACL LOG and its housekeeping: none of that counts as reached, and its ACL LOG has none
    of the denials, so both exercise entries of the check fail."""
    real_try = acl._try

    def elsewhere(node, user, password, args):
        other = next(n for n in cluster.nodes if (n.host, n.port) != (node.host, node.port))
        return real_try(other, user, password, args)

    monkeypatch.setattr(acl, "_try", elsewhere)
    _, m = _run(cluster, tmp_path, rules={"fixed": acl.WORKING_RULE})
    assert m["fixed.forbidden_noperm"] == acl.N_FORBIDDEN
    assert m["fixed.forbidden_reached"] == 0 and m["fixed.denials_logged"] == 0


def test_view_shows_each_probe_under_each_rule(cluster, tmp_path):
    from harness.experiments import views
    from harness.model.spec import Case, SuiteClaim, SuiteRun
    from harness.model.stored_run import Record, RunData
    from harness.verdict.analysis import analyze

    out, _ = _run(cluster, tmp_path / "raw")
    recs = [Record(suite="redis-cluster", case="acl", repetition=1, metrics=out.metrics, series=out.series)]
    suite = SuiteRun(
        "redis-cluster", "", SuiteClaim("2.5", "t"), "cluster", "local", "", 1, [Case("acl", "redis-cluster-acl")], []
    )
    run = RunData(tmp_path, {}, recs, {"redis-cluster": suite}, [])
    (table,) = views.build(run, analyze(run), "redis-cluster")
    assert table.columns == ["probe", "kind", "source", "fixed", "read-all"] and len(table.rows) == len(acl.PROBES)
    assert table.rows[0][:3] == ["GET a cache key", "read", "NOPERM"] and table.rows[0][3] == "ok"


def test_refusals_the_owning_node_never_saw_are_inconclusive():
    """C21's checks of an absence (issue 52): 14 of 14 refused is evidence only when the owning
    node's own counters saw the 14 probes; out of 0 probes, or seen 0 times, it is inconclusive."""
    from tests.ledger_helpers import verdicts

    n = acl.N_FORBIDDEN
    m = {"source.reads_allowed": 0, "fixed.reads_allowed": 2, "read-all.forbidden_not_refused": 5}
    for rule in ("source", "fixed"):
        m.update(
            {
                f"{rule}.forbidden_not_refused": 0,
                f"{rule}.forbidden_sent": n,
                f"{rule}.forbidden_reached": n,
                f"{rule}.forbidden_noperm": n,
                f"{rule}.denials_logged": n,
            }
        )

    def judged(metrics):
        return {k: str(v.outcome) for k, v in verdicts("C21", "acl", metrics, suite="redis-cluster").items()}

    v = judged(m)
    assert v["source.forbidden_not_refused"] == v["fixed.forbidden_not_refused"] == "reproduced", v
    v = judged(dict(m, **{"fixed.forbidden_reached": 0, "source.forbidden_reached": n - 1}))
    assert v["source.forbidden_not_refused"] == v["fixed.forbidden_not_refused"] == "inconclusive", v
    v = judged(dict(m, **{"fixed.forbidden_sent": 0, "fixed.forbidden_reached": 0}))
    assert v["fixed.forbidden_not_refused"] == "inconclusive", v
    # the owning node's ACL LOG recorded fewer denials than the client saw NOPERMs: the refusals were another
    # node's (or the client's), whatever its commandstats were read to say
    v = judged(dict(m, **{"fixed.denials_logged": 0, "source.denials_logged": n - 1}))
    assert v["source.forbidden_not_refused"] == v["fixed.forbidden_not_refused"] == "inconclusive", v


def test_only_the_probes_own_command_counts_as_reached():
    """The reached test (issue 52): the harness's own commands on the owning node (its INFO, ACL
    LOG) and the node's housekeeping grow around every probe; they are left out, so a probe sent
    elsewhere grows nothing there, and only the probe's own entry (or acl|dryrun for a granted
    DRYRUN) makes it reached."""
    assert not {acl.stat_name(args) for _, args, _ in acl.PROBES} & acl.NOT_PROBES
    before = {"info": 10, "acl|log": 3, "replconf": 7, "get": 1}
    harness_only = {"info": 12, "acl|log": 3, "replconf": 8, "get": 1, "auth": 1, "client|setinfo": 2}
    assert acl.probe_growth(before, harness_only) == set()
    assert not acl.reached(("GET", acl.OTHER_STRING), "NOPERM", acl.probe_growth(before, harness_only))
    grew = acl.probe_growth(before, {**harness_only, "get": 2})
    assert grew == {"get"} and acl.reached(("GET", acl.OTHER_STRING), "NOPERM", grew)
    assert not acl.reached(("SET", acl.CACHE_STRING, "x"), "NOPERM", grew)  # another command's growth
    dry = acl.probe_growth(before, {**harness_only, "acl|dryrun": 1})
    assert acl.reached(("FLUSHALL",), "ok (ACL DRYRUN: granted, not sent)", dry)
    assert not acl.reached(("FLUSHALL",), "NOPERM", dry)  # denied by DRYRUN, then sent: flushall must grow
