"""The cold-start suite (C8, C9): pure counting on known answers, parameters, the lab profile,
the real PostgreSQL server and its bounded pool with the retry policy, a short real run on the
cluster, and proof that its checks could fail: with the flush or the retries removed, the
ledger's verdict changes."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.paths import SUITES_DIR, suite_spec
from harness.experiments.cold_start import counting
from harness.experiments.cold_start import drivers as cs
from harness.model import ledger_parse, spec, yaml_fields
from harness.model.driver_contract import CaseContext, get
from harness.model.spec import Case, SuiteClaim, SuiteRun
from harness.model.stored_run import Record, RunData
from harness.verdict.analysis import analyze, check_verdict

PG_PORT = 5435  # the tests' PostgreSQL (the suite's local profile uses 5433 and 5434)


# ---- pure ---------------------------------------------------------------------------------
def test_per_second_buckets_around_the_flush():
    times = [98.2, 99.0, 99.99, 100.0, 100.5, 101.2, 102.9, 103.0]
    assert counting.per_second(times, t_flush=100.0, before=2, after=3) == [1, 2, 2, 1, 1]


def test_growth_of_the_ledgers_series_is_its_factor():
    claimed = _ledger("C8")["figures"]["cold_node_store_qps"]
    assert len(claimed) == 8
    assert counting.growth_per_second(claimed) == pytest.approx(1.8, abs=0.001)
    assert counting.growth_per_second([100, 50, 25]) == pytest.approx(0.5)
    assert counting.growth_per_second([0, 10]) is None
    assert counting.growth_per_second([10, 0]) == 0.0
    assert counting.growth_per_second([10]) is None


def test_predicted_hit_rates_of_a_known_stream():
    # 2 requests a second: [a a] [b a] [c d] -> 50%, 50%, 0%
    assert counting.predicted_hit_rates(list("aabacd"), rate=2, ttl_s=100) == [50.0, 50.0, 0.0]
    # a TTL of 1 s (2 requests): 'a' stored at 0 has expired at 3, and is stored again
    assert counting.predicted_hit_rates(list("aabaca"), rate=2, ttl_s=1) == [50.0, 0.0, 0.0]


def test_steady_second_and_its_cap():
    rates = [50, 70, 80, 85, 86, 87, 90]
    assert counting.steady_second(rates, window=3, tol_pp=2, min_s=3, max_s=7) == (6, True)  # 85, 86, 87
    assert counting.steady_second(rates, window=3, tol_pp=6, min_s=3, max_s=7) == (5, True)  # 80, 85, 86
    assert counting.steady_second(rates, window=3, tol_pp=2, min_s=3, max_s=5) == (5, False)  # the cap
    assert counting.steady_second(rates, window=2, tol_pp=0, min_s=2, max_s=7) == (7, False)


def test_occupancy_per_second_of_known_intervals():
    # pool of 2; flush at 10; seconds [9,10) and [10,11)
    busy = [(9.5, 10.5), (10.0, 10.25), (10.9, 11.4)]
    occ = counting.occupancy_per_second(busy, t_flush=10.0, before=1, after=1, size=2)
    assert occ == pytest.approx([25.0, 100.0 * (0.5 + 0.25 + 0.1) / 2])
    assert counting.minus([5, 3], [1, 4]) == [4, -1]
    assert counting.weighted_per_second([(9.5, 3), (10.2, 1), (10.7, 2)], 10.0, 1, 1) == [3, 3]


def test_offered_load_can_pass_a_full_pool():
    # 2 connections; reads held 10 ms and 30 ms (mean 20 ms); 50 attempts in a second ask for 1 s
    # of connection time, half of the pool's 2: 50%; 300 attempts ask for 6 s: 300%
    busy = [(0.0, 0.01), (0.5, 0.53)]
    assert counting.mean_service_s(busy) == pytest.approx(0.02) and counting.mean_service_s([]) is None
    assert counting.offered_pct([50, 300], 0.02, 2) == pytest.approx([50.0, 300.0])
    assert counting.offered_pct([5], None, 2) == [None]


def test_errors_say_what_they_are_out_of():
    """The errors threshold's denominator: every cluster request made, answered or failed."""
    from harness.experiments.cold_start.traffic import RunLog

    logs = {
        "flush": RunLog(requests=[(0.1, 1, True, True, 0)] * 5, errors=2, first_error="x"),
        "control": RunLog(requests=[(0.1, 1, True, True, 0)] * 3),
    }
    m, first = cs._health(logs)
    assert m["requests"].value == 10 and m["errors"].value == 2 and first == "x"
    assert cs._health({"flush": RunLog()})[0]["requests"].value == 0


