"""Runs suites: plans every case first (harness.run.selection), finds or starts the target
(harness.run.target_lifecycle), runs each case's repetitions, writes a record after each one, and
publishes the report (harness.publish.outputs) when the cases are done or interrupted.

A case whose driver registered `isolate=True` runs each repetition in a fresh Python
process (`python -m harness.run.worker`, through harness.model.child), so that it never measures
what an earlier case left behind in this one (loaded models, RSS peaks, first-use costs).
An interrupted run (Ctrl-C, SIGTERM, SIGHUP) is marked as such in results.json and still
gets its report and JUnit file. A run refused before it measured anything (a busy port,
a bad setting found once the folder was made) leaves no folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence, cast

from harness.base import import_graph, machine_load, progress
from harness.base.errors import BadInput, EnvironmentProblem, HarnessError
from harness.base.files import NO_SPACE, NoSpace, no_space_line, release_reserve, reserve_for, reserve_space
from harness.base.paths import REPO_ROOT
from harness.base.signals import deferred_interrupts, first_interrupt_only, signal_name
from harness.infra import machine_facts as manifest
from harness.infra import server_stats
from harness.infra.cluster import LocalCluster
from harness.infra.monitoring import Monitor, configured_port
from harness.infra.monitoring.query import configured_url
from harness.infra.redis_server import check_port_number
from harness.infra.serving_engine.external import external_engines
from harness.infra.serving_engine.for_run import early_start, engine_configs, engines_for_run, plan_engines
from harness.infra.target import Target
from harness.model import child, driver_contract, ledger, ledger_parse, metric_names, packs, spec
from harness.model.driver_contract import CaseContext
from harness.model.manifest import Manifest
from harness.model.stored_run import Record, write_manifest, write_results
from harness.publish.outputs import publish
from harness.run import worker
from harness.run.selection import Plan, check_repeat, plan
from harness.run.target_lifecycle import manifest_facts, refresh_topology, target_for
from harness.verdict.analysis import Analysis


@dataclass
class RunOutcome:
    run_dir: Path
    analysis: Analysis
    exit_code: int
    report: Path | None = None
    suite_wall_s: dict | None = None
    summary: str = ""


@dataclass
class _Run:
    """One run's state: its folder, manifest and records, saved after every record."""

    run_dir: Path
    man: Manifest  # what is known so far; note() adds to it
    suite_runs: dict
    claims: list
    log: Callable[[str], None]
    records: list[Record] = field(default_factory=list)
    monitoring: dict | None = None
    interrupted: dict | None = None
    current: str = ""
    # the serving engines' summary, which harness.infra.serving_engine.for_run keeps as the run goes
    # (the manifest's `engines` and `engines_start`)
    engine_facts: dict = field(default_factory=dict)

    def note(self, **facts) -> None:
        """Add declared fields to the manifest (written by write_manifest)."""
        self.man = replace(self.man, **facts)

    def write_manifest(self) -> None:
        write_manifest(self.run_dir, replace(self.man, **self.engine_facts))

    def save(self) -> None:
        write_results(
            self.run_dir,
            self.records,
            self.suite_runs,
            self.claims,
            monitoring=self.monitoring,
            interrupted=self.interrupted,
        )
        reserve_for(self.run_dir / "results.json")  # room for the next save, should a case fill the disk

    def refused(self, error: BaseException | None) -> bool:
        """The run ends on an error (not an interrupt) before it measured anything: the
        target, an engine or the monitoring was refused (a busy port, a bad setting, another
        run on these ports), or the first case failed on the user's input. Its folder would
        hold nothing worth keeping, and compare or history might pool it."""
        if error is None or isinstance(error, KeyboardInterrupt) or self.interrupted:
            return False
        return all(r.bad_input for r in self.records)

    def mark_interrupted(self, e: BaseException) -> None:
        self.interrupted = {"at": time.time(), "case": self.current or "between cases", "signal": signal_name(e)}

    def close(self) -> None:
        self.note(ended=time.time(), interrupted=dict(self.interrupted or {}))
        self.write_manifest()
        self.save()


