"""The target of a run, beside the runner: found or started before the first case, kept
current between cases, stopped afterwards (when this run started it).

`target_for` yields the Target of the selected suites: nothing when none needs a cluster,
an inventory's hosts (harness.infra.inventory), or the local cluster on loopback (a healthy one
already there is used as it is, one left by a killed run is replaced). `refresh_topology`
re-reads the cluster's roles between cases, `server_versions` and `manifest_facts` say
what the target is for the manifest (with the identity of each host, measured on it).
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable

import redis

from harness.base.errors import HarnessError
from harness.infra import host_identity
from harness.infra.cluster import LocalCluster, parse_cluster_nodes
from harness.infra.inventory import load_generators_only, load_target, loadgen_summary, redis_ssh_hosts
from harness.infra.target import Target


@contextlib.contextmanager
def target_for(needs_cluster: bool, target: str, base_port: int, log: Callable[[str], None]):
    """Yield the Target; a local cluster that this run started is stopped afterwards."""
    if not needs_cluster:  # an inventory's load generators still come along (the serving client runs there)
        yield Target(name=target, kind="none") if target == "local" else load_generators_only(target)
        return
    if target != "local":
        yield load_target(target)
        return
    cluster = LocalCluster(base_port=base_port)
    with cluster.lock:  # another run on these ports is refused here, before anything is touched
        left = cluster.leftover()
        if left:  # a run killed with -9 left it, with that run's data: never measure on it
            log(
                f"the local cluster on 127.0.0.1:{base_port} was {left}; it holds that run's data, "
                f"so it is stopped and a fresh one started"
            )
            cluster.down()
        elif cluster.health_problem() is None:  # a healthy cluster already answers there: use it
            log(
                f"using the running local cluster on 127.0.0.1:{base_port} (started by {cluster.started_by()}); "
                f"it keeps the data it holds ({_key_count(cluster)} keys now), nothing is flushed"
            )
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
    try:
        return str(
            sum(
                redis.Redis(host=n.host, port=n.port, socket_timeout=2).dbsize()
                for n in cluster.nodes()
                if n.role == "primary"
            )
        )
    except (redis.RedisError, HarnessError):
        return "?"


def refresh_topology(tgt: Target, log: Callable[[str], None]) -> None:
    """Between cases: re-read the cluster's roles from the first node that answers, drop the
    nodes it marks failed and put the current primaries first, so that a case after a
    failover never uses a dead entry node. Leaves the target as it is when no node answers."""
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
            log(
                f"cluster topology changed: primaries now {', '.join(n.address for n in kept if n.role == 'primary')}"
                + (f"; not answering or failed: {', '.join(gone)}" if gone else "")
            )
            tgt.nodes[:] = kept
        return


def server_versions(tgt: Target) -> dict:
    """Per Redis node: its version, role and OS (or the error it answered with)."""
    out = {}
    for node in tgt.nodes:
        try:
            info = tgt.client(node, socket_timeout=3).info("server")
            out[node.address] = {"redis_version": info.get("redis_version"), "role": node.role, "os": info.get("os")}
        except redis.RedisError as e:
            out[node.address] = {"error": str(e)}
    return out


def manifest_facts(tgt: Target, target: str) -> dict:
    """What the manifest keeps of the target: its nodes, the load generator (an inventory's),
    the servers' versions and which machine each host is (harness.infra.host_identity: read on
    each host, over SSH as the inventory names it, so that aliases or namespaces of one
    machine count as one host)."""
    nodes = {k: v for k, v in tgt.to_json().items() if k != "loadgen"}  # the load generator has its own entry
    facts: dict = {"target_nodes": nodes}
    ssh_hosts: dict = {}
    if tgt.kind == "cluster" and target != "local":
        facts["loadgen"] = loadgen_summary(tgt)
        ssh_hosts = redis_ssh_hosts(target)
    facts["servers"] = server_versions(tgt)
    facts["host_identity"] = host_identity.measure(tgt, ssh_hosts)
    return facts
