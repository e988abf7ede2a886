"""One cache-aside run: requests at a fixed rate (open loop) against the cluster; a GET per
request and, on a miss, a read from the store (with its pool and retry policy) and a SET with
the TTL. After `warm_s` seconds the given primaries are flushed (FLUSHALL; their replicas
follow); with no primaries given the run is the no-flush control: the same schedule and keys,
the flush point only marked. Everything is logged with its time; counting is done after.

The client is one asyncio event loop: a dispatcher starts each request as its own task at its
scheduled time, so a request that waits on the store (a full pool, a timeout, a retry) holds
no later request back. A pool of threads sharing the schedule could not hold it on 2 cores:
its threads all ended up waiting on the store while the schedule ran on (a quarter of the
requests were more than 50 ms late), and more threads only fought over the GIL. A request
whose task starts more than LATE_S after its scheduled time counts as late: that lateness is
the client's own (the loop had no CPU in time), not the system's.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from harness.experiments.cold_start.store import BoundedPool, Store, StoreLog

LATE_S = 0.05  # a request started more than this after its scheduled time counts as late


@dataclass
class RunLog:
    requests: list = field(default_factory=list)  # (time, slot, hit: bool, served: bool, store attempts)
    late: int = 0
    max_late_s: float = 0.0
    errors: int = 0  # cluster errors (the request failed)
    first_error: str = ""
    t_start: float = 0.0
    t_flush: float = 0.0
    store: StoreLog = field(default_factory=StoreLog)


@dataclass
class StoreConfig:
    """How a run reaches its store: the pool and the retry policy."""

    dsn: str
    pool_size: int
    acquire_timeout_s: float
    statement_timeout_ms: int
    query_s: float
    retries: int
    backoff_s: float


def flush_primaries(target, nodes) -> None:
    for node in nodes:
        c = target.client(node)
        try:
            c.flushall()
        finally:
            c.close()


async def _request(c, store: Store, key: int, slot: int, due: float, ttl_s: int, log: RunLog) -> None:
    t = time.monotonic()
    if t - due > LATE_S:
        log.late += 1
    log.max_late_s = max(log.max_late_s, t - due)
    name = f"cs:{{{key}}}"
    try:
        hit = await c.get(name) is not None
        served, attempts = True, 0
        if not hit:
            value, attempts = await store.read(key, slot)
            if value is None:
                served = False
            else:
                await c.set(name, value, ex=ttl_s)
        log.requests.append((t, slot, hit, served, attempts))
    except Exception as e:  # noqa: BLE001 - counted, reported with the first message
        log.errors += 1
        log.first_error = log.first_error or f"{type(e).__name__}: {e}"


async def _flush_at(target, nodes: list, at: float, log: RunLog) -> None:
    await asyncio.sleep(max(0.0, at - time.monotonic()))
    log.t_flush = time.monotonic() if nodes else at
    if nodes:
        await asyncio.to_thread(flush_primaries, target, nodes)


async def _run(
    target,
    cfg: StoreConfig,
    keys: list,
    slots: list,
    rate: int,
    warm_s: int,
    cold_s: int,
    ttl_s: int,
    flush: list,
    log: RunLog,
) -> None:
    pool = await BoundedPool(cfg.dsn, cfg.pool_size, cfg.acquire_timeout_s, cfg.statement_timeout_ms, log.store).open()
    c = target.async_cluster_client(socket_timeout=10)
    tasks: set = set()
    try:
        await c.initialize()
        store = Store(pool, cfg.query_s, cfg.retries, cfg.backoff_s)
        start = time.monotonic() + 0.2
        end = start + warm_s + cold_s
        log.t_start = start
        flusher = asyncio.create_task(_flush_at(target, flush, start + warm_s, log))
        i = 0
        while True:
            due = start + i / rate
            if due >= end:
                break
            delay = due - time.monotonic()
            # behind schedule: still yield, so that the started requests get their replies
            await asyncio.sleep(max(0.0, delay))
            task = asyncio.create_task(_request(c, store, keys[i % len(keys)], slots[i % len(keys)], due, ttl_s, log))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            i += 1
        await flusher
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await c.aclose()
        await pool.close()


def run_once(
    target, cfg: StoreConfig, keys: list, slots: list, *, rate: int, warm_s: int, cold_s: int, ttl_s: int, flush: list
) -> RunLog:
    """Start from an empty cluster, run warm_s + cold_s seconds of schedule, flush `flush`
    (a list of primary Nodes; empty for the control) at warm_s."""
    flush_primaries(target, target.primaries)
    log = RunLog()
    asyncio.run(_run(target, cfg, keys, slots, rate, warm_s, cold_s, ttl_s, flush, log))
    return log