def engine_needs(plans: list[Plan]) -> list[tuple[str, tuple[str, ...]]]:
    """("suite/case", the serving-engine configurations its driver measures) in run order."""
    return [(f"{p.suite.name}/{c.name}", driver_contract.get(c.driver).engines) for p in plans for c in p.suite.cases]


def check_before_run(plans: list[Plan], *, target: str, base_port: int, monitoring: bool) -> None:
    """Every check of the options and the environment a run makes before it starts anything,
    made without starting anything: `run --dry-run` makes them too, so that it never shows a
    plan the real run refuses (a --base-port with no room for the cluster, HARNESS_ENGINE_PORT
    or HARNESS_ENGINE_KV_GIB out of range, a HARNESS_LLM_URL on port 0)."""
    check_port_number(base_port)
    if monitoring:
        configured_port()
        configured_url(target)
    if target == "local" and any(p.suite.target == "cluster" for p in plans):
        LocalCluster(base_port=base_port)  # refuses a base port with no room for the nodes and bus ports
    needs = plan_engines(engine_needs(plans))
    if needs.configs and external_engines(target) is None and target == "local":
        engine_configs(needs.configs)
        early_start()


def run_suites(
    names: list[str],
    *,
    profile: str = "local",
    target: str = "local",
    results_dir: Path = Path("results"),
    repeat: int | None = None,
    overrides: Sequence[str] = (),
    base_port: int = 7000,
    monitoring: bool = False,
    allow_skipped: bool = False,
    log: Callable[[str], None] = print,
    keyword: str | None = None,
    pack: str | None = None,
) -> RunOutcome:
    check_repeat(repeat)
    check_port_number(base_port)
    the_pack = packs.load(pack) if pack else None
    if monitoring:
        configured_port()  # a bad HARNESS_MONITORING_PORT is refused before anything starts
        configured_url(target)  # so is a bad HARNESS_PROMETHEUS_URL (or inventory monitoring host)
    plans = plan(
        list(names), profile=profile, keyword=keyword, repeat=repeat, overrides=list(overrides), log=log, pack=the_pack
    )
    check_before_run(plans, target=target, base_port=base_port, monitoring=monitoring)
    bad_input: BadInput | None = None
    interrupt: BaseException | None = None
    with first_interrupt_only() as gate:  # a second signal, or one after the last case, is held
        run = _open_run(plans, profile, target, Path(results_dir), log, the_pack)
        try:
            _run_on_target(run, plans, target, base_port, monitoring, profile)
        except BadInput as e:
            bad_input = e
        except KeyboardInterrupt as e:
            interrupt = e
            run.mark_interrupted(e)
        finally:
            gate.closing = True  # first: a signal from here on waits, the report is written
            # an exception going on past this block (none when handled above)
            pending = sys.exc_info()[1]
            if run.refused(bad_input or pending):
                _discard(run.run_dir)
            else:
                published = _close_run(run, pending, allow_skipped)
    if interrupt is not None:
        log(
            # run.interrupted was set by run.mark_interrupted when the interrupt was caught
            f"interrupted during {cast(dict, run.interrupted)['case']}; what was measured is in {run.run_dir} "
            f"(report: {published.report})"
        )
        raise interrupt
    if bad_input is not None:
        raise bad_input
    return RunOutcome(
        run.run_dir,
        published.analysis,
        published.exit_code,
        published.report,
        dict(run.man.suite_wall_s),
        published.summary(),
    )


