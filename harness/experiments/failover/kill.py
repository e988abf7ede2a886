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
from collections import Counter

import redis

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput, EnvironmentProblem
from harness.experiments.failover import client, measure
from harness.experiments.failover.watch import Watcher, node_id, parse_nodes

VARIANTS = ("plain", "wait", "min-replicas")
CONTROLS = ("no-kill", "no-replicas", "no-nodes-conf")
GROUPS = {"killed": "killed_range", "others": "other_ranges"}

PARAMS = {
    "node_timeout_ms": Param(int, 2000, "cluster-node-timeout of the case's own cluster (Redis default 15000)",
                             min=500, max=120000),
    "variants": Param(list, list(VARIANTS), "write variants to run", choices=VARIANTS),
    "controls": Param(list, list(CONTROLS), "controls run interleaved with the variants", choices=CONTROLS),
    "writers": Param(int, 2, "writer threads", min=1, max=64),
    "rate": Param(float, 100.0, "writes per second per writer (open loop)", min=1, max=100000),
    "readers": Param(int, 1, "reader threads (read the latest acknowledged keys)", min=0, max=16),
    "read_rate": Param(float, 50.0, "reads per second per reader", min=1, max=100000),
    "warm_s": Param(float, 1.5, "seconds of traffic before the kill", min=0.5, max=600),
    "after_kill_s": Param((float, type(None)), None,
                          "seconds of traffic after the kill; null: node timeout x 1.5 + 3 s", min=1, max=3600),
    "wait_ms": Param(int, 100, "the WAIT timeout of the wait variant", min=1, max=60000),
    "min_replicas_max_lag": Param(int, 10, "min-replicas-max-lag of the min-replicas variant (Redis default 10)",
                                  min=1, max=3600),
    "victim": Param(int, 0, "which primary is killed (0-based, by port)", min=0, max=15),
    "client_timeout_ms": Param(int, 250, "client connect and read timeout", min=10, max=60000),
    "rejoin_timeout_s": Param(float, 30.0, "how long the restarted node may take to rejoin", min=1, max=600),
    "port_offset": Param(int, 20, "the case's own cluster starts this many ports above the suite's cluster "
                                  "(it uses 9 ports and their bus ports +10000)", min=6, max=1000),
}


def _check(where: str, p: dict) -> None:
    if not p["variants"] and not p["controls"]:
        raise BadInput(f"{where}: give at least one of variants or controls")
    for name in ("variants", "controls"):
        if len(set(p[name])) != len(p[name]):
            raise BadInput(f"{where}.{name}: a name appears twice; list each once")


def order(variants: list[str], controls: list[str], repetition: int) -> list[str]:
    """The run order of one repetition: variants and controls alternating (a control between
    two variants), the whole sequence rotated by one per repetition."""
    names: list[str] = []
    for i in range(max(len(variants), len(controls))):
        names += variants[i:i + 1] + controls[i:i + 1]
    if not names:
        return []
    k = (repetition - 1) % len(names)
    return names[k:] + names[:k]


def _after_s(p: dict) -> float:
    return p["after_kill_s"] if p["after_kill_s"] is not None else p["node_timeout_ms"] / 1000 * 1.5 + 3


def _config_all(cl, settings: dict) -> None:
    for port in cl.ports:
        c = redis.Redis(host=cl.host, port=port, socket_timeout=2)
        try:
            for k, v in settings.items():
                c.config_set(k, v)
        except redis.RedisError:
            pass  # a node that is down gets its config from redis.conf when restarted
        finally:
            c.close()


def _flush(cl) -> None:
    for n in cl.nodes():
        if n.role == "primary":
            c = redis.Redis(host=n.host, port=n.port, socket_timeout=5)
            try:
                c.flushall()
            finally:
                c.close()


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


