"""Partition: one primary's simulated host cut off (its link down) while a writer on its
side keeps writing, then healed.

Runs on the simulated lab (infra/lab-sim, `make lab-sim-up`): hosts are network namespaces
ls-h1..ls-h6 at 127.77.0.11-16 on bridge ls-br0. The case starts its own redis-server in
each of the six namespaces (`ip netns exec`, so they are its own processes, stopped when
the case ends) and creates a 3 + 3 cluster across them. Per run: a writer process inside
the victim primary's namespace writes keys of that primary's slots; writer threads here
write keys of every slot. At the cut, `ip link set ls-hN-p down` takes the host's link
down; after `cut_s` it comes back up. Every key is read back once the cluster is whole
again: the writes the cut-off primary acknowledged and the cluster then dropped are
counted, and how long the minority kept acknowledging them.

Variants: `plain`, `min-replicas` (min-replicas-to-write 1 with min-replicas-max-lag as a
parameter); control `no-cut` (the same schedule, the link left up).

Where the lab cannot be used (not root, no `ip`, the lab-sim scripts missing, the lab not
up and `start_lab` false, or its start failing) the case is skipped with the reason. With
`start_lab` the case brings the lab up itself and takes it down again afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import cast

import redis

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.paths import INFRA_DIR, STATE_DIR
from harness.experiments.failover import client, lost_writes, minority_writer, scenario
from harness.experiments.failover.scenario import FaultRun, ranges
from harness.infra import ownership
from harness.infra.redis_server import RedisProcess, require_tool
from harness.model import child
from harness.model.driver_contract import CaseContext, Metric, Param, Record

VARIANTS = ("plain", "min-replicas")
CONTROLS = ("no-cut",)
LAB_NET = "127.77.0"
HOSTS = 6  # ls-h1..ls-h6; ls-h7 is the lab's load generator
GROUPS = {"cut": "cut_range", "others": "other_ranges"}

PARAMS = {
    "node_timeout_ms": Param(int, 2000, "cluster-node-timeout of the case's cluster", min=500, max=120000),
    "variants": Param(list, list(VARIANTS), "write variants to run", choices=VARIANTS),
    "controls": Param(list, list(CONTROLS), "controls run interleaved with the variants", choices=CONTROLS),
    "rate": Param(float, 100.0, "writes per second of the writer on the cut-off side", min=1, max=100000),
    "writers": Param(int, 1, "writer threads on the majority side (all slots)", min=0, max=64),
    "majority_rate": Param(float, 100.0, "writes per second per majority-side writer", min=1, max=100000),
    "warm_s": Param(float, 1.5, "seconds of traffic before the cut", min=0.5, max=600),
    "cut_s": Param(
        (float, type(None)), None, "seconds the link stays down; null: node timeout x 1.5 + 3 s", min=0.5, max=3600
    ),
    "after_heal_s": Param(float, 3.0, "seconds of traffic after the link is back", min=0.5, max=600),
    "min_replicas_max_lag": Param(int, 1, "min-replicas-max-lag of the min-replicas variant", min=1, max=3600),
    "client_timeout_ms": Param(int, 250, "client connect and read timeout", min=10, max=60000),
    "heal_timeout_s": Param(float, 30.0, "how long the cluster may take to be whole again", min=1, max=600),
    "port_offset": Param(int, 30, "the case's nodes listen on the suite cluster's first port + this", min=0, max=1000),
    "start_lab": Param(bool, False, "bring the simulated lab up (and down afterwards) when it is not up"),
}


def check(where: str, p: dict) -> None:
    scenario.check_arms(where, p)


# ---- the lab --------------------------------------------------------------------------------
def lab_problem() -> str | None:
    """Why the lab cannot be used from here (None: it can, if it is up or can be started)."""
    if os.geteuid() != 0:
        return "not root: network namespaces and link changes need root"
    for tool in ("ip", "redis-server", "redis-cli"):
        if not shutil.which(tool):
            return f"{tool} not found (apt-get install -y iproute2 redis-server redis-tools)"
    if not (INFRA_DIR / "lab-sim" / "up.sh").is_file():
        return "the simulated lab's scripts (infra/lab-sim/up.sh) are not in this checkout"
    return None


def lab_is_up() -> bool:
    return Path("/sys/class/net/ls-br0").exists() and all(
        Path(f"/run/netns/ls-h{i}").exists() for i in range(1, HOSTS + 1)
    )


def _lab_script(name: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(INFRA_DIR / "lab-sim" / name)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def link(i: int, up: bool, check: bool = True) -> None:
    """Host i's link (its veth end on the bridge) up or down."""
    r = subprocess.run(
        ["ip", "link", "set", f"ls-h{i}-p", "up" if up else "down"], capture_output=True, text=True, timeout=10
    )
    if check and r.returncode != 0:
        raise EnvironmentProblem(
            f"ip link set ls-h{i}-p {'up' if up else 'down'} failed: {r.stderr.strip()} "
            f"(was the simulated lab taken down during the case?)"
        )