def test_runs_rotate_by_repetition():
    names = ["flush", "control", "no-retry"]
    assert [cs.run_order(names, r)[0] for r in (1, 2, 3, 4)] == ["flush", "control", "no-retry", "flush"]


def test_cluster_sizes_spread_over_repetitions():
    """The local profile's 2 repetitions measure every size once between them (alternate),
    'one' cycles a size per repetition, 'all' measures every size each time."""
    p = {"primaries": [3, 6, 10]}
    assert [cs._sizes({**p, "sizes_per_repetition": "alternate"}, r) for r in (1, 2, 3)] == [[3, 10], [6], [3, 10]]
    assert [cs._sizes({**p, "sizes_per_repetition": "one"}, r) for r in (1, 2, 4)] == [[3], [6], [3]]
    assert cs._sizes({**p, "sizes_per_repetition": "all"}, 2) == [3, 6, 10]
    assert cs._sizes({"primaries": [3], "sizes_per_repetition": "alternate"}, 2) == [3]
    s = spec.load_suite_file(suite_spec("cold-start"))
    local = s.case_params(s.case("pool-by-cluster-size"), "local")
    reps = s.profile("local").repetitions
    measured = [n for r in range(1, reps + 1) for n in cs._sizes(local, r)]
    assert sorted(measured) == sorted(local["primaries"])  # every size once in a local run, none twice


# ---- parameters and the spec ----------------------------------------------------------------
def test_bad_params_are_refused_with_the_fix():
    drv = get("cold-start-flush")
    with pytest.raises(BadInput, match="cold_seconds: must be at least 1"):
        drv.resolve_params("cases[0].params", {"cold_seconds": 0})
    with pytest.raises(BadInput, match="retries: must be at most 20"):
        drv.resolve_params("cases[0].params", {"retries": 99})
    with pytest.raises(BadInput, match="warm_min_s: 9 is above warm_max_s 5"):
        drv.resolve_params("cases[0].params", {"warm_min_s": 9, "warm_max_s": 5})
    with pytest.raises(BadInput, match="ttl_s: 10 s expires keys during the run"):
        drv.resolve_params("cases[0].params", {"ttl_s": 10})
    pool = get("cold-start-pool")
    with pytest.raises(BadInput, match="primaries: must be at least 3, got 2"):
        pool.resolve_params("cases[1].params", {"primaries": [2, 6]})


def test_lab_profile_carries_the_source_numbers_as_bands():
    s = spec.load_suite_file(suite_spec("cold-start"))
    lab = s.profile("lab-a100")
    assert lab.skipped_fails is True
    assert s.case_params(s.case("flush-one-primary"), "lab-a100")["cold_seconds"] == 8  # the source's 8 s
    assert s.case_params(s.case("pool-by-cluster-size"), "lab-a100")["primaries"] == [10, 20]
    limits = {(t.metric, t.op, t.value) for t in lab.thresholds}
    # a point is a band: both ends, so that a growth of 5x or a pool over 100% does not pass
    assert {("cold_node.excess_growth_per_s", ">=", 1.44), ("cold_node.excess_growth_per_s", "<=", 2.16)} <= limits
    assert {("p10.pool.peak_occupancy_pct", ">=", 83), ("p10.pool.peak_occupancy_pct", "<=", 100)} <= limits
    assert ("p20.pool.peak_offered_pct", ">", 100) in limits  # "over 100%": one-sided in the source itself
    assert all(t.reason for p in s.profiles.values() for t in p.thresholds)
    local = s.case_params(s.case("pool-by-cluster-size"), "local")
    assert local["primaries"] == [3, 6, 10] and local["pool_sweep"] and local["sweep_primaries"] == 10


