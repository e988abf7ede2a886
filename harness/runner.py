"""Runs suites: resolves every parameter first, starts the target, runs each case's
repetitions, writes a record after each one, stops what it started.

A case whose driver registered `isolate=True` runs each repetition in a fresh Python
process (`python -m harness.worker`), so that it never measures what an earlier case left
behind in this one (loaded models, RSS peaks, first-use costs). An interrupted run is
marked as such in results.json and still gets its report and JUnit file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness import drivers, manifest, progress, server_stats, spec
from harness.analysis import Analysis, analyze
from harness.cluster import LocalCluster
from harness.drivers import CaseContext, CaseOutcome, Target
from harness.errors import BadInput, EnvironmentProblem, HarnessError
from harness.files import NO_SPACE, NoSpace, no_space_line, release_reserve, reserve_for, reserve_space
from harness.results import Record, load_run, write_manifest, write_results
from harness.signals import deferred_interrupts, signal_name

PASSWORD_ENV = "HARNESS_TARGET_PASSWORD"  # how an isolated case gets the target's password (never argv)


@dataclass
class RunOutcome:
    run_dir: Path
    analysis: Analysis
    exit_code: int
    report: Path | None = None
    suite_wall_s: dict | None = None


def parse_overrides(items: list[str]) -> dict[str, dict]:
    """--set CASE.PARAM=VALUE (VALUE read as YAML, aliases refused) -> {case: {param: value}}."""
    out: dict[str, dict] = {}
    for item in items:
        key, sep, value = item.partition("=")
        case, dot, param = key.partition(".")
        if not sep or not dot or not case or not param:
            raise BadInput(f"--set {item!r}: expected CASE.PARAM=VALUE, e.g. --set semantic.dataset=pairs.tsv")
        if value.strip() == "":
            raise BadInput(f"--set {item!r}: the value is empty; give one after '=' (quote it for an empty string: '\"\"')")
        try:
            parsed = spec.parse_yaml_text(value, f"--set {key}")
        except spec.AliasRefused:
            raise
        except BadInput:  # not YAML: the text as it is
            parsed = value
        out.setdefault(case, {})[param] = parsed
    return out


def check_set(case: spec.Case, given: dict) -> None:
    """Each --set value checked on its own first, so that its error names --set (not the spec
    file it overrides)."""
    from harness.errors import did_you_mean

    drv = drivers.get(case.driver)
    for param, value in given.items():
        where = f"--set {case.name}.{param}"
        if param not in drv.params:
            known = ", ".join(sorted(drv.params)) or "none"
            raise BadInput(f"{where}: case {case.name!r} (driver {drv.name!r}) has no parameter {param!r}"
                           f"{did_you_mean(param, drv.params)}; its parameters: {known}")
        drv.params[param].check(where, value)


@dataclass
class Plan:
    suite: spec.Suite
    run: spec.SuiteRun

    @property
    def repetitions(self) -> int:
        return self.run.repetitions

    def params(self, case: str) -> dict:
        return next(c.params for c in self.run.cases if c.name == case)


def choose_suites(names: list[str], profile: str, log: Callable[[str], None]) -> list[spec.Suite]:
    """Named suites; with none named, every suite that has the profile (saying which not)."""
    suites = spec.select_suites(names)
    if names:
        return suites
    having = [s for s in suites if profile in s.profiles]
    left = [s.name for s in suites if profile not in s.profiles]
    if not having:
        raise BadInput(f"no suite has a profile {profile!r}; profiles: "
                       f"{', '.join(sorted({p for s in suites for p in s.profiles}))}")
    if left:
        log(f"profile {profile}: not in {', '.join(left)}; running {', '.join(s.name for s in having)}")
    return having


def make_plans(suites: list[spec.Suite], profile: str, repeat: int | None,
               overrides: dict[str, dict]) -> list[Plan]:
    """Check everything that can be checked before anything starts."""
    plans, used = [], set()
    for s in suites:
        prof = s.profile(profile)
        params = {}
        for case in s.cases:
            if case.name in overrides:
                used.add(case.name)
                check_set(case, overrides[case.name])
            params[case.name] = s.case_params(case, profile, overrides.get(case.name))
        plans.append(Plan(s, s.as_run(profile, repeat or prof.repetitions, params)))
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
    with cluster.lock:  # another run on these ports is refused here, before anything is touched
        left = cluster.leftover()
        if left:  # a run killed with -9 left it, with that run's data: never measure on it
            log(f"the local cluster on 127.0.0.1:{base_port} was {left}; it holds that run's data, "
                f"so it is stopped and a fresh one started")
            cluster.down()
        elif cluster.health_problem() is None:  # a healthy cluster already answers there: use it
            log(f"using the running local cluster on 127.0.0.1:{base_port} (started by {cluster.started_by()}); "
                f"it keeps the data it holds ({_key_count(cluster)} keys now), nothing is flushed")
            yield cluster.target()
            return
        log(f"starting a local Redis Cluster (3 primaries + 3 replicas) on 127.0.0.1:{base_port}-{base_port + 5}")
        try:
            yield cluster.up(log=log, owner_pid=os.getpid())
        finally:
            started = bool(cluster.processes)
            n = cluster.stop_started()  # a refused start stops nothing: a cluster already there stays
            if started:
                log(f"stopped the local cluster ({n} processes)")


def _key_count(cluster: LocalCluster) -> str:
    import redis

    try:
        return str(sum(redis.Redis(host=n.host, port=n.port, socket_timeout=2).dbsize()
                       for n in cluster.nodes() if n.role == "primary"))
    except (redis.RedisError, HarnessError):
        return "?"


def refresh_topology(tgt: Target, log: Callable[[str], None]) -> None:
    """Between cases: re-read the cluster's roles from the first node that answers, drop the
    nodes it marks failed and put the current primaries first, so that a case after a
    failover never uses a dead entry node. Leaves the target as it is when no node answers."""
    import redis

    from harness.cluster import parse_cluster_nodes

    for node in list(tgt.nodes):
        try:
            c = tgt.client(node, socket_timeout=2, socket_connect_timeout=2, decode_responses=True)
            try:
                text = c.execute_command("CLUSTER NODES")
            finally:
                c.close()
        except redis.RedisError:
            continue
        live = {(n.host, n.port): n.role for n in parse_cluster_nodes(text)}
        kept = [n for n in tgt.nodes if (n.host, n.port) in live]
        if not kept:
            return
        before = [(n.address, n.role) for n in tgt.nodes]
        for n in kept:
            n.role = live[(n.host, n.port)]
        kept.sort(key=lambda n: (n.role != "primary", n.port))
        if [(n.address, n.role) for n in kept] != before:
            gone = sorted({a for a, _ in before} - {n.address for n in kept})
            log(f"cluster topology changed: primaries now {', '.join(n.address for n in kept if n.role == 'primary')}"
                + (f"; not answering or failed: {', '.join(gone)}" if gone else ""))
            tgt.nodes[:] = kept
        return


def run_suites(names: list[str], *, profile: str = "local", target: str = "local",
               results_dir: Path = Path("results"), repeat: int | None = None,
               overrides: list[str] = (), base_port: int = 7000, monitoring: bool = False,
               allow_skipped: bool = False, log: Callable[[str], None] = print,
               keyword: str | None = None) -> RunOutcome:
    if repeat is not None and not 1 <= repeat <= 1000:
        raise BadInput(f"--repeat must be between 1 and 1000, got {repeat}")
    from harness.redis_server import check_port_number

    check_port_number(base_port)
    if monitoring:
        from harness.monitoring import configured_port

        configured_port()  # a bad HARNESS_MONITORING_PORT is refused before anything starts
    from harness.selection import choose  # SUITE/CASE and -k PATTERN narrow the suites

    suites = choose(list(names), profile, keyword, log)
    plans = make_plans(suites, profile, repeat, parse_overrides(list(overrides)))
    claims = spec.load_claims()
    suite_runs = {p.suite.name: p.run for p in plans}
    records: list[Record] = []
    state: dict = {"monitoring": None, "interrupted": None, "current": ""}
    run_dir: Path | None = None

    def save() -> None:
        write_results(run_dir, records, suite_runs, claims, monitoring=state["monitoring"],
                      interrupted=state["interrupted"])
        reserve_for(run_dir / "results.json")  # room for the next save, should a case fill the disk

    try:  # until the run starts, a Ctrl-C removes the new folder: nothing was measured yet
        with deferred_interrupts():  # the folder is made and known before a Ctrl-C can land
            run_dir = _make_run_dir(Path(results_dir))
        reserve_space(run_dir)  # room for the records if the case output fills the disk
        man = {"run_id": run_dir.name, "profile": profile, "target": target,
               "suites": [p.suite.name for p in plans], "started": time.time(), "ended": None,
               **manifest.collect_all()}
        write_manifest(run_dir, man)
        save()
        log(f"run {run_dir.name}: {len(plans)} suite(s), profile {profile}, results in {run_dir}")
    except BaseException:
        if run_dir is not None:
            with deferred_interrupts():
                shutil.rmtree(run_dir, ignore_errors=True)
        raise
    bad_input: BadInput | None = None
    interrupt: BaseException | None = None
    try:
        with target_for(plans, target, base_port, log) as tgt:
            man["target_nodes"] = tgt.to_json()
            if tgt.kind == "cluster" and target != "local":
                from harness.inventory import loadgen_summary

                man["loadgen"] = loadgen_summary(tgt)
            man["servers"] = _server_versions(tgt)
            write_manifest(run_dir, man)
            monitor = _start_monitoring(tgt, run_dir, log) if monitoring else None
            man["window"] = {"start": time.time()}
            try:
                total = sum(len(p.suite.cases) * p.repetitions for p in plans)
                done = 0
                t_start = time.monotonic()
                man["suite_wall_s"] = {}
                for plan in plans:
                    suite_t0 = time.monotonic()
                    for case in plan.suite.cases:
                        for rep in range(1, plan.repetitions + 1):
                            done += 1
                            state["current"] = f"{plan.suite.name}/{case.name}/repetition {rep}"
                            if plan.suite.target == "cluster" and tgt.kind == "cluster" and tgt.nodes:
                                refresh_topology(tgt, log)
                            log(f"{progress.progress(done - 1, total, time.monotonic() - t_start)} "
                                f"{plan.suite.name} / {case.name} / repetition {rep}/{plan.repetitions}")
                            rec = run_case(plan, case, rep, profile, tgt, run_dir, log)
                            records.append(rec)
                            save()
                            log(f"    {progress.colour(rec.status, rec.status)}{': ' + rec.reason if rec.reason else ''} "
                                f"({rec.duration_s:.1f} s)")
                            if rec.status == "skipped":  # the next repetitions would skip too
                                for r2 in range(rep + 1, plan.repetitions + 1):
                                    records.append(Record(plan.suite.name, case.name, r2, "skipped", rec.reason))
                                save()
                                break
                            if rec.bad_input:
                                raise BadInput(rec.reason)
                    man["suite_wall_s"][plan.suite.name] = round(time.monotonic() - suite_t0, 1)
                state["current"] = ""
            finally:
                man["window"]["end"] = time.time()
                if monitor is not None:
                    cut_short = isinstance(sys.exc_info()[1], KeyboardInterrupt)  # do not keep a Ctrl-C waiting
                    state["monitoring"] = monitor.finish(man["window"], run_dir, wait=not cut_short)
    except BadInput as e:
        bad_input = e
    except KeyboardInterrupt as e:
        interrupt = e
        state["interrupted"] = {"at": time.time(), "case": state["current"] or "between cases",
                                "signal": signal_name(e)}
    finally:
        with _shielded(), _reserve_released(run_dir):  # a second Ctrl-C (or a SIGTERM) waits until the report is written
            pending = sys.exc_info()[1]  # an exception going on past this block (none when handled above)
            if isinstance(pending, KeyboardInterrupt) and not state["interrupted"]:  # a second Ctrl-C came early
                interrupt = pending
                state["interrupted"] = {"at": time.time(), "case": state["current"] or "between cases",
                                        "signal": signal_name(pending)}
            man["ended"] = time.time()
            if state["interrupted"]:
                man["interrupted"] = state["interrupted"]
            write_manifest(run_dir, man)
            save()
            if pending is None or isinstance(pending, KeyboardInterrupt):
                from harness.report.junit import write_junit
                from harness.report.render import render_report

                data = load_run(run_dir)
                a = analyze(data, allow_skipped=allow_skipped)
                report = render_report(data, a)
                write_junit(run_dir / "junit.xml", a)
    if interrupt is not None:
        log(f"interrupted during {state['interrupted']['case']}; what was measured is in {run_dir} "
            f"(report: {report})")
        raise interrupt
    if bad_input is not None:
        raise bad_input
    return RunOutcome(run_dir, a, a.exit_code, report, dict(man.get("suite_wall_s") or {}))


@contextlib.contextmanager
def _reserve_released(run_dir: Path):
    """The run folder's space reserve is given back when the run's last files are written,
    whatever happens while they are."""
    try:
        yield
    finally:
        release_reserve(run_dir)


@contextlib.contextmanager
def _shielded():
    """Let a second Ctrl-C (or SIGTERM) wait until the report of what was measured is
    written; when the run was interrupted anyway, the held signal adds nothing."""
    try:
        with deferred_interrupts():
            yield
    except KeyboardInterrupt:
        pass


def _make_run_dir(results_dir: Path) -> Path:
    if results_dir.exists() and not results_dir.is_dir():
        raise BadInput(f"--results-dir {results_dir}: is a file, not a folder; give a folder")
    for _ in range(5):
        run_dir = results_dir / manifest.new_run_id()
        try:
            (run_dir / "raw").mkdir(parents=True, exist_ok=False)
            return run_dir
        except FileExistsError:
            continue
        except OSError as e:
            raise BadInput(f"--results-dir {results_dir}: cannot create a run folder there "
                           f"({e.strerror or e}); give a writable folder") from None
    raise EnvironmentProblem(f"could not make a new run folder under {results_dir}")


def run_case(plan: Plan, case: spec.Case, rep: int, profile: str, tgt: Target, run_dir: Path,
             log: Callable[[str], None]) -> Record:
    suite = plan.suite.name
    raw_dir = run_dir / "raw" / suite / case.name / f"rep{rep}"
    if not raw_dir.resolve().is_relative_to((run_dir / "raw").resolve()):  # names are checked by spec too
        raise BadInput(f"case {case.name!r} of suite {suite!r} would write outside the results folder")
    raw_dir.mkdir(parents=True, exist_ok=True)
    drv = drivers.get(case.driver)
    params = plan.params(case.name)
    ctx = CaseContext(suite, case.name, rep, profile, params, raw_dir, tgt, log=lambda msg: log("    " + msg))
    details: dict = {}
    bad = False
    on_cluster = plan.suite.target == "cluster" and tgt.kind == "cluster" and bool(tgt.nodes)
    if on_cluster:
        failed = server_stats.reset_stats(tgt)
        if failed:
            details["resetstat_failed"] = failed
    started = time.time()
    t0 = time.monotonic()
    try:
        outcome = _run_isolated(drv, ctx) if drv.isolate else drv.run(ctx)
        if not isinstance(outcome, CaseOutcome):
            raise TypeError(f"driver {case.driver} returned {type(outcome).__name__}, not CaseOutcome")
    except BadInput as e:
        outcome = CaseOutcome("failed", str(e))
        bad = True
    except HarnessError as e:
        outcome = CaseOutcome("failed", str(e))
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a bug or a tool crash: keep the traceback with the record
        if isinstance(e, OSError) and e.errno in NO_SPACE:  # the disk is full: the run ends (exit 3)
            raise NoSpace(no_space_line(run_dir)) from None
        (raw_dir / "traceback.txt").write_text(traceback.format_exc())
        outcome = CaseOutcome("failed", f"{type(e).__name__}: {e} (traceback in raw/)")
    duration = time.monotonic() - t0
    if on_cluster:
        details["server_info"] = server_stats.collect_info(tgt, raw_dir)
    details.update(outcome.details)
    if drv.isolate:
        details["process"] = "its own"
    raw_files = sorted(str(p.relative_to(run_dir)) for p in raw_dir.rglob("*") if p.is_file())
    if not raw_files:
        shutil.rmtree(raw_dir, ignore_errors=True)
    return Record(suite, case.name, rep, outcome.status, outcome.reason, outcome.metrics, raw_files,
                  details, params, started, duration, outcome.series, bad,
                  dict(outcome.facts))


def _run_isolated(drv: drivers.Driver, ctx: CaseContext) -> CaseOutcome:
    """One repetition in a fresh `python -m harness.worker` process; its log lines are
    passed on as they come, its outcome read back from a JSON file."""
    with tempfile.TemporaryDirectory(prefix="harness-case-") as tmp:
        job, out = Path(tmp) / "job.json", Path(tmp) / "outcome.json"
        job.write_text(json.dumps({"driver": drv.name, "module": drv.module, "suite": ctx.suite, "case": ctx.case,
                                   "repetition": ctx.repetition, "profile": ctx.profile, "params": ctx.params,
                                   "raw_dir": str(ctx.raw_dir), "target": ctx.target.to_json(),
                                   "username": ctx.target.username, "outcome": str(out)}))
        env = dict(os.environ)
        if ctx.target.password:
            env[PASSWORD_ENV] = ctx.target.password
        tail: list[str] = []
        proc = None
        try:
            with deferred_interrupts():  # a Ctrl-C now waits until proc exists, so the except below stops it
                proc = subprocess.Popen([sys.executable, "-m", "harness.worker", str(job)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
            for line in proc.stderr:
                line = line.rstrip("\n")
                if line.startswith("LOG "):
                    ctx.log(line[4:])
                else:
                    tail = (tail + [line])[-20:]
            proc.wait()
        except BaseException:
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
        if not out.exists():
            (ctx.raw_dir / "worker.stderr").write_text("\n".join(tail) + "\n")
            raise EnvironmentProblem(f"the case's own process exited with code {proc.returncode} and no outcome: "
                                     f"{' | '.join(tail[-3:]) or '(no output)'} (worker.stderr in raw/)")
        data = json.loads(out.read_text())
    if data.get("error"):
        kind, msg = data["error"]["kind"], data["error"]["message"]
        if data["error"].get("traceback"):
            (ctx.raw_dir / "traceback.txt").write_text(data["error"]["traceback"])
        if kind == "BadInput":
            raise BadInput(msg)
        if kind == "HarnessError":
            raise HarnessError(msg)
        raise RuntimeError(msg)
    return CaseOutcome.from_json(data["outcome"])


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
