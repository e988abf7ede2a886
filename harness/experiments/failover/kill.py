"""Primary killed: `kill -9` of one primary of a 3 + 3 cluster under fixed-rate writers.

The case starts its OWN loopback cluster (3 primaries + 3 replicas, cluster-node-timeout
as a parameter) on the ports `port_offset` above the suite's cluster, so the shared
cluster of the other suites is never touched; its processes are stopped when the case ends.
Each repetition runs the variants and controls on that cluster in a rotating order:

- `plain`: SET; `wait`: SET then `WAIT 1 wait_ms` (acknowledged only when a replica
  confirmed); `min-replicas`: `min-replicas-to-write 1` on every node, plain SET;
- controls: `no-kill` (the same schedule, nothing killed), `no-replicas` (the same kill on
  a 3 + 0 cluster of its own: nothing to promote), `no-nodes-conf` (the plain kill, but the
  node is restarted without its nodes.conf: it cannot rejoin; its nodes.conf is then put
  back and it is restarted again so the cluster is whole for the next variant).

Per run: PFAIL and FAIL in the other nodes' views, the replica's promotion, the client-side
outage per slot range, the killed node's rejoin as a replica, and the acknowledged writes
lost after the cluster healed.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import cast

import redis

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.paths import STATE_DIR
from harness.experiments.failover import client, scenario
from harness.experiments.failover.scenario import FaultRun, ranges
from harness.infra.cluster import LocalCluster
from harness.model.driver_contract import CaseContext, Metric, Param, Record

VARIANTS = ("plain", "wait", "min-replicas")
CONTROLS = ("no-kill", "no-replicas", "no-nodes-conf")
GROUPS = {"killed": "killed_range", "others": "other_ranges"}

PARAMS = {
    "node_timeout_ms": Param(
        int, 2000, "cluster-node-timeout of the case's own cluster (Redis default 15000)", min=500, max=120000
    ),
    "variants": Param(list, list(VARIANTS), "write variants to run", choices=VARIANTS),
    "controls": Param(list, list(CONTROLS), "controls run interleaved with the variants", choices=CONTROLS),
    "writers": Param(int, 2, "writer threads", min=1, max=64),
    "rate": Param(float, 100.0, "writes per second per writer (open loop)", min=1, max=100000),
    "readers": Param(int, 1, "reader threads (read the latest acknowledged keys)", min=0, max=16),
    "read_rate": Param(float, 50.0, "reads per second per reader", min=1, max=100000),
    "warm_s": Param(float, 1.5, "seconds of traffic before the kill", min=0.5, max=600),
    "after_kill_s": Param(
        (float, type(None)), None, "seconds of traffic after the kill; null: node timeout x 1.5 + 3 s", min=1, max=3600
    ),
    "wait_ms": Param(int, 100, "the WAIT timeout of the wait variant", min=1, max=60000),
    "min_replicas_max_lag": Param(
        int, 10, "min-replicas-max-lag of the min-replicas variant (Redis default 10)", min=1, max=3600
    ),
    "victim": Param(int, 0, "which primary is killed (0-based, by port)", min=0, max=15),
    "client_timeout_ms": Param(int, 250, "client connect and read timeout", min=10, max=60000),
    "rejoin_timeout_s": Param(float, 30.0, "how long the restarted node may take to rejoin", min=1, max=600),
    "port_offset": Param(
        int,
        20,
        "the case's own cluster starts this many ports above the suite's cluster "
        "(it uses 9 ports and their bus ports +10000)",
        min=6,
        max=1000,
    ),
}


def check(where: str, p: dict) -> None:
    scenario.check_arms(where, p)
    for name in ("variants", "controls"):
        if len(set(p[name])) != len(p[name]):
            raise BadInput(f"{where}.{name}: a name appears twice; list each once")


def _after_s(p: dict) -> float:
    return scenario.fault_s(p["after_kill_s"], p)


def _is_replica(host: str, port: int) -> bool:
    c = client.plain_client(host, port, 1.0)
    try:
        info = c.info("replication")
        return info.get("role") == "slave" and info.get("master_link_status") == "up"
    except redis.RedisError:
        return False
    finally:
        c.close()


def _wait_replica(host: str, port: int, timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if _is_replica(host, port):
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


class KillRun(FaultRun):
    """kill -9 of the victim primary at t = 0; after the traffic it is restarted (with its
    nodes.conf, or without it for the no-nodes-conf control) and must rejoin as a replica."""

    noun = "kill"
    groups = GROUPS
    lead_s = 0.3
    views_timeout = 2.0
    whole_note = "3 primaries + 3 replicas, all slots, links up, after the run"

    def __init__(self, ctx: CaseContext, cl, variant: str, p: dict):
        super().__init__(
            ctx,
            variant,
            p,
            [(cl.host, port) for port in cl.ports],
            faulty=variant != "no-kill",
            fault_s=_after_s(p),
            need_replicas=1 if variant == "wait" else 0,
            victim_index=p["victim"],
        )
        self.cl = cl
        self.rejoined: float | None = None
        self.t_restart: float | None = None

    def describe(self) -> dict:
        return {"victim": self.victim.address, "killed_slots": ranges(sorted(self.victim.slots)), "kill": self.faulty}

    def threads(self, router, group_of) -> list[threading.Thread]:
        p = self.p
        out = [
            threading.Thread(
                target=client.writer,
                args=(router, f"w{i}", self.prefix, p["rate"], self.start, self.end, self.hist, group_of),
                kwargs={"wait_replicas": self.need, "wait_ms": p["wait_ms"]},
            )
            for i in range(p["writers"])
        ]
        out += [
            threading.Thread(
                target=client.reader, args=(router, p["read_rate"], self.start, self.end, self.hist, group_of)
            )
            for _ in range(p["readers"])
        ]
        return out

    def inject(self) -> None:
        self.cl.kill_node(self.victim.addr[1])

    def after_traffic(self) -> None:
        if not self.faulty:
            return
        host, port = self.victim.addr
        v, p = self.variant, self.p
        if v == "no-nodes-conf":
            self._restart_without_nodes_conf()
        else:  # no-replicas: nothing took its slots, it comes back as their primary, empty
            self.t_restart = time.monotonic()
            self.cl.restart_node(port)
            if v != "no-replicas":
                self.rejoined = _wait_replica(host, port, p["rejoin_timeout_s"])
        if v != "no-replicas":
            self.metrics[f"{v}.rejoined_as_replica"] = Metric(
                1 if self.rejoined is not None else 0,
                "bool",
                "higher",
                "the restarted node is a replica with its link up",
            )
            self.metrics[f"{v}.rejoin_s"] = Metric(self.rejoined, "s", "lower", "restart to replica with link up")
        self.details["restart_at_s"] = round(self.t_restart - self.t_fault, 2)

    def _restart_without_nodes_conf(self) -> None:
        """Restarted without its nodes.conf it is a stranger (the control); then its nodes.conf
        is put back and it is restarted again, so that the cluster is whole for the next run."""
        host, port = self.victim.addr
        folder = self.cl._process(port).folder
        saved = folder / "nodes.conf.saved"
        shutil.move(folder / "nodes.conf", saved)
        self.cl.restart_node(port)
        self.rejoined = _wait_replica(host, port, min(self.p["rejoin_timeout_s"], 3.0))
        self.cl.kill_node(port)
        (folder / "nodes.conf").unlink(missing_ok=True)
        shutil.move(saved, folder / "nodes.conf")
        self.t_restart = time.monotonic()
        self.cl.restart_node(port)
        restored = _wait_replica(host, port, self.p["rejoin_timeout_s"])
        self.details["restored_with_nodes_conf_s"] = None if restored is None else round(restored, 2)

    def wait_whole(self) -> bool:
        try:
            self.cl.wait_healthy(self.p["rejoin_timeout_s"])
            return True
        except EnvironmentProblem as e:
            self.details["unhealthy"] = str(e)
            return False

    def after_whole(self) -> None:
        if self.faulty and self.variant != "no-replicas":
            t_restart = cast(float, self.t_restart)  # set by after_traffic, run before this when faulty
            self.watcher.events.append((t_restart, self.victim.address, "restarted"))
            if self.rejoined is not None:
                self.watcher.events.append((t_restart + self.rejoined, self.victim.address, "rejoined as replica"))


def run_once(ctx: CaseContext, cl, variant: str, p: dict) -> tuple[dict, dict, dict]:
    """One variant or control on cluster `cl`; returns (metrics, series, details)."""
    return KillRun(ctx, cl, variant, p).run()


def run(ctx: CaseContext) -> Record:

    p = ctx.params
    host, base = "127.0.0.1", scenario.own_port(ctx, p)
    names = scenario.order(list(p["variants"]), list(p["controls"]), ctx.repetition)
    metrics: dict[str, Metric] = {}
    series: dict = {}
    details: dict = {
        "order": names,
        "node_timeout_ms": p["node_timeout_ms"],
        "own_cluster": f"{host}:{base}-{base + 5}",
    }
    cl = LocalCluster(host, base, node_timeout_ms=p["node_timeout_ms"], state_dir=STATE_DIR / f"failover-{base}")
    bare = LocalCluster(
        host, base + 6, replicas=0, node_timeout_ms=p["node_timeout_ms"], state_dir=STATE_DIR / f"failover-{base + 6}"
    )
    for c in (cl, bare):  # left by a run that was killed (-9): its owner is gone
        if c.leftover():
            ctx.log(f"stopping the case's cluster on {host}:{c.base_port} left by a run that no longer runs")
            c.down()
    try:
        if any(n != "no-replicas" for n in names):
            ctx.log(f"own cluster 3 + 3 on {host}:{base}-{base + 5}, cluster-node-timeout {p['node_timeout_ms']} ms")
            cl.up(owner_pid=os.getpid())
        for name in names:
            ctx.log(f"{name}: {p['warm_s']:g} s, {'kill' if name != 'no-kill' else 'no kill'}, {_after_s(p):g} s")
            if name == "no-replicas":
                bare.up(owner_pid=os.getpid())
                try:
                    m, s, d = run_once(ctx, bare, name, p)
                finally:
                    bare.down()
                m.pop(f"{name}.healthy_after", None)
            else:
                m, s, d = run_once(ctx, cl, name, p)
            metrics.update(m)
            series.update(s)
            details[name] = d
            ctx.log(
                f"{name}: promoted {scenario.fmt(m.get(name + '.promoted_s'))} s, killed range recovered "
                f"{scenario.fmt(m.get(name + '.killed_range.recovered_s'))} s, lost acknowledged "
                f"{scenario.fmt(m.get(name + '.lost_acked'))} of {scenario.fmt(m.get(name + '.acked'))}"
            )
    finally:
        cl.down()
        bare.down()
    return Record("ok", metrics=metrics, series=series, details=details)
