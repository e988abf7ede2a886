"""The workload's client: a small slot-routing Redis Cluster client, fixed-rate writers
and readers that log every request with its time.

The router keeps the slot map from CLUSTER SLOTS, sends each command to the slot's owner,
follows MOVED once, and refreshes the map (at most every `refresh_s`) after a connection
error, a timeout or CLUSTERDOWN, as cluster clients do. It never retries a failed write:
every attempt is logged as it ended, so the history shows the outage as the client saw it.
"""

from __future__ import annotations

import threading
import time
from typing import cast

import redis
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from harness.experiments.failover.lost_writes import Write


def plain_client(host: str, port: int, timeout: float, password: str | None = None) -> redis.Redis:
    """A connection that never retries on its own (redis-py retries 3 times with backoff by
    default, which would hide the outage): every failure reaches the history."""
    return redis.Redis(
        host=host,
        port=port,
        password=password,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=True,
        retry=Retry(NoBackoff(), 0),
    )


def error_kind(e: Exception) -> str:
    text = str(e)
    if isinstance(e, redis.TimeoutError):
        return "timeout"
    if isinstance(e, redis.ConnectionError):
        return "refused"
    for tag in ("CLUSTERDOWN", "NOREPLICAS", "MOVED", "TRYAGAIN", "LOADING", "READONLY", "MASTERDOWN"):
        if tag in text or tag.lower() in type(e).__name__.lower():
            return tag.lower()
    return "other"


class Router:
    def __init__(
        self, seeds: list[tuple[str, int]], timeout: float = 0.25, password: str | None = None, refresh_s: float = 0.1
    ):
        self.seeds = list(seeds)
        self.timeout, self.password, self.refresh_s = timeout, password, refresh_s
        self.conns: dict[tuple[str, int], redis.Redis] = {}
        self.slots: list[tuple[str, int] | None] = [None] * 16384
        self.last_refresh = 0.0
        self.refresh(force=True)

    def conn(self, addr: tuple[str, int]) -> redis.Redis:
        c = self.conns.get(addr)
        if c is None:
            c = plain_client(addr[0], addr[1], self.timeout, self.password)
            self.conns[addr] = c
        return c

    def refresh(self, force: bool = False) -> bool:
        now = time.monotonic()
        if not force and now - self.last_refresh < self.refresh_s:
            return False
        self.last_refresh = now
        known = list(dict.fromkeys([a for a in self.slots if a] + self.seeds))
        for addr in known:
            try:
                ranges = self.conn(addr).execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            for start, end, primary, *_ in ranges:
                owner = (primary[0], int(primary[1]))
                for s in range(int(start), int(end) + 1):
                    self.slots[s] = owner
            return True
        return False

    def execute(self, key: str, *args, then: tuple | None = None):
        """Run `args` (and `then` right after, on the same node) for `key`'s slot; one MOVED
        is followed. Returns (first answer, second answer or None); raises on failure."""
        slot = key_slot(key.encode())
        for attempt in range(2):
            addr = self.slots[slot] or self.seeds[0]
            c = self.conn(addr)
            try:
                first = c.execute_command(*args)
                second = c.execute_command(*then) if then else None
                return first, second
            except redis.exceptions.MovedError as e:
                self.slots[slot] = (e.host, int(e.port))
                if attempt:
                    raise
            except (redis.ConnectionError, redis.TimeoutError):
                self.refresh()
                raise
            except redis.ResponseError as e:
                if "CLUSTERDOWN" in str(e) or "TRYAGAIN" in str(e):
                    self.refresh()
                raise
        raise RuntimeError("unreachable")

    def close(self) -> None:
        for c in self.conns.values():
            try:
                c.close()
            except redis.RedisError:
                pass
        self.conns.clear()


class History:
    """Thread-safe logs of one run: writes, reads, the latest acknowledged key per writer."""

    def __init__(self):
        self.lock = threading.Lock()
        self.writes: list[Write] = []
        self.reads: list[tuple[float, str, str]] = []  # (time, group, "hit" | "missing" | error kind)
        self.latest: dict[str, str] = {}  # writer -> latest acknowledged key
        self.late = 0


