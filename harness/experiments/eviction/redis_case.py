"""eviction-redis and eviction-redis-cluster: the trace replayed on real Redis (redis_replay.py),
one fresh redis-server per maxmemory-policy and knob or the target Redis Cluster, at the
calibrated size (C18 on Redis): INFO and client hit rates, long-tail retention, the settings
read back from the servers, exact LRU / LFU / OPT at the same number of keys, and the LRU
stand-in's recency probe."""

from __future__ import annotations

import json
import time

from harness.base.errors import BadInput
from harness.infra.redis_server import require_tool
from harness.mechanisms.cache_policies import sim as simulate
from harness.mechanisms.cache_policies import traces
from harness.model.driver_contract import CaseContext, Metric, Param, Record

from .calibrated_size import calibrated_capacity
from .common import TRACE_PARAMS, build_trace, check_trace, percent
from .redis_replay import (
    RECENCY_PROBE_SLEEP_S,
    config_facts,
    key_names,
    parse_runs,
    refuse_names_not_in_redis,
    replay_cluster,
    replay_standalone,
)
from .series import RUNS

DEFAULT_RUNS = [
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-ttl",
    "noeviction",
    {"policy": "allkeys-lru", "maxmemory-samples": 1},
    {"policy": "allkeys-lru", "maxmemory-samples": 10},
    {"policy": "allkeys-lfu", "lfu-log-factor": 0},
    {"policy": "allkeys-lfu", "lfu-log-factor": 100},
    {"policy": "allkeys-lfu", "lfu-decay-time": 0},
]

REDIS_PARAMS = {
    **TRACE_PARAMS,
    "n_requests": Param(int, 60000, "requests replayed (warm-up included)", min=100),
    "warmup_requests": Param(
        int, 20000, "requests replayed before the counters are reset (fills past maxmemory)", min=1
    ),
    "runs": Param(
        list,
        DEFAULT_RUNS,
        "configurations: a maxmemory-policy, or {policy, maxmemory-samples, lfu-log-factor, lfu-decay-time}",
    ),
    "capacity_fraction": Param(
        float, 0.1, "maxmemory holds about this fraction of the distinct keys", min=1e-6, max=0.999999
    ),
    "value_bytes": Param(int, 4096, "bytes of each cached value (large, so that maxmemory dwarfs buffers)", min=1),
    "volatile_ttl_s": Param(int, 3600, "TTL given to every key under volatile-* policies (0 elsewhere)", min=0),
    "batch": Param(int, 200, "requests per pipeline", min=1),
    "lru-k-samples": Param((int, type(None)), None, "not a Redis setting; any value is refused (see the hybrid)"),
    "standin_lru_samples": Param(
        int,
        5,
        "the LRU stand-in of allkeys-lfu: maxmemory-samples of the allkeys-lru "
        "run that names none (Redis's default 5; read back from its server)",
        min=1,
        max=64,
    ),
    "calibrate_lru_hit_pct": Param(
        (float, type(None)),
        None,
        "maxmemory for the number of keys at which exact LRU first reaches this hit rate on "
        "the measured requests (the suite's copy of the source's LRU figure; the source "
        "gives no cache size); replaces capacity_fraction; null: use capacity_fraction",
        min=0.001,
        max=99.999,
    ),
}


def capacity_fraction(ctx: CaseContext, trace: traces.Trace) -> tuple[float, dict[str, Metric]]:
    """The replay's cache size as a fraction of the distinct keys: capacity_fraction, or the
    size at which exact LRU reaches calibrate_lru_hit_pct after the warm-up."""
    p = ctx.params
    cap = calibrated_capacity(trace.ids, p["calibrate_lru_hit_pct"], p["warmup_requests"])
    if cap is None:
        if p["calibrate_lru_hit_pct"] is not None:
            ctx.log(f"exact LRU never reaches {p['calibrate_lru_hit_pct']:g}%: capacity_fraction is used")
        return p["capacity_fraction"], {}
    ctx.log(f"calibrated: exact LRU hits {p['calibrate_lru_hit_pct']:g}% after the warm-up at {cap} keys")
    note = (
        f"the number of keys at which exact LRU first hits {p['calibrate_lru_hit_pct']:g}% of the measured "
        "requests (the source's LRU figure; the source gives no cache size)"
    )
    return cap / trace.n_distinct, {"calibrated.capacity_objects": Metric(cap, "keys", None, note)}


