"""A cold cache node's load on the backing store (source section 2.3, claims C8 and C9).

Cache-aside on a real Redis Cluster in front of a real PostgreSQL server (traffic.py, store.py,
postgres.py): requests arrive at a fixed rate (open loop); each GETs its key and, on a miss,
reads the value from PostgreSQL through a bounded connection pool, with a retry policy on
store timeouts, and SETs it with a TTL. The key stream is the real token traffic of the
eviction experiment (MiniLM tokens of the shipped GPTCache texts; key = token id).

The cache warms from empty until its hit rate is steady (counting.steady_second, with a cap),
then primaries are flushed. Each repetition runs, interleaved and in rotating order, with the
same seed and schedule:
- `flush`: the flush with the retry policy on (the measurement);
- `control`: no flush (the flush point only marked), retry policy on;
- `no-retry` (cold-start-flush only): the flush with the retry policy off.
The drivers report per-second series of every run and metrics of flush minus control.
"""

from __future__ import annotations

from harness.base.errors import BadInput
from harness.base.paths import STATE_DIR
from harness.experiments.cold_start import counting, metrics
from harness.experiments.cold_start.postgres import PostgresServer
from harness.experiments.cold_start.series import EXCESS, FLUSH_SECONDS, POOL_SECONDS, POOL_SWEEP
from harness.experiments.cold_start.store import load_table
from harness.experiments.cold_start.traffic import RunLog, StoreConfig, run_once
from harness.infra.cluster import LocalCluster, parse_cluster_nodes, slot_owners
from harness.mechanisms.cache_policies.traces import real_trace
from harness.model.driver_contract import CaseContext, Metric, Param, Record, Series, register

COMMON = {
    "warm_min_s": Param(int, 3, "shortest warm-up before the flush (s)", min=1),
    "warm_max_s": Param(int, 20, "the warm-up cap (s): flush then even if the hit rate is not steady", min=1),
    "steady_window_s": Param(int, 3, "steady = the hit rates of this many consecutive seconds ...", min=2),
    "steady_tol_pp": Param(float, 2.0, "... lie within this many percentage points of each other", min=0),
    "cold_seconds": Param(int, 8, "measured after the flush (s)", min=1),
    "ttl_s": Param(int, 300, "TTL of a cached value (the source's L2 TTL)", min=1),
    "value_bytes": Param(int, 256, "bytes per value in the store", min=1),
    "pool_size": Param(int, 4, "connections in the store's bounded pool", min=1, max=90),
    "acquire_timeout_ms": Param(float, 20.0, "wait for a free pool connection; then the read is refused", min=0),
    "statement_timeout_ms": Param(int, 50, "PostgreSQL statement_timeout of each query", min=1),
    "query_ms": Param(float, 20.0, "service time of one store query (pg_sleep in the SELECT)", min=0),
    "retries": Param(int, 2, "retry policy: further attempts after a store timeout (0 = off)", min=0, max=20),
    "backoff_ms": Param(float, 10.0, "retry policy: wait before each further attempt", min=0),
    "pg_port": Param(int, 5433, "the PostgreSQL server's port on 127.0.0.1", min=1024, max=65535),
    "flush": Param(bool, True, "false: the measured runs skip the flush too (the mechanism removed; for tests)"),
    "seed": Param(int, 20261129, "seed of the key stream's text order (repetition r uses seed + r - 1)"),
}

FLUSH_PARAMS = {
    "rate": Param(int, 600, "requests per second offered (open loop)", min=1),
    "cold_primary": Param(int, 0, "which primary (0-based, by port) is flushed", min=0),
    **COMMON,
}

POOL_PARAMS = {
    "primaries": Param(list, [3, 6, 10], "cluster sizes (primaries), each started on loopback", min=3, max=50),
    "replicas": Param(int, 1, "replicas per primary", min=0, max=2),
    "rate_per_primary": Param(int, 100, "requests per second offered per primary (open loop)", min=1),
    "cold_fraction": Param(float, 0.5, "share of the primaries flushed together (rounded up)", min=0.01, max=1),
    "port_offset": Param(int, 20, "the clusters' base port: the target's lowest port + this", min=1),
    "sizes_per_repetition": Param(
        str,
        "all",
        "all: every size in each repetition; one: repetition r measures "
        "the r-th size (cycling); alternate: odd repetitions measure the 1st, "
        "3rd, ... size, even ones the 2nd, 4th, ... (every size in 2 "
        "repetitions); one and alternate fit a small machine",
        choices=("all", "one", "alternate"),
    ),
    "pool_sweep": Param(
        list,
        [],
        "further pool sizes (connections) for the flush at sweep_primaries: the "
        "source gives no pool size, so the occupancy's level is shown against it",
        min=1,
        max=90,
    ),
    "sweep_primaries": Param(int, 10, "the cluster size at which pool_sweep runs", min=3, max=50),
    **COMMON,
}


