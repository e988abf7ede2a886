"""The click command line. Commands stay thin: they map options onto keyword-only
functions, and `main` turns every HarnessError into one line and its exit code."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from harness.base import signals
from harness.base.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, BadInput, EnvironmentProblem, HarnessError
from harness.base.files import NO_SPACE, no_space_line, write_atomic
from harness.base.paths import REPO_ROOT
from harness.base.safe_text import LINE, NAME, for_terminal
from harness.infra.cluster import LocalCluster
from harness.infra.monitoring import cluster_owner, configured_port, stacks_owned_by, start_stack, stop_stack
from harness.infra.redaction import redact
from harness.infra.serving_engine.commands import engine
from harness.model import driver_contract, ledger_parse, metric_names, packs, spec
from harness.publish.history_page import write_history
from harness.publish.outputs import measurements_markdown, publish
from harness.publish.render import check_history_location
from harness.run.runner import check_before_run, run_suites
from harness.run.selection import plan, plan_lines
from harness.verdict import baseline as C


def _log(msg: str) -> None:
    # a secret (or a URL's password) never reaches the terminal, nor an escape sequence or a forged line
    click.echo(for_terminal(redact(msg), LINE), err=True)


ENVIRONMENT = """Environment variables:

\b
  HARNESS_MONITORING_PORT  Prometheus port of the local monitoring stack (default 9090)
  HARNESS_PROMETHEUS_URL   use this Prometheus instead of starting one (--monitoring; a password in it is never shown)
  HARNESS_LOADGEN          'local': run the load tools here even when the inventory has a loadgen host
  REDIS_CLUSTER_PASSWORD   the password of an inventory's cluster (never written anywhere)
  HARNESS_TEST_CLUSTER_PORT  first port of the tests' cluster (pytest)
  HARNESS_LLM_URL, HARNESS_LLM_MODEL  measure this OpenAI-compatible server (base URL, model); start no engine
  HARNESS_ENGINE_PORT      first port of the engines a run starts (default 8011: cached, 8012: uncached)
  HARNESS_ENGINE_KV_GIB    KV cache of each engine a run starts, GiB (default 1)
  HF_HUB_OFFLINE=1         set by the Makefile: nothing is downloaded at run time
  NO_COLOR                 set (not empty): no colour in progress lines (colour only on a terminal)
"""


def _complete_suites(ctx, param, incomplete):
    """Shell completion: suite names and SUITE/CASE."""
    try:
        suites = spec.load_all_suites()
    except Exception:  # a broken spec must not break the shell
        return []
    names = [n for s in suites.values() for n in [s.name] + [f"{s.name}/{c.name}" for c in s.cases]]
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def _complete_profiles(ctx, param, incomplete):
    try:
        profiles = sorted({p for s in spec.load_all_suites().values() for p in s.profiles})
    except Exception:
        return []
    return [CompletionItem(p) for p in profiles if p.startswith(incomplete)]


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=ENVIRONMENT)
@click.version_option(package_name="llm-cache-harness")
def cli():
    """Runs LLM-serving cache claims as experiments on real systems and reports
    claim, threshold and measurement side by side."""


def _spec_path(s) -> str | None:
    """A suite's spec file, relative to the repository when it is there."""
    if not s.path:
        return None
    p = Path(s.path).resolve()
    return str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else str(p)


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON (suites, cases, profiles, drivers)")
def list_cmd(as_json):
    """Suites, their cases and profiles; the registered drivers."""
    if as_json:
        click.echo(
            json.dumps(
                {
                    "suites": [
                        {
                            "name": s.name,
                            "file": _spec_path(s),
                            "description": s.description,
                            "target": s.target,
                            "profiles": list(s.profiles),
                            "cases": [
                                {"name": c.name, "driver": c.driver, "description": c.description} for c in s.cases
                            ],
                        }
                        for s in spec.load_all_suites().values()
                    ],
                    "drivers": [
                        {"name": n, "module": d.module, "own_process": bool(d.isolate)}
                        for n, d in sorted(driver_contract.load_all().items())
                    ],
                },
                indent=1,
            )
        )
        return
    for s in spec.load_all_suites().values():
        click.echo(for_terminal(f"{s.name}  ({_spec_path(s)})  profiles: {', '.join(s.profiles)}", LINE))
        click.echo("    " + for_terminal(s.description.strip().splitlines()[0] if s.description.strip() else "", LINE))
        for c in s.cases:
            click.echo(for_terminal(f"    - {c.name} [{c.driver}] {c.description}", LINE))
    click.echo("\ndrivers:")
    for name, d in sorted(driver_contract.load_all().items()):
        click.echo(f"    {name}  ({d.module}){'  [own process]' if d.isolate else ''}")