def check_redis(where: str, p: dict) -> None:
    if p.get("lru-k-samples") is not None:
        refuse_names_not_in_redis(where, {"lru-k-samples": p["lru-k-samples"]})
    check_trace(where, {k: v for k, v in p.items() if k != "lru-k-samples"})
    parse_runs(where, p["runs"])
    if p["warmup_requests"] >= p["n_requests"]:
        raise BadInput(f"{where}.warmup_requests: must be below n_requests ({p['n_requests']})")


REDIS_COLUMNS = (
    "configuration",
    "maxmemory_bytes",
    "bytes_per_key",
    "target_keys",
    "keys_held",
    "hit_pct_info",
    "hit_pct_client",
    "long_tail_pct",
    "evicted",
    "refused_sets",
    "max_idle_s",
    "exact_lru_pct",
    "exact_lfu_pct",
    "opt_pct",
)


def _redis_outcome(ctx: CaseContext, results: list, trace: traces.Trace, pre: str, note: str) -> Record:

    p = ctx.params
    ids, nxt = trace.ids, traces.next_access(trace.ids)
    warm = p["warmup_requests"]
    tail = traces.tail_mask(ids, traces.head_ids(ids, p["head_fraction"]))[warm:]
    m: dict[str, Metric] = {}
    cols: dict[str, list] = {c: [] for c in REDIS_COLUMNS}
    problems, sims, facts = [], {}, {}
    for r in results:
        # the policy, maxmemory and knobs as the server reported them during the run (CONFIG GET,
        # INFO): the ledger's `configured` compares them with what its checks need
        facts.update(config_facts(f"{pre}.{r.label}", r.config_read, r.maxmemory))
        cap = max(1, int(round(r.dbsize_median)))
        if cap not in sims:
            sims[cap] = {
                x: traces.hit_rates(simulate.policy_hits(x, ids, nxt, cap)[warm:], tail) for x in ("lru", "lfu", "opt")
            }
        hr, lt = traces.hit_rates(r.results == 1, tail)
        a = r.info_after
        n_info = a["keyspace_hits"] + a["keyspace_misses"]
        info_hr = 100.0 * a["keyspace_hits"] / n_info if n_info else 0.0
        if a["keyspace_hits"] != r.hits:
            problems.append(f"{r.label}: INFO keyspace_hits {a['keyspace_hits']} != {r.hits} hits seen by the client")
        if not r.filled and r.label.split(".")[0] != "noeviction":
            problems.append(f"{r.label}: the warm-up did not fill maxmemory (no eviction)")
        label = f"{pre}.{r.label}"
        m[f"{label}.hit_rate_pct"] = percent(
            info_hr,
            "the control of allkeys-lru/lfu: random eviction, same replay" if r.label == "allkeys-random" else "",
        )
        m[f"reference.{label}.hit_rate_pct"] = percent(
            hr, "the replay client's own count of the GETs that found their key (the reference of INFO's hit rate)"
        )
        m[f"{label}.long_tail_pct"] = percent(lt)
        m[f"{label}.evicted_keys"] = Metric(a["evicted_keys"], "keys")
        m[f"{label}.refused_sets"] = Metric(r.refused, "requests", None, "SET refused with OOM")
        m[f"{label}.keys_held"] = Metric(r.dbsize_median, "keys")
        m[f"{label}.rps"] = Metric(
            len(r.results) / r.seconds if r.seconds else 0.0, "req/s", "higher", "GET-or-SET scripts, pipelined"
        )
        m[f"{label}.gap_to_exact_lru_pp"] = Metric(info_hr - sims[cap]["lru"][0], "pp")
        m[f"{label}.gap_to_exact_lfu_pp"] = Metric(info_hr - sims[cap]["lfu"][0], "pp")
        if r.idle_max_s is not None:
            m[f"{label}.idle_time_max_s"] = Metric(
                r.idle_max_s, "s", None, "largest OBJECT IDLETIME of cached keys at the end (LRU clock resolution 1 s)"
            )
        for c, v in zip(
            REDIS_COLUMNS,
            (
                r.label,
                r.maxmemory,
                r.bytes_per_key,
                r.target_keys,
                r.dbsize_median,
                info_hr,
                hr,
                lt,
                int(a["evicted_keys"]),
                r.refused,
                r.idle_max_s,
                sims[cap]["lru"][0],
                sims[cap]["lfu"][0],
                sims[cap]["opt"][0],
            ),
        ):
            cols[c].append(v)
    ctx.raw_path("redis_runs.json").write_text(
        json.dumps(
            [
                {
                    "label": r.label,
                    "maxmemory": r.maxmemory,
                    "bytes_per_key": r.bytes_per_key,
                    "target_keys": r.target_keys,
                    "keys_held_median": r.dbsize_median,
                    "filled": r.filled,
                    "seconds": r.seconds,
                    "info_before": r.info_before,
                    "info_after": r.info_after,
                    "client_hits": r.hits,
                    "refused": r.refused,
                    "config_read": r.config_read,
                }
                for r in results
            ],
            indent=1,
        )
    )
    for r in results:
        for node, text in r.raw_infos.items():
            ctx.raw_path(f"info_{r.label}_{node.replace(':', '_')}.txt").write_text(text)
    series = {RUNS.name: RUNS.make(cols, note)}
    if problems:
        return Record("invalid", "; ".join(problems), m, {}, series, facts)
    return Record("ok", metrics=m, series=series, facts=facts)