def _check(where: str, p: dict) -> None:
    if p["warm_min_s"] > p["warm_max_s"]:
        raise BadInput(
            f"{where}.warm_min_s: {p['warm_min_s']} is above warm_max_s {p['warm_max_s']}; lower it or raise the cap"
        )
    if p["steady_window_s"] > p["warm_max_s"]:
        raise BadInput(
            f"{where}.steady_window_s: {p['steady_window_s']} s does not fit in warm_max_s "
            f"{p['warm_max_s']} s; raise the cap"
        )
    if p["ttl_s"] < p["warm_max_s"] + p["cold_seconds"]:
        raise BadInput(
            f"{where}.ttl_s: {p['ttl_s']} s expires keys during the run "
            f"(warm_max_s + cold_seconds = {p['warm_max_s'] + p['cold_seconds']} s); raise it"
        )


def _check_pool(where: str, p: dict) -> None:
    _check(where, p)
    if not p["primaries"] or any(isinstance(n, bool) or not isinstance(n, int) for n in p["primaries"]):
        raise BadInput(f"{where}.primaries: give a list of whole numbers of primaries, e.g. [3, 6, 10]")
    if any(isinstance(k, bool) or not isinstance(k, int) for k in p["pool_sweep"]):
        raise BadInput(f"{where}.pool_sweep: give a list of whole numbers of connections, e.g. [2, 4, 6]")
    if p["pool_sweep"] and p["sweep_primaries"] not in p["primaries"]:
        raise BadInput(
            f"{where}.sweep_primaries: {p['sweep_primaries']} is not one of primaries "
            f"{p['primaries']}; name a size that runs"
        )


# ---- shared -------------------------------------------------------------------------------
def plan(p: dict, rate: int, seed: int):
    """The key stream and the warm-up: (keys, hit rates per second, warm seconds, steady)."""

    n = rate * (p["warm_max_s"] + p["cold_seconds"]) + rate
    trace = real_trace(n, seed)
    keys = [int(x) for x in trace.ids]
    rates = counting.predicted_hit_rates(keys, rate, p["ttl_s"])
    warm, steady = counting.steady_second(
        rates, p["steady_window_s"], p["steady_tol_pp"], p["warm_min_s"], p["warm_max_s"]
    )
    return trace, keys, rates, warm, steady


def one_run(tgt, dsn: str, p: dict, keys, slots, rate: int, warm: int, flush: list, retries: int) -> RunLog:
    cfg = StoreConfig(
        dsn,
        p["pool_size"],
        p["acquire_timeout_ms"] / 1000,
        p["statement_timeout_ms"],
        p["query_ms"] / 1000,
        retries,
        p["backoff_ms"] / 1000,
    )
    return run_once(
        tgt, cfg, keys, slots, rate=rate, warm_s=warm, cold_s=p["cold_seconds"], ttl_s=p["ttl_s"], flush=flush
    )


def seconds_of(log: RunLog, cold_slots: set, before: int, after: int, pool_size: int) -> dict[str, list]:
    """Per-second columns of one run (second 0 starts at the flush)."""
    tf = log.t_flush
    st = log.store

    def count(items, cond=lambda s: True):
        return counting.per_second([t for t, s in items if cond(s)], tf, before, after)

    def cold(s):
        return s in cold_slots

    hits = counting.per_second([r[0] for r in log.requests if r[2]], tf, before, after)
    n = counting.per_second([r[0] for r in log.requests], tf, before, after)
    cold_miss = [r for r in log.requests if not r[2] and r[1] in cold_slots]
    return {
        "requests": n,
        "hit_rate_pct": [100.0 * h / r if r else None for h, r in zip(hits, n)],
        "store_queries": count(st.queries),
        "cold_misses": counting.per_second([r[0] for r in cold_miss], tf, before, after),
        # store attempts of those misses, counted at the request's time (retries included)
        "cold_attempts": counting.weighted_per_second([(r[0], r[4]) for r in cold_miss], tf, before, after),
        "cold_store_queries": count(st.queries, cold),
        "cold_refused": count(st.refused, cold),
        "refused": count(st.refused),
        "timeouts": count(st.timeouts),
        "failed": count(st.failed),
        "occupancy_pct": counting.occupancy_per_second(st.busy, tf, before, after, pool_size),
        "offered_pct": counting.offered_pct(
            [q + r for q, r in zip(count(st.queries), count(st.refused))], counting.mean_service_s(st.busy), pool_size
        ),
    }