def reference_imports(claims: list[ledger.Claim], suites: set[str]) -> dict:
    """What each reference module of the selected suites' checks reaches of the modules it must
    not import, read from the source this run executes (the manifest's `references`)."""
    out: dict[str, dict[str, Any]] = {}
    for claim in claims:
        for chk in claim.checks:
            ref = chk.reference
            if chk.suite not in suites or ref is None or not ref.module:
                continue
            found = import_graph.reaches(REPO_ROOT, ref.module, ref.independent_of)
            entry = out.setdefault(ref.module, {"reaches": []} if found is not None else {"missing": True})
            if found is not None:
                entry["reaches"] = sorted(set(entry.get("reaches", [])) | set(found))
                entry.setdefault("checked", [])
                entry["checked"] = sorted(set(entry["checked"]) | set(ref.independent_of))
    return out


def _open_run(
    plans: list[Plan], profile: str, target: str, results_dir: Path, log, pack: packs.Pack | None = None
) -> _Run:
    """The new run folder with its manifest and an empty results.json (the claims it will be
    judged by: the pack's, else the seed's ledger). Until the run starts, a Ctrl-C removes the
    folder: nothing was measured yet."""
    run_dir: Path | None = None
    try:
        with deferred_interrupts():  # the folder is made and known before a Ctrl-C can land
            run_dir = _make_run_dir(results_dir)
        reserve_space(run_dir)  # room for the records if the case output fills the disk
        claims = pack.claims() if pack is not None else ledger_parse.load_claims()
        man = Manifest(
            run_id=run_dir.name,
            profile=profile,
            target=target,
            suites=tuple(p.suite.name for p in plans),
            started=time.time(),
            **manifest.collect_all(),
            references=reference_imports(claims, {p.suite.name for p in plans}),
            pack=pack.record() if pack is not None else {},
        )
        run = _Run(run_dir, man, {p.suite.name: p.run for p in plans}, claims, log)
        run.write_manifest()
        run.save()
        log(
            f"run {run_dir.name}: {len(plans)} suite(s), profile {profile}"
            + (f", claim pack {pack.name}" if pack is not None else "")
            + f", results in {run_dir}"
        )
        return run
    except BaseException:
        if run_dir is not None:
            with deferred_interrupts():
                shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _run_on_target(run: _Run, plans: list[Plan], target: str, base_port: int, monitoring: bool, profile: str) -> None:
    """Find or start the target (and the serving engines the cases need), run every plan on
    it, stop what was started."""
    needs_cluster = any(p.suite.target == "cluster" for p in plans)
    with (
        target_for(needs_cluster, target, base_port, run.log) as tgt,
        engines_for_run(engine_needs(plans), tgt, run.run_dir, target, run.engine_facts, run.log) as engines,
    ):
        run.note(**manifest_facts(tgt, target))
        run.write_manifest()
        monitor = Monitor.start(tgt, run.run_dir, run.log) if monitoring else None
        run.note(window={"start": time.time()})
        try:
            _run_plans(run, plans, tgt, engines, profile)
            run.current = ""
        finally:
            run.note(window={**run.man.window, "end": time.time()})
            if monitor is not None:
                cut_short = isinstance(sys.exc_info()[1], KeyboardInterrupt)  # do not keep a Ctrl-C waiting
                run.monitoring = monitor.finish(run.man.window, run.run_dir, wait=not cut_short)


