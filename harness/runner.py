"""Runs suites: resolves every parameter first, starts the target, runs each case's
repetitions, writes a record after each one, stops what it started."""

from __future__ import annotations

import contextlib
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from harness import drivers, manifest, server_stats, spec
from harness.analysis import Analysis, analyze
from harness.cluster import LocalCluster
from harness.drivers import CaseContext, CaseOutcome, Target
from harness.errors import BadInput, HarnessError
from harness.results import Record, load_run, write_manifest, write_results


@dataclass
class RunOutcome:
    run_dir: Path
    analysis: Analysis
    exit_code: int
    report: Path | None = None


def parse_overrides(items: list[str]) -> dict[str, dict]:
    """--set CASE.PARAM=VALUE (VALUE read as YAML) -> {case: {param: value}}."""
    out: dict[str, dict] = {}
    for item in items:
        key, sep, value = item.partition("=")
        case, dot, param = key.partition(".")
        if not sep or not dot or not case or not param:
            raise BadInput(f"--set {item!r}: expected CASE.PARAM=VALUE, e.g. --set semantic.dataset=pairs.tsv")
        try:
            out.setdefault(case, {})[param] = yaml.safe_load(value)
        except yaml.YAMLError:
            out.setdefault(case, {})[param] = value
    return out


@dataclass
class Plan:
    suite: spec.Suite
    repetitions: int
    params: dict[str, dict]  # case name -> resolved params


def make_plans(suites: list[spec.Suite], profile: str, repeat: int | None,
               overrides: dict[str, dict]) -> list[Plan]:
    """Check everything that can be checked before anything starts."""
    plans, used = [], set()
    for s in suites:
        prof = s.profile(profile)
        params = {}
        for case in s.cases:
            merged = {**case.params, **prof.params.get(case.name, {}), **overrides.get(case.name, {})}
            if case.name in overrides:
                used.add(case.name)
            where = f"{s.path or s.name}: cases.{case.name}.params (profile {profile})"
            params[case.name] = drivers.get(case.driver, where).resolve_params(where, merged)
        plans.append(Plan(s, repeat or prof.repetitions, params))
    unknown = set(overrides) - used
    if unknown:
        raise BadInput(f"--set names case {sorted(unknown)[0]!r}, which no selected suite has")
    return plans


@contextlib.contextmanager
def target_for(plans: list[Plan], target: str, base_port: int, log: Callable[[str], None]):
    """Yield the Target; a local cluster that this run started is stopped afterwards."""
    needs_cluster = any(p.suite.target == "cluster" for p in plans)
    if not needs_cluster:
        yield Target(name=target, kind="none")
        return
    if target != "local":
        from harness.inventory import load_target

        yield load_target(target)
        return
    cluster = LocalCluster(base_port=base_port)
    if cluster.health_problem() is None:  # a healthy cluster already answers there: use it
        log(f"using the running local cluster on 127.0.0.1:{base_port}")
        yield cluster.target()
        return
    log(f"starting a local Redis Cluster (3 primaries + 3 replicas) on 127.0.0.1:{base_port}-{base_port + 5}")
    try:
        yield cluster.up(log=log)
    finally:
        n = cluster.down()
        log(f"stopped the local cluster ({n} processes)")


def suite_as_run(plan: Plan, profile: str) -> dict:
    s, prof = plan.suite, plan.suite.profiles[profile]
    return {
        "description": s.description, "claim": s.claim, "target": s.target, "profile": profile,
        "profile_description": prof.description, "repetitions": plan.repetitions,
        "cases": [{"name": c.name, "driver": c.driver, "description": c.description,
                   "params": plan.params[c.name]} for c in s.cases],
        "thresholds": [{"case": t.case, "metric": t.metric, "op": t.op, "value": t.value,
                        "unit": t.unit, "reason": t.reason} for t in prof.thresholds],
    }


def _claim_order(claim) -> tuple:
    digits = "".join(ch for ch in claim.id if ch.isdigit())
    return (int(digits) if digits else 10**9, claim.id)


def claims_as_run() -> list[dict]:
    """The ledger in claim order (C1, C2, ... C22), as stored with the run."""
    return [{"id": c.id, "section": c.section, "text": c.text, "not_measurable": c.not_measurable,
             "differs": c.differs, "not_measured": c.not_measured, "checks": [vars(k) for k in c.checks]} for c in sorted(spec.load_claims(), key=_claim_order)]