def run_order(names: list[str], repetition: int) -> list[str]:
    """The runs of a repetition in rotating order, so that no kind always goes first."""
    k = (repetition - 1) % len(names)
    return names[k:] + names[:k]


def _cold_slots(tgt, nodes) -> set:

    addrs = {n.address for n in nodes}
    return {slot for slot, (owner, _) in slot_owners(tgt).items() if owner is not None and owner.address in addrs}


def _slots(keys) -> list[int]:
    from redis.crc import key_slot

    return [key_slot(f"cs:{{{k}}}".encode()) for k in keys]


def _health(logs: dict[str, RunLog]) -> tuple[dict, str]:
    n = sum(len(lg.requests) + lg.errors for lg in logs.values())
    late = sum(lg.late for lg in logs.values())
    errors = sum(lg.errors for lg in logs.values())
    first = next((lg.first_error for lg in logs.values() if lg.first_error), "")
    return {
        "late_pct": Metric(
            100.0 * late / max(1, n),
            "%",
            "lower",
            "requests started more than 50 ms after their scheduled time, all runs",
        ),
        "late_max_ms": Metric(
            1000.0 * max((lg.max_late_s for lg in logs.values()), default=0.0),
            "ms",
            "lower",
            "the latest start of a request after its scheduled time, all runs",
        ),
        "errors": Metric(errors, "requests", "lower", "cluster errors, all runs"),
        "requests": Metric(
            n, "requests", None, "cluster requests made, answered or failed, all runs (what errors is out of)"
        ),
    }, first


def _warm_metrics(warm: int, steady: bool, spread: float | None, pre: str = "") -> dict:
    return {
        f"{pre}warm.seconds": Metric(warm, "s", note="warm-up before the flush (steady or the cap)"),
        f"{pre}warm.steady": Metric(
            1 if steady else 0, "", note="1: the hit rate was steady before the flush; 0: the cap was reached"
        ),
        f"{pre}warm.measured_spread_pp": Metric(
            spread, "pp", note="max - min of the measured hit rate over the steady window before the flush"
        ),
    }


def _spread(col: list, before: int) -> float | None:
    vals = [v for v in col[:before] if v is not None]
    return max(vals) - min(vals) if vals else None


# ---- the instrument: the empty cluster's first second ----------------------------------------
def first_warm_second(log: RunLog, pool_size: int) -> dict[str, float | None]:
    """The first second of a run's warm-up, when the cluster is empty and every request misses
    until its SET: a condition where a pool smaller than the offered misses is known to be full,
    to refuse reads and to make the retry policy try again. The pool and retry checks use it as
    their instrument: a meter that shows no full pool, no refusal or no retry here is blind."""
    t0 = log.t_start
    misses = [r for r in log.requests if not r[2] and t0 <= r[0] < t0 + 1]
    attempts = sum(r[4] for r in misses)
    return {
        "misses": len(misses),
        "attempts_per_miss": attempts / len(misses) if misses else None,
        "refused": sum(1 for t, _ in log.store.refused if t0 <= t < t0 + 1),
        "occupancy_pct": counting.occupancy_per_second(log.store.busy, t0, 0, 1, pool_size)[0],
        "offered_pct": counting.offered_pct(
            [
                sum(1 for t, _ in log.store.queries if t0 <= t < t0 + 1)
                + sum(1 for t, _ in log.store.refused if t0 <= t < t0 + 1)
            ],
            counting.mean_service_s(log.store.busy),
            pool_size,
        )[0],
    }