def _run_plans(run: _Run, plans: list[Plan], tgt: Target, engines, profile: str) -> None:
    # repetitions left and the finished ones' seconds, per "suite/case": the time left is
    # estimated per case (progress.time_left); a skipped case's repetitions count as done
    remaining = {f"{p.suite.name}/{c.name}": p.reps(c.name) for p in plans for c in p.suite.cases}
    finished: dict[str, list[float]] = {}
    total, done = sum(remaining.values()), 0
    t_start = time.monotonic()
    run.note(suite_wall_s={})
    for p in plans:
        suite_t0 = time.monotonic()
        for case in p.suite.cases:
            key = f"{p.suite.name}/{case.name}"
            engines.at(key)  # started before the first case that needs them
            for rep in range(1, p.reps(case.name) + 1):
                engines.tick()  # a background engine start moves on between repetitions
                run.current = f"{key}/repetition {rep}"
                if p.suite.target == "cluster" and tgt.kind == "cluster" and tgt.nodes:
                    refresh_topology(tgt, run.log)
                elapsed = time.monotonic() - t_start
                line = progress.progress(done, total, elapsed, progress.time_left(finished, remaining))
                run.log(f"{line} {p.suite.name} / {case.name} / repetition {rep}/{p.reps(case.name)}")
                t0 = time.monotonic()
                more = _repetition(run, p, case, rep, profile, tgt)
                if more:  # a skip takes no time and says nothing of how long the case takes
                    finished.setdefault(key, []).append(time.monotonic() - t0)
                left = remaining[key] - 1 if more else 0  # a skip skips the case's later repetitions too
                done, remaining[key] = done + remaining[key] - left, left
                if not more:
                    break
        run.note(suite_wall_s={**run.man.suite_wall_s, p.suite.name: round(time.monotonic() - suite_t0, 1)})


def _repetition(run: _Run, p: Plan, case: spec.Case, rep: int, profile: str, tgt: Target) -> bool:
    """One repetition, recorded and saved; False when the case's next repetitions would skip too."""
    before = machine_load.sample()
    rec = run_case(p, case, rep, profile, tgt, run.run_dir, run.log)
    rec.machine_load = machine_load.during(before, machine_load.sample())
    run.records.append(rec)
    run.save()
    run.log(
        f"    {progress.colour(rec.status, rec.status)}{': ' + rec.reason if rec.reason else ''} "
        f"({rec.duration_s:.1f} s)"
    )
    if rec.status == "skipped":
        for r2 in range(rep + 1, p.reps(case.name) + 1):
            run.records.append(Record("skipped", rec.reason).stored(suite=p.suite.name, case=case.name, repetition=r2))
        run.save()
        return False
    if rec.bad_input:
        raise BadInput(rec.reason)
    return True


def _discard(run_dir: Path) -> None:
    """Remove the folder of a refused run (nothing was measured in it); a Ctrl-C meanwhile
    waits until it is gone."""
    with deferred_interrupts():
        shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def _reserve_released(run_dir: Path):
    """The run folder's space reserve is given back when the run's last files are written,
    whatever happens while they are."""
    try:
        yield
    finally:
        release_reserve(run_dir)


def _close_run(run: _Run, pending: BaseException | None, allow_skipped: bool):
    """Write the manifest and results and, unless an error other than an interrupt is going
    on (`pending`), publish the report (signals meanwhile are held by the run's gate).
    Returns what publish made, or None."""
    with _reserve_released(run.run_dir):
        if isinstance(pending, KeyboardInterrupt) and not run.interrupted:
            run.mark_interrupted(pending)
        run.close()
        if pending is None or isinstance(pending, KeyboardInterrupt):
            return publish(run.run_dir, allow_skipped=allow_skipped)
    return None


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
            raise BadInput(
                f"--results-dir {results_dir}: cannot create a run folder there "
                f"({e.strerror or e}); give a writable folder"
            ) from None
    raise EnvironmentProblem(f"could not make a new run folder under {results_dir}")