def test_conditions_are_the_facts_the_cases_measured():
    """C8 needs 20 primaries and a 15% share, C9's 20-node check a run that measured 20
    primaries: compared with the case facts, not with the profile's strings."""
    from harness.model.conditions import differ

    growth, attempts = _checks("C8")
    assert growth.conditions == attempts.conditions == {"cluster_primaries": 20, "cold_node_share_pct": 15}
    here = {"cluster_primaries": 3, "cold_node_share_pct": 33}
    assert differ(growth.conditions, here) == [
        "cluster_primaries: measured 3, claim 20",
        "cold_node_share_pct: measured 33, claim 15",
    ]
    assert differ(growth.conditions, {"cluster_primaries": 20, "cold_node_share_pct": 15}) == []
    c9_10, c9_20 = _checks("C9")
    assert not c9_10.conditions
    assert differ(c9_20.conditions, {"measured_20_primaries": False}) == [
        "measured_20_primaries: measured no, claim yes"
    ]
    assert differ(c9_20.conditions, {"measured_20_primaries": True}) == []
    # a list of sizes is no number: it never matches 20 (issue 39)
    assert differ({"cluster_primaries": 20}, {"cluster_primaries": "10, 20"}) != []


# ---- the real store --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    from harness.experiments.cold_start.postgres import PostgresServer

    with PostgresServer(PG_PORT, max_connections=20) as server:
        yield server
    assert server.proc is None  # stopped, not left running


def test_busy_port_is_an_environment_problem(pg):
    from harness.experiments.cold_start.postgres import PostgresServer

    with pytest.raises(EnvironmentProblem, match=f"port {PG_PORT} .* is busy"):
        PostgresServer(PG_PORT).start()


def test_a_server_left_by_a_killed_run_is_stopped_first():
    from harness.experiments.cold_start.postgres import PostgresServer
    from harness.infra.redis_server import pid_alive

    left = PostgresServer(PG_PORT + 1).start()
    pid = left.proc.pid
    left.proc = None  # the run that started it was killed: nobody stops it
    try:
        with PostgresServer(PG_PORT + 1) as again:
            assert not pid_alive(pid) and again.proc.pid != pid
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGINT)


def test_full_pool_refuses_and_the_retry_policy_tries_again(pg):
    import asyncio

    from harness.experiments.cold_start.store import BoundedPool, Store, StoreLog, load_table

    assert load_table(pg.dsn, [1, 2, 2, 3], 16) == 3
    log = StoreLog()

    async def go():
        pool = await BoundedPool(pg.dsn, 1, acquire_timeout_s=0.02, statement_timeout_ms=1000, log=log).open()
        try:
            store = Store(pool, query_s=0.0, retries=2, backoff_s=0.0)
            value, attempts = await store.read(2, slot=7)
            assert len(value) == 16 and attempts == 1
            held = await pool.acquire()  # the pool is now full
            assert await store.read(2, slot=7) == (None, 3)
            assert len(log.refused) == 3 and [s for _, s in log.failed] == [7]  # 1 + 2 retries, then failed
            pool.release(held)
            off = Store(pool, query_s=0.0, retries=0, backoff_s=0.0)
            held = await pool.acquire()
            assert await off.read(2, slot=7) == (None, 1) and len(log.refused) == 4  # policy off: one attempt
            pool.release(held)
            assert pool.free == 1  # every connection came back
        finally:
            await pool.close()

    asyncio.run(go())


def test_statement_timeout_counts_as_a_store_timeout(pg):
    import asyncio

    from harness.experiments.cold_start.store import BoundedPool, Store, StoreLog, load_table

    load_table(pg.dsn, [1], 16)
    log = StoreLog()

    async def go():
        pool = await BoundedPool(pg.dsn, 1, acquire_timeout_s=1.0, statement_timeout_ms=20, log=log).open()
        try:
            assert await Store(pool, query_s=0.2, retries=1, backoff_s=0.0).read(1, slot=3) == (None, 2)
        finally:
            await pool.close()

    asyncio.run(go())
    assert len(log.timeouts) == 2 and len(log.queries) == 2 and len(log.busy) == 2


# ---- a short real run, and the checks with the mechanism removed -----------------------------
def _ledger(claim_id: str) -> dict:
    """This suite's claim as written in the ledger (read alone, so that other suites' specs
    do not matter here)."""
    data = yaml_fields.load_yaml(SUITES_DIR / "claims.yaml", "claims ledger")
    return next(c for c in data["claims"] if c["id"] == claim_id)