def _warmup_metrics(first: dict, pre: str = "") -> dict[str, Metric]:
    why = "the empty cluster's first second of the warm-up (every request a miss until its SET)"
    return {
        f"{pre}warmup.attempts_per_miss": Metric(
            first["attempts_per_miss"], "x", note=f"store attempts per cache miss in {why}"
        ),
        f"{pre}warmup.refused_first_s": Metric(first["refused"], "reads", note=f"reads the pool refused in {why}"),
        f"{pre}warmup.occupancy_first_s_pct": Metric(first["occupancy_pct"], "%", note=f"pool occupancy in {why}"),
        f"{pre}warmup.offered_first_s_pct": Metric(
            first["offered_pct"],
            "%",
            note=f"load offered to the pool (attempts x mean service time over its connection-seconds) in {why}",
        ),
    }


# ---- C8: one cold primary -------------------------------------------------------------------
def _run_metrics(col: dict, before: int, pre: str) -> dict[str, Metric]:
    """The metrics of one run (flush, control or no-retry) after the flush point."""
    post = col["cold_store_queries"][before:]
    misses = sum(col["cold_misses"][before:])
    attempts = sum(col["cold_attempts"][before:])
    return {
        f"{pre}cold_node.store_qps.before": Metric(
            col["cold_store_queries"][before - 1], "queries/s", note="the last warm second"
        ),
        f"{pre}cold_node.store_qps.first_s": Metric(post[0], "queries/s"),
        f"{pre}cold_node.store_qps.peak": Metric(max(post), "queries/s"),
        f"{pre}cold_node.misses.before": Metric(
            col["cold_misses"][before - 1],
            "misses/s",
            note="cache misses on the cold node's keys, the last warm second",
        ),
        f"{pre}cold_node.misses.first_s": Metric(
            col["cold_misses"][before], "misses/s", note="cache misses on the cold node's keys, the first second after"
        ),
        f"{pre}cold_node.attempts_per_miss": Metric(
            attempts / misses if misses else None,
            "x",
            note="store attempts (queries and refusals, retries included) per cache miss on the cold node's "
            "keys after the flush",
        ),
        f"{pre}cold_node.store_attempts": Metric(
            attempts,
            "attempts",
            note="store attempts (queries and refusals, retries included) of the cache "
            "misses on the cold node's keys after the flush",
        ),
        f"{pre}store.timeouts": Metric(
            sum(col["timeouts"][before:]) + sum(col["refused"][before:]),
            "reads",
            note="statement timeouts and pool refusals after the flush",
        ),
        f"{pre}store.failed_reads": Metric(
            sum(col["failed"][before:]), "reads", note="reads that failed every attempt (request not served)"
        ),
        f"{pre}pool.peak_occupancy_pct": Metric(max(col["occupancy_pct"][before:]), "%"),
    }


def _attempts_growth(cols: dict, before: int) -> dict[str, Metric]:
    """The store load the cold node's misses offer (attempts: queries and refusals, retries
    included, counted at the request's second), flush minus control, and its growth."""
    ctl = cols["control"]["cold_attempts"][before:]
    out = {}
    for pre, name in (("", "flush"), ("noretry.", "no-retry")):
        excess = counting.minus(cols[name]["cold_attempts"][before:], ctl)
        out[f"{pre}cold_node.excess_attempts_growth_per_s"] = Metric(
            counting.growth_per_second(excess),
            "x/s",
            note="of the store attempts the cold node's misses make (queries and refusals, retries included), "
            "flush minus control: (last second / first second) ^ (1 / (seconds - 1))",
        )
        out[f"{pre}cold_node.excess_attempts_first_s"] = Metric(
            excess[0], "attempts/s", note="flush minus control, first second"
        )
    return out


def _excess_metrics(excess: list, excess_nr: list) -> dict[str, Metric]:
    return {
        "cold_node.excess_first_s": Metric(excess[0], "queries/s", note="flush minus control, first second"),
        "cold_node.excess_growth_per_s": Metric(
            counting.growth_per_second(excess),
            "x/s",
            note="of flush minus control: (last second / first second) ^ (1 / (seconds - 1))",
        ),
        "cold_node.excess_queries": Metric(sum(excess), "queries", note="flush minus control, all seconds after"),
        "noretry.cold_node.excess_growth_per_s": Metric(counting.growth_per_second(excess_nr), "x/s"),
        "noretry.cold_node.excess_queries": Metric(sum(excess_nr), "queries"),
    }


