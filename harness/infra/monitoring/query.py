"""Querying Prometheus for a run's time window: ops/s, memory and connected clients per
node, evicted keys, host CPU (Prometheus's HTTP API through harness.infra.http_get: a deadline per
request, a cap on the answer, no redirect followed, credentials sent to Prometheus's own host
only), kept with the results (results.json "monitoring", raw answers under raw/monitoring/);
the report's monitoring view turns them into charts and tables.

`Monitor.start` uses the Prometheus of HARNESS_PROMETHEUS_URL or of the inventory's
`monitoring` group when there is one, else the local stack (harness.infra.monitoring.stack),
starting it when none runs; a stack it started is stopped by `finish`, and by `start`
itself when it is interrupted before it returns (say, while waiting for the targets).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, cast
from urllib.parse import urlencode

from harness.base.errors import EnvironmentProblem
from harness.infra import http_get
from harness.infra.inventory import prometheus_url
from harness.infra.monitoring.stack import (
    INSTALL_HINT,
    PORT_ENV,
    RATE_WINDOW,
    SCRAPE_INTERVAL_S,
    URL_ENV,
    configured_port,
    http_ok,
    leftover,
    missing_tools,
    read_state,
    run_owner,
    stack_running,
    start_stack,
    stop_stack,
)
from harness.infra.ownership import DamagedState
from harness.infra.redaction import redact
from harness.infra.target import Target, check_prometheus_url

# A run shorter than this is charted over this long from its start (a 1 s window gives one
# or two points per series, which says nothing); the report's reason names the padding.
MIN_CHART_WINDOW_S = 5


# ---- queries (pure parts first) -------------------------------------------------------
@dataclass(frozen=True)
class SeriesQuery:
    key: str
    title: str
    promql: str
    label: str  # the label that names a series (node or host)
    unit: str


QUERIES = (
    SeriesQuery(
        "ops",
        "Server-side ops/s per node (redis_exporter)",
        f'sum by (node) (irate(redis_commands_processed_total{{job="redis"}}[{RATE_WINDOW}]))',
        "node",
        "ops/s",
    ),
    SeriesQuery(
        "memory",
        "Used memory per node",
        'max by (node) (redis_memory_used_bytes{job="redis"}) / 1048576',
        "node",
        "MiB",
    ),
    SeriesQuery(
        "clients",
        "Connected clients per node",
        'max by (node) (redis_connected_clients{job="redis"})',
        "node",
        "clients",
    ),
    SeriesQuery(
        "evicted",
        "Evicted keys per node (counter; reset by CONFIG RESETSTAT before each case)",
        'max by (node) (redis_evicted_keys_total{job="redis"})',
        "node",
        "keys",
    ),
    SeriesQuery(
        "cpu",
        "Host CPU busy (node exporter)",
        f'100 * (1 - avg by (host) (irate(node_cpu_seconds_total{{job="node",mode="idle"}}[{RATE_WINDOW}])))',
        "host",
        "%",
    ),
)


def matrix_to_series(result: list[dict], label: str, t0: float) -> list[dict]:
    """A query_range result ([{metric: {...}, values: [[ts, "v"], ...]}]) as chart series
    named by `label`, x in seconds since t0; NaN and infinite samples, and anything not
    shaped as Prometheus answers, are dropped."""
    out = []
    for item in result if isinstance(result, list) else []:
        metric = item.get("metric") if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(metric, dict) or not isinstance(values, list):
            continue
        name = str(metric.get(label) or metric.get("instance", "?"))[:200]
        points = [pt for pt in (_point(v, t0) for v in values) if pt is not None]
        if points:
            out.append({"name": name, "points": points})
    return sorted(out, key=lambda s: s["name"])


def _point(sample, t0: float) -> list[float] | None:
    """[x, y] of one [ts, "value"] pair; None unless both are finite numbers."""
    if not isinstance(sample, (list, tuple)) or len(sample) != 2:
        return None
    try:
        x, y = float(sample[0]) - t0, float(sample[1])
    except (TypeError, ValueError, OverflowError):
        return None
    return [round(x, 3), y] if math.isfinite(x) and math.isfinite(y) else None


def prom_api(url: str, path: str, params: dict, timeout: float, cap: int = http_get.METRICS_CAP) -> list:
    """`data.result` of Prometheus's answer to GET url + path?params, within `timeout` seconds
    in all; HttpGetError (one line, URL shown without secrets) for anything else. TLS is not
    verified, as prometheus-api-client's disable_ssl did."""
    ans = http_get.get(f"{url.rstrip('/')}{path}?{urlencode(params)}", timeout=timeout, cap=cap, verify=False)
    if ans.status != 200:
        raise http_get.HttpGetError(f"{ans.shown} answered HTTP {ans.status}")
    data = ans.json()
    ok = isinstance(data, dict) and data.get("status") == "success" and isinstance(data.get("data"), dict)
    result = data["data"].get("result") if ok else None
    if not isinstance(result, list):
        raise http_get.HttpGetError(f"{ans.shown} did not answer as Prometheus does (status success, data.result)")
    return result