MAX_PATTERN = 256  # a SUITE/CASE name is at most 129 characters: a longer -k pattern matches nothing


def _pattern(ctx, param, value):
    """-k: a pattern longer than any SUITE/CASE can match nothing; refused without echoing it whole."""
    if value is not None and len(value) > MAX_PATTERN:
        raise BadInput(
            f"-k {value[:40]!r}... is {len(value)} characters long; a SUITE/CASE name has at most "
            f"129, give a shorter pattern ('harness list' shows the names)"
        )
    return value


def _results_dir(ctx, param, value):
    """--results-dir '' would be the current folder: an empty path is bad input."""
    if value is not None and not str(value).strip():
        raise BadInput("--results-dir is empty; give a folder for the run folders, e.g. --results-dir results")
    return Path(value)


@cli.command(epilog=ENVIRONMENT)
@click.argument("suites", nargs=-1, shell_complete=_complete_suites)
@click.option(
    "-k",
    "keyword",
    metavar="PATTERN",
    callback=_pattern,
    help="only cases whose SUITE/CASE contains PATTERN (or matches it as a glob: *, ?, [])",
)
@click.option(
    "--dry-run", is_flag=True, help="print the plan (suites, cases, repetitions, parameters, target) and exit"
)
@click.option(
    "--profile",
    default="local",
    show_default=True,
    help="profile of the suite specs",
    shell_complete=_complete_profiles,
)
@click.option("--target", default="local", show_default=True, help="'local' or an Ansible inventory file")
@click.option("--results-dir", default="results", show_default=True, type=click.Path(), callback=_results_dir)
@click.option("--repeat", type=int, default=None, help="repetitions per case (default: the profile's)")
@click.option("--set", "overrides", multiple=True, metavar="CASE.PARAM=VALUE", help="override a case parameter")
@click.option("--base-port", default=7000, show_default=True, help="first port of the local cluster")
@click.option("--monitoring", is_flag=True, help="query Prometheus for server-side series of the run")
@click.option(
    "--allow-skipped", is_flag=True, help="accept skipped cases in a profile where a skip fails the run (lab-a100)"
)
@click.option(
    "--pack",
    metavar="NAME|FOLDER",
    help="judge a claim pack's claims (harness packs lists them), running the cases they need with the pack's setup",
)
def run(
    suites,
    keyword,
    dry_run,
    profile,
    target,
    results_dir,
    repeat,
    overrides,
    base_port,
    monitoring,
    allow_skipped,
    pack,
):
    """Run SUITES (all when none are named; SUITE/CASE for one case; with --pack, the cases
    its claims need), write the results folder and the report."""
    if monitoring:
        _need_monitoring_client()
    if dry_run:
        the_pack = packs.load(pack) if pack else None
        plans = plan(
            list(suites),
            profile=profile,
            keyword=keyword,
            repeat=repeat,
            overrides=list(overrides),
            log=_log,
            pack=the_pack,
        )
        if the_pack is not None:
            click.echo(for_terminal(f"claim pack {the_pack.name}: {the_pack.title}", LINE))
        check_before_run(plans, target=target, base_port=base_port, monitoring=monitoring)  # what the run refuses
        for line in plan_lines(
            plans, profile=profile, target=target, base_port=base_port, results_dir=results_dir, monitoring=monitoring
        ):
            click.echo(line)
        return
    out = run_suites(
        list(suites),
        profile=profile,
        target=target,
        results_dir=results_dir,
        repeat=repeat,
        overrides=list(overrides),
        base_port=base_port,
        monitoring=monitoring,
        allow_skipped=allow_skipped,
        log=_log,
        keyword=keyword,
        pack=pack,
    )
    signals.settle()  # the results, report and JUnit are written: a late Ctrl-C changes nothing
    click.echo(out.summary)
    click.echo(
        f"\nresults: {for_terminal(out.run_dir, LINE)}\nreport:  {for_terminal(out.report, LINE)}\n"
        f"junit:   {for_terminal(out.run_dir / 'junit.xml', LINE)}"
    )
    if out.exit_code:
        click.echo(f"exit {out.exit_code}: {for_terminal(out.analysis.exit_reason, LINE)}", err=True)
    sys.exit(out.exit_code)