def run_once(ctx: CaseContext, cl, variant: str, p: dict) -> tuple[dict, dict, dict]:
    """One variant or control on cluster `cl`; returns (metrics, series, details)."""
    kill = variant != "no-kill"
    need = 1 if variant == "wait" else 0
    _flush(cl)
    if variant == "min-replicas":
        _config_all(cl, {"min-replicas-to-write": 1, "min-replicas-max-lag": p["min_replicas_max_lag"]})
    nodes = cl.nodes()
    primaries = sorted((n for n in nodes if n.role == "primary"), key=lambda n: n.port)
    victim = primaries[p["victim"] % len(primaries)]
    vid = node_id(victim.host, victim.port)
    c = redis.Redis(host=victim.host, port=victim.port, socket_timeout=2, decode_responses=True)
    try:
        rows = parse_nodes(c.execute_command("CLUSTER NODES"))
    finally:
        c.close()
    victim_replicas = {addr for _, addr, _, primary in rows if primary == vid}
    seeds = [(n.host, n.port) for n in nodes]
    timeout = p["client_timeout_ms"] / 1000

    def router():
        return client.Router(seeds, timeout)

    r0 = router()
    victim_addr = (victim.host, victim.port)
    killed_slots = [s for s in range(16384) if r0.slots[s] == victim_addr]
    r0.close()
    killed_set = set(killed_slots)

    from redis.crc import key_slot

    def group_of(key: str) -> str:
        return "killed" if key_slot(key.encode()) in killed_set else "others"

    hist = client.History()
    after = _after_s(p)
    start = time.monotonic() + 0.3
    t_kill = start + p["warm_s"]
    end = t_kill + after
    prefix = f"fo:{variant}:{ctx.repetition}"
    threads = [threading.Thread(target=client.writer, args=(router, f"w{i}", prefix, p["rate"], start, end, hist,
                                                            group_of),
                                kwargs={"wait_replicas": need, "wait_ms": p["wait_ms"]})
               for i in range(p["writers"])]
    threads += [threading.Thread(target=client.reader, args=(router, p["read_rate"], start, end, hist, group_of))
                for _ in range(p["readers"])]
    watcher = Watcher(seeds, vid, victim_replicas)
    watcher.start()
    for t in threads:
        t.start()
    time.sleep(max(0.0, t_kill - time.monotonic()))
    t_kill = time.monotonic()  # t = 0: the signal is sent now
    if kill:
        cl.kill_node(victim.port)
    for t in threads:
        t.join()
    watcher.stop()

    m: dict[str, Metric] = {}
    details: dict = {"victim": victim.address, "killed_slots": _ranges(killed_slots), "kill": kill}
    rejoined = None
    if kill:
        folder = cl._process(victim.port).folder
        if variant == "no-nodes-conf":
            saved = folder / "nodes.conf.saved"
            shutil.move(folder / "nodes.conf", saved)
            cl.restart_node(victim.port)
            rejoined = _wait_replica(victim.host, victim.port, min(p["rejoin_timeout_s"], 3.0))
            cl.kill_node(victim.port)
            (folder / "nodes.conf").unlink(missing_ok=True)
            shutil.move(saved, folder / "nodes.conf")
            t_restart = time.monotonic()
            cl.restart_node(victim.port)
            restored = _wait_replica(victim.host, victim.port, p["rejoin_timeout_s"])
            details["restored_with_nodes_conf_s"] = None if restored is None else round(restored, 2)
        elif variant == "no-replicas":  # nothing took its slots: it comes back as their primary, empty
            t_restart = time.monotonic()
            cl.restart_node(victim.port)
        else:
            t_restart = time.monotonic()
            cl.restart_node(victim.port)
            rejoined = _wait_replica(victim.host, victim.port, p["rejoin_timeout_s"])
        if variant != "no-replicas":
            m[f"{variant}.rejoined_as_replica"] = Metric(1 if rejoined is not None else 0, "bool", "higher",
                                                         "the restarted node is a replica with its link up")
            m[f"{variant}.rejoin_s"] = Metric(rejoined, "s", "lower", "restart to replica with link up")
        details["restart_at_s"] = round(t_restart - t_kill, 2)
    try:
        cl.wait_healthy(p["rejoin_timeout_s"])
        healthy = True
    except EnvironmentProblem as e:
        healthy = False
        details["unhealthy"] = str(e)
    if kill and variant != "no-replicas":
        watcher.events.append((t_restart, victim.address, "restarted"))
        if rejoined is not None:
            watcher.events.append((t_restart + rejoined, victim.address, "rejoined as replica"))
    m[f"{variant}.healthy_after"] = Metric(1 if healthy else 0, "bool", "higher",
                                           "3 primaries + 3 replicas, all slots, links up, after the run")
    m[f"{variant}.slot_views_agree"] = Metric(1 if healthy and client.views_agree([(cl.host, p) for p in cl.ports], 2.0) else 0, "bool", "higher",
                                              "every node reports the same slot map after the heal")
    if variant == "min-replicas":
        _config_all(cl, {"min-replicas-to-write": 0, "min-replicas-max-lag": 10})

    reader = router()
    try:
        final = client.read_back(reader, [w.key for w in hist.writes])
    finally:
        reader.close()
    m.update(measure.loss_metrics(variant, hist.writes, final, need))
    m.update(measure.outage_metrics(variant, hist.writes, t_kill, end, GROUPS))
    for what in ("pfail", "fail", "promoted"):
        t = watcher.first.get(what)
        m[f"{variant}.{what}_s"] = Metric(None if t is None or not kill else t - t_kill, "s", "lower",
                                          {"pfail": "kill to PFAIL in another node's view",
                                           "fail": "kill to FAIL in another node's view",
                                           "promoted": "kill to the replica calling itself primary"}[what])
    total = len(hist.writes)
    m[f"{variant}.writes"] = Metric(total, "writes")
    m[f"{variant}.late_pct"] = Metric(100.0 * hist.late / total if total else None, "%", "lower",
                                      "writes sent more than 50 ms after their scheduled time")
    m[f"{variant}.reads_missing"] = Metric(sum(1 for _, _, w in hist.reads if w == "missing"), "reads", "lower",
                                           "reads of an acknowledged key that found nothing")
    series = {f"{variant}.timeline": measure.timeline(hist.writes, hist.reads, t_kill, -p["warm_s"], after,
                                                      list(GROUPS), need),
              f"{variant}.events": measure.events_series(watcher.events, t_kill)}
    measure.write_history(ctx.raw_path(f"{variant}.writes.csv"), hist, t_kill)
    details["watch_polls"] = watcher.polls
    details["error_kinds"] = dict(Counter(w.error for w in hist.writes if not w.ok))
    return m, series, details


