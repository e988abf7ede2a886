"""The local Redis Cluster on loopback: 3 primaries + 3 replicas by default.

Used by `harness cluster up|down|status`, by `harness run --target local`, by
`make reproduce` and by the test fixtures. Its state (pids, ports) lives in a state file
so that `down` works from another process; every process it started is stopped on
success, failure and Ctrl-C.

Ports are locked (`PortLock`: one flock per node port under .harness/locks, held by the
process that uses them and released by the kernel when it dies): a `harness run` holds its
cluster's ports for the whole run and `up` holds them while it starts, so a second run on
the same (or an overlapping) base port is refused up front, before anything is touched.
A start that is refused or fails stops only the processes it started (`stop_started`),
never a cluster that was already there.

The state file (state.json in the cluster's folder) records each node as pid, start time
and port (harness.infra.ownership): `down` from another process, and a run that replaces the
leftover of a killed run, signal a node only when the live process has that start time
and runs in that node's own folder. Anything else a state file names is left alone, with
one line saying so; a damaged state file is one line naming it and the fix (exit 3).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, cast

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.paths import STATE_DIR
from harness.base.signals import deferred_interrupts
from harness.infra.ownership import (
    DamagedState,
    Proc,
    boot_id,
    gone_owner,
    is_ours,
    not_ours_note,
    note,
    open_state,
    own_dir,
    split_owned,
    start_time,
    terminate,
    write_private,
)
from harness.infra.redis_server import RedisProcess, check_port_number, check_ports_free, require_tool, stop_pids
from harness.infra.target import Node, Target

JOIN_LINE = "Waiting for the cluster to join"  # redis-cli's line once the nodes were told to meet

LOCK_DIR = STATE_DIR / "locks"


class PortLock:
    """Exclusive locks on TCP ports of this machine, one flock'd file per port: the holder
    is the one harness process using them; the kernel releases them when it exits."""

    def __init__(self, host: str, ports: list[int], lock_dir: Path | None = None):
        self.host, self.ports = host, sorted(ports)
        self.lock_dir = Path(lock_dir or LOCK_DIR)
        self.fds: list[int] = []

    def _path(self, port: int) -> Path:
        return self.lock_dir / f"port-{self.host}-{port}.lock"

    def acquire(self, flag: str = "--base-port") -> "PortLock":
        """Take every port's lock or none: EnvironmentProblem (exit 3) naming the holder."""
        if self.fds:
            return self
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        for port in self.ports:
            fd = self._open(port)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                self.release()
                raise EnvironmentProblem(
                    f"port {port} on {self.host} is in use by another harness process (pid {holder}); nothing "
                    f"was started or stopped: wait until it is done, or choose other ports with {flag}"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self.fds.append(fd)
        return self

    def _open(self, port: int) -> int:
        """The port's lock file, opened without following a link or blocking on a FIFO."""
        path = self._path(port)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as e:
            self.release()
            raise EnvironmentProblem(
                f"{path}: the harness's port lock cannot be opened ({e.strerror or e}); "
                f"remove it (rm {path}) and try again"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self.release()
            raise EnvironmentProblem(
                f"{path}: the harness's port lock is not a regular file; remove it (rm {path}) and try again"
            )
        return fd

    def release(self) -> None:
        for fd in self.fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self.fds = []

    @property
    def held(self) -> bool:
        return bool(self.fds)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


class LocalCluster:
    def __init__(
        self,
        host: str = "127.0.0.1",
        base_port: int = 7000,
        primaries: int = 3,
        replicas: int = 1,
        state_dir: Path | None = None,
        node_timeout_ms: int | None = None,
    ):
        if primaries < 3:
            raise BadInput(f"a Redis Cluster needs at least 3 primaries, got {primaries}")
        if replicas < 0:
            raise BadInput(f"replicas per primary must be >= 0, got {replicas}")
        check_port_number(base_port)
        if not 1 <= base_port <= 65535 - 10000 - primaries * (replicas + 1):
            raise BadInput(f"base port {base_port} leaves no room for the nodes and their bus ports (+10000)")
        if node_timeout_ms is not None and not 100 <= node_timeout_ms <= 3_600_000:
            raise BadInput(f"cluster-node-timeout must be 100-3600000 ms, got {node_timeout_ms}")
        self.node_timeout_ms = node_timeout_ms  # None: infra/redis/cluster.conf's setting
        self.host, self.base_port = host, base_port
        self.primaries, self.replicas = primaries, replicas
        self.state_dir = Path(state_dir or STATE_DIR / f"cluster-{host}-{base_port}")
        self.processes: list[RedisProcess] = []
        self.owner_pid: int | None = None  # the `harness run` that started it (None: `cluster up`, kept)
        self.owner_start: int | None = None  # that run's start time (a pid alone may be reused)
        self.lock = PortLock(host, self.ports + [p + 10000 for p in self.ports])

    @property
    def ports(self) -> list[int]:
        return list(range(self.base_port, self.base_port + self.primaries * (1 + self.replicas)))

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    # ---- lifecycle -----------------------------------------------------------------------
    def up(self, timeout: float = 60.0, log=lambda msg: None, owner_pid: int | None = None) -> Target:
        """Start the nodes, create the cluster, wait until it is healthy. `owner_pid`: the
        process whose end makes this cluster a leftover (a `harness run`); None keeps it
        until `harness cluster down`. Every pid is in the state file before its server is
        waited for, so that a later `down` (or the next run) finds it whatever interrupts."""
        require_tool("redis-server")
        require_tool("redis-cli")
        locked_here = not self.lock.held  # a run holds the lock already; `cluster up` takes it now
        self.lock.acquire()
        try:
            self._refuse_running()
            return self._start(timeout, log, owner_pid)
        finally:
            if locked_here:
                self.lock.release()

    def _refuse_running(self) -> None:
        if not self.is_running():
            return
        problem = self.health_problem()
        state = "healthy: use it" if problem is None else f"not healthy ({problem})"
        raise EnvironmentProblem(
            f"a local cluster is already running on {self.host}:{self.base_port}, {state}; it was left as it "
            f"is: stop it with `harness cluster down --base-port {self.base_port}`, or choose other ports "
            f"with --base-port"
        )

    def _start(self, timeout: float, log, owner_pid: int | None) -> Target:
        all_ports = self.ports + [p + 10000 for p in self.ports]
        check_ports_free(self.host, all_ports, "the local Redis Cluster")
        own_dir(self.state_dir)
        self.owner_pid = owner_pid
        self.owner_start = start_time(owner_pid) if owner_pid else None
        try:
            for port in self.ports:
                log(f"starting redis-server {self.host}:{port}")
                config = {"cluster-node-timeout": self.node_timeout_ms} if self.node_timeout_ms else None
                proc = RedisProcess(self.host, port, self.state_dir / f"node-{port}", cluster=True, config=config)
                self.processes.append(proc)
                proc.start(on_spawn=lambda _p: self._write_state())
            self._create(timeout)
            log("waiting for cluster_state:ok and replica links")
            self.wait_healthy(timeout)
        except BaseException:
            self.stop_started()
            raise
        return self.target()

    def _create(self, timeout: float) -> None:
        """redis-cli --cluster create. Once it waits for the nodes to join, every node meets
        every other one at once (`_meet_all`): gossip alone took redis-cli's join wait 8 s for
        a 10 + 10 cluster and 2 s for 3 + 3; redis-cli still checks the result as before."""
        addrs = [f"{self.host}:{p}" for p in self.ports]
        cmd = ["redis-cli", "--cluster", "create", *addrs, "--cluster-replicas", str(self.replicas), "--cluster-yes"]
        deadline = time.monotonic() + timeout
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        joining = threading.Event()

        def read() -> None:
            for line in cast(IO[str], proc.stdout):  # stdout=PIPE: never None
                lines.append(line)
                if JOIN_LINE in line:
                    joining.set()

        reader = threading.Thread(target=read, name="cluster-create-output", daemon=True)
        reader.start()
        try:
            while proc.poll() is None and not joining.wait(0.05) and time.monotonic() < deadline:
                pass
            if joining.is_set():
                self._meet_all()
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise EnvironmentProblem(f"redis-cli --cluster create did not finish in {timeout:.0f} s") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(5)
        out = "".join(lines)
        write_private(self.state_dir / "cluster-create.log", out)
        if proc.returncode != 0 or "[OK] All 16384 slots covered" not in out:
            tail = " | ".join(out.strip().splitlines()[-3:])
            raise EnvironmentProblem(f"redis-cli --cluster create failed (exit {proc.returncode}): {tail}")

    def _meet_all(self) -> None:
        """CLUSTER MEET from every node to every other (a node that knows the other already
        ignores it). Only a speed-up: an error leaves the joining to gossip and redis-cli."""
        import redis

        for port in self.ports:
            c = redis.Redis(host=self.host, port=port, socket_timeout=2)
            try:
                pipe = c.pipeline(transaction=False)
                for other in self.ports:
                    if other != port:
                        pipe.execute_command("CLUSTER", "MEET", self.host, other)
                pipe.execute(raise_on_error=False)
            except redis.RedisError:
                pass
            finally:
                c.close()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        problem: str | None = "not checked"
        while time.monotonic() < deadline:
            problem = self.health_problem()
            if problem is None:
                return
            time.sleep(0.2)
        raise EnvironmentProblem(f"the local cluster did not become healthy in {timeout:.0f} s: {problem}")

    def health_problem(self) -> str | None:
        """None when every node says cluster_state:ok, there are the expected primaries with
        all slots and every replica's link to its primary is up; else what is wrong."""
        import redis

        try:
            for port in self.ports:
                c = redis.Redis(host=self.host, port=port, socket_timeout=2, decode_responses=True)
                info = c.execute_command("CLUSTER INFO")
                state = info.get("cluster_state") if isinstance(info, dict) else None
                if state is None:
                    state = dict(line.split(":", 1) for line in str(info).splitlines() if ":" in line).get(
                        "cluster_state"
                    )
                if state != "ok":
                    return f"{self.host}:{port} reports cluster_state:{state}"
            nodes = self.nodes()
            prim = [n for n in nodes if n.role == "primary"]
            reps = [n for n in nodes if n.role == "replica"]
            if len(prim) != self.primaries or len(reps) != self.primaries * self.replicas:
                return f"{len(prim)} primaries and {len(reps)} replicas, expected {self.primaries} and {self.primaries * self.replicas}"
            for n in reps:
                repl = redis.Redis(host=n.host, port=n.port, socket_timeout=2, decode_responses=True).info(
                    "replication"
                )
                if repl.get("master_link_status") != "up":
                    return f"replica {n.address} link to its primary is {repl.get('master_link_status')}"
        except redis.RedisError as e:
            return f"{type(e).__name__}: {e}"
        return None

    def nodes(self) -> list[Node]:
        """Nodes with their roles, from CLUSTER NODES of the first reachable node."""
        import redis

        last = None
        for port in self.ports:
            try:
                text = redis.Redis(host=self.host, port=port, socket_timeout=2, decode_responses=True).execute_command(
                    "CLUSTER NODES"
                )
                break
            except redis.RedisError as e:
                last = e
        else:
            raise EnvironmentProblem(f"no node of the local cluster answers ({last})")
        return parse_cluster_nodes(text)

    def target(self) -> Target:
        return Target(name="local", kind="cluster", nodes=self.nodes())

    def down(self, log=note) -> int:
        """Stop every node this cluster started, or that its state file names and that is
        provably the harness's (pid, start time, node folder); a second Ctrl-C waits until
        they are all stopped. Whatever else the state names is left alone, and `log` says so."""
        with deferred_interrupts():
            stopped, mine = self._stop_mine()
            st = self._state()
            ours, foreign, legacy = self._split(st)
            stopped += terminate([p for p in ours if p.pid not in mine], self._folder)
            if foreign:
                log(not_ours_note(self.state_file, foreign, legacy, self._fix()))
            if not (foreign and legacy):  # an older harness's state stays until the user removes it
                self.state_file.unlink(missing_ok=True)
        return stopped

    def _stop_mine(self) -> tuple[int, list[int]]:
        """Stop the nodes this object started (its own children)."""
        mine = [p.pid for p in self.processes if p.pid]
        stopped = stop_pids(mine)
        for p in self.processes:
            p.stop()
        self.processes = []
        return stopped, mine

    def stop_started(self) -> int:
        """Stop only the nodes this object started (none when its start was refused): a
        cluster that was running before is never touched. The state file goes when it
        names no other live process of the harness."""
        with deferred_interrupts():
            stopped, mine = self._stop_mine()
            try:
                others = [p for p in self._split(self._state())[0] if p.pid not in mine]
            except DamagedState:
                others = []
            if mine and not others:
                self.state_file.unlink(missing_ok=True)
        return stopped

    def leftover(self) -> str | None:
        """When the nodes running here were started by a `harness run` that is gone (killed
        with -9, say): which run; else None."""
        st = self._state()
        if not st.get("owner_pid") or not self._split(st)[0]:
            return None
        return gone_owner(st["owner_pid"], st.get("owner_start"))

    def started_by(self) -> str:
        owner = self._state().get("owner_pid")
        return f"harness run pid {owner}" if owner else "harness cluster up"

    # ---- one node (failover experiments) -------------------------------------------------
    def _process(self, port: int) -> RedisProcess:
        for p in self.processes:
            if p.port == port:
                return p
        raise BadInput(f"port {port} is not a node this cluster started ({self.ports[0]}-{self.ports[-1]})")

    def kill_node(self, port: int) -> None:
        """SIGKILL one node (no shutdown, no save): a crashed server."""
        p = self._process(port)
        if p.proc is not None and p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(timeout=5)
            if p.proc.stderr:
                p.proc.stderr.close()
        p.pid = None

    def restart_node(self, port: int, timeout: float = 10.0) -> None:
        """Start a killed node again with its own redis.conf and nodes.conf (its cluster
        identity), as a restarted server would; it answers PING when this returns."""
        p = self._process(port)
        if p.proc is not None and p.proc.poll() is None:
            raise EnvironmentProblem(f"node {self.host}:{port} is still running; kill it first")
        conf = p.folder / "redis.conf"
        if not conf.is_file():
            raise EnvironmentProblem(f"node {self.host}:{port} has no config at {conf}; it was never started")
        check_ports_free(self.host, [port, port + 10000], f"redis-server {self.host}:{port}")
        p.spawn(require_tool("redis-server"), conf, on_spawn=lambda _p: self._write_state())
        p.wait_ready(timeout)

    def is_running(self) -> bool:
        return bool(self._split(self._state())[0])

    def status(self) -> dict:
        alive = [p.pid for p in self._split(self._state())[0]]
        out = {
            "host": self.host,
            "base_port": self.base_port,
            "ports": self.ports,
            "pids_alive": alive,
            "running": bool(alive),
        }
        if alive:
            out["health"] = self.health_problem() or "ok"
        return out

    # ---- state file ----------------------------------------------------------------------
    def _write_state(self) -> None:
        write_private(
            self.state_file,
            json.dumps(
                {
                    "host": self.host,
                    "base_port": self.base_port,
                    "ports": self.ports,
                    "pids": [p.pid for p in self.processes if p.pid],
                    "procs": [p.entry().as_json() for p in self.processes if p.pid],
                    "owner_pid": self.owner_pid,
                    "owner_start": self.owner_start,
                    "boot": boot_id(),
                    "started": time.time(),
                }
            ),
        )

    def _fix(self) -> str:
        return (
            f"stop the cluster's redis-server processes yourself if any still runs (ss -ltnp 'sport = "
            f":{self.base_port}'), then remove {self.state_dir}"
        )

    def _state(self) -> dict:
        """The state file's fields the harness uses, checked; {} when there is none.
        DamagedState (one line, exit 3) when it cannot be used."""
        f = open_state(self.state_file, "redis-server of this cluster")
        if f is None:
            return {}
        return {
            **f.owned_procs(),
            "host": f.text("host", 300),
            "base_port": f.integer("base_port", 1, 65535),
            "started": f.number("started"),
        }

    def _folder(self, p: Proc) -> Path:
        return self.state_dir / f"node-{p.port}"

    def _split(self, st: dict) -> tuple[list[Proc], list[int], bool]:
        """(the live nodes that are provably this cluster's, the live pids that are not,
        whether those have no start time: an older harness's state)."""
        return split_owned(st, "procs", lambda p: p.port in self.ports and is_ours(p, self._folder(p)))

    def __enter__(self):
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()


def parse_cluster_nodes(text) -> list[Node]:
    """Parse CLUSTER NODES output: `<id> <ip:port@cport> <flags> <master> ...` per line.
    Also takes redis-py's parsed form ({"ip:port@cport": {"flags": ...}})."""
    if isinstance(text, dict):
        entries = [(addr, str(v.get("flags", ""))) for addr, v in text.items()]
    else:
        entries = [(p[1], p[2]) for p in (line.split() for line in text.strip().splitlines()) if len(p) >= 8]
    nodes = []
    for addr_full, flag_text in entries:
        addr = addr_full.split("@")[0]
        host, _, port = addr.rpartition(":")
        flags = flag_text.split(",")
        if "fail" in flags or "noaddr" in flags:
            continue
        role = "primary" if "master" in flags else "replica" if "slave" in flags else None
        nodes.append(Node(host, int(port), role))
    return sorted(nodes, key=lambda n: (n.role != "primary", n.port))


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def slot_owners(target) -> dict[int, tuple]:
    """slot -> (primary Node, [replica Nodes]): primaries from CLUSTER SLOTS, replicas from
    each replica's ROLE (CLUSTER SLOTS leaves out replicas it has not yet seen synced)."""
    by_addr = {(n.host, n.port): n for n in target.nodes}
    replicas_of: dict[tuple, list] = {}
    for n in target.nodes:
        c = target.client(n)
        try:
            role = c.execute_command("ROLE")
        finally:
            c.close()
        if _text(role[0]) == "slave":
            replicas_of.setdefault((_text(role[1]), int(role[2])), []).append(n)
    c = target.client(target.entry)
    try:
        ranges = c.execute_command("CLUSTER", "SLOTS")
    finally:
        c.close()
    out: dict[int, tuple] = {}
    for start, end, primary, *_ in ranges:
        addr = (_text(primary[0]), int(primary[1]))
        entry = (by_addr.get(addr), replicas_of.get(addr, []))
        for slot in range(int(start), int(end) + 1):
            out[slot] = entry
    return out
