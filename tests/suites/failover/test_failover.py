"""The failover suite against real redis-server processes: a primary killed on the case's
own cluster (with the no-replicas control, which must turn the claim check around), the
report's view of that run, the spec, and the partition case where the simulated lab is up."""

import subprocess
from pathlib import Path

import pytest

from harness.base.errors import BadInput
from harness.base.paths import REPO_ROOT, suite_spec
from harness.infra.redis_server import port_is_free
from harness.model import driver_contract, ledger_parse, spec
from harness.model.driver_contract import CaseContext, Node, Target
from tests.conftest import TEST_CLUSTER_PORT


def _ctx(tmp_path, driver, target=None, **params):
    drv = driver_contract.get(driver)
    p = drv.resolve_params("test", params)
    tgt = target or Target("test", "cluster", [Node("127.0.0.1", TEST_CLUSTER_PORT, "primary")])
    return drv, CaseContext("failover", "c", 1, "local", p, tmp_path / "raw", tgt, log=lambda m: None)


@pytest.fixture(scope="module")
def killed(tmp_path_factory, cluster):
    """One short real run against the session cluster as the suite's cluster: plain SET with
    a primary of the case's own cluster killed, the 3 + 0 control, and the no-nodes.conf
    control (the same kill, the node restarted without its nodes.conf)."""
    tmp = tmp_path_factory.mktemp("failover")
    drv, ctx = _ctx(
        tmp,
        "failover-primary-killed",
        target=cluster,
        node_timeout_ms=1500,
        variants=["plain"],
        controls=["no-replicas", "no-nodes-conf"],
        writers=1,
        rate=80,
        readers=1,
        read_rate=20,
        warm_s=1,
        after_kill_s=6,
        port_offset=60,
    )
    out = drv.run(ctx)
    return out, ctx


def test_the_suites_cluster_is_untouched_and_healthy_after_the_case(killed, cluster):
    from harness.infra.cluster import LocalCluster

    base = min(n.port for n in cluster.nodes)
    assert LocalCluster(base_port=base).health_problem() is None
    assert sorted(n.port for n in LocalCluster(base_port=base).nodes()) == sorted(n.port for n in cluster.nodes)


def test_kill_measures_failover_and_the_node_rejoins(killed):
    out, ctx = killed
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    # not before the node timeout; a poll may miss the short PFAIL state, never FAIL (it stays)
    assert m["plain.pfail_s"] is None or 1.0 <= m["plain.pfail_s"] <= m["plain.fail_s"]
    assert m["plain.fail_s"] >= 1.0
    assert m["plain.promoted_s"] >= m["plain.fail_s"]
    assert m["plain.rejoined_as_replica"] == 1 and m["plain.healthy_after"] == 1 and m["plain.slot_views_agree"] == 1
    assert m["plain.killed_range.error_pct"] > 0 and m["plain.killed_range.recovered_s"] is not None
    assert m["plain.served_at_end_pct"] >= 99
    assert m["plain.acked"] > 0 and m["plain.lost_acked"] is not None
    tl = out.series["plain.timeline"].columns
    after = [e for t, e in zip(tl["t"], tl["errors.killed"]) if t >= 0]
    before = [e for t, e in zip(tl["t"], tl["errors"]) if t < -0.1]  # a write in flight at the kill may fail
    assert sum(after) > 0 and sum(before) == 0
    assert "promoted" in out.series["plain.events"].column("event")
    assert (ctx.raw_dir / "plain.writes.csv").is_file()


def test_no_replicas_control_stays_down_and_loses_the_range(killed):
    out, _ = killed
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["no-replicas.promoted_s"] is None
    assert m["no-replicas.served_at_end_pct"] < 50
    assert m["no-replicas.killed_range.recovered_s"] is None


def test_nothing_is_left_running_after_the_case(killed):
    base = TEST_CLUSTER_PORT + 60
    ports = list(range(base, base + 9))
    assert all(port_is_free("127.0.0.1", p) and port_is_free("127.0.0.1", p + 10000) for p in ports)