def unavailable(reason: str) -> dict:
    return {"status": "unavailable", "reason": reason, "queries": [], "roles": {}}


# ---- the monitor of one run -----------------------------------------------------------
class Monitor:
    """Created by `harness run --monitoring` before the run window opens; `finish`
    queries the window and returns the report's monitoring section."""

    def __init__(
        self,
        url: str | None = None,
        *,
        problem: str = "",
        owned_port: int | None = None,
        roles: dict[str, str] | None = None,
        log: Callable[[str], None] = print,
    ):
        self.url, self.problem, self.owned_port = url, problem, owned_port
        self.shown = http_get.display(url) if url else ""  # what is logged and kept: the URL without its credentials
        self.roles = roles or {}
        self.log = log

    @classmethod
    def start(cls, target: Target, run_dir: Path, log: Callable[[str], None] = print) -> "Monitor":
        roles = {n.address: n.role or "" for n in target.nodes}
        if target.kind != "cluster" or not target.nodes:
            return cls(problem="this run has no Redis nodes to monitor", log=log)
        url = configured_url(target.name)
        if url:
            shown = http_get.display(url)  # credentials in the URL are never shown or kept
            log(f"monitoring: using Prometheus at {shown}")
            if not http_ok(url.rstrip("/") + "/-/ready", timeout=5):
                return cls(
                    problem=f"Prometheus at {shown} does not answer /-/ready; start it "
                    f"(make provision runs the monitoring role) or unset {URL_ENV}",
                    log=log,
                )
            return cls(url, roles=roles, log=log)
        port = configured_port()
        try:  # a damaged state of the stack is the telemetry's problem, never the run's end
            left = leftover(port)
            if left:
                log(f"monitoring: the stack on port {port} was {left}; stopping it and starting a fresh one")
                stop_stack(port)
            st = read_state(port) if stack_running(port) else None
        except DamagedState as e:
            return cls(problem=str(e), log=log)
        if st is not None:
            wanted = sorted(n.address for n in target.nodes)
            if sorted(st.get("nodes", [])) != wanted:
                return cls(
                    problem=f"the monitoring stack on port {port} scrapes {', '.join(st.get('nodes', []))}, "
                    f"not this run's nodes; stop it (harness cluster down) or set {PORT_ENV} "
                    f"to another port",
                    log=log,
                )
            log(f"monitoring: using the running stack at {st['url']}")
            mon = cls(st["url"], roles=roles, log=log)
        else:
            missing = missing_tools()
            if missing:
                return cls(
                    problem=f"Prometheus telemetry is not available: {', '.join(missing)} not found on PATH; "
                    f"{INSTALL_HINT}",
                    log=log,
                )
            try:
                start_stack(target, log=lambda m: log("monitoring: " + m), port=port, owner=run_owner())
            except EnvironmentProblem as e:
                return cls(problem=f"the monitoring stack did not start: {e}", log=log)
            mon = cls(f"http://127.0.0.1:{port}", owned_port=port, roles=roles, log=log)
        try:
            mon.wait_for_targets(len(target.nodes))
        except BaseException:  # Ctrl-C while waiting: the caller never gets the monitor to finish
            if mon.owned_port is not None:
                stop_stack(mon.owned_port)
            raise
        return mon

    def wait_for_targets(self, n_nodes: int, timeout: float = 20.0) -> None:
        """Wait until Prometheus has scraped every exporter at least twice, so the window
        that opens next has points from its start."""
        self.log("monitoring: waiting until Prometheus has scraped every exporter twice")
        deadline = time.monotonic() + timeout
        query = f'count_over_time(up{{job="redis"}}[{RATE_WINDOW}]) >= 2 and up{{job="redis"}} == 1'
        while time.monotonic() < deadline:
            left = max(0.1, min(5.0, deadline - time.monotonic()))
            try:
                # called by start() only on a monitor given a URL
                url = cast(str, self.url)
                if len(prom_api(url, "/api/v1/query", {"query": query}, left, http_get.JSON_CAP)) >= n_nodes:
                    return
            except http_get.HttpGetError:
                pass  # not ready yet; the deadline decides
            time.sleep(0.5)
        self.log(f"monitoring: not every exporter was up within {timeout:.0f} s; series may be incomplete")

    def finish(self, window: dict, run_dir: Path, *, wait: bool = True) -> dict:
        """The window's series; `wait=False` (an interrupted run) queries what Prometheus
        has now instead of waiting for the scrapes after the window's end."""
        try:
            if self.problem:
                return unavailable(self.problem)
            return self._query(window, Path(run_dir), wait)
        except Exception as e:  # noqa: BLE001 - telemetry never breaks a run
            return unavailable(redact(f"querying Prometheus at {self.shown} failed: {type(e).__name__}: {e}"))
        finally:
            if self.owned_port is not None:
                n = stop_stack(self.owned_port)
                self.log(f"monitoring: stopped the stack this run started ({n} processes)")

    def _query(self, window: dict, run_dir: Path, wait: bool = True) -> dict:
        start, run_end = float(window["start"]), float(window["end"])
        end = max(run_end, start + MIN_CHART_WINDOW_S)
        padded = (
            "" if end == run_end else f" (the run took {run_end - start:.1f} s; charted over {MIN_CHART_WINDOW_S} s)"
        )
        # Prometheus needs a scrape after the window's end (and rate() a few around it).
        pause = end + 2 * SCRAPE_INTERVAL_S + 0.5 - time.time()
        if wait and pause > 0:
            time.sleep(min(pause, MIN_CHART_WINDOW_S + 3))
        step = max(SCRAPE_INTERVAL_S, math.ceil((end - start) / 500))
        raw_dir = run_dir / "raw" / "monitoring"
        raw_dir.mkdir(parents=True, exist_ok=True)
        queries = []
        for q in QUERIES:
            result = prom_api(
                cast(str, self.url),  # a monitor without a URL has a problem: finish() does not query
                "/api/v1/query_range",
                {"query": q.promql, "start": math.floor(start), "end": math.ceil(end), "step": f"{step}s"},
                30,
            )
            (raw_dir / f"{q.key}.json").write_text(
                json.dumps(
                    {"query": q.promql, "start": start, "end": end, "step_s": step, "url": self.shown, "result": result}
                )
            )
            queries.append(
                {
                    "key": q.key,
                    "title": q.title,
                    "unit": q.unit,
                    "label": q.label,
                    "series": matrix_to_series(result, q.label, start),
                }
            )
        if not any(q["series"] for q in queries):
            return unavailable(
                f"Prometheus at {self.shown} returned no samples for the run window "
                f"({end - start:.0f} s); raw answers in raw/monitoring/"
            )
        return {
            "status": "ok",
            "reason": f"{self.shown}, scrape interval {SCRAPE_INTERVAL_S} s, step {step} s, "
            f"window {end - start:.0f} s{padded}; raw answers in raw/monitoring/",
            "queries": queries,
            "roles": self.roles,
        }


def configured_url(target_name: str | None = None, environ=None) -> str | None:
    """The Prometheus the user configured (HARNESS_PROMETHEUS_URL, else the inventory's
    `monitoring` host of the inventory `target_name`), checked as an engine's URL is (harness.infra.target.check_prometheus_url:
    BadInput, exit 2, showing no credential) and its credentials remembered as secrets
    before anything shows or uses it; None when none is configured."""
    environ = os.environ if environ is None else environ
    if environ.get(URL_ENV):
        return check_prometheus_url(environ[URL_ENV], URL_ENV)
    url = _inventory_url(target_name)
    return check_prometheus_url(url, f"{target_name}: the monitoring host's Prometheus") if url else None


def _inventory_url(target_name: str | None) -> str | None:
    if not target_name or target_name == "local" or not Path(target_name).exists():
        return None
    return prometheus_url(target_name)