def run_suites(names: list[str], *, profile: str = "local", target: str = "local",
               results_dir: Path = Path("results"), repeat: int | None = None,
               overrides: list[str] = (), base_port: int = 7000, monitoring: bool = False,
               log: Callable[[str], None] = print) -> RunOutcome:
    if repeat is not None and repeat < 1:
        raise BadInput(f"--repeat must be at least 1, got {repeat}")
    suites = spec.select_suites(names)
    plans = make_plans(suites, profile, repeat, parse_overrides(list(overrides)))
    claims = claims_as_run()
    run_id = manifest.new_run_id()
    run_dir = Path(results_dir) / run_id
    (run_dir / "raw").mkdir(parents=True, exist_ok=False)
    man = {"run_id": run_id, "profile": profile, "target": target, "suites": [p.suite.name for p in plans],
           "started": time.time(), "ended": None, **manifest.collect_all()}
    write_manifest(run_dir, man)
    suites_json = {p.suite.name: suite_as_run(p, profile) for p in plans}
    records: list[Record] = []
    write_results(run_dir, records, suites_json, claims)
    log(f"run {run_id}: {len(plans)} suite(s), profile {profile}, results in {run_dir}")
    bad_input: BadInput | None = None
    try:
        with target_for(plans, target, base_port, log) as tgt:
            man["target_nodes"] = tgt.to_json()
            man["servers"] = _server_versions(tgt)
            monitor = _start_monitoring(tgt, run_dir, log) if monitoring else None
            man["window"] = {"start": time.time()}
            try:
                total = sum(len(p.suite.cases) * p.repetitions for p in plans)
                done = 0
                for plan in plans:
                    for case in plan.suite.cases:
                        for rep in range(1, plan.repetitions + 1):
                            done += 1
                            log(f"[{done}/{total}] {plan.suite.name} / {case.name} / repetition {rep}/{plan.repetitions}")
                            rec = run_case(plan, case, rep, profile, tgt, run_dir, log)
                            records.append(rec)
                            write_results(run_dir, records, suites_json, claims)
                            log(f"    {rec.status}{': ' + rec.reason if rec.reason else ''} ({rec.duration_s:.1f} s)")
                            if rec.status == "skipped":  # the next repetitions would skip too
                                for r2 in range(rep + 1, plan.repetitions + 1):
                                    records.append(Record(plan.suite.name, case.name, r2, "skipped", rec.reason))
                                write_results(run_dir, records, suites_json, claims)
                                break
                            if rec.details.get("bad_input"):
                                raise BadInput(rec.reason)
            finally:
                man["window"]["end"] = time.time()
                if monitor is not None:
                    man["monitoring"] = monitor.finish(man["window"], run_dir)
    except BadInput as e:
        bad_input = e
    finally:
        man["ended"] = time.time()
        write_manifest(run_dir, man)
    data = load_run(run_dir)
    a = analyze(data)
    from harness.report.junit import write_junit
    from harness.report.render import render_report

    report = render_report(data, a)
    write_junit(run_dir / "junit.xml", a)
    if bad_input is not None:
        raise bad_input
    return RunOutcome(run_dir, a, a.exit_code, report)


def run_case(plan: Plan, case: spec.Case, rep: int, profile: str, tgt: Target, run_dir: Path,
             log: Callable[[str], None]) -> Record:
    suite = plan.suite.name
    raw_dir = run_dir / "raw" / suite / case.name / f"rep{rep}"
    raw_dir.mkdir(parents=True, exist_ok=True)
    drv = drivers.get(case.driver)
    ctx = CaseContext(suite, case.name, rep, profile, plan.params[case.name], raw_dir, tgt,
                      log=lambda msg: log("    " + msg))
    details: dict = {}
    on_cluster = plan.suite.target == "cluster" and tgt.kind == "cluster" and bool(tgt.nodes)
    if on_cluster:
        failed = server_stats.reset_stats(tgt)
        if failed:
            details["resetstat_failed"] = failed
    started = time.time()
    t0 = time.monotonic()
    try:
        outcome = drv.run(ctx)
        if not isinstance(outcome, CaseOutcome):
            raise TypeError(f"driver {case.driver} returned {type(outcome).__name__}, not CaseOutcome")
    except BadInput as e:
        outcome = CaseOutcome("failed", str(e))
        details["bad_input"] = True
    except HarnessError as e:
        outcome = CaseOutcome("failed", str(e))
    except Exception as e:  # a bug or a tool crash: keep the traceback with the record
        (raw_dir / "traceback.txt").write_text(traceback.format_exc())
        outcome = CaseOutcome("failed", f"{type(e).__name__}: {e} (traceback in raw/)")
    duration = time.monotonic() - t0
    if on_cluster:
        details["server_info"] = server_stats.collect_info(tgt, raw_dir)
    details.update(outcome.details)
    raw_files = sorted(str(p.relative_to(run_dir)) for p in raw_dir.rglob("*") if p.is_file())
    if not raw_files:
        shutil.rmtree(raw_dir, ignore_errors=True)
    return Record(suite, case.name, rep, outcome.status, outcome.reason, outcome.metrics, raw_files,
                  details, plan.params[case.name], started, duration)


def _server_versions(tgt: Target) -> dict:
    import redis

    out = {}
    for node in tgt.nodes:
        try:
            info = tgt.client(node, socket_timeout=3).info("server")
            out[node.address] = {"redis_version": info.get("redis_version"), "role": node.role,
                                 "os": info.get("os")}
        except redis.RedisError as e:
            out[node.address] = {"error": str(e)}
    return out


def _start_monitoring(tgt: Target, run_dir: Path, log):
    from harness.monitoring import Monitor

    return Monitor.start(tgt, run_dir, log)
