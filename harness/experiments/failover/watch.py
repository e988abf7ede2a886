"""Watches the nodes' own views (CLUSTER NODES of each node, every `interval` s) and logs
when the failed node turns PFAIL and FAIL in another node's view, when its replica calls
itself primary, and every role change a node reports about itself."""

from __future__ import annotations

import threading
import time

import redis

from harness.experiments.failover.client import plain_client


def parse_nodes(reply) -> list[tuple[str, str, set, str]]:
    """(id, ip:port, flags, primary id or '-') per line of CLUSTER NODES (text or redis-py's dict)."""
    if isinstance(reply, dict):
        return [
            (
                v.get("node_id", ""),
                addr.split("@")[0],
                set(str(v.get("flags", "")).split(",")),
                v.get("master_id") or "-",
            )
            for addr, v in reply.items()
        ]
    out = []
    for line in str(reply).strip().splitlines():
        p = line.split()
        if len(p) >= 4:
            out.append((p[0], p[1].split("@")[0], set(p[2].split(",")), p[3]))
    return out


def node_id(host: str, port: int, password: str | None = None) -> str:
    c = redis.Redis(host=host, port=port, password=password, socket_timeout=2, decode_responses=True)
    try:
        return str(c.execute_command("CLUSTER", "MYID"))
    finally:
        c.close()


class Watcher(threading.Thread):
    def __init__(
        self,
        addrs: list[tuple[str, int]],
        victim_id: str,
        victim_replicas: set[str],
        interval: float = 0.05,
        password: str | None = None,
    ):
        super().__init__(daemon=True)
        self.addrs, self.victim_id, self.victim_replicas = addrs, victim_id, set(victim_replicas)
        self.interval, self.password = interval, password
        self.stop_event = threading.Event()
        self.first: dict[str, float] = {}  # pfail / fail / promoted -> monotonic time
        self.roles: dict[str, str] = {}  # address -> its own role
        self.events: list[tuple[float, str, str]] = []  # (monotonic time, address, event)
        self.polls = 0

    def run(self) -> None:

        conns = {a: plain_client(a[0], a[1], 0.2, self.password) for a in self.addrs}
        try:
            skip_until: dict = {}
            while not self.stop_event.is_set():
                for addr, c in conns.items():
                    if skip_until.get(addr, 0) > time.monotonic():
                        continue  # a dead node is tried again once a second, not every poll
                    try:
                        rows = parse_nodes(c.execute_command("CLUSTER NODES"))
                    except redis.RedisError:
                        skip_until[addr] = time.monotonic() + 1.0
                        continue
                    self.observe(f"{addr[0]}:{addr[1]}", rows, time.monotonic())
                self.polls += 1
                self.stop_event.wait(self.interval)
        finally:
            for c in conns.values():
                c.close()

    def observe(self, observer: str, rows, now: float) -> None:
        for nid, addr, flags, _primary in rows:
            if "myself" in flags:
                role = "primary" if "master" in flags else "replica" if "slave" in flags else "?"
                if self.roles.get(addr) != role:
                    if addr in self.roles:
                        self.events.append((now, addr, f"now {role}"))
                    self.roles[addr] = role
                if role == "primary" and addr in self.victim_replicas:
                    self._mark("promoted", now, addr)
            elif nid == self.victim_id:
                if "fail?" in flags:
                    self._mark("pfail", now, observer)
                if "fail" in flags:
                    self._mark("fail", now, observer)

    def _mark(self, what: str, now: float, who: str) -> None:
        if what not in self.first:
            self.first[what] = now
            self.events.append((now, who, what))

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)