def _checks(claim_id: str):
    suites = {"cold-start": spec.load_suite_file(suite_spec("cold-start"))}
    return [
        ledger_parse._parse_check(f"{claim_id}.checks[{i}]", c, suites)
        for i, c in enumerate(_ledger(claim_id)["checks"])
    ]


# what a run on the source's setting would have measured (C8's conditions): the verdict on the
# effect is then shown, where this machine's facts (3 primaries, a third of the traffic) make it
# not comparable
CLAIMED_SETTING = {"cluster_primaries": 20, "cold_node_share_pct": 15}


def _verdict(chk, out, tmp_path, facts: dict | None = None):
    """The ledger's verdict of `chk` on one repetition's outcome (or a list of them, the
    repetitions of one run), through the real analysis, with the case's measured facts (or
    `facts` in their place)."""
    outs = out if isinstance(out, list) else [out]
    recs = [
        Record(
            suite="cold-start",
            case=chk.case,
            repetition=i,
            metrics=o.metrics,
            series=o.series,
            facts=dict(o.facts if facts is None else facts),
        )
        for i, o in enumerate(outs, 1)
    ]
    driver = "cold-start-flush" if chk.case == "flush-one-primary" else "cold-start-pool"
    suite = SuiteRun(
        "cold-start", "", SuiteClaim("2.3", "t"), "cluster", "local", "", len(recs), [Case(chk.case, driver)], []
    )
    run = RunData(tmp_path, {}, recs, {"cold-start": suite}, [])
    return check_verdict(run, analyze(run), chk)


def _short(**over):
    p = {k: v.default for k, v in cs.FLUSH_PARAMS.items()}
    # a pool that nothing fills: 8 connections x 1 ms; the misses depend on the key order alone
    p.update(
        rate=400,
        warm_min_s=3,
        warm_max_s=3,
        steady_window_s=2,
        cold_seconds=2,
        pool_size=8,
        query_ms=1.0,
        pg_port=PG_PORT + 1,
    )
    p.update(over)
    return p


# the profile's pool (3 connections x 20 ms = 150 reads/s) at 400 requests/s: the empty cluster's
# first second (400 misses) overfills it, so reads are refused and retried there (the instrument)
FILLS = {"pool_size": 3, "query_ms": 20.0, "warm_min_s": 4, "warm_max_s": 4, "cold_seconds": 3}


def _run(cluster, tmp_path, **over):
    return cs.flush_one(
        CaseContext(
            "cold-start", "flush-one-primary", 1, "local", _short(**over), tmp_path, cluster, log=lambda m: None
        )
    )


@pytest.mark.slow
def test_c8_checks_refute_the_growth_and_need_the_flush(cluster, tmp_path):
    """Both C8 checks on real runs: not comparable with this machine's facts; on the claim's
    setting the measured growth (the node refills) is not reproduced with the instruments held;
    with the flush removed the instrument is blind and the verdict inconclusive."""
    growth_chk, attempts_chk = _checks("C8")
    out = _run(cluster, tmp_path, **FILLS)
    m = {k: v.value for k, v in out.metrics.items()}
    assert out.status == "ok" and m["errors"] == 0
    per = out.series["per_second"]
    assert sorted(set(per.column("run"))) == ["control", "flush", "no-retry"]
    assert per.column("second")[:4] == [-2, -1, 0, 1] and out.series["excess"].column("second") == [0, 1, 2]
    # the window (2 s before the flush, 3 after) holds most of its 400/s and at most the whole
    # schedule (late requests of the first warm second land in it on a busy machine)
    assert 0.6 * 3 * 2000 <= sum(per.column("requests")) <= 3 * 400 * 8
    assert m["cold_node.misses.first_s"] > m["control.cold_node.misses.first_s"]
    assert m["warmup.attempts_per_miss"] > 1.0 == m["noretry.cold_node.attempts_per_miss"]
    assert out.facts["cluster_primaries"] == 3 and 25 <= out.facts["cold_node_share_pct"] <= 42
    for chk in (growth_chk, attempts_chk):
        here = _verdict(chk, out, tmp_path)
        assert here.outcome.name == "NOT_COMPARABLE" and "cluster_primaries: measured 3, claim 20" in here.reason
        v = _verdict(chk, out, tmp_path, CLAIMED_SETTING)
        assert all(r.held for r in v.controls if r.kind == "instrument"), v.reason
        assert v.outcome.name == "NOT_REPRODUCED", (chk.metric, m[chk.metric], v.reason)
    _view_shows_the_run_beside_the_ledger(out, tmp_path)
    # the mechanism removed (no flush): nothing turns cold, the no-flush instrument is blind; the
    # verdict is inconclusive, or not measured where no excess is left to take a growth of
    # (flush minus control <= 0 in the first second: the growth is undefined, not 0)
    off = _run(cluster, tmp_path, flush=False, **FILLS)
    for chk in (growth_chk, attempts_chk):
        v = _verdict(chk, off, tmp_path, CLAIMED_SETTING)
        blind = [r for r in v.controls if r.control.metric == "control.cold_node.misses.first_s"]
        assert blind and blind[0].held is False, v.reason
        assert v.outcome.name in ("INCONCLUSIVE", "NOT_MEASURED"), v.reason