def _flush_series(cols: dict, seconds: list, excess: list, excess_nr: list) -> dict[str, Series]:
    runs_col, sec_col = [], []
    data: dict[str, list] = {k: [] for k in cols["flush"]}
    for name in cols:
        for i, s in enumerate(seconds):
            runs_col.append(name)
            sec_col.append(s)
            for k in data:
                data[k].append(cols[name][k][i])
    return {
        FLUSH_SECONDS.name: FLUSH_SECONDS.make({"run": runs_col, "second": sec_col, **data}),
        EXCESS.name: EXCESS.make(
            {"second": list(range(len(excess))), "flush_minus_control": excess, "noretry_minus_control": excess_nr}
        ),
    }


def cold_share_pct(log: RunLog, cold_slots: set) -> float | None:
    """The share of a run's requests (%) whose key is on the cold node: what the node serves."""
    if not log.requests:
        return None
    return 100.0 * sum(r[1] in cold_slots for r in log.requests) / len(log.requests)


@register(
    "cold-start-flush",
    params=FLUSH_PARAMS,
    needs="cluster",
    check=_check,
    metrics=metrics.FLUSH,
    description="one primary flushed after a steady warm-up, with paired no-flush and no-retry runs: "
    "store reads per second, flush minus control",
)
def flush_one(ctx: CaseContext) -> Record:
    p = ctx.params
    tgt = ctx.target
    primaries = sorted(tgt.primaries, key=lambda n: (n.host, n.port))
    if p["cold_primary"] >= len(primaries):
        raise BadInput(
            f"cold_primary: {p['cold_primary']} but the target has {len(primaries)} primaries "
            f"(0 to {len(primaries) - 1})"
        )
    cold = primaries[p["cold_primary"]]
    seed = p["seed"] + ctx.repetition - 1
    trace, keys, _, warm, steady = plan(p, p["rate"], seed)
    slots = _slots(keys)
    before, after = p["steady_window_s"], p["cold_seconds"]
    cold_slots = _cold_slots(tgt, [cold])
    ctx.log(
        f"{p['rate']}/s, {trace.n_distinct} distinct keys; warm {warm} s ({'steady' if steady else 'cap'}), "
        f"flush {cold.address} ({len(cold_slots)} slots), {after} s after"
    )
    flushed = [cold] if p["flush"] else []
    runs = {"flush": (flushed, p["retries"]), "control": ([], p["retries"]), "no-retry": (flushed, 0)}
    order = run_order(list(runs), ctx.repetition)
    logs: dict[str, RunLog] = {}
    with PostgresServer(p["pg_port"], max_connections=p["pool_size"] + 10) as pg:
        load_table(pg.dsn, keys, p["value_bytes"])
        for name in order:
            flush, retries = runs[name]
            logs[name] = one_run(tgt, pg.dsn, p, keys, slots, p["rate"], warm, flush, retries)
    if all(not lg.requests for lg in logs.values()):
        return Record("failed", f"every request failed; first error: {_health(logs)[1]}")
    cols = {name: seconds_of(logs[name], cold_slots, before, after, p["pool_size"]) for name in runs}
    m, first_error = _health(logs)
    if first_error:
        ctx.log(f"first error: {first_error}")
    m.update(_warm_metrics(warm, steady, _spread(cols["flush"]["hit_rate_pct"], before)))
    m.update(_warmup_metrics(first_warm_second(logs["flush"], p["pool_size"])))
    for pre, name in (("", "flush"), ("control.", "control"), ("noretry.", "no-retry")):
        m.update(_run_metrics(cols[name], before, pre))
    control = cols["control"]["cold_store_queries"][before:]
    excess = counting.minus(cols["flush"]["cold_store_queries"][before:], control)
    excess_nr = counting.minus(cols["no-retry"]["cold_store_queries"][before:], control)
    m.update(_excess_metrics(excess, excess_nr))
    m.update(_attempts_growth(cols, before))
    share = cold_share_pct(logs["flush"], cold_slots)
    facts = {"cluster_primaries": len(primaries), "cold_node_share_pct": round(share) if share is not None else -1}
    details = {
        "order": order,
        "seed": seed,
        "cold_node": cold.address,
        "cold_slots": len(cold_slots),
        "warm_seconds": warm,
        "steady": steady,
        "cold_node_share_pct": share,
        "trace": {"digest": trace.digest(), **trace.meta},
    }
    return Record(
        "ok",
        metrics=m,
        details=details,
        series=_flush_series(cols, list(range(-before, after)), excess, excess_nr),
        facts=facts,
    )