def _ranges(slots: list[int]) -> str:
    out, i = [], 0
    while i < len(slots):
        j = i
        while j + 1 < len(slots) and slots[j + 1] == slots[j] + 1:
            j += 1
        out.append(f"{slots[i]}-{slots[j]}" if j > i else str(slots[i]))
        i = j + 1
    return ",".join(out)


def _own_base(ctx: CaseContext, p: dict) -> tuple[str, int]:
    nodes = ctx.target.nodes
    host = "127.0.0.1"
    base = (min(n.port for n in nodes) if nodes else 7000) + p["port_offset"]
    return host, base


@register("failover-primary-killed", params=PARAMS, needs="cluster", check=_check,
          description="kill -9 of one primary of the case's own 3 + 3 cluster under writers: failover times, "
                      "outage, lost acknowledged writes, rejoin")
def run(ctx: CaseContext) -> CaseOutcome:
    from harness.cluster import LocalCluster
    from harness.paths import STATE_DIR

    p = ctx.params
    host, base = _own_base(ctx, p)
    names = order(list(p["variants"]), list(p["controls"]), ctx.repetition)
    metrics: dict[str, Metric] = {}
    series: dict = {}
    details: dict = {"order": names, "node_timeout_ms": p["node_timeout_ms"], "own_cluster": f"{host}:{base}-{base + 5}"}
    cl = LocalCluster(host, base, node_timeout_ms=p["node_timeout_ms"], state_dir=STATE_DIR / f"failover-{base}")
    bare = LocalCluster(host, base + 6, replicas=0, node_timeout_ms=p["node_timeout_ms"],
                        state_dir=STATE_DIR / f"failover-{base + 6}")
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
            ctx.log(f"{name}: promoted {_fmt(m.get(name + '.promoted_s'))} s, killed range recovered "
                    f"{_fmt(m.get(name + '.killed_range.recovered_s'))} s, lost acknowledged "
                    f"{_fmt(m.get(name + '.lost_acked'))} of {_fmt(m.get(name + '.acked'))}")
    finally:
        cl.down()
        bare.down()
    return CaseOutcome("ok", metrics=metrics, series=series, details=details)


def _fmt(m) -> str:
    if m is None or m.value is None:
        return "-"
    return f"{m.value:.2f}".rstrip("0").rstrip(".")