def _view_shows_the_run_beside_the_ledger(out, tmp_path):
    """The view on stored records of two repetitions: aggregated tables, the ledger's series."""
    from harness.experiments import views
    from harness.model.ledger import Claim

    recs = [
        Record(suite="cold-start", case="flush-one-primary", repetition=r, metrics=out.metrics, series=out.series)
        for r in (1, 2)
    ]
    suite = SuiteRun(
        "cold-start",
        "",
        SuiteClaim("2.3", "t"),
        "cluster",
        "local",
        "",
        2,
        [Case("flush-one-primary", "cold-start-flush")],
        [],
    )
    claimed = _ledger("C8")["figures"]["cold_node_store_qps"]
    run = RunData(
        tmp_path,
        {},
        recs,
        {"cold-start": suite},
        [Claim("C8", "2.3", "t", [], figures={"cold_node_store_qps": claimed})],
    )
    blocks = views.build(run, analyze(run), "cold-start")
    excess = next(b for b in blocks if isinstance(b, views.Table) and "minus the paired" in b.title)
    assert [r[0] for r in excess.rows] == [1, 2, 3] and [r[3] for r in excess.rows] == claimed[:3]
    assert excess.rows[0][1] == out.series["excess"].column("flush_minus_control")[0]
    chart = next(b for b in blocks if isinstance(b, views.Chart) and "beside the source" in b.title)
    assert chart.series[-1]["points"][0] == [1, claimed[0]]


@pytest.mark.slow
def test_c8_attempts_check_is_blind_without_retries(cluster, tmp_path):
    """The retry policy removed from every run: no miss costs more than one attempt, not even
    in the empty cluster's first second, so the attempts check's instrument is blind."""
    growth_chk, attempts_chk = _checks("C8")
    off = _run(cluster, tmp_path, retries=0, **FILLS)
    m = {k: v.value for k, v in off.metrics.items()}
    assert m["warmup.attempts_per_miss"] == 1.0 and m["warmup.refused_first_s"] > 0  # refused, not retried
    assert m["cold_node.attempts_per_miss"] == 1.0
    v = _verdict(attempts_chk, off, tmp_path, CLAIMED_SETTING)
    assert v.outcome.name == "INCONCLUSIVE" and "warmup.attempts_per_miss" in v.reason, v.reason
    assert _verdict(growth_chk, off, tmp_path, CLAIMED_SETTING).outcome.name == "NOT_REPRODUCED"