# ---- C9: several cold primaries, clusters of several sizes ---------------------------------
def _size_metrics(cols: dict, before: int, pre: str) -> dict[str, Metric]:
    return {
        f"{pre}pool.peak_occupancy_pct": Metric(
            max(cols["occupancy_pct"][before:]), "%", note="the highest per-second mean after the flush"
        ),
        f"{pre}pool.refused": Metric(
            sum(cols["refused"][before:]), "reads", note="reads refused by the full pool after the flush"
        ),
        f"{pre}pool.peak_offered_pct": Metric(
            max((v for v in cols["offered_pct"][before:] if v is not None), default=None),
            "%",
            note="the highest per-second load offered to the pool after the flush: store attempts (queries and "
            "refusals) x the measured mean service time over the pool's connection-seconds; over 100% the "
            "pool is asked for more than it has",
        ),
        f"{pre}store_qps.peak": Metric(max(cols["store_queries"][before:]), "queries/s"),
        f"{pre}store.failed_reads": Metric(sum(cols["failed"][before:]), "reads"),
    }


def _sizes(p: dict, repetition: int) -> list[int]:
    sizes = list(p["primaries"])
    if p["sizes_per_repetition"] == "one":
        sizes = [sizes[(repetition - 1) % len(sizes)]]
    elif p["sizes_per_repetition"] == "alternate":
        sizes = sizes[(repetition - 1) % 2 :: 2] or sizes[:1]
    return sizes


class _Pooled:
    """What the pool case gathers over its cluster sizes."""

    def __init__(self):
        self.metrics: dict[str, Metric] = {}
        self.rows: dict[str, list] = {}
        self.sweep: dict[str, list] = {}
        self.logs: dict[str, RunLog] = {}
        self.primaries: list[int] = []  # the primaries each cluster had, as its CLUSTER NODES said

    def add_seconds(self, n: int, k: int, name: str, cols: dict, before: int, after: int) -> None:
        for i, s in enumerate(range(-before, after)):
            for key, v in (("primaries", n), ("cold_primaries", k), ("run", name), ("second", s)):
                self.rows.setdefault(key, []).append(v)
            for key in ("requests", "store_queries", "refused", "timeouts", "failed", "occupancy_pct", "offered_pct"):
                self.rows.setdefault(key, []).append(cols[key][i])

    def add_sweep(self, n: int, pool: int, query_ms: float, cols: dict, before: int) -> None:
        for key, v in (
            ("primaries", n),
            ("pool_size", pool),
            ("capacity_reads_per_s", 1000.0 * pool / query_ms if query_ms else None),
            ("peak_occupancy_pct", max(cols["occupancy_pct"][before:])),
            ("refused", sum(cols["refused"][before:])),
        ):
            self.sweep.setdefault(key, []).append(v)


def _primaries_of(tgt) -> int:
    """The primaries the cluster itself reports (CLUSTER NODES asked of its entry node), not
    the number it was asked to start: the case facts that conditions compare come from here."""

    c = tgt.client(tgt.entry, socket_timeout=5, socket_connect_timeout=5, decode_responses=True)
    try:
        return sum(n.role == "primary" for n in parse_cluster_nodes(c.execute_command("CLUSTER NODES")))
    finally:
        c.close()


