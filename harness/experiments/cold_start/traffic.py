"""One cache-aside run: requests at a fixed rate (open loop) against the cluster; a GET per
request and, on a miss, a read from the store (with its pool and retry policy) and a SET with
the TTL. After `warm_s` seconds the given primaries are flushed (FLUSHALL; their replicas
follow); with no primaries given the run is the no-flush control: the same schedule and keys,
the flush point only marked. Everything is logged with its time; counting is done after."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from harness.experiments.cold_start.store import Store, StoreLog

LATE_S = 0.05  # a request sent more than this after its scheduled time counts as late


@dataclass
class RunLog:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list = field(default_factory=list)  # (time, slot, hit: bool, served: bool, store attempts)
    late: int = 0
    errors: int = 0  # cluster errors (the request failed)
    first_error: str = ""
    t_start: float = 0.0
    t_flush: float = 0.0
    store: StoreLog = field(default_factory=StoreLog)


def flush_primaries(target, nodes) -> None:
    for node in nodes:
        c = target.client(node)
        try:
            c.flushall()
        finally:
            c.close()


def _worker(target, store: Store, keys: list, slots: list, start: float, rate: int, end: float,
            ttl_s: int, counter, log: RunLog) -> None:
    c = target.cluster_client()
    reqs, late, errors = [], 0, 0
    try:
        while True:
            i = next(counter)
            due = start + i / rate
            if due >= end:
                break
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            elif now - due > LATE_S:
                late += 1
            key, slot = keys[i % len(keys)], slots[i % len(keys)]
            t = time.monotonic()
            try:
                hit = c.get(f"cs:{{{key}}}") is not None
                served, attempts = True, 0
                if not hit:
                    value, attempts = store.read(key, slot)
                    if value is None:
                        served = False
                    else:
                        c.set(f"cs:{{{key}}}", value, ex=ttl_s)
                reqs.append((t, slot, hit, served, attempts))
            except Exception as e:  # noqa: BLE001 - counted, reported with the first message
                errors += 1
                log.first_error = log.first_error or f"{type(e).__name__}: {e}"
    finally:
        c.close()
        with log.lock:
            log.requests += reqs
            log.late += late
            log.errors += errors


def run_once(target, store: Store, keys: list, slots: list, *, rate: int, warm_s: int, cold_s: int,
             ttl_s: int, threads: int, flush: list, log: RunLog) -> RunLog:
    """Start from an empty cluster, run warm_s + cold_s seconds of schedule, flush `flush`
    (a list of primary Nodes; empty for the control) at warm_s."""
    flush_primaries(target, target.primaries)
    counter = itertools.count()
    start = time.monotonic() + 0.2
    end = start + warm_s + cold_s
    log.t_start = start
    workers = [threading.Thread(target=_worker, args=(target, store, keys, slots, start, rate, end, ttl_s,
                                                       counter, log), daemon=True)
               for _ in range(threads)]
    for w in workers:
        w.start()
    t_flush = start + warm_s
    time.sleep(max(0.0, t_flush - time.monotonic()))
    log.t_flush = time.monotonic() if flush else t_flush
    if flush:
        flush_primaries(target, flush)
    for w in workers:
        w.join()
    return log
