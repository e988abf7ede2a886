"""The local monitoring stack: one Prometheus, one redis_exporter per Redis node and one
node exporter, started as plain processes (state in harness.paths.STATE_DIR/monitoring-<port>/)
by `harness cluster up --monitoring` or by `harness run --monitoring` when none runs.

Its state file records every process by pid (before it is waited for) and who started
the stack (`owner`: a cluster's "cluster HOST:PORT", or "run PID"), so that `harness
cluster down --base-port N` stops only the stack of that cluster, and a stack left behind
by a killed run is recognised and replaced. Stopping runs to its end through a second
Ctrl-C (harness.signals.deferred_interrupts).

Ports: Prometheus on HARNESS_MONITORING_PORT (default 9090), the redis_exporters on the
next ports (one per node), the node exporter after them. Both this stack and the Ansible
role `monitoring` render infra/prometheus/prometheus.yml.j2.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from harness.errors import BadInput, EnvironmentProblem
from harness.paths import INFRA_DIR, STATE_DIR
from harness.redis_server import check_ports_free, pid_alive, runs_program
from harness.signals import deferred_interrupts
from harness.target import Target

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
        raise BadInput(f"{PORT_ENV}={raw!r} is not a port number with room for the exporters after it "
                       f"(1-{65535 - 64}); set it to a free port such as 9090")
    return port


def stack_ports(n_nodes: int, base: int) -> dict:
    """Prometheus on `base`, the redis exporters on base+1..base+n, the node exporter after."""
    return {"prometheus": base, "redis_exporters": [base + 1 + i for i in range(n_nodes)],
            "node_exporter": base + 1 + n_nodes}


def render_config(redis_targets: list[dict], node_targets: list[dict], prometheus_address: str,
                  scrape_interval_s: float = SCRAPE_INTERVAL_S) -> str:
    """Prometheus YAML from the shared template. redis_targets: [{exporter, node}],
    node_targets: [{exporter, host}]."""
    import jinja2

    tmpl = jinja2.Template(TEMPLATE.read_text(), undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    interval = f"{scrape_interval_s:g}s"
    return tmpl.render(monitoring_scrape_interval=interval, monitoring_scrape_timeout=interval,
                       monitoring_prometheus_address=prometheus_address,
                       monitoring_redis_targets=redis_targets, monitoring_node_targets=node_targets)


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
    try:
        st = json.loads((stack_dir(port) / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(st, dict):
        return {}
    st["processes"] = [p for p in st.get("processes") or [] if isinstance(p, dict)
                       and isinstance(p.get("pid"), int) and p["pid"] > 1 and isinstance(p.get("exe"), str)]
    return st


def all_stacks() -> list[int]:
    """Ports of every local stack that has a state file."""
    out = []
    for d in sorted(STATE_DIR.glob("monitoring-*")):
        tail = d.name.rsplit("-", 1)[-1]
        if tail.isdigit() and (d / "state.json").exists():
            out.append(int(tail))
    return out


def stacks_owned_by(owner: str) -> list[int]:
    """Ports of the local stacks whose state says `owner` started them."""
    return [p for p in all_stacks() if read_state(p).get("owner") == owner]


def cluster_owner(host: str, base_port: int) -> str:
    return f"cluster {host}:{base_port}"


def run_owner(pid: int | None = None) -> str:
    return f"run {os.getpid() if pid is None else pid}"


def leftover(port: int) -> str | None:
    """When the stack on `port` was started by a `harness run` that no longer runs: which."""
    owner = str(read_state(port).get("owner", ""))
    kind, _, pid = owner.partition(" ")
    if kind != "run" or not pid.isdigit():
        return None
    return None if pid_alive(int(pid)) else f"started by harness run pid {pid}, which no longer runs"


def stack_running(port: int) -> bool:
    st = read_state(port)
    procs = st.get("processes", [])
    return bool(procs) and all(runs_program(p["pid"], p["exe"]) for p in procs)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Whether `url` answers 200. Credentials in it (http://user:password@host/) are sent
    as HTTP basic auth, as Prometheus's client does, never as part of the host."""
    try:
        with urllib.request.urlopen(_request(url), timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _request(url: str) -> urllib.request.Request:
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return urllib.request.Request(url)
    host = parts.netloc.rpartition("@")[2]
    req = urllib.request.Request(urlunsplit(parts._replace(netloc=host)))
    token = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    req.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
    return req


def _wait_http(url: str, timeout: float, what: str, proc: subprocess.Popen | None = None,
               log_file: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http_ok(url):
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = ""
    if log_file is not None and log_file.exists():
        tail = " | ".join(log_file.read_text(errors="replace").strip().splitlines()[-3:])
    raise EnvironmentProblem(f"{what} did not answer {url} within {timeout:.0f} s"
                             f"{' (exited with code %s)' % proc.returncode if proc is not None and proc.poll() is not None else ''}"
                             f"{': ' + tail if tail else ''}")


def targets_up(url: str, n_redis: int, timeout: float) -> bool:
    """Wait until Prometheus reports `n_redis` healthy targets of job redis and a healthy
    node target (its /api/v1/targets)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/targets?state=active", timeout=2) as r:
                active = json.load(r)["data"]["activeTargets"]
            up = [t["labels"].get("job") for t in active if t.get("health") == "up"]
            if up.count("redis") >= n_redis and "node" in up:
                return True
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass
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
            with open(logf, "wb") as out:
                p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, env=env, cwd=self.folder)
            self.state["processes"].append({"name": name, "pid": p.pid, "exe": cmd[0], "cmd": cmd})
            (self.folder / "state.json").write_text(json.dumps(self.state, indent=1))
            self.started.append((p, logf, name))
        return p

    def wait_ready(self, timeout: float = 30) -> None:
        for p, logf, name in self.started:
            listen = next(a for a in p.args if "listen-address" in a).split("=", 1)[1]
            path = "/-/ready" if name == "prometheus" else "/metrics"
            _wait_http(f"http://{listen}{path}", timeout, name, p, logf)


def _start_processes(target: Target, ports: dict, spawn: _Spawner, url: str, log: Callable[[str], None]) -> None:
    """One redis_exporter per node, a node exporter, Prometheus; waits until each answers."""
    env = dict(os.environ)
    if target.password:
        env["REDIS_PASSWORD"] = target.password
    if target.username:
        env["REDIS_USER"] = target.username
    exe = find_tool("redis_exporter")
    for n, p in zip(target.nodes, ports["redis_exporters"]):
        log(f"starting redis_exporter for {n.address} on 127.0.0.1:{p}")
        spawn(f"redis_exporter-{n.port}", [exe, f"-redis.addr=redis://{n.address}",
                                           f"-web.listen-address=127.0.0.1:{p}"], env)
    log(f"starting node exporter on 127.0.0.1:{ports['node_exporter']}")
    spawn("node_exporter", [find_tool("node_exporter"), f"--web.listen-address=127.0.0.1:{ports['node_exporter']}",
                            "--collector.disable-defaults", "--collector.cpu", "--collector.meminfo",
                            "--collector.loadavg"])
    log(f"starting Prometheus on {url} (scrape interval {SCRAPE_INTERVAL_S} s)")
    folder = spawn.folder
    spawn("prometheus", [find_tool("prometheus"), f"--config.file={folder / 'prometheus.yml'}",
                         f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address={url.split('//', 1)[1]}",
                         "--storage.tsdb.retention.time=2d"])
    spawn.wait_ready()
    if not targets_up(url, len(target.nodes), timeout=20):
        log("Prometheus has not scraped every redis_exporter yet; see its targets page")


def start_stack(target: Target, log: Callable[[str], None] = print, *, port: int | None = None,
                owner: str = "") -> list[str]:
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
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    redis_targets = [{"exporter": f"127.0.0.1:{p}", "node": n.address}
                     for n, p in zip(target.nodes, ports["redis_exporters"])]
    node_targets = [{"exporter": f"127.0.0.1:{ports['node_exporter']}", "host": os.uname().nodename}]
    url = f"http://127.0.0.1:{port}"
    (folder / "prometheus.yml").write_text(render_config(redis_targets, node_targets, f"127.0.0.1:{port}"))
    state = {"port": port, "url": url, "nodes": [n.address for n in target.nodes], "owner": owner,
             "started": time.time(), "processes": []}
    try:
        _start_processes(target, ports, _Spawner(folder, state), url, log)
    except BaseException:
        stop_stack(port)
        raise
    lines = [f"prometheus     {url}"]
    lines += [f"redis_exporter 127.0.0.1:{p} -> {n.address}" for n, p in zip(target.nodes, ports["redis_exporters"])]
    lines += [f"node_exporter  127.0.0.1:{ports['node_exporter']}"]
    return lines


def stop_stack(port: int | None = None) -> int:
    """Stop the processes of the local stack on `port` (default: HARNESS_MONITORING_PORT or
    9090); returns how many were running. Only processes named in its state file whose
    command line still names their executable are signalled."""
    port = configured_port() if port is None else port
    with deferred_interrupts():
        return _stop(port)


def _stop(port: int) -> int:
    st = read_state(port)
    procs = [p for p in st.get("processes", []) if runs_program(p["pid"], p["exe"])]
    for p in procs:
        try:
            os.kill(p["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for p in procs:
        while runs_program(p["pid"], p["exe"]) and time.monotonic() < deadline:
            _reap(p["pid"])
            time.sleep(0.05)
        if runs_program(p["pid"], p["exe"]):
            try:
                os.kill(p["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap(p["pid"])
    (stack_dir(port) / "state.json").unlink(missing_ok=True)
    return len(procs)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