def run_case(
    p: Plan, case: spec.Case, rep: int, profile: str, tgt: Target, run_dir: Path, log: Callable[[str], None]
) -> Record:
    suite = p.suite.name
    raw_dir = run_dir / "raw" / suite / case.name / f"rep{rep}"
    if not raw_dir.resolve().is_relative_to((run_dir / "raw").resolve()):  # names are checked by spec too
        raise BadInput(f"case {case.name!r} of suite {suite!r} would write outside the results folder")
    raw_dir.mkdir(parents=True, exist_ok=True)
    drv = driver_contract.get(case.driver)
    params = p.params(case.name)
    ctx = CaseContext(suite, case.name, rep, profile, params, raw_dir, tgt, log=lambda msg: log("    " + msg))
    details: dict = {}
    on_cluster = p.suite.target == "cluster" and tgt.kind == "cluster" and bool(tgt.nodes)
    if on_cluster:
        failed = server_stats.reset_stats(tgt)
        if failed:
            details["resetstat_failed"] = failed
    started = time.time()
    t0 = time.monotonic()
    outcome, bad = _outcome(drv, ctx, run_dir)
    duration = time.monotonic() - t0
    if on_cluster:
        details["server_info"] = server_stats.collect_info(tgt, raw_dir)
    details.update(outcome.details)
    if drv.isolate:
        details["process"] = "its own"
    raw_files = sorted(str(f.relative_to(run_dir)) for f in raw_dir.rglob("*") if f.is_file())
    if not raw_files:
        shutil.rmtree(raw_dir, ignore_errors=True)
    return outcome.stored(
        suite=suite,
        case=case.name,
        repetition=rep,
        params=params,
        started=started,
        duration_s=duration,
        raw_files=raw_files,
        bad_input=bad,
        details=details,
    )


def _outcome(drv: driver_contract.Driver, ctx: CaseContext, run_dir: Path) -> tuple[Record, bool]:
    """The driver's outcome (here or in its own process) and whether it failed on the
    user's input; an error becomes a failed outcome, a bug's traceback goes to raw/."""
    try:
        outcome = _run_isolated(drv, ctx) if drv.isolate else drv.run(ctx)
        if not isinstance(outcome, Record):
            raise TypeError(f"driver {drv.name} returned {type(outcome).__name__}, not Record")
        _check_declared(drv, ctx, outcome)
        return outcome, False
    except BadInput as e:
        return Record("failed", str(e)), True
    except HarnessError as e:
        return Record("failed", str(e)), False
    except KeyboardInterrupt:
        raise
    except child.ChildCrashed as e:  # a bug in the case's own process: its traceback kept
        (ctx.raw_dir / "traceback.txt").write_text(e.traceback)
        return Record("failed", f"{e} (traceback in raw/)"), False
    except Exception as e:  # a bug or a tool crash: keep the traceback with the record
        if isinstance(e, OSError) and e.errno in NO_SPACE:  # the disk is full: the run ends (exit 3)
            raise NoSpace(no_space_line(run_dir)) from None
        (ctx.raw_dir / "traceback.txt").write_text(traceback.format_exc())
        return Record("failed", f"{type(e).__name__}: {e} (traceback in raw/)"), False


def _check_declared(drv: driver_contract.Driver, ctx: CaseContext, outcome: Record) -> None:
    """A metric the driver reports but does not declare (or declares with another unit): the
    measurement is kept, the record says so in its details and the log says so; with
    HARNESS_STRICT_METRICS=1 (the project's tests) it is the driver's bug and fails the case."""
    wrong = metric_names.undeclared_in(outcome, drv)
    if not wrong:
        return
    line = f"driver {drv.name} reports {len(wrong)} metric(s) it does not declare: {'; '.join(wrong[:3])}"
    if os.environ.get("HARNESS_STRICT_METRICS") == "1":
        raise TypeError(line + f"; declare them in its metrics= ({drv.module})")
    outcome.details["undeclared_metrics"] = wrong
    ctx.log(line)


def _run_isolated(drv: driver_contract.Driver, ctx: CaseContext) -> Record:
    """One repetition in a fresh `python -m harness.run.worker` process; its log lines are
    passed on as they come, its outcome read back (harness.model.child) as the record it sent."""
    out = child.run(
        worker.MODULE,
        worker.job_for(drv, ctx),
        what="the case's own process",
        env={**os.environ, **ctx.target.to_env()},
        log=ctx.log,
        stderr_path=ctx.raw_dir / "worker.stderr",
    )
    return Record.from_json(out)