def _measure_size(ctx: CaseContext, p: dict, pg, n: int, seed: int, acc: _Pooled) -> dict:
    """Flush and control (and the pool sweep at `sweep_primaries`) at one cluster size."""
    import math

    before, after = p["steady_window_s"], p["cold_seconds"]
    rate = p["rate_per_primary"] * n
    trace, keys, _, warm, steady = plan(p, rate, seed)
    load_table(pg.dsn, keys, p["value_bytes"])
    slots = _slots(keys)
    own = ctx.target
    base = min(x.port for x in own.nodes) + p["port_offset"]
    lc = None
    if len(own.primaries) == n and len(own.nodes) == n * (1 + p["replicas"]):
        where = f"the target ({own.entry.address})"  # the target has this shape: measure it, start nothing
    else:
        lc = LocalCluster("127.0.0.1", base, n, p["replicas"], STATE_DIR / f"cold-start-{base}")
        where = f"127.0.0.1:{base}"
    ctx.log(f"{n} primaries + {n * p['replicas']} replicas on {where}; {rate}/s; warm {warm} s")
    tgt = lc.up(log=lambda msg: None) if lc else own
    sweep = [k for k in p["pool_sweep"] if k != p["pool_size"]] if n == p["sweep_primaries"] else []
    try:
        acc.primaries.append(_primaries_of(tgt))
        cold = sorted(tgt.primaries, key=lambda x: (x.host, x.port))[: math.ceil(p["cold_fraction"] * n)]
        cold_slots = _cold_slots(tgt, cold)
        runs = {"flush": cold if p["flush"] else [], "control": []}
        order = run_order(list(runs), ctx.repetition + n)
        logs = {name: one_run(tgt, pg.dsn, p, keys, slots, rate, warm, runs[name], p["retries"]) for name in order}
        swept = {
            k: one_run(tgt, pg.dsn, dict(p, pool_size=k), keys, slots, rate, warm, runs["flush"], p["retries"])
            for k in sweep
        }
    finally:
        if lc:
            lc.down()
    for name, lg in logs.items():
        acc.logs[f"{n}/{name}"] = lg
        cols = seconds_of(lg, cold_slots, before, after, p["pool_size"])
        pre = f"p{n}." if name == "flush" else f"control.p{n}."
        acc.metrics.update(_size_metrics(cols, before, pre))
        if name == "flush":
            acc.metrics.update(_warm_metrics(warm, steady, _spread(cols["hit_rate_pct"], before), pre=pre))
            acc.metrics.update(_warmup_metrics(first_warm_second(lg, p["pool_size"]), pre=pre))
            if n == p["sweep_primaries"] and p["pool_sweep"]:
                acc.add_sweep(n, p["pool_size"], p["query_ms"], cols, before)
        acc.add_seconds(n, len(cold), name, cols, before, after)
    for k, lg in swept.items():
        acc.logs[f"{n}/pool{k}"] = lg
        cols = seconds_of(lg, cold_slots, before, after, k)
        acc.metrics.update(
            {
                f"p{n}.pool{k}.{name.removeprefix('pool.')}": v
                for name, v in _size_metrics(cols, before, "").items()
                if name.startswith("pool.")
            }
        )
        acc.add_sweep(n, k, p["query_ms"], cols, before)
    return {
        "order": order,
        "cold_primaries": len(cold),
        "warm_seconds": warm,
        "steady": steady,
        "where": where,
        "pool_sweep": sorted(swept),
    }


@register(
    "cold-start-pool",
    params=POOL_PARAMS,
    needs="cluster",
    check=_check_pool,
    metrics=metrics.POOL,
    description="several primaries flushed in clusters of several sizes on loopback, with a paired "
    "no-flush control: store pool occupancy and refused connections",
)
def pool_sizes(ctx: CaseContext) -> Record:
    p = ctx.params
    seed = p["seed"] + ctx.repetition - 1
    sizes = _sizes(p, ctx.repetition)
    acc = _Pooled()
    details: dict = {"seed": seed, "sizes": {}}
    pools = [p["pool_size"], *p["pool_sweep"]]
    with PostgresServer(p["pg_port"], max_connections=max(pools) + 10) as pg:
        for n in sizes:
            details["sizes"][str(n)] = _measure_size(ctx, p, pg, n, seed, acc)
    health, first_error = _health(acc.logs)
    if first_error:
        ctx.log(f"first error: {first_error}")
    acc.metrics.update(health)
    series = {POOL_SECONDS.name: POOL_SECONDS.make(acc.rows)}
    if acc.sweep:
        series[POOL_SWEEP.name] = POOL_SWEEP.make(acc.sweep)
    # the clusters' primaries as they reported them, and whether the source's 20-primary cluster
    # was among them (a condition compares numbers as numbers: a list of sizes never equals 20)
    facts = {
        "cluster_primaries": ", ".join(str(n) for n in acc.primaries),
        "measured_20_primaries": 20 in acc.primaries,
    }
    return Record("ok", metrics=acc.metrics, details=details, series=series, facts=facts)
