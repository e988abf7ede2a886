"""The local monitoring stack: one Prometheus, one redis_exporter per Redis node and one
node exporter, started as plain processes (state in harness.base.paths.STATE_DIR/monitoring-<port>/)
by `harness cluster up --monitoring` or by `harness run --monitoring` when none runs.

Its state file records every process by pid and start time (before it is waited for)
and who started the stack (`owner`: a cluster's "cluster HOST:PORT", or "run PID"), so
that `harness cluster down --base-port N` stops only the stack of that cluster, and a
stack left behind by a killed run is recognised and replaced. A process is signalled only
when it still has that start time and runs in the stack's folder, where it was started
(harness.infra.ownership); the executable a state file names proves nothing. Stopping runs to its end through a second
Ctrl-C (harness.base.signals.deferred_interrupts).

Ports: Prometheus on HARNESS_MONITORING_PORT (default 9090), the redis_exporters on the
next ports (one per node), the node exporter after them. Both this stack and the Ansible
role `monitoring` render infra/prometheus/prometheus.yml.j2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, cast

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.paths import INFRA_DIR, STATE_DIR
from harness.base.signals import deferred_interrupts
from harness.infra import http_get
from harness.infra.ownership import (
    START_LIMIT,
    DamagedState,
    Proc,
    boot_id,
    gone_owner,
    is_ours,
    is_pid,
    not_ours_note,
    note,
    open_log,
    open_state,
    own_dir,
    spawned,
    split_owned,
    start_time,
    terminate,
    write_private,
)
from harness.infra.redis_server import check_ports_free
from harness.infra.target import Target

PORT_ENV = "HARNESS_MONITORING_PORT"
URL_ENV = "HARNESS_PROMETHEUS_URL"
DEFAULT_PORT = 9090
SCRAPE_INTERVAL_S = 1
RATE_WINDOW = "5s"  # irate() over the last two scrapes in 5 s: per-second values at a 1 s scrape interval
TEMPLATE = INFRA_DIR / "prometheus" / "prometheus.yml.j2"
INSTALL_HINT = "install them with: apt-get install -y prometheus prometheus-redis-exporter prometheus-node-exporter"
# Executable names: Debian's first, then upstream's.
TOOLS = {
    "prometheus": ("prometheus",),
    "redis_exporter": ("prometheus-redis-exporter", "redis_exporter"),
    "node_exporter": ("prometheus-node-exporter", "node_exporter"),
}


# ---- configuration (pure) -------------------------------------------------------------
def configured_port() -> int:
    raw = os.environ.get(PORT_ENV, str(DEFAULT_PORT))
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535 - 64:
        raise BadInput(
            f"{PORT_ENV}={raw!r} is not a port number with room for the exporters after it "
            f"(1-{65535 - 64}); set it to a free port such as 9090"
        )
    return port


def stack_ports(n_nodes: int, base: int) -> dict:
    """Prometheus on `base`, the redis exporters on base+1..base+n, the node exporter after."""
    return {
        "prometheus": base,
        "redis_exporters": [base + 1 + i for i in range(n_nodes)],
        "node_exporter": base + 1 + n_nodes,
    }


def render_config(
    redis_targets: list[dict],
    node_targets: list[dict],
    prometheus_address: str,
    scrape_interval_s: float = SCRAPE_INTERVAL_S,
) -> str:
    """Prometheus YAML from the shared template. redis_targets: [{exporter, node}],
    node_targets: [{exporter, host}]."""
    import jinja2

    tmpl = jinja2.Template(TEMPLATE.read_text(), undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    interval = f"{scrape_interval_s:g}s"
    return tmpl.render(
        monitoring_scrape_interval=interval,
        monitoring_scrape_timeout=interval,
        monitoring_prometheus_address=prometheus_address,
        monitoring_redis_targets=redis_targets,
        monitoring_node_targets=node_targets,
    )


def find_tool(kind: str) -> str | None:
    for name in TOOLS[kind]:
        path = shutil.which(name)
        if path:
            return path
    return None


def missing_tools() -> list[str]:
    return [TOOLS[k][0] for k in TOOLS if find_tool(k) is None]


# ---- the local stack (processes) ------------------------------------------------------
def stack_dir(port: int) -> Path:
    return STATE_DIR / f"monitoring-{port}"


def read_state(port: int) -> dict:
    """The stack's state, checked field by field; {} when there is none. DamagedState (one
    line, exit 3) when it cannot be used."""
    path = stack_dir(port) / "state.json"
    f = open_state(path, "process of this monitoring stack")
    if f is None:
        return {}
    url = f.text("url", 100)
    if url is not None and url != f"http://127.0.0.1:{port}":
        raise f.bad("url", f"this stack's own address (http://127.0.0.1:{port})")
    owner = f.text("owner", 200) or ""
    kind, _, pid = owner.partition(" ")
    if kind == "run" and not (pid.isdigit() and len(pid) < 10 and is_pid(int(pid))):
        raise f.bad("owner", "'run PID' with a process id")
    return {
        "port": port,
        "url": url,
        "nodes": f.texts("nodes", 300),
        "owner": owner,
        "owner_start": f.integer("owner_start", 0, START_LIMIT),
        "boot": f.text("boot", 100),
        "started": f.number("started"),
        "processes": f.procs("processes"),
    }


def all_stacks() -> list[int]:
    """Ports of every local stack that has a state file."""
    out = []
    for d in sorted(STATE_DIR.glob("monitoring-*")):
        tail = d.name.rsplit("-", 1)[-1]
        if tail.isdigit() and len(tail) <= 5 and 1 <= int(tail) <= 65535 and os.path.lexists(d / "state.json"):
            out.append(int(tail))
    return out


def stacks_owned_by(owner: str) -> list[int]:
    """Ports of the local stacks whose state says `owner` started them (a damaged state
    says nothing: that stack is left alone)."""
    out = []
    for p in all_stacks():
        try:
            if read_state(p).get("owner") == owner:
                out.append(p)
        except DamagedState:
            continue
    return out


def cluster_owner(host: str, base_port: int) -> str:
    return f"cluster {host}:{base_port}"


def run_owner(pid: int | None = None) -> str:
    return f"run {os.getpid() if pid is None else pid}"


def leftover(port: int) -> str | None:
    """When the stack on `port` was started by a `harness run` that no longer runs: which."""
    st = read_state(port)
    kind, _, pid = st.get("owner", "").partition(" ")
    if kind != "run" or not pid.isdigit():
        return None
    return gone_owner(int(pid), st.get("owner_start"))


def _owned(port: int, st: dict) -> tuple[list[Proc], list[int], bool]:
    """(the live processes that are provably this stack's, the live pids the state names
    that are not, whether those have no start time: an older harness's state)."""
    return split_owned(st, "processes", lambda p: is_ours(p, stack_dir(port)))


def stack_running(port: int) -> bool:
    st = read_state(port)
    procs = st.get("processes", [])
    return bool(procs) and len(_owned(port, st)[0]) == len(procs)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Whether `url` answers 200 within `timeout` seconds in all (harness.infra.http_get: a
    redirect followed only on the same origin). Credentials in it (http://user:password@host/) are sent as HTTP
    basic auth to that host only, as Prometheus's client does, never as part of the host."""
    try:
        return _request(url, timeout, http_get.SMALL_CAP).status == 200
    except http_get.HttpGetError:
        return False


def _request(url: str, timeout: float, cap: int) -> http_get.Answer:
    """The one way this module asks a server something: a bounded GET (harness.infra.http_get)."""
    return http_get.get(url, timeout=timeout, cap=cap)


def _wait_http(
    url: str, timeout: float, what: str, proc: subprocess.Popen | None = None, log_file: Path | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http_ok(url, timeout=max(0.1, min(2.0, deadline - time.monotonic()))):
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = ""
    if log_file is not None and log_file.is_file():
        with open(log_file, "rb") as f:  # only the end of the log: it may be large
            f.seek(max(0, f.seek(0, 2) - 4096))
            tail = " | ".join(f.read().decode(errors="replace").strip().splitlines()[-3:])
    raise EnvironmentProblem(
        f"{what} did not answer {http_get.display(url)} within {timeout:.0f} s"
        f"{' (exited with code %s)' % proc.returncode if proc is not None and proc.poll() is not None else ''}"
        f"{': ' + tail if tail else ''}"
    )


def targets_up(url: str, n_redis: int, timeout: float) -> bool:
    """Wait until Prometheus reports `n_redis` healthy targets of job redis and a healthy
    node target (its /api/v1/targets)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = max(0.1, min(2.0, deadline - time.monotonic()))
        try:
            active = _request(f"{url}/api/v1/targets?state=active", left, http_get.JSON_CAP).json()["data"][
                "activeTargets"
            ]
            up = [t["labels"].get("job") for t in active if t.get("health") == "up"]
            if up.count("redis") >= n_redis and "node" in up:
                return True
        except (http_get.HttpGetError, KeyError, TypeError, AttributeError):
            pass  # not ready yet (or not answering as Prometheus does): the deadline decides
        time.sleep(0.3)
    return False


class _Spawner:
    """Starts the stack's processes, each pid written to the state file before anything
    else can happen (a Ctrl-C waits for it)."""

    def __init__(self, folder: Path, state: dict):
        self.folder, self.state = folder, state
        self.started: list[tuple[subprocess.Popen, Path, str]] = []

    def __call__(self, name: str, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        logf = self.folder / f"{name}.log"
        with deferred_interrupts():  # a Ctrl-C now waits until the new pid is in the state file
            with open_log(logf) as out:
                p = subprocess.Popen(
                    cmd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env=env,
                    cwd=self.folder,
                )
            self.state["processes"].append({**spawned(p.pid, name=name).as_json(), "exe": cmd[0], "cmd": cmd})
            write_private(self.folder / "state.json", json.dumps(self.state, indent=1))
            self.started.append((p, logf, name))
        return p

    def wait_ready(self, timeout: float = 30) -> None:
        for p, logf, name in self.started:
            args = cast(list[str], p.args)  # the cmd list __call__ started it with
            listen = next(a for a in args if "listen-address" in a).split("=", 1)[1]
            path = "/-/ready" if name == "prometheus" else "/metrics"
            _wait_http(f"http://{listen}{path}", timeout, name, p, logf)


def _start_processes(target: Target, ports: dict, spawn: _Spawner, url: str, log: Callable[[str], None]) -> None:
    """One redis_exporter per node, a node exporter, Prometheus; waits until each answers."""
    env = dict(os.environ)
    if target.password:
        env["REDIS_PASSWORD"] = target.password
    if target.username:
        env["REDIS_USER"] = target.username
    exe = cast(str, find_tool("redis_exporter"))  # the tools: start_stack checked missing_tools() first
    for n, p in zip(target.nodes, ports["redis_exporters"]):
        log(f"starting redis_exporter for {n.address} on 127.0.0.1:{p}")
        spawn(
            f"redis_exporter-{n.port}",
            [exe, f"-redis.addr=redis://{n.address}", f"-web.listen-address=127.0.0.1:{p}"],
            env,
        )
    log(f"starting node exporter on 127.0.0.1:{ports['node_exporter']}")
    spawn(
        "node_exporter",
        [
            cast(str, find_tool("node_exporter")),
            f"--web.listen-address=127.0.0.1:{ports['node_exporter']}",
            "--collector.disable-defaults",
            "--collector.cpu",
            "--collector.meminfo",
            "--collector.loadavg",
        ],
    )
    log(f"starting Prometheus on {url} (scrape interval {SCRAPE_INTERVAL_S} s)")
    folder = spawn.folder
    spawn(
        "prometheus",
        [
            cast(str, find_tool("prometheus")),
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address={url.split('//', 1)[1]}",
            "--storage.tsdb.retention.time=2d",
        ],
    )
    spawn.wait_ready()
    if not targets_up(url, len(target.nodes), timeout=20):
        log("Prometheus has not scraped every redis_exporter yet; see its targets page")


def start_stack(
    target: Target, log: Callable[[str], None] = print, *, port: int | None = None, owner: str = ""
) -> list[str]:
    """Start Prometheus, one redis_exporter per node of `target` and a node exporter;
    they keep running until stop_stack(). `owner` (cluster_owner() or run_owner()) is
    recorded in the state. Returns lines to print."""
    port = configured_port() if port is None else port
    missing = missing_tools()
    if missing:
        raise EnvironmentProblem(f"the monitoring stack needs {', '.join(missing)}; {INSTALL_HINT}")
    if not target.nodes:
        raise EnvironmentProblem("the monitoring stack needs Redis nodes to scrape; the target has none")
    if stack_running(port):
        st = read_state(port)
        return [f"monitoring stack already running: Prometheus {st.get('url')}"]
    ports = stack_ports(len(target.nodes), port)
    all_ports = [ports["prometheus"], *ports["redis_exporters"], ports["node_exporter"]]
    check_ports_free("127.0.0.1", all_ports, "the monitoring stack", flag=f"the environment variable {PORT_ENV}")
    folder = stack_dir(port)
    stop_stack(port)  # whatever is left of a stale stack (some of its processes may still run)
    if os.path.islink(folder):  # a link at the stack's folder goes, never what it points to
        os.unlink(folder)
    shutil.rmtree(folder, ignore_errors=True)
    own_dir(folder)
    redis_targets = [
        {"exporter": f"127.0.0.1:{p}", "node": n.address} for n, p in zip(target.nodes, ports["redis_exporters"])
    ]
    node_targets = [{"exporter": f"127.0.0.1:{ports['node_exporter']}", "host": os.uname().nodename}]
    url = f"http://127.0.0.1:{port}"
    write_private(folder / "prometheus.yml", render_config(redis_targets, node_targets, f"127.0.0.1:{port}"))
    owner_pid = int(owner.split(" ", 1)[1]) if owner.startswith("run ") else None
    state = {
        "port": port,
        "url": url,
        "nodes": [n.address for n in target.nodes],
        "owner": owner,
        "owner_start": start_time(owner_pid) if owner_pid else None,
        "boot": boot_id(),
        "started": time.time(),
        "processes": [],
    }
    try:
        _start_processes(target, ports, _Spawner(folder, state), url, log)
    except BaseException:
        stop_stack(port)
        raise
    lines = [f"prometheus     {url}"]
    lines += [f"redis_exporter 127.0.0.1:{p} -> {n.address}" for n, p in zip(target.nodes, ports["redis_exporters"])]
    lines += [f"node_exporter  127.0.0.1:{ports['node_exporter']}"]
    return lines


def stop_stack(port: int | None = None, log: Callable[[str], None] = note) -> int:
    """Stop the processes of the local stack on `port` (default: HARNESS_MONITORING_PORT or
    9090); returns how many were running. Only processes its state file names that are
    provably the stack's (start time, folder) are signalled; `log` names the others."""
    port = configured_port() if port is None else port
    with deferred_interrupts():
        return _stop(port, log)


def _stop(port: int, log: Callable[[str], None]) -> int:
    st = read_state(port)
    ours, foreign, legacy = _owned(port, st)
    n = terminate(ours, lambda p: stack_dir(port), timeout=10)
    if foreign:
        log(
            not_ours_note(
                stack_dir(port) / "state.json",
                foreign,
                legacy,
                f"stop them yourself if they are this stack's, then remove {stack_dir(port)}",
            )
        )
    if not (foreign and legacy):
        (stack_dir(port) / "state.json").unlink(missing_ok=True)
    return n
