"""Server-side telemetry through Prometheus.

Two halves:
- the local stack: one Prometheus, one redis_exporter per Redis node and one node exporter,
  started as plain processes (state in harness.paths.STATE_DIR/monitoring-<port>/) by
  `harness cluster up --monitoring` or by `harness run --monitoring` when none runs;
- the queries: after a run, its time window is read back from Prometheus through
  prometheus-api-client (ops/s, memory and connected clients per node, evicted keys, host
  CPU) and kept with the results (results.json "monitoring", raw answers under
  raw/monitoring/); the report's monitoring view turns them into charts and tables.

On the lab the Ansible role `monitoring` runs Prometheus; `harness run --monitoring
--target INVENTORY` queries the Prometheus of the inventory's `monitoring` group (or the
URL in HARNESS_PROMETHEUS_URL) instead of starting one. Both render
infra/prometheus/prometheus.yml.j2, so the job and label names are the same.

Ports of the local stack: Prometheus on HARNESS_MONITORING_PORT (default 9090), the
redis_exporters on the next ports (one per node), the node exporter after them.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.drivers import Target
from harness.errors import EnvironmentProblem
from harness.paths import INFRA_DIR, STATE_DIR

PORT_ENV = "HARNESS_MONITORING_PORT"
URL_ENV = "HARNESS_PROMETHEUS_URL"
DEFAULT_PORT = 9090
SCRAPE_INTERVAL_S = 1
RATE_WINDOW = "5s"  # irate() over the last two scrapes in 5 s: per-second values at a 1 s scrape interval
# A run shorter than this is charted over this long from its start (a 1 s window gives one
# or two points per series, which says nothing); the report's reason names the padding.
MIN_CHART_WINDOW_S = 5
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
        raise EnvironmentProblem(f"{PORT_ENV}={raw!r} is not a port number") from None
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
        return json.loads((stack_dir(port) / "state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _alive(pid: int, exe: str) -> bool:
    """True when pid runs and its command line names `exe` (never touch other processes)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.split(") ", 1)[-1][:1] == "Z":
        return False
    return os.path.basename(exe).encode() in cmdline


def stack_running(port: int) -> bool:
    st = read_state(port)
    procs = st.get("processes", [])
    return bool(procs) and all(_alive(p["pid"], p["exe"]) for p in procs)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


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