@pytest.mark.slow
def test_pool_case_measures_a_cluster_of_its_own_and_stops_it(cluster, tmp_path):
    from harness.infra.redis_server import port_is_free

    p = {k: v.default for k, v in cs.POOL_PARAMS.items()}
    p.update(
        primaries=[3],
        replicas=0,
        rate_per_primary=100,
        warm_min_s=2,
        warm_max_s=2,
        steady_window_s=2,
        cold_seconds=2,
        port_offset=40,
        pg_port=PG_PORT + 1,
    )
    base = min(n.port for n in cluster.nodes) + 40
    out = cs.pool_sizes(
        CaseContext("cold-start", "pool-by-cluster-size", 1, "local", p, tmp_path, cluster, log=lambda m: None)
    )
    m = {k: v.value for k, v in out.metrics.items()}
    assert out.status == "ok" and m["errors"] == 0
    # both arms measured a pool (their order is the ledger's C9 check, judged with its controls in
    # the suite's run: in 2-second windows on a loaded 2-core CI machine the control once peaked higher)
    assert 0 < m["control.p3.pool.peak_occupancy_pct"] <= 100 and 0 < m["p3.pool.peak_occupancy_pct"] <= 100
    assert out.details["sizes"]["3"]["cold_primaries"] == 2  # half of 3, rounded up
    per = out.series["per_second"]
    assert set(per.column("primaries")) == {3} and set(per.column("run")) == {"flush", "control"}
    assert all(port_is_free("127.0.0.1", base + i) for i in range(3))  # the cluster was stopped
    assert "target" not in out.details["sizes"]["3"]["where"]


def test_pool_case_measures_the_target_when_it_has_the_size(cluster, tmp_path):
    p = {k: v.default for k, v in cs.POOL_PARAMS.items()}
    p.update(
        primaries=[3],
        replicas=1,
        rate_per_primary=50,
        warm_min_s=2,
        warm_max_s=2,
        steady_window_s=2,
        cold_seconds=1,
        port_offset=40,
        pg_port=PG_PORT + 1,
    )
    out = cs.pool_sizes(
        CaseContext("cold-start", "pool-by-cluster-size", 1, "local", p, tmp_path, cluster, log=lambda m: None)
    )
    assert out.status == "ok" and out.details["sizes"]["3"]["where"].startswith("the target")


def test_unknown_primary_is_refused(cluster, tmp_path):
    with pytest.raises(BadInput, match="cold_primary: 3 but the target has 3 primaries"):
        cs.flush_one(
            CaseContext("cold-start", "c", 1, "local", _short(cold_primary=3), tmp_path, cluster, log=lambda m: None)
        )


