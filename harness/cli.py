"""The click command line. Commands stay thin: they map options onto keyword-only
functions, and `main` turns every HarnessError into one line and its exit code."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import click

from harness.errors import EXIT_BAD_INPUT, HarnessError


def _log(msg: str) -> None:
    click.echo(msg, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llm-cache-harness")
def cli():
    """Runs LLM-serving cache claims as experiments on real systems and reports
    claim, threshold and measurement side by side."""


@cli.command("list")
def list_cmd():
    """Suites, their cases and profiles; the registered drivers."""
    from harness import drivers, spec

    for s in spec.load_all_suites().values():
        click.echo(f"{s.name}  ({s.path.name})  profiles: {', '.join(s.profiles)}")
        click.echo(f"    {s.description.strip().splitlines()[0] if s.description else ''}")
        for c in s.cases:
            click.echo(f"    - {c.name} [{c.driver}] {c.description}")
    click.echo("\ndrivers:")
    for name, d in sorted(drivers.load_all().items()):
        click.echo(f"    {name}  ({d.module}){'  [own process]' if d.isolate else ''}")


@cli.command()
@click.argument("suites", nargs=-1)
@click.option("--profile", default="local", show_default=True, help="profile of the suite specs")
@click.option("--target", default="local", show_default=True, help="'local' or an Ansible inventory file")
@click.option("--results-dir", default="results", show_default=True, type=click.Path(path_type=Path))
@click.option("--repeat", type=int, default=None, help="repetitions per case (default: the profile's)")
@click.option("--set", "overrides", multiple=True, metavar="CASE.PARAM=VALUE", help="override a case parameter")
@click.option("--base-port", default=7000, show_default=True, help="first port of the local cluster")
@click.option("--monitoring", is_flag=True, help="query Prometheus for server-side series of the run")
@click.option("--allow-skipped", is_flag=True,
              help="accept skipped cases in a profile where a skip fails the run (lab-a100)")
def run(suites, profile, target, results_dir, repeat, overrides, base_port, monitoring, allow_skipped):
    """Run SUITES (all when none are named), write the results folder and the report."""
    from harness.runner import run_suites
    from harness.summary import summary_text

    out = run_suites(list(suites), profile=profile, target=target, results_dir=results_dir, repeat=repeat,
                     overrides=list(overrides), base_port=base_port, monitoring=monitoring,
                     allow_skipped=allow_skipped, log=_log)
    click.echo(summary_text(out.analysis, out.suite_wall_s))
    click.echo(f"\nresults: {out.run_dir}\nreport:  {out.report}\njunit:   {out.run_dir / 'junit.xml'}")
    if out.exit_code:
        click.echo(f"exit {out.exit_code}: {out.analysis.exit_reason}", err=True)
    sys.exit(out.exit_code)


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--baseline", type=click.Path(path_type=Path), help="an earlier results folder to compare with")
def report(run_dir, baseline):
    """(Re)render RUN_DIR/report.html from the stored results alone."""
    from harness.analysis import analyze
    from harness.compare import compare
    from harness.report.junit import write_junit
    from harness.report.render import render_report
    from harness.results import load_run

    data = load_run(run_dir)
    a = analyze(data)
    comparison = compare(analyze(load_run(baseline)), a) if baseline else None
    path = render_report(data, a, comparison)
    write_junit(data.run_dir / "junit.xml", a)
    click.echo(f"report: {path}")


@cli.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--factor", default=0.05, show_default=True, help="smallest relative change that counts")
def compare(run_a, run_b, factor):
    """Per-metric change from RUN_A (baseline) to RUN_B; exit 1 on a regression."""
    from harness.analysis import analyze
    from harness.compare import compare as do_compare
    from harness.results import load_run
    from harness.summary import comparison_text

    rows = do_compare(analyze(load_run(run_a)), analyze(load_run(run_b)), factor)
    if not rows:
        click.echo("no metric in common between the two runs")
        return
    click.echo(comparison_text(rows))
    if any(r["regression"] for r in rows):
        sys.exit(1)


@cli.group()
def cluster():
    """The local Redis Cluster on loopback (3 primaries + 3 replicas)."""


def _cluster_opts(f):
    f = click.option("--host", default="127.0.0.1", show_default=True)(f)
    f = click.option("--base-port", default=7000, show_default=True)(f)
    return f


@cluster.command("up")
@_cluster_opts
@click.option("--monitoring", is_flag=True, help="also start Prometheus and redis_exporter")
def cluster_up(host, base_port, monitoring):
    """Start the cluster and wait until it is healthy; it keeps running."""
    from harness.cluster import LocalCluster

    c = LocalCluster(host=host, base_port=base_port)
    t = c.up(log=_log)
    for n in t.nodes:
        click.echo(f"{n.address}  {n.role}")
    if monitoring:
        from harness.monitoring import start_stack

        for line in start_stack(t, log=_log):
            click.echo(line)
    click.echo(f"cluster_state:ok; stop it with: harness cluster down --base-port {base_port}")


@cluster.command("down")
@_cluster_opts
def cluster_down(host, base_port):
    """Stop every process the cluster (and its monitoring stack) started."""
    from harness.cluster import LocalCluster

    n = LocalCluster(host=host, base_port=base_port).down()
    try:
        from harness.monitoring import stop_stack

        n += stop_stack()
    except ImportError:
        pass
    click.echo(f"stopped {n} processes")


@cluster.command("status")
@_cluster_opts
def cluster_status(host, base_port):
    """Whether the local cluster runs and is healthy."""
    from harness.cluster import LocalCluster

    click.echo(json.dumps(LocalCluster(host=host, base_port=base_port).status(), indent=1))


@cli.command()
@click.argument("specs", nargs=-1)
def validate(specs):
    """Check suite specs (all of suites/ and the claims ledger when none are given)."""
    from harness.spec import validate_paths

    for line in validate_paths(list(specs)):
        click.echo(line)


def main(argv=None):
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        cli.main(args=argv, prog_name="harness", standalone_mode=False)
    except HarnessError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        click.echo("interrupted; what was measured so far is in the results folder", err=True)
        sys.exit(130)
    sys.exit(0)