def _need_monitoring_client() -> None:
    """--monitoring needs prometheus-api-client (a core dependency): one line if it is gone."""
    try:
        import prometheus_api_client  # noqa: F401
    except ImportError:
        raise EnvironmentProblem(
            "--monitoring needs the prometheus-api-client package, which is not installed; "
            "run `make setup` (or pip install -c constraints.txt -e .)"
        ) from None


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--baseline", type=click.Path(path_type=Path), help="an earlier results folder to compare with")
@click.option(
    "--history",
    "history",
    metavar="LOCATION",
    callback=lambda ctx, param, v: check_history_location(v),
    help="where the history page is (a path relative to the report, or an https URL; nothing else): "
    "threshold and claim rows link to their metric's history",
)
def report(run_dir, baseline, history):
    """(Re)render RUN_DIR/report.html (and junit.xml) from the stored results alone."""
    out = publish(run_dir, baseline=baseline, history=history)
    if isinstance(out.run.interrupted, dict):
        click.echo(
            f"note: this run was interrupted ({for_terminal(out.run.interrupted.get('case', ''), NAME)}); "
            f"the report shows what was measured before",
            err=True,
        )
    click.echo(f"report: {for_terminal(out.report, LINE)}")


@cli.command()
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--last",
    default=7,
    show_default=True,
    help="when BASELINE is a folder of results folders: pool the last N earlier runs (median of their medians)",
)
@click.option(
    "--factor",
    default=0.05,
    show_default=True,
    help="smallest relative change that counts (raised to the baseline's coefficient of variation)",
)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--only-changed", is_flag=True, help="leave out metrics with no change or a change within the noise")
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="compare even when the profile, host, key versions or case parameters differ (a warning instead of exit 2)",
)
@click.option("--output", type=click.Path(path_type=Path), help="also write the comparison to this file")
def compare(baseline, run_dir, last, factor, fmt, only_changed, allow_mismatch, output):
    """The claims whose verdict changed from BASELINE to RUN_DIR, then the per-metric
    change, regressions first; exit 1 on a regression (a metric, or a claim that held and
    no longer does), 2 when the sides are not comparable or share no metric.

    BASELINE is one earlier results folder, or the folder that holds earlier results
    folders: then the baseline is the median of the last --last runs that match RUN_DIR's
    profile, host, versions and case parameters. A change counts when it is past max(--factor, the
    baseline's coefficient of variation) and the repetitions clear the baseline's range;
    a metric whose baseline varies over 10% is marked unstable, never a regression."""
    c = C.compare_dirs(baseline, run_dir, last=last, factor=factor, allow_mismatch=allow_mismatch, log=_log)
    rows = C.changed_only(c.rows) if only_changed else c.rows
    text = {"text": C.format_text, "markdown": C.format_markdown, "json": C.format_json}[fmt](c, rows)
    for w in c.warnings:
        _log(f"warning: {w}")
    click.echo(text)
    if output:
        try:
            write_atomic(output, text if text.endswith("\n") else text + "\n", follow=True)
        except BadInput as e:
            raise BadInput(f"--output {e}") from None
    sys.exit(c.exit_code)


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--write",
    "out",
    type=click.Path(path_type=Path),
    help="write the Markdown to this file (docs/measurements.md) instead of printing it",
)
def measurements(run_dir, out):
    """What RUN_DIR measured, as Markdown generated from the folder alone: the run and its
    machine, each claim's verdict with its deciding check, the thresholds, the cases that did
    not run, where the time went. docs/measurements.md is written by it, never by hand."""
    text = measurements_markdown(run_dir)
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        write_atomic(out, text, follow=True)
    except BadInput as e:
        raise BadInput(f"--write {e}") from None
    click.echo(f"wrote {for_terminal(out, LINE)}")


@cli.command()
@click.argument("results_root", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    help="folder for history.html and history.json (default: RESULTS_ROOT)",
)
@click.option("--last", type=int, default=None, help="only the last N runs")
@click.option(
    "--profile",
    default=None,
    shell_complete=_complete_profiles,
    help="the runs of this profile (default: the newest run's)",
)
def history(results_root, out_dir, last, profile):
    """Every metric's history over the results folders under RESULTS_ROOT: one
    self-contained page (history.html) and history.json, with per-run whiskers, the
    threshold, annotations and the steps found."""
    html, js = write_history(results_root, out_dir, last, log=_log, profile=profile)
    click.echo(f"history: {for_terminal(html, LINE)}\njson:    {for_terminal(js, LINE)}")


@cli.group()
def cluster():
    """The local Redis Cluster on loopback (3 primaries + 3 replicas)."""