def _claim_verdict(out, tmp_path, claim_id, metrics=None):
    from harness.model.spec import Case, SuiteClaim, SuiteRun
    from harness.model.stored_run import Record, RunData
    from harness.verdict.analysis import analyze, check_verdict

    chk = next(c for c in ledger_parse.load_claims() if c.id == claim_id).checks[0]
    rec = Record(suite="failover", case=chk.case, repetition=1, metrics=metrics or out.metrics, series=out.series)
    suite = SuiteRun(
        "failover",
        "",
        SuiteClaim("2.5", "t"),
        "cluster",
        "local",
        "",
        1,
        [Case(chk.case, "failover-primary-killed")],
        [],
    )
    run = RunData(tmp_path, {}, [rec], {"failover": suite}, ledger_parse.load_claims())
    return check_verdict(run, analyze(run), chk), run


def test_c11a_check_holds_and_turns_around_without_replicas(killed, tmp_path):
    from harness.verdict.analysis import Outcome

    out, _ = killed
    v, _ = _claim_verdict(out, tmp_path, "C11a")
    assert v.control_held is True and v.outcome == Outcome.REPRODUCED
    # the mechanism removed: the measured side is the 3 + 0 cluster's
    swapped = dict(out.metrics)
    swapped["plain.served_at_end_pct"] = out.metrics["no-replicas.served_at_end_pct"]
    v2, _ = _claim_verdict(out, tmp_path, "C11a", swapped)
    assert v2.outcome == Outcome.NOT_REPRODUCED


def test_c11b_rejoin_needs_the_nodes_conf(killed, tmp_path):
    """C11b's mechanism-off control on a real run: restarted without its nodes.conf the node
    comes back as a stranger (new identity) and does not rejoin as a replica, while the same
    kill with nodes.conf rejoins. The check holds with its control held; with the measured
    side taken from the control (the mechanism removed) it is not reproduced."""
    from harness.verdict.analysis import Outcome

    out, ctx = killed
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["no-nodes-conf.rejoined_as_replica"] == 0 and m["plain.rejoined_as_replica"] == 1
    assert m["no-nodes-conf.healthy_after"] == 1  # nodes.conf put back: the cluster is whole again
    v, _ = _claim_verdict(out, tmp_path, "C11b")
    assert v.check.metric == "plain.rejoined_as_replica"
    assert v.controls[0].control.metric == "no-nodes-conf.rejoined_as_replica"
    assert v.control_held is True and v.outcome == Outcome.REPRODUCED, v.reason
    swapped = {**out.metrics, "plain.rejoined_as_replica": out.metrics["no-nodes-conf.rejoined_as_replica"]}
    v2, _ = _claim_verdict(out, tmp_path, "C11b", swapped)
    assert v2.outcome == Outcome.NOT_REPRODUCED, v2.reason


def test_view_has_a_timeline_per_run_and_the_lost_writes_table(killed, tmp_path):
    from harness.experiments.views import Chart, Table, build
    from harness.verdict.analysis import analyze

    out, _ = killed
    _, run = _claim_verdict(out, tmp_path, "C11a")
    blocks = build(run, analyze(run), "failover")
    charts = [b for b in blocks if isinstance(b, Chart)]
    assert {c.title.split(":")[0] for c in charts} == {"plain", "no-replicas", "no-nodes-conf"}
    plain_chart = next(c for c in charts if c.title.startswith("plain"))
    assert any(
        s["name"].startswith("errors, kill range") and any(p[1] > 0 for p in s["points"]) for s in plain_chart.series
    )
    assert "promoted" in plain_chart.note
    lost = next(b for b in blocks if isinstance(b, Table) and b.title.startswith("Acknowledged writes lost"))
    row = next(r for r in lost.rows if r[0] == "plain")
    assert row[2] == out.metrics["plain.acked"].value


def test_bad_variant_names_the_choices():
    drv = driver_contract.get("failover-primary-killed")
    with pytest.raises(BadInput, match="'plian' is not one of plain, wait, min-replicas"):
        drv.resolve_params("failover.cases[0].params", {"variants": ["plian"]})
    with pytest.raises(BadInput, match="at least one of variants or controls"):
        drv.resolve_params("failover.cases[0].params", {"variants": [], "controls": []})


def test_spec_lab_profile_carries_the_source_topology_and_redis_default_timeout():
    s = spec.load_suite_file(suite_spec("failover"))
    lab = s.profile("lab-a100")
    assert lab.skipped_fails is True
    assert s.case_params(s.case("primary-killed"), "lab-a100")["node_timeout_ms"] == 15000
    local = s.case_params(s.case("primary-killed"), "local")
    assert local["node_timeout_ms"] == 2000 and set(local["controls"]) >= {"no-kill", "no-replicas"}
    assert s.case_params(s.case("primary-killed-longer-timeout"), "local")["node_timeout_ms"] == 5000
    assert all(t.reason for p in s.profiles.values() for t in p.thresholds)