# ---- the cluster across the lab's hosts ------------------------------------------------------
class LabCluster:
    def __init__(self, port: int, node_timeout_ms: int, folder: Path):
        self.port, self.node_timeout_ms, self.folder = port, node_timeout_ms, folder
        self.hosts = {i: f"{LAB_NET}.1{i}" for i in range(1, HOSTS + 1)}
        self.procs: dict[int, RedisProcess] = {}

    @property
    def addrs(self) -> list[tuple[str, int]]:
        return [(a, self.port) for a in self.hosts.values()]

    def up(self, timeout: float = 30.0) -> None:

        exe = require_tool("redis-server")
        self._stop_leftovers()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            for i, addr in self.hosts.items():
                rp = RedisProcess(
                    addr,
                    self.port,
                    self.folder / f"h{i}",
                    cluster=True,
                    config={"cluster-node-timeout": self.node_timeout_ms},
                )
                rp.folder.mkdir(parents=True, exist_ok=True)
                for stale in ("nodes.conf", "dump.rdb", "redis.log"):
                    (rp.folder / stale).unlink(missing_ok=True)
                conf = rp.folder / "redis.conf"
                conf.write_text(rp.render_config())
                rp.proc = subprocess.Popen(
                    ["ip", "netns", "exec", f"ls-h{i}", exe, str(conf)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    cwd=rp.folder,
                )  # its folder: proof it is ours
                rp.pid = rp.proc.pid
                self.procs[i] = rp
                self._write_state()
                rp.wait_ready(10)
            out = subprocess.run(
                [
                    "redis-cli",
                    "--cluster",
                    "create",
                    *[f"{a}:{p}" for a, p in self.addrs],
                    "--cluster-replicas",
                    "1",
                    "--cluster-yes",
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if out.returncode != 0 or "[OK] All 16384 slots covered" not in out.stdout:
                tail = " | ".join((out.stdout + out.stderr).strip().splitlines()[-3:])
                raise EnvironmentProblem(f"redis-cli --cluster create on the lab failed: {tail}")
            self.wait_whole(timeout)
        except BaseException:
            self.down()
            raise

    def health_problem(self) -> str | None:
        roles: Counter[str | None] = Counter()
        for addr, port in self.addrs:
            c = client.plain_client(addr, port, 1.0)
            try:
                ci = c.execute_command("CLUSTER INFO")
                state = (
                    ci.get("cluster_state")
                    if isinstance(ci, dict)
                    else dict(x.split(":", 1) for x in str(ci).splitlines() if ":" in x).get("cluster_state")
                )
                if state != "ok":
                    return f"{addr}:{port} reports cluster_state:{state}"
                info = c.info("replication")
                roles[info.get("role")] += 1
                if info.get("role") == "slave" and info.get("master_link_status") != "up":
                    return f"replica {addr}:{port} link is {info.get('master_link_status')}"
            except redis.RedisError as e:
                return f"{addr}:{port}: {e}"
            finally:
                c.close()
        if roles["master"] != 3 or roles["slave"] != 3:
            return f"{roles['master']} primaries and {roles['slave']} replicas"
        return None

    def wait_whole(self, timeout: float) -> float:
        t0 = time.monotonic()
        problem = None
        while time.monotonic() - t0 < timeout:
            problem = self.health_problem()
            if problem is None:
                return time.monotonic() - t0
            time.sleep(0.1)
        raise EnvironmentProblem(f"the lab cluster was not whole within {timeout:.0f} s: {problem}")

    @property
    def state_file(self) -> Path:
        return self.folder / "state.json"

    def _write_state(self) -> None:
        procs = [
            ownership.spawned(rp.pid, port=self.port, name=f"h{i}").as_json() for i, rp in self.procs.items() if rp.pid
        ]
        ownership.write_private(self.state_file, json.dumps({"boot": ownership.boot_id(), "procs": procs}))

    def _stop_leftovers(self) -> None:
        """Servers a killed earlier run left in the namespaces: only the processes its state
        file names that are provably the harness's (the recorded start time, running in the
        host's own folder h<i>: harness.infra.ownership), never a pid a file merely names."""
        fix = f"remove {self.folder} once no lab cluster of the harness runs"
        doc = ownership.read_state_file(self.state_file, fix)
        if doc is None:
            return
        procs = ownership.Fields(self.state_file, doc, fix).procs("procs", legacy="pids")
        mine = [p for p in procs if ownership.same_boot(doc) and re.fullmatch(r"h[0-9]{1,2}", p.name)]
        ownership.terminate(mine, lambda p: self.folder / p.name)
        left = [p.pid for p in procs if ownership.start_time(p.pid) is not None]  # alive, and not ours
        if left:
            legacy = any(p.start is None for p in procs)
            ownership.note(ownership.not_ours_note(self.state_file, left, legacy, fix))
        self.state_file.unlink(missing_ok=True)

    def down(self) -> None:
        for rp in self.procs.values():
            rp.stop()
        self.procs = {}
        self.state_file.unlink(missing_ok=True)


def _tags_for(slots: set[int], n: int) -> list[str]:
    """n hash-tagged key stems whose slots are all in `slots`."""
    from redis.crc import key_slot

    out: list[str] = []
    i = 0
    while len(out) < n and i < 200000:
        stem = f"{{t{i}}}"
        if key_slot(stem.encode()) in slots:
            out.append(stem)
        i += 1
    return out


class CutRun(FaultRun):
    """The victim primary's host cut off (its link down) at t = 0 while a writer process in
    its namespace keeps writing keys of its slots; healed after `cut_s`."""

    noun = "cut"
    groups = GROUPS
    lead_s = 2.0  # the minority writer's process needs to start
    views_timeout = 1.0
    whole_note = "3 primaries + 3 replicas, links up, after the heal"

    def __init__(self, ctx: CaseContext, lc: LabCluster, variant: str, p: dict):
        super().__init__(
            ctx,
            variant,
            p,
            lc.addrs,
            faulty=variant != "no-cut",
            fault_s=scenario.fault_s(p["cut_s"], p),
            after_s=p["after_heal_s"],
        )
        self.lc = lc
        self.minority: child.Child | None = None
        self.minority_writes: list = []

    @property
    def host_index(self) -> int:
        return next(i for i, a in self.lc.hosts.items() if a == self.victim.addr[0])

    def describe(self) -> dict:
        return {
            "victim": self.victim.address,
            "host": f"ls-h{self.host_index}",
            "cut": self.faulty,
            "cut_slots": ranges(sorted(self.victim.slots)),
            "cut_s": self.fault_s,
        }

    def threads(self, router, group_of) -> list[threading.Thread]:
        out = [
            threading.Thread(
                target=client.writer,
                args=(router, f"w{i}", self.prefix, self.p["majority_rate"], self.start, self.end, self.hist, group_of),
            )
            for i in range(self.p["writers"])
        ]
        out.append(
            threading.Thread(target=client.reader, args=(router, 50.0, self.start, self.end, self.hist, group_of))
        )
        return out

    def before_traffic(self) -> None:
        """The writer on the cut-off side: its own process in the victim's namespace."""
        ns = f"ls-h{self.host_index}"
        job = {
            "seeds": [list(self.victim.addr)],
            "keys": [f"{self.prefix}:m:{t}" for t in _tags_for(self.victim.slots, 64)],
            "name": "minority",
            "prefix": self.prefix,
            "rate": self.p["rate"],
            "start": self.start,
            "end": self.end,
            "timeout": self.timeout,
            "group": "cut",
        }
        self.minority = child.start(
            minority_writer.MODULE,
            job,
            what=f"the writer in {ns}",
            log=self.ctx.log,
            stderr_path=self.ctx.raw_path(f"{self.variant}.minority.stderr"),
            prefix=["ip", "netns", "exec", ns],
        )

    def inject(self) -> None:
        link(self.host_index, False)

    def while_faulty(self) -> None:
        self.t_down = time.monotonic()  # `ip link` has returned: the link is down
        time.sleep(max(0.0, self.t_fault + self.fault_s - time.monotonic()))
        self.t_heal = time.monotonic()
        if self.faulty:
            link(self.host_index, True)

    def after_traffic_threads(self) -> None:
        """The writer's history (it stops writing at `end`); its error, if any, is raised here."""
        minority = cast(child.Child, self.minority)  # started by before_traffic, which FaultRun runs first
        out = minority.result(timeout=max(10.0, self.end - time.monotonic() + 10))
        self.minority_writes = [lost_writes.Write(**w) for w in out["writes"]]
        with self.ctx.raw_path(f"{self.variant}.minority.jsonl").open("w") as f:  # kept with the record
            f.writelines(json.dumps(w) + "\n" for w in out["writes"])

    def cleanup(self) -> None:
        if self.minority is None:
            return
        link(self.host_index, True, check=False)  # never leave a host cut off
        self.minority.stop()  # already ended unless the run was cut short

    def wait_whole(self) -> bool:
        try:
            self.lc.wait_whole(self.p["heal_timeout_s"])
            self.details["whole_after_heal_s"] = round(time.monotonic() - self.t_heal, 2)
            return True
        except EnvironmentProblem as e:
            self.details["not_whole"] = str(e)
            return False

    def after_whole(self) -> None:
        v = self.variant
        c = client.plain_client(*self.victim.addr, 2.0)
        try:
            self.metrics[f"{v}.old_primary_is_replica"] = Metric(
                1 if c.info("replication").get("role") == "slave" else 0,
                "bool",
                note="the cut-off primary after the heal",
            )
        except redis.RedisError:
            self.metrics[f"{v}.old_primary_is_replica"] = Metric(None, "bool")
        finally:
            c.close()
        if self.faulty:
            self.watcher.events.append((self.t_heal, self.victim.address, "link up"))
        self.details["heal_at_s"] = round(self.t_heal - self.t_fault, 2)
        self.details["link_down_took_s"] = round(self.t_down - self.t_fault, 3)

    def extra_writes(self) -> list:
        return self.minority_writes

    def extra_metrics(self, final: dict) -> dict[str, Metric]:
        v, mw = self.variant, self.minority_writes
        verdict = lost_writes.classify(mw, final)
        during = [w for w in mw if w.ok and self.t_down <= w.sent and w.done < self.t_heal]
        return {
            f"{v}.minority.acked": Metric(
                verdict.acknowledged, "writes", note="acknowledged to the writer on the cut-off side"
            ),
            f"{v}.minority.lost_acked": Metric(
                verdict.counts[lost_writes.LOST],
                "writes",
                "lower",
                "acknowledged on the cut-off side, gone after the heal",
            ),
            f"{v}.minority.acked_during_cut": Metric(
                len(during), "writes", note="sent after the link went down, acknowledged before it came back"
            ),
            f"{v}.minority.accepting_s": Metric(
                max(w.done for w in during) - self.t_down if during else 0.0,
                "s",
                "lower",
                "link down to the last write the cut-off side acknowledged before the heal",
            ),
        }


def run_once(ctx: CaseContext, lc: LabCluster, variant: str, p: dict) -> tuple[dict, dict, dict]:
    return CutRun(ctx, lc, variant, p).run()


def run(ctx: CaseContext) -> Record:
    p = ctx.params
    problem = lab_problem()
    if problem:
        return Record("skipped", f"the simulated lab cannot be used here: {problem}")
    started = False
    if not lab_is_up():
        if not p["start_lab"]:
            return Record(
                "skipped",
                "the simulated lab is not up; start it with make lab-sim-up (or --set partition.start_lab=true)",
            )
        ctx.log("starting the simulated lab (infra/lab-sim/up.sh)")
        r = _lab_script("up.sh", 180)
        if r.returncode != 0:
            _lab_script("down.sh", 60)
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            return Record("skipped", f"the simulated lab could not be started: {tail[0]}")
        started = True
    port = scenario.own_port(ctx, p)
    if port > 65535 - 10000:
        raise BadInput(
            f"port_offset {p['port_offset']}: the lab nodes' port {port} leaves no room for its bus "
            f"port (+10000); give a smaller port_offset"
        )
    lc = LabCluster(port, p["node_timeout_ms"], STATE_DIR / f"failover-lab-{port}")
    names = scenario.order(list(p["variants"]), list(p["controls"]), ctx.repetition)
    metrics: dict[str, Metric] = {}
    series: dict = {}
    details: dict = {
        "order": names,
        "node_timeout_ms": p["node_timeout_ms"],
        "lab_started_by_case": started,
        "nodes": [f"{a}:{port}" for a in lc.hosts.values()],
    }
    try:
        ctx.log(f"3 + 3 cluster on the lab's hosts {LAB_NET}.11-16:{port}, node timeout {p['node_timeout_ms']} ms")
        lc.up()
        for name in names:
            m, s, d = run_once(ctx, lc, name, p)
            metrics.update(m)
            series.update(s)
            details[name] = d
            ctx.log(
                f"{name}: the cut-off side acknowledged writes for {scenario.fmt(m.get(name + '.minority.accepting_s'))} s; "
                f"lost acknowledged {scenario.fmt(m.get(name + '.minority.lost_acked'))} of "
                f"{scenario.fmt(m.get(name + '.minority.acked'))} (cut-off side), "
                f"{scenario.fmt(m.get(name + '.lost_acked'))} of {scenario.fmt(m.get(name + '.acked'))} (all)"
            )
    finally:
        lc.down()
        if started:
            r = _lab_script("down.sh", 120)
            if r.returncode != 0:
                ctx.log(f"lab-sim down.sh: {(r.stderr or r.stdout).strip()[-200:]}")
    return Record("ok", metrics=metrics, series=series, details=details)