def _host(ctx, param, value: str) -> str:
    """--host names a folder of the cluster's state (.harness/cluster-HOST-PORT): an address
    or a host name only, never a path."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.:-]{0,252}", value or "") or ".." in value:
        raise BadInput(f"--host {value!r}: give an IP address or a host name of this machine, e.g. 127.0.0.1")
    return value


def _cluster_opts(f):
    f = click.option("--host", default="127.0.0.1", show_default=True, callback=_host)(f)
    f = click.option("--base-port", default=7000, show_default=True)(f)
    return f


@cluster.command("up")
@_cluster_opts
@click.option("--monitoring", is_flag=True, help="also start Prometheus and redis_exporter")
def cluster_up(host, base_port, monitoring):
    """Start the cluster and wait until it is healthy; it keeps running."""
    c = LocalCluster(host=host, base_port=base_port)
    if monitoring:
        configured_port()  # a bad HARNESS_MONITORING_PORT is refused before anything starts
    t = c.up(log=_log)
    for n in t.nodes:
        click.echo(f"{n.address}  {n.role}")
    if monitoring:
        try:
            lines = start_stack(t, log=_log, owner=cluster_owner(host, base_port))
        except BaseException:  # the cluster alone is no use to whoever asked for both
            c.down()
            raise
        for line in lines:
            click.echo(line)
    click.echo(f"cluster_state:ok; stop it with: harness cluster down --base-port {base_port}")


@cluster.command("down")
@_cluster_opts
def cluster_down(host, base_port):
    """Stop every process this cluster (and the monitoring stack it started) started; the
    state files name them by pid, so another cluster's processes are never touched."""
    n = LocalCluster(host=host, base_port=base_port).down()
    for port in stacks_owned_by(cluster_owner(host, base_port)):
        n += stop_stack(port)
    click.echo(f"stopped {n} processes")


@cluster.command("status")
@_cluster_opts
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def cluster_status(host, base_port, as_json):
    """Whether the local cluster runs and is healthy; exit 3 when it is down or unhealthy."""
    c = LocalCluster(host=host, base_port=base_port)
    st = c.status()
    if not st.get("running"):
        problem = c.health_problem()  # one started elsewhere (no state file here) still counts
        if problem is None:
            st.update(running=True, health="ok", started_by="another process (no state file here)")
        else:
            st["health"] = f"down: {problem}"
    healthy = st.get("running") and st.get("health") == "ok"
    if as_json:
        click.echo(json.dumps({**st, "healthy": bool(healthy)}, indent=1))
    else:
        click.echo(
            f"cluster on {host}:{base_port}-{base_port + 5}: "
            + (
                "healthy"
                if healthy
                else ("running, unhealthy: " if st.get("running") else "") + for_terminal(st.get("health"), LINE)
            )
        )
    if not healthy:
        sys.exit(EXIT_ENVIRONMENT)


cli.add_command(engine)  # harness engine install|up|down|status (harness/infra/serving_engine/commands.py)


@cli.command("packs")
def list_packs():
    """List the claim packs: each one's claims, the cases they need, and its source."""
    for name in packs.names():
        p = packs.load(name)
        claims = p.claims()
        click.echo(for_terminal(f"{p.name}  {p.title}", LINE))
        click.echo(
            for_terminal(
                f"    {packs.count(len(claims), 'claim')}, {packs.count(len(p.cases(claims)), 'case')}; source ({p.source.kind}): "
                f"{p.source.url or p.source.no_url}",
                LINE,
            )
        )
    click.echo("harness run --pack NAME runs one; harness validate FOLDER checks a pack of your own (docs/packs.md)")


@cli.command()
@click.argument("specs", nargs=-1)
def validate(specs):
    """Check suite specs (every suite of harness/experiments/ and the claims ledger when none
    are given), or a claim pack's folder."""
    if len(specs) == 1 and (Path(specs[0]).is_dir() or Path(specs[0]).name == packs.PACK_FILE):
        for line in packs.validate(specs[0]):
            click.echo(for_terminal(line, LINE))
        click.echo("metrics: every ledger check names a metric its case declares")
        return
    for line in ledger_parse.validate_paths(list(specs)):
        click.echo(for_terminal(line, LINE))
    if specs:
        suites = {s.name: s for s in (spec.load_suite_file(Path(p)) for p in specs)}
        metric_names.refuse_undeclared(suites, [])
    else:
        metric_names.refuse_undeclared(spec.load_all_suites(), ledger_parse.load_claims())
        for name in packs.names():  # the shipped packs (the seed's ledger is checked above)
            if name != packs.SEED:
                for line in packs.validate(name):
                    click.echo(for_terminal(line, LINE))
    click.echo("metrics: every threshold and ledger check names a metric its case declares")