def paced(rate: float, start: float, end: float, stop: threading.Event | None = None):
    """An open-loop schedule: yields (i, late) when request i is due at start + i / rate,
    sleeping until then; a request already due is yielded at once, late when more than
    50 ms behind. Ends at `end` or when `stop` is set."""
    i = 0
    while stop is None or not stop.is_set():
        due = start + i / rate
        if due >= end:
            return
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        yield i, now - due > 0.05
        i += 1


def writer(
    router_factory,
    name: str,
    prefix: str,
    rate: float,
    start: float,
    end: float,
    hist: History,
    group_of,
    wait_replicas: int = 0,
    wait_ms: int = 0,
    keys: list[str] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Open loop: write i is due at start + i / rate; a late one is sent at once and counted.
    Each write is a unique key and value (`prefix:name:seq`), or the next of `keys` (cycled,
    for a writer confined to one slot range); with wait_replicas, SET is followed by
    WAIT wait_replicas wait_ms on the same connection."""
    router = router_factory()
    log, late, latest = [], 0, None
    try:
        for i, was_late in paced(rate, start, end, stop):
            late += was_late
            key = f"{prefix}:{name}:{i}" if keys is None else f"{keys[i % len(keys)]}:{i}"
            value = f"{name}:{i}"
            then = ("WAIT", wait_replicas, wait_ms) if wait_replicas else None
            t = time.monotonic()
            try:
                _, reps = router.execute(key, "SET", key, value, then=then)
                w = Write(
                    name,
                    i,
                    key,
                    value,
                    t,
                    time.monotonic(),
                    True,
                    int(reps) if reps is not None else None,
                    "",
                    group_of(key),
                )
            except (redis.RedisError, OSError) as e:
                w = Write(name, i, key, value, t, time.monotonic(), False, None, error_kind(e), group_of(key))
            log.append(w)
            if w.acknowledged(wait_replicas):
                latest = key
                with hist.lock:
                    hist.latest[name] = key
    finally:
        router.close()
        with hist.lock:
            hist.writes += log
            hist.late += late
            if latest:
                hist.latest[name] = latest


def reader(
    router_factory, rate: float, start: float, end: float, hist: History, group_of, stop: threading.Event | None = None
) -> None:
    """Reads, at a fixed rate, the key each writer acknowledged last (round robin over the
    writers): a hit, a missing key (acknowledged but not there) or an error."""
    router = router_factory()
    log = []
    try:
        for i, _ in paced(rate, start, end, stop):
            with hist.lock:
                keys = sorted(hist.latest.values())
            if not keys:
                continue
            key = keys[(i + 1) % len(keys)]
            t = time.monotonic()
            try:
                v, _ = router.execute(key, "GET", key)
                log.append((t, group_of(key), "hit" if v is not None else "missing"))
            except (redis.RedisError, OSError) as e:
                log.append((t, group_of(key), error_kind(e)))
    finally:
        router.close()
        with hist.lock:
            hist.reads += log


def read_back(router: Router, keys: list[str], batch: int = 500) -> dict[str, str | None]:
    """Every key's value from its slot's owner, in pipelines per node."""
    by_node: dict[tuple[str, int], list[str]] = {}
    router.refresh(force=True)
    for k in keys:
        # a slot no node owns fails in router.conn() below, as it always did
        by_node.setdefault(cast(tuple[str, int], router.slots[key_slot(k.encode())]), []).append(k)
    out: dict[str, str | None] = {}
    for addr, ks in by_node.items():
        c = router.conn(addr)
        for i in range(0, len(ks), batch):
            part = ks[i : i + batch]
            pipe = c.pipeline(transaction=False)
            for k in part:
                pipe.get(k)
            for k, v in zip(part, pipe.execute()):
                out[k] = v
    return out


def views_agree(addrs, timeout: float) -> bool:
    """Every node at `addrs` ((host, port) pairs) answers CLUSTER SLOTS with the same slot ->
    primary map; False when one does not answer."""
    seen = set()
    for host, port in addrs:
        c = plain_client(host, port, timeout)
        try:
            slots = c.execute_command("CLUSTER", "SLOTS")
        except redis.RedisError:
            return False
        finally:
            c.close()
        seen.add(tuple(sorted((int(s), int(e), str(p[0]), int(p[1])) for s, e, p, *_ in slots)))
    return len(seen) == 1