def start_stack(target: Target, log: Callable[[str], None] = print, *, port: int | None = None) -> list[str]:
    """Start Prometheus, one redis_exporter per node of `target` and a node exporter;
    they keep running until stop_stack(). Returns lines to print."""
    from harness.redis_server import check_ports_free

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
    shutil.rmtree(folder, ignore_errors=True)  # a stale stack's data: its processes are gone
    folder.mkdir(parents=True)
    redis_targets = [{"exporter": f"127.0.0.1:{p}", "node": n.address}
                     for n, p in zip(target.nodes, ports["redis_exporters"])]
    node_targets = [{"exporter": f"127.0.0.1:{ports['node_exporter']}", "host": os.uname().nodename}]
    url = f"http://127.0.0.1:{port}"
    (folder / "prometheus.yml").write_text(render_config(redis_targets, node_targets, f"127.0.0.1:{port}"))
    state = {"port": port, "url": url, "nodes": [n.address for n in target.nodes],
             "started": time.time(), "processes": []}
    started: list[tuple[subprocess.Popen, Path, str]] = []

    def spawn(name: str, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        logf = folder / f"{name}.log"
        with open(logf, "wb") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, env=env, cwd=folder)
        state["processes"].append({"name": name, "pid": p.pid, "exe": cmd[0], "cmd": cmd})
        (folder / "state.json").write_text(json.dumps(state, indent=1))
        started.append((p, logf, name))
        return p

    try:
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
        spawn("prometheus", [find_tool("prometheus"), f"--config.file={folder / 'prometheus.yml'}",
                             f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--storage.tsdb.retention.time=2d"])
        for p, logf, name in started:
            listen = next(a for a in p.args if "listen-address" in a).split("=", 1)[1]
            path = "/-/ready" if name == "prometheus" else "/metrics"
            _wait_http(f"http://{listen}{path}", 30, name, p, logf)
        if not targets_up(url, len(target.nodes), timeout=20):
            log("Prometheus has not scraped every redis_exporter yet; see its targets page")
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
    st = read_state(port)
    procs = [p for p in st.get("processes", []) if _alive(p["pid"], p["exe"])]
    for p in procs:
        try:
            os.kill(p["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for p in procs:
        while _alive(p["pid"], p["exe"]) and time.monotonic() < deadline:
            _reap(p["pid"])
            time.sleep(0.05)
        if _alive(p["pid"], p["exe"]):
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


# ---- queries (pure parts first) -------------------------------------------------------
@dataclass(frozen=True)
class SeriesQuery:
    key: str
    title: str
    promql: str
    label: str  # the label that names a series (node or host)
    unit: str


QUERIES = (
    SeriesQuery("ops", "Server-side ops/s per node (redis_exporter)",
                f'sum by (node) (irate(redis_commands_processed_total{{job="redis"}}[{RATE_WINDOW}]))', "node", "ops/s"),
    SeriesQuery("memory", "Used memory per node",
                'max by (node) (redis_memory_used_bytes{job="redis"}) / 1048576', "node", "MiB"),
    SeriesQuery("clients", "Connected clients per node",
                'max by (node) (redis_connected_clients{job="redis"})', "node", "clients"),
    SeriesQuery("evicted", "Evicted keys per node (counter; reset by CONFIG RESETSTAT before each case)",
                'max by (node) (redis_evicted_keys_total{job="redis"})', "node", "keys"),
    SeriesQuery("cpu", "Host CPU busy (node exporter)",
                f'100 * (1 - avg by (host) (irate(node_cpu_seconds_total{{job="node",mode="idle"}}[{RATE_WINDOW}])))',
                "host", "%"),
)


def matrix_to_series(result: list[dict], label: str, t0: float) -> list[dict]:
    """A query_range result ([{metric: {...}, values: [[ts, "v"], ...]}]) as chart series
    named by `label`, x in seconds since t0; NaN and infinite samples are dropped."""
    out = []
    for item in result:
        name = item.get("metric", {}).get(label) or item.get("metric", {}).get("instance", "?")
        points = []
        for ts, v in item.get("values", []):
            y = float(v)
            if math.isfinite(y):
                points.append([round(float(ts) - t0, 3), y])
        if points:
            out.append({"name": name, "points": points})
    return sorted(out, key=lambda s: s["name"])


def unavailable(reason: str) -> dict:
    return {"status": "unavailable", "reason": reason, "queries": [], "roles": {}}


# ---- the monitor of one run -----------------------------------------------------------
class Monitor:
    """Created by `harness run --monitoring` before the run window opens; `finish`
    queries the window and returns the report's monitoring section."""

    def __init__(self, url: str | None = None, *, problem: str = "", owned_port: int | None = None,
                 roles: dict[str, str] | None = None, log: Callable[[str], None] = print):
        self.url, self.problem, self.owned_port = url, problem, owned_port
        self.roles = roles or {}
        self.log = log

    @classmethod
    def start(cls, target: Target, run_dir: Path, log: Callable[[str], None] = print) -> "Monitor":
        roles = {n.address: n.role or "" for n in target.nodes}
        if target.kind != "cluster" or not target.nodes:
            return cls(problem="this run has no Redis nodes to monitor", log=log)
        url = os.environ.get(URL_ENV) or _inventory_url(target)
        if url:
            log(f"monitoring: using Prometheus at {url}")
            if not http_ok(url.rstrip("/") + "/-/ready", timeout=5):
                return cls(problem=f"Prometheus at {url} does not answer /-/ready; start it "
                                   f"(make provision runs the monitoring role) or unset {URL_ENV}", log=log)
            return cls(url, roles=roles, log=log)
        port = configured_port()
        if stack_running(port):
            st = read_state(port)
            wanted = sorted(n.address for n in target.nodes)
            if sorted(st.get("nodes", [])) != wanted:
                return cls(problem=f"the monitoring stack on port {port} scrapes {', '.join(st.get('nodes', []))}, "
                                   f"not this run's nodes; stop it (harness cluster down) or set {PORT_ENV} "
                                   f"to another port", log=log)
            log(f"monitoring: using the running stack at {st['url']}")
            mon = cls(st["url"], roles=roles, log=log)
        else:
            missing = missing_tools()
            if missing:
                return cls(problem=f"Prometheus telemetry is not available: {', '.join(missing)} not found on PATH; "
                                   f"{INSTALL_HINT}", log=log)
            try:
                start_stack(target, log=lambda m: log("monitoring: " + m), port=port)
            except EnvironmentProblem as e:
                return cls(problem=f"the monitoring stack did not start: {e}", log=log)
            mon = cls(f"http://127.0.0.1:{port}", owned_port=port, roles=roles, log=log)
        mon.wait_for_targets(len(target.nodes))
        return mon

    def wait_for_targets(self, n_nodes: int, timeout: float = 20.0) -> None:
        """Wait until Prometheus has scraped every exporter at least twice, so the window
        that opens next has points from its start."""
        from prometheus_api_client import PrometheusConnect

        pc = PrometheusConnect(url=self.url, disable_ssl=True, timeout=5)
        deadline = time.monotonic() + timeout
        query = f'count_over_time(up{{job="redis"}}[{RATE_WINDOW}]) >= 2 and up{{job="redis"}} == 1'
        while time.monotonic() < deadline:
            try:
                if len(pc.custom_query(query)) >= n_nodes:
                    return
            except Exception:  # noqa: BLE001 - not ready yet; the deadline decides
                pass
            time.sleep(0.5)
        self.log(f"monitoring: not every exporter was up within {timeout:.0f} s; series may be incomplete")

    def finish(self, window: dict, run_dir: Path) -> dict:
        try:
            if self.problem:
                return unavailable(self.problem)
            return self._query(window, Path(run_dir))
        except Exception as e:  # noqa: BLE001 - telemetry never breaks a run
            return unavailable(f"querying Prometheus at {self.url} failed: {type(e).__name__}: {e}")
        finally:
            if self.owned_port is not None:
                n = stop_stack(self.owned_port)
                self.log(f"monitoring: stopped the stack this run started ({n} processes)")

    def _query(self, window: dict, run_dir: Path) -> dict:
        import datetime as dt

        from prometheus_api_client import PrometheusConnect

        start, run_end = float(window["start"]), float(window["end"])
        end = max(run_end, start + MIN_CHART_WINDOW_S)
        padded = "" if end == run_end else f" (the run took {run_end - start:.1f} s; charted over {MIN_CHART_WINDOW_S} s)"
        # Prometheus needs a scrape after the window's end (and rate() a few around it).
        wait = end + 2 * SCRAPE_INTERVAL_S + 0.5 - time.time()
        if wait > 0:
            time.sleep(min(wait, MIN_CHART_WINDOW_S + 3))
        pc = PrometheusConnect(url=self.url, disable_ssl=True, timeout=30)
        step = max(SCRAPE_INTERVAL_S, math.ceil((end - start) / 500))
        t_start = dt.datetime.fromtimestamp(math.floor(start), dt.timezone.utc)
        t_end = dt.datetime.fromtimestamp(math.ceil(end), dt.timezone.utc)
        raw_dir = run_dir / "raw" / "monitoring"
        raw_dir.mkdir(parents=True, exist_ok=True)
        queries = []
        for q in QUERIES:
            result = pc.custom_query_range(q.promql, start_time=t_start, end_time=t_end, step=f"{step}s")
            (raw_dir / f"{q.key}.json").write_text(json.dumps(
                {"query": q.promql, "start": start, "end": end, "step_s": step, "url": self.url, "result": result}))
            queries.append({"key": q.key, "title": q.title, "unit": q.unit, "label": q.label,
                            "series": matrix_to_series(result, q.label, start)})
        if not any(q["series"] for q in queries):
            return unavailable(f"Prometheus at {self.url} returned no samples for the run window "
                               f"({end - start:.0f} s); raw answers in raw/monitoring/")
        return {"status": "ok",
                "reason": f"{self.url}, scrape interval {SCRAPE_INTERVAL_S} s, step {step} s, "
                          f"window {end - start:.0f} s{padded}; raw answers in raw/monitoring/",
                "queries": queries, "roles": self.roles}


def _inventory_url(target: Target) -> str | None:
    if target.name in ("local", "") or not Path(target.name).exists():
        return None
    from harness.inventory import prometheus_url

    return prometheus_url(target.name)