def main(argv=None):
    # A real process: output to a closed terminal or a pipe whose reader left is dropped, and
    # the run goes on (signals.guard_output); in-process callers (tests) keep their streams.
    old_streams = signals.guard_output() if argv is None else {}
    old_handlers = signals.install()
    try:
        if argv is None:
            try:
                _main(argv)
            except (SystemExit, KeyboardInterrupt):
                raise
            except Exception as e:  # noqa: BLE001 - a bug: one line, never exit 1
                _unexpected(e)
        else:
            _main(argv)  # in-process callers (tests) see the exception itself
    finally:  # in-process callers (tests) get their handlers back; a real process settles as it exits
        if argv is None:
            signals.settle()
        else:
            signals.restore(old_handlers)
            signals.unguard_output(old_streams)


def _main(argv) -> None:
    try:
        cli.main(args=argv, prog_name="harness", standalone_mode=False)
    except HarnessError as e:
        click.echo(f"error: {for_terminal(redact(str(e)), LINE)}", err=True)  # one line, whatever it quotes
        sys.exit(e.exit_code)
    except click.exceptions.Abort as e:  # click turns KeyboardInterrupt (Terminated, HungUp) into Abort
        _interrupted(e.__cause__ or e)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt as e:
        _interrupted(e)
    except MemoryError:  # the machine's memory or the process's limit: the environment, never a bug
        _out_of_memory()
    except OSError as e:  # a disk that filled up under a case's own output: the environment, one line
        if e.errno in BAD_PATH:  # a name over 255 bytes, a path over 4096, a loop of links: the user's path
            click.echo(f"error: {for_terminal(bad_path_line(e), LINE)}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        if e.errno not in NO_SPACE:
            raise
        where = Path(e.filename).parent if e.filename else Path.cwd()
        click.echo(f"error: {no_space_line(where)}", err=True)
        sys.exit(EXIT_ENVIRONMENT)
    sys.exit(0)


BAD_PATH = (errno.ENAMETOOLONG, errno.ELOOP)


def bad_path_line(e: OSError) -> str:
    """One line for a path the file system refuses as a name: which path, why, the fix."""
    name = str(e.filename or "a path")
    shown = name if len(name) <= 120 else f"{name[:60]}...{name[-40:]} ({len(name.encode('utf-8', 'replace'))} bytes)"
    why = (
        "a name in it is longer than the file system allows (255 bytes a name, 4096 in all)"
        if e.errno == errno.ENAMETOOLONG
        else "it is a loop of links"
    )
    return f"{redact(shown)}: {why}; give a shorter path"


def _unexpected(e: BaseException) -> None:
    """A real process's exception that is no HarnessError: a bug of the harness. One line, its
    traceback kept in a file, and exit 3: never 1, which `run` and `compare` give for a failed
    threshold or a regression, and never a traceback on the terminal. A MemoryError is no bug:
    the environment's line (_out_of_memory)."""
    if isinstance(e, MemoryError):
        _out_of_memory()
    where = ""
    try:
        fd, path = tempfile.mkstemp(prefix="harness-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(redact("".join(traceback.format_exception(e))))
        where = f"; its traceback is in {path}"
    except OSError:
        pass
    what = for_terminal(redact(f"{type(e).__name__}: {e}"), 200)
    click.echo(f"error: the harness failed ({what}); this is a bug in the harness{where}", err=True)
    sys.exit(EXIT_ENVIRONMENT)


# Written before it is needed: when memory has run out, the line must cost next to none.
OUT_OF_MEMORY = (
    "error: out of memory (environment): the machine, or the limit set on this process (ulimit -v), "
    "gave the harness less memory than this command needed; free memory or raise the limit, then run it again"
)


def _out_of_memory() -> None:
    """A MemoryError: one line saying it is the environment's limit, and exit 3 (no traceback
    file: writing one could need the memory that is not there)."""
    click.echo(OUT_OF_MEMORY, err=True)
    sys.exit(EXIT_ENVIRONMENT)


def _interrupted(e: BaseException) -> None:
    """Exit 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP (128 + the signal's number),
    after one line (dropped when the terminal is gone)."""
    click.echo(f"interrupted ({signals.signal_name(e)})", err=True)
    sys.exit(signals.exit_code(e))
