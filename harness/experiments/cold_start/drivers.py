"""A cold cache node's load on the backing store (source section 2.3, claims C8 and C9).

Cache-aside on the real cluster: requests arrive at a fixed rate (open loop, paced by
threads); each GETs its key from the cluster and, on a miss, reads the value from a real
backing store (an SQLite file) and SETs it with a TTL. The key stream is the real token
traffic of the eviction experiment (MiniLM tokens of the shipped GPTCache texts; the key is
the token id), so popularity is long-tailed as in the source's setting.

After `warm_seconds` from an empty cluster, one primary is flushed (FLUSHALL; its replica
follows): that node is cold while the others stay warm. Store reads are counted per
second, for the whole cluster and for the keys the cold node owns, from `warm_seconds`
before the flush to `cold_seconds` after it. The source claims the cold node's store load
grows 1.8x per second for 8 s (100, 180, ..., 6124 QPS); the harness reports the measured
series and its growth factor per second.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput

PARAMS = {
    "rate": Param(int, 800, "requests per second offered (open loop)"),
    "threads": Param(int, 4, "client threads sharing the schedule"),
    "warm_seconds": Param(float, 4.0, "from an empty cluster to the flush"),
    "cold_seconds": Param(float, 8.0, "measured after the flush (the source's series is 8 s)"),
    "cold_primary": Param(int, 0, "which primary (0-based, by port) is flushed"),
    "ttl_s": Param(int, 300, "TTL of a cached value (the source's L2 TTL)"),
    "value_bytes": Param(int, 256, "bytes per value in the backing store"),
    "seed": Param(int, 20261129, "seed of the key stream's text order (repetition r uses seed + r - 1)"),
}

# The source's series for the cold node, QPS to the backing store in seconds 1..8 (C8).
CLAIMED = (100, 180, 324, 583, 1050, 1890, 3402, 6124)


def _check(where: str, p: dict) -> None:
    for name in ("rate", "threads", "value_bytes", "ttl_s"):
        if p[name] < 1:
            raise BadInput(f"{where}.{name}: must be at least 1, got {p[name]}")
    for name in ("warm_seconds", "cold_seconds"):
        if p[name] < 1:
            raise BadInput(f"{where}.{name}: must be at least 1 s (the series is counted per second), got {p[name]}")
    if p["cold_primary"] < 0:
        raise BadInput(f"{where}.cold_primary: must be 0 or more, got {p['cold_primary']}")


# ---- pure -----------------------------------------------------------------------------
def per_second(times: list[float], t_flush: float, before: int, after: int) -> list[int]:
    """Counts per whole second, from `before` seconds before the flush to `after` seconds
    after it: index 0 is [-before, -before+1), index `before` is [0, 1) after the flush."""
    out = [0] * (before + after)
    for t in times:
        k = math.floor(t - t_flush) + before
        if 0 <= k < len(out):
            out[k] += 1
    return out


def growth_per_second(series: list[float]) -> float | None:
    """Geometric mean of the second-to-second ratios: (last / first) ^ (1 / (n - 1)).
    The source's 100, 180, ..., 6124 gives 1.8. None when the first value is 0 or n < 2."""
    if len(series) < 2 or series[0] <= 0:
        return None
    if series[-1] <= 0:
        return 0.0
    return (series[-1] / series[0]) ** (1 / (len(series) - 1))