def test_partition_skips_with_the_reason_where_the_lab_is_not_usable(tmp_path, monkeypatch):
    from harness.experiments.failover import partition

    monkeypatch.setattr(partition, "lab_problem", lambda: "not root: network namespaces and link changes need root")
    drv, ctx = _ctx(tmp_path, "failover-partition")
    out = drv.run(ctx)
    assert out.status == "skipped" and "not root" in out.reason
    monkeypatch.setattr(partition, "lab_problem", lambda: None)
    monkeypatch.setattr(partition, "lab_is_up", lambda: False)
    out = drv.run(ctx)
    assert out.status == "skipped" and "make lab-sim-up" in out.reason


def test_partition_on_the_simulated_lab(tmp_path):
    from harness.experiments.failover import partition

    problem = partition.lab_problem()
    if problem:
        pytest.skip(f"the simulated lab cannot be used here: {problem}")
    started = False
    if not partition.lab_is_up():  # bring a lab up for this test (CI has none) and take it down after
        up = subprocess.run(
            [str(REPO_ROOT / "infra" / "lab-sim" / "up.sh")], capture_output=True, text=True, timeout=120
        )
        if up.returncode != 0:
            subprocess.run([str(REPO_ROOT / "infra" / "lab-sim" / "down.sh")], capture_output=True, timeout=120)
            pytest.skip(f"the simulated lab could not be made here: {(up.stderr or up.stdout).strip()[-300:]}")
        started = True
    try:
        _partition_run(tmp_path)
    finally:
        if started:
            down = subprocess.run(
                [str(REPO_ROOT / "infra" / "lab-sim" / "down.sh")], capture_output=True, text=True, timeout=120
            )
            assert down.returncode == 0, down.stderr


def _partition_run(tmp_path):
    drv, ctx = _ctx(
        tmp_path,
        "failover-partition",
        node_timeout_ms=2000,
        variants=["plain"],
        controls=["no-cut"],
        rate=80,
        writers=1,
        majority_rate=40,
        warm_s=1,
        cut_s=5,
        after_heal_s=2,
        port_offset=70,
    )
    out = drv.run(ctx)
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["plain.minority.acked_during_cut"] > 0  # the cut-off primary kept acknowledging for a while
    assert m["plain.minority.accepting_s"] < 5
    assert m["plain.minority.lost_acked"] >= m["plain.minority.acked_during_cut"]  # and all of it was dropped
    assert m["no-cut.lost_acked"] == 0 and m["no-cut.old_primary_is_replica"] == 0
    assert m["plain.old_primary_is_replica"] == 1 and m["plain.healthy_after"] == 1
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert not [line for line in links.splitlines() if "ls-h" in line and "-p@" in line and "state DOWN" in line]
    port = TEST_CLUSTER_PORT + 70
    left = [c for c in map(_cmd, Path("/proc").iterdir()) if "redis-server 127.77." in c and f":{port} " in c]
    assert left == []


def _cmd(p: Path) -> str:
    if not p.name.isdigit():
        return ""
    try:
        return (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def test_the_minority_writer_runs_as_a_child_and_returns_its_history():
    """The partition case's writer process (harness.model.child), here without a namespace: a seed
    that refuses connections gives unacknowledged writes, each kept with its error kind."""
    import time

    from harness.experiments.failover import lost_writes, minority_writer
    from harness.model import child

    port = next(p for p in range(TEST_CLUSTER_PORT + 40, TEST_CLUSTER_PORT + 50) if port_is_free("127.0.0.1", p))
    start = time.monotonic() + 0.3
    job = {
        "seeds": [["127.0.0.1", port]],
        "keys": ["fo:m:{a}"],
        "name": "minority",
        "prefix": "fo",
        "rate": 20.0,
        "start": start,
        "end": start + 0.3,
        "timeout": 0.2,
        "group": "cut",
    }
    writes = [lost_writes.Write(**w) for w in child.run(minority_writer.MODULE, job, timeout=60)["writes"]]
    assert writes and all(not w.ok and w.error == "refused" and w.group == "cut" for w in writes)
    assert [w.seq for w in writes] == list(range(len(writes))) and writes[0].key == "fo:m:{a}:0"