REDIS_NOTE = (
    "maxmemory = used_memory of the empty server + target keys x bytes/key, where bytes/key is the "
    "used_memory added by probe keys of the same shape (measured on each server). The exact "
    "simulations use the number of keys Redis actually held (median of DBSIZE after each batch). "
    "Hit % (INFO) = keyspace_hits / (keyspace_hits + keyspace_misses) after CONFIG RESETSTAT. "
    "volatile-* runs give every key the same TTL (volatile_ttl_s), so volatile-ttl evicts the "
    "key set earliest; other runs set no TTL. Redis's LRU clock has a 1-second resolution "
    "(LRU_CLOCK_RESOLUTION): a replay at tens of thousands of requests/s leaves every cached key with "
    "OBJECT IDLETIME 0 or 1 ('max idle s'), so approximated LRU cannot tell recent from old and lands "
    "near allkeys-random, whatever maxmemory-samples is. Redis's LFU counters do not depend on that "
    "clock (except for decay, in minutes), so allkeys-lfu tracks exact LFU."
)


def run_redis(ctx: CaseContext) -> Record:

    require_tool("redis-server")
    p = ctx.params
    trace = build_trace(p, ctx.repetition)
    keys = key_names(trace.ids)
    fraction, cal = capacity_fraction(ctx, trace)
    results, stand_in = [], None
    for spec in parse_runs("runs", p["runs"]):
        is_stand_in = stand_in is None and spec.policy == STAND_IN_POLICY and "maxmemory-samples" not in spec.knobs
        if is_stand_in:  # the LRU stand-in: its strength is the case's parameter (the ledger fixes it)
            spec.knobs["maxmemory-samples"] = p["standin_lru_samples"]
        t0 = time.perf_counter()
        r = replay_standalone(
            spec,
            keys,
            p["warmup_requests"],
            ctx.raw_dir / f"server-{spec.label}",
            n_distinct=trace.n_distinct,
            capacity_fraction=fraction,
            value_bytes=p["value_bytes"],
            ttl_s=p["volatile_ttl_s"],
            batch=p["batch"],
            probe=is_stand_in,
        )
        results.append(r)
        if is_stand_in:
            stand_in = r
        ctx.log(
            f"{spec.label}: hit {100 * r.hits / len(r.results):.1f}%, keys held {r.dbsize_median:.0f}, "
            f"evicted {r.info_after['evicted_keys']} ({time.perf_counter() - t0:.1f} s)"
        )
    out = _redis_outcome(ctx, results, trace, "redis", REDIS_NOTE)
    out.metrics.update({f"redis.{k}": v for k, v in cal.items()})
    if stand_in is not None:
        _stand_in_outcome(out, stand_in)
    return out