# ---- the run ----------------------------------------------------------------------------
def _make_store(path, ids, value_bytes: int) -> None:
    import hashlib

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE kv (id INTEGER PRIMARY KEY, value BLOB NOT NULL)")
    rows = []
    for i in sorted(set(int(x) for x in ids)):
        seed = hashlib.sha256(str(i).encode()).digest()
        rows.append((i, (seed * (value_bytes // len(seed) + 1))[:value_bytes]))
    con.executemany("INSERT INTO kv VALUES (?, ?)", rows)
    con.commit()
    con.close()


class Log:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests: list[float] = []
        self.store: list[tuple[float, int]] = []  # (time, slot)
        self.late = 0
        self.errors = 0
        self.first_error = ""


def _client_thread(target, store_path, keys, slots, start: float, rate: int, k0: int, step: int,
                   end: float, ttl: int, log: Log) -> None:
    c = target.cluster_client()
    con = sqlite3.connect(store_path, check_same_thread=False)
    reqs, store, late, errors = [], [], 0, 0
    try:
        i = k0
        while True:
            due = start + i / rate
            if due >= end:
                break
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            elif now - due > 0.05:
                late += 1
            key = keys[i % len(keys)]
            t = time.monotonic()
            try:
                if c.get(f"cs:{{{key}}}") is None:
                    value = con.execute("SELECT value FROM kv WHERE id = ?", (key,)).fetchone()[0]
                    store.append((t, slots[i % len(keys)]))
                    c.set(f"cs:{{{key}}}", value, ex=ttl)
                reqs.append(t)
            except Exception as e:  # noqa: BLE001 - counted, reported with the first message
                errors += 1
                log.first_error = log.first_error or f"{type(e).__name__}: {e}"
            i += step
    finally:
        con.close()
        c.close()
        with log.lock:
            log.requests += reqs
            log.store += store
            log.late += late
            log.errors += errors


def _flushall(target, node) -> None:
    c = target.client(node)
    try:
        c.flushall()
    finally:
        c.close()


@register("cold-start-flush", params=PARAMS, needs="cluster", check=_check,
          description="one primary flushed under steady cache-aside traffic: backing-store reads per second")
def run(ctx: CaseContext) -> CaseOutcome:
    from redis.crc import key_slot

    from harness.cluster import slot_owners
    from harness.experiments.eviction.traces import real_trace

    p = ctx.params
    tgt = ctx.target
    primaries = sorted(tgt.primaries, key=lambda n: (n.host, n.port))
    if p["cold_primary"] >= len(primaries):
        raise BadInput(f"cold_primary: {p['cold_primary']} but the target has {len(primaries)} primaries "
                       f"(0 to {len(primaries) - 1})")
    cold = primaries[p["cold_primary"]]
    total_s = p["warm_seconds"] + p["cold_seconds"]
    n = int(p["rate"] * total_s) + 1
    # the misses depend on the key order, not on timing: each repetition takes its own text order
    seed = p["seed"] + ctx.repetition - 1
    trace = real_trace(n, seed)
    keys = [int(x) for x in trace.ids]
    slots = [key_slot(f"cs:{{{k}}}".encode()) for k in keys]
    store_path = ctx.raw_path("store.sqlite")
    store_path.unlink(missing_ok=True)
    _make_store(store_path, keys, p["value_bytes"])
    for node in primaries:
        _flushall(tgt, node)
    cold_slots = {slot for slot, (owner, _) in slot_owners(tgt).items()
                  if owner is not None and owner.address == cold.address}
    ctx.log(f"{n} requests at {p['rate']}/s over {total_s:g} s, {trace.n_distinct} distinct keys; "
            f"flushing {cold.address} ({len(cold_slots)} slots) after {p['warm_seconds']:g} s")

    log = Log()
    start = time.monotonic() + 0.2
    end = start + total_s
    threads = [threading.Thread(target=_client_thread, args=(tgt, str(store_path), keys, slots, start, p["rate"],
                                                             k, p["threads"], end, p["ttl_s"], log))
               for k in range(p["threads"])]
    for t in threads:
        t.start()
    t_flush = start + p["warm_seconds"]
    time.sleep(max(0.0, t_flush - time.monotonic()))
    t_flush = time.monotonic()
    _flushall(tgt, cold)
    for t in threads:
        t.join()
    if log.errors and not log.requests:
        return CaseOutcome("failed", f"every request failed; first error: {log.first_error}")

    before, after = int(p["warm_seconds"]), int(p["cold_seconds"])
    req_s = per_second(log.requests, t_flush, before, after)
    store_all = per_second([t for t, _ in log.store], t_flush, before, after)
    store_cold = per_second([t for t, s in log.store if s in cold_slots], t_flush, before, after)
    seconds = list(range(-before, after))
    after_cold = store_cold[before:]
    peak = max(after_cold)
    growth = growth_per_second(after_cold)
    hit = [100.0 * (1 - s / r) if r else None for s, r in zip(store_all, req_s)]
    m = {
        "offered_rps": Metric(len(log.requests) / total_s, "req/s", "higher"),
        "late_pct": Metric(100.0 * log.late / max(1, len(log.requests) + log.errors), "%", "lower",
                           "requests sent more than 50 ms after their scheduled time"),
        "errors": Metric(log.errors, "requests", "lower"),
        "store_qps.before": Metric(store_all[before - 1], "reads/s", note="the whole cluster, the second before the flush"),
        "cold_node.store_qps.before": Metric(store_cold[before - 1], "reads/s"),
        "cold_node.store_qps.first_s": Metric(after_cold[0], "reads/s"),
        "cold_node.store_qps.peak": Metric(peak, "reads/s"),
        "cold_node.peak_second": Metric(after_cold.index(peak) + 1, "s", note="1 = the first second after the flush"),
        "cold_node.store_qps.last_s": Metric(after_cold[-1], "reads/s"),
        "cold_node.growth_per_s": Metric(growth, "x/s", note="(last second / first second) ^ (1 / (seconds - 1))"),
        "cold_node.amplification": Metric(after_cold[0] / store_cold[before - 1] if store_cold[before - 1] else None,
                                          "x", note="first second after the flush over the second before it"),
        "hit_rate.before_pct": Metric(hit[before - 1], "%"),
        "hit_rate.first_s_pct": Metric(hit[before], "%"),
    }
    if log.errors:
        ctx.log(f"{log.errors} requests failed; first error: {log.first_error}")
    ctx.log(f"cold node store reads/s around the flush: {store_cold}; growth {growth if growth is None else round(growth, 3)}x/s")
    rows = [[s, req_s[i], store_all[i], store_cold[i], f"{hit[i]:.1f}" if hit[i] is not None else "-",
             CLAIMED[s] if 0 <= s < len(CLAIMED) else "-"] for i, s in enumerate(seconds)]
    details = {
        "tables": [{"title": "Backing-store reads per second around the flush (second 0 starts at the flush)",
                    "note": f"cold node {cold.address}; the claimed column is the source's series (100 x 1.8^t, "
                            f"though 1.8^6 and 1.8^7 give 3401 and 6122). {trace.n_distinct} distinct keys, "
                            f"rate {p['rate']}/s, {p['threads']} threads, TTL {p['ttl_s']} s, seed {seed}.",
                    "columns": ["second", "requests", "store reads (all)", "store reads (cold node)", "hit rate %",
                                "claimed cold-start-flush QPS"],
                    "rows": rows}],
        "charts": [{"title": "Backing-store reads per second (flush at 0)", "x_label": "seconds since the flush",
                    "y_label": "reads/s", "kind": "line",
                    "series": [{"name": "cold node", "points": [[s, v] for s, v in zip(seconds, store_cold)]},
                               {"name": "whole cluster", "points": [[s, v] for s, v in zip(seconds, store_all)]}]}],
        "trace": {"digest": trace.digest(), **trace.meta},
    }
    store_path.unlink(missing_ok=True)  # rebuilt from the trace; not a result
    return CaseOutcome("ok", metrics=m, details=details)