def test_pg_port_in_use_is_refused_before_anything_runs(cluster, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", PG_PORT + 2))
        s.listen()
        with pytest.raises(EnvironmentProblem, match="busy"):
            cs.flush_one(
                CaseContext(
                    "cold-start", "c", 1, "local", _short(pg_port=PG_PORT + 2), tmp_path, cluster, log=lambda m: None
                )
            )


def _pool_run(cluster, tmp_path, chk, p, **over):
    out = cs.pool_sizes(
        CaseContext(
            "cold-start", "pool-by-cluster-size", 1, "local", {**p, **over}, tmp_path, cluster, log=lambda m: None
        )
    )
    assert out.status == "ok" and out.metrics["errors"].value == 0 and out.metrics["late_pct"].value < 10
    return {k: v.value for k, v in out.metrics.items()}, _verdict(chk, out, tmp_path), out


@pytest.mark.slow
def test_pool_check_needs_the_flush(cluster, tmp_path):
    """C9's check at 10 primaries on a loopback cluster of its own: with half the primaries
    flushed the pool fills beyond the no-flush control (the instrument, the empty cluster's
    first second, reads a full pool); a larger pool of the sweep is less full; with the flush
    removed from the measured run too the effect is gone or no longer the flush's."""
    chk = _checks("C9")[0]
    assert chk.metric == "p10.pool.peak_occupancy_pct"
    p = {k: v.default for k, v in cs.POOL_PARAMS.items()}
    # the local profile's pool (3 connections x 20 ms = 150 reads/s) and rate per primary;
    # no replicas, so that the 10 primaries start quickly
    p.update(
        primaries=[10],
        replicas=0,
        rate_per_primary=60,
        warm_min_s=4,
        warm_max_s=4,
        steady_window_s=2,
        cold_seconds=3,
        pool_size=3,
        query_ms=20.0,
        port_offset=80,
        pg_port=PG_PORT + 1,
    )
    m, v, out = _pool_run(cluster, tmp_path, chk, p, pool_sweep=[6])
    # The instrument (the empty cluster's first second) reads a full pool on a quiet host; where
    # a busy host's client could not fill it (84% in a fresh clone's make test once), the ledger
    # must say the measurement was blind: inconclusive, never a success
    if m["p10.warmup.occupancy_first_s_pct"] < 90:
        assert v.outcome.name == "INCONCLUSIVE" and "occupancy_first_s_pct" in v.reason, v.reason
    # held on a quiet host (86-99% against 47-74%); a control that spikes on a busy one (both
    # pools full) is named
    elif v.control_held:
        assert m["p10.pool.peak_occupancy_pct"] > m["control.p10.pool.peak_occupancy_pct"]
        assert v.outcome.name in ("REPRODUCED", "DIRECTION"), v.reason
    else:
        assert v.outcome.name == "NOT_ATTRIBUTABLE", v.reason
    assert m["p10.pool6.peak_occupancy_pct"] < m["p10.pool.peak_occupancy_pct"]  # the level is the pool's
    assert out.series["pool_sweep"].column("pool_size") == [3, 6] and out.facts == {
        "cluster_primaries": "10",
        "measured_20_primaries": False,
    }
    # With the flush removed the measured arm and its control are one condition: a single pair
    # of peaks (72-84% each here, in 3 pairs) can pass the 0.9x control by chance, so
    # this is judged as a run would judge it, on the median of its repetitions (3).
    runs = [_pool_run(cluster, tmp_path, chk, p, flush=False) for _ in range(3)]
    v = _verdict(chk, [o for _, _, o in runs], tmp_path)
    # below the direction bound: not reproduced; above it but no fuller than its control: not
    # the flush's. Never a success. The instrument (the empty cluster's first second) mostly
    # reads a full pool; where a busy host's client could not fill it in the judged runs (a
    # fresh clone's run beside the engine tests once read under 90% in one of three), the
    # verdict says the measurement was blind: inconclusive
    blind = [
        round(m["p10.warmup.occupancy_first_s_pct"]) for m, _, _ in runs if m["p10.warmup.occupancy_first_s_pct"] < 90
    ]
    assert v.outcome.name in ("NOT_REPRODUCED", "NOT_ATTRIBUTABLE") or (v.outcome.name == "INCONCLUSIVE" and blind), (
        v.reason,
        blind,
    )


@pytest.mark.slow
def test_pool_refusal_check_at_20_primaries(cluster, tmp_path):
    """C9's 20-node check on a 20-primary loopback cluster (no replicas, half the rate per
    primary, a pool of 4 x 30 ms = 133 reads/s that the warm cluster does not fill, and that half the
    primaries flushed overfill by half even when a loaded machine sends less than the rate: CI once
    saw 98% at 200 reads/s): comparable
    (the case measured 20 primaries); with half the primaries flushed the pool is asked for
    more than it has; with the flush removed it is not: not reproduced."""
    chk = _checks("C9")[1]
    p = {k: v.default for k, v in cs.POOL_PARAMS.items()}
    p.update(
        primaries=[20],
        replicas=0,
        rate_per_primary=30,
        warm_min_s=5,
        warm_max_s=6,
        steady_window_s=2,
        cold_seconds=3,
        pool_size=4,
        query_ms=30.0,
        port_offset=40,
        pg_port=PG_PORT + 1,
    )
    m, v, out = _pool_run(cluster, tmp_path, chk, p)
    assert (
        out.facts == {"cluster_primaries": "20", "measured_20_primaries": True}
        and m["p20.warmup.offered_first_s_pct"] > 100
    )
    assert m["p20.pool.peak_offered_pct"] > 100 and m["p20.pool.refused"] > 0
    # reproduced; on a busy 2-core host the no-flush control can spike too, and then the verdict
    # says so (not attributable) instead of crediting the flush
    assert v.outcome.name == ("REPRODUCED" if v.control_held else "NOT_ATTRIBUTABLE"), v.reason
    # the warm cluster asks the pool for well under its capacity: a stray refusal is no pool over 100%
    m, v, _ = _pool_run(cluster, tmp_path, chk, p, flush=False)
    assert m["p20.pool.peak_offered_pct"] < 100 and m["p20.warmup.offered_first_s_pct"] > 100
    assert v.outcome.name == "NOT_REPRODUCED", (m["p20.pool.peak_offered_pct"], v.reason)