STAND_IN_POLICY = "allkeys-lru"  # the stand-in of allkeys-lfu's check (C18)


def _stand_in_outcome(out: Record, r) -> None:
    """The LRU stand-in's strength as its server reports it (fact standin_lru_samples, CONFIG GET
    maxmemory-samples after the replay) and its instrument: the recency probe on the same server."""
    # the last reading (after the measured replay) of the stand-in's own server
    samples = r.config_read[-1].get("maxmemory-samples") if r.config_read else None
    if samples is not None:
        out.facts["standin_lru_samples"] = int(samples)
    pr = r.probe
    n = pr["keys_per_group"]
    label = f"redis.{r.label}"
    out.metrics[f"{label}.known_recency_kept_pct"] = Metric(
        100.0 * pr["kept"]["touched"] / n,
        "%",
        None,
        f"the LRU stand-in's instrument, on its own server after the replay: {n} keys read again "
        f"{RECENCY_PROBE_SLEEP_S:g} s after {n} others were written, then {n} new keys past maxmemory; LRU keeps every "
        "key read again (it evicts the idle ones), random eviction loses about a fifth of them",
    )
    out.metrics[f"{label}.known_recency_idle_kept_pct"] = Metric(
        100.0 * pr["kept"]["idle"] / n, "%", None, "the same probe: the idle keys still held (LRU evicts these)"
    )
    out.details["stand_in_probe"] = {"label": r.label, **pr, "config_read": r.config_read}


CLUSTER_PARAMS = {**REDIS_PARAMS, "runs": Param(list, ["allkeys-lru", "allkeys-lfu"], REDIS_PARAMS["runs"].help)}


def run_redis_cluster(ctx: CaseContext) -> Record:

    p = ctx.params
    if ctx.target.kind != "cluster" or not ctx.target.nodes:
        return Record("skipped", "no Redis Cluster target")
    trace = build_trace(p, ctx.repetition)
    fraction, cal = capacity_fraction(ctx, trace)
    results = []
    for spec in parse_runs("runs", p["runs"]):
        r = replay_cluster(
            spec,
            ctx.target,
            trace.ids,
            p["warmup_requests"],
            capacity_fraction=fraction,
            value_bytes=p["value_bytes"],
            ttl_s=p["volatile_ttl_s"],
            batch=p["batch"],
            log=ctx.log,
        )
        results.append(r)
        ctx.log(
            f"{spec.label}: hit {100 * r.hits / len(r.results):.1f}%, keys held {r.dbsize_median:.0f} (all primaries)"
        )
    note = (
        REDIS_NOTE + " Cluster: maxmemory is per node; each primary gets maxmemory for its share of the "
        "distinct keys; counters and keys held are summed over the primaries; the exact simulations use "
        "the summed keys held as one cache, which a sharded cache can only approach."
    )
    out = _redis_outcome(ctx, results, trace, "cluster", note)
    out.metrics.update({f"cluster.{k}": v for k, v in cal.items()})
    return out
