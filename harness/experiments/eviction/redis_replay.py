"""Replay a token trace against real Redis: GET, then SET on a miss, under maxmemory.

Each request runs one small Lua script (EVALSHA) that does GET and, on a miss, SET of a
value of `value_bytes` bytes built inside Redis. Scripts are pipelined in batches for
speed, yet each key still sees GET before SET in trace order (one script per request,
executed atomically). The script returns 1 (hit), 0 (miss, stored) or -1 (miss, SET
refused with OOM: `noeviction`, or `volatile-*` with no key to evict).

`redis` is imported inside functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from harness.base.errors import BadInput
from harness.infra.redis_server import RedisProcess

REAL_POLICIES = (
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-ttl",
    "volatile-random",
    "noeviction",
)
KNOBS = {"maxmemory-samples": "s", "lfu-log-factor": "lf", "lfu-decay-time": "dt"}  # knob -> label
REDIS_DEFAULTS = {"maxmemory-samples": 5, "lfu-log-factor": 10, "lfu-decay-time": 1}  # redis.conf defaults
NOT_IN_REDIS = ("allkeys-lru-lfu", "lru-k-samples")
INFO_COUNTERS = (
    "keyspace_hits",
    "keyspace_misses",
    "evicted_keys",
    "expired_keys",
    "used_memory",
    "maxmemory",
    "total_commands_processed",
)

GET_OR_SET = """
local v = redis.call('GET', KEYS[1])
if v then return 1 end
local val = string.rep('v', tonumber(ARGV[1]))
local r
if tonumber(ARGV[2]) > 0 then
  r = redis.pcall('SET', KEYS[1], val, 'EX', ARGV[2])
else
  r = redis.pcall('SET', KEYS[1], val)
end
if type(r) == 'table' and r['err'] then return -1 end
return 0
"""


def refuse_names_not_in_redis(where: str, value, path: str = "") -> None:
    """Raise BadInput if a name the source invents (allkeys-lru-lfu, lru-k-samples) appears
    anywhere in `value` (keys or values, at any depth)."""
    if isinstance(value, dict):
        for k, v in value.items():
            refuse_names_not_in_redis(where, k, f"{path}.{k}" if path else str(k))
            refuse_names_not_in_redis(where, v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            refuse_names_not_in_redis(where, v, f"{path}[{i}]")
    elif isinstance(value, str):
        for name in NOT_IN_REDIS:
            if name in value.lower():
                what = "maxmemory-policy" if name == "allkeys-lru-lfu" else "configuration setting"
                raise BadInput(
                    f"{where}{'.' + path if path else ''}: {name!r} does not exist in Redis (no {what} of "
                    f"that name in any release); the source's LRU-K + LFU hybrid is simulated instead: "
                    f"policy 'hybrid' of driver eviction-simulate (case 'simulate' in harness/experiments/eviction/suite.yaml)"
                )


@dataclass
class RunSpec:
    """One Redis configuration to replay: a real policy and optional knobs."""

    policy: str
    knobs: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The policy, then each knob that differs from Redis's default (a knob set to its
        default is the same configuration: {policy: allkeys-lru, maxmemory-samples: 5} is
        'allkeys-lru', so the lab's verbatim settings match the ledger's checks)."""
        return self.policy + "".join(f".{KNOBS[k]}{v}" for k, v in sorted(self.knobs.items()) if v != REDIS_DEFAULTS[k])

    def config(self) -> dict:
        return {"maxmemory-policy": self.policy, **self.knobs}

    @property
    def volatile(self) -> bool:
        return self.policy.startswith("volatile-")


def parse_runs(where: str, runs: list) -> list[RunSpec]:
    """`runs` entries: a policy name, or {policy: NAME, maxmemory-samples: N, ...}."""
    out: list[RunSpec] = []
    for i, r in enumerate(runs):
        w = f"{where}.runs[{i}]"
        if isinstance(r, str):
            r = {"policy": r}
        if not isinstance(r, dict) or "policy" not in r:
            raise BadInput(f"{w}: expected a policy name or a mapping with 'policy'")
        unknown = sorted(set(r) - {"policy", *KNOBS})
        if unknown:
            raise BadInput(f"{w}: unknown key {unknown[0]!r}; allowed: policy, {', '.join(KNOBS)}")
        if r["policy"] not in REAL_POLICIES:
            raise BadInput(
                f"{w}.policy: {r['policy']!r} is not a Redis maxmemory-policy; one of {', '.join(REAL_POLICIES)}"
            )
        knobs = {}
        for k in KNOBS:
            if k in r:
                v = r[k]
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise BadInput(f"{w}.{k}: expected a non-negative integer, got {v!r}")
                if k == "maxmemory-samples" and not 1 <= v <= 64:
                    raise BadInput(f"{w}.{k}: Redis accepts 1..64, got {v}")
                knobs[k] = v
        spec = RunSpec(r["policy"], knobs)
        if any(s.label == spec.label for s in out):
            raise BadInput(f"{w}: {spec.label} is listed twice")
        out.append(spec)
    return out


# ---- INFO ---------------------------------------------------------------------------


def parse_info(text: str | bytes) -> dict:
    """INFO's text (`# Section` lines, `key:value` lines) -> {key: int | float | str}.
    Lines like `db0:keys=1,expires=0` become a dict."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    out: dict = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, value = line.split(":", 1)
        if "=" in value and "," in value or key.startswith("db"):
            out[key] = {k: _num(v) for k, v in (p.split("=", 1) for p in value.split(",") if "=" in p)}
        else:
            out[key] = _num(value)
    return out


def _num(v: str):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def raw_info(client, section: str = "all") -> str:
    """INFO's untouched text (redis-py would parse it; we keep and parse the raw reply)."""
    conn = client.connection_pool.get_connection()
    try:
        conn.send_command("INFO", section)
        reply = conn.read_response()
    finally:
        client.connection_pool.release(conn)
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def counters(info: dict) -> dict:
    return {k: info.get(k, 0) for k in INFO_COUNTERS}


def sum_counters(infos: list[dict]) -> dict:
    """Per-node counters added up (a cluster's INFO is per node)."""
    return {k: sum(i.get(k, 0) for i in infos) for k in INFO_COUNTERS}


# ---- the configuration the server runs with, read back -------------------------------

READ_BACK = ("maxmemory-policy", "maxmemory", *KNOBS)


def read_config(client) -> dict:
    """What the server says it runs with (CONFIG GET, never what the harness asked for):
    maxmemory-policy, maxmemory and the knobs, plus INFO memory's maxmemory and
    maxmemory_policy (the same settings through another command)."""
    out = {}
    for name in READ_BACK:
        got = client.config_get(name)
        value = got.get(name) if isinstance(got, dict) else None
        if isinstance(value, bytes):
            value = value.decode()
        out[name] = _num(value) if isinstance(value, str) else value
    info = parse_info(raw_info(client, "memory"))
    out["info.maxmemory"] = info.get("maxmemory")
    out["info.maxmemory_policy"] = info.get("maxmemory_policy")
    return out


def config_facts(label: str, readings: list[dict], sized: int | None) -> dict:
    """Case facts from the server's own readings (each a read_config() taken during the run,
    on every server or node): `LABEL.maxmemory-policy` and each knob as read when every
    reading agrees (else 'readings differ: ...'), `LABEL.maxmemory` (bytes, summed over the
    nodes) and `LABEL.maxmemory_as_sized` (True when every reading's maxmemory, through CONFIG
    GET and INFO alike, is the maxmemory the harness sized for that server: `sized` is the sum).
    The policy and maxmemory are each read by two commands (CONFIG GET and INFO memory): when
    the two disagree in any reading (or INFO reports none), the fact says the readings differ,
    naming both, instead of taking either, so a check that needs the setting is inconclusive."""

    def one(name: str):
        if not readings:
            return "not read"
        values = list(dict.fromkeys(str(r.get(name)) for r in readings))
        if len(values) == 1:
            v = readings[0].get(name)
            return v if isinstance(v, (str, int, float, bool)) else str(v)
        return "readings differ: " + ", ".join(values)

    def seen(name: str) -> str:
        return ", ".join(dict.fromkeys(str(r.get(name)) for r in readings))

    def two_ways(config: str, info: str):
        """None when INFO's `info` agrees with CONFIG GET's `config` in every reading, else both."""
        if all(str(r.get(config)) == str(r.get(info)) for r in readings):
            return None
        return f"readings differ: CONFIG GET {config} {seen(config)}; INFO {info} {seen(info)}"

    facts: dict = {
        f"{label}.maxmemory-policy": two_ways("maxmemory-policy", "info.maxmemory_policy") or one("maxmemory-policy")
    }
    for k in KNOBS:
        facts[f"{label}.{k}"] = one(k)
    if readings:
        facts[f"{label}.info_maxmemory_policy"] = one("info.maxmemory_policy")
    by_node: dict = {}
    for r in readings:  # the last reading of each node
        by_node[r.get("node", "")] = r
    total = sum(int(r.get("maxmemory") or 0) for r in by_node.values())
    facts[f"{label}.maxmemory"] = two_ways("maxmemory", "info.maxmemory") or total
    facts[f"{label}.maxmemory_as_sized"] = (
        bool(readings)
        and sized is not None
        and all(
            r.get("maxmemory") == r.get("info.maxmemory") and r.get("maxmemory") == r.get("sized") for r in readings
        )
        and total == sized
    )
    return facts


# ---- replay -------------------------------------------------------------------------


def key_names(ids: np.ndarray) -> list[bytes]:
    return [b"tok:%d" % i for i in ids.tolist()]


def replay(
    client, keys: list[bytes], value_bytes: int, ttl_s: int, batch: int, dbsize_samples: list | None = None
) -> np.ndarray:
    """Run GET-or-SET for every key in order; returns int8 per request (1, 0 or -1)."""
    sha = client.script_load(GET_OR_SET)
    out = np.zeros(len(keys), dtype=np.int8)
    for start in range(0, len(keys), batch):
        pipe = client.pipeline(transaction=False)
        for k in keys[start : start + batch]:
            pipe.evalsha(sha, 1, k, value_bytes, ttl_s)
        res = pipe.execute(raise_on_error=False)
        bad = [r for r in res if isinstance(r, Exception)]
        if bad:
            raise RuntimeError(f"Redis replied with an error during the replay: {bad[0]}")
        out[start : start + len(res)] = res
        if dbsize_samples is not None:
            dbsize_samples.append(client.dbsize())
    return out


def evictable_memory(client) -> int:
    """The memory maxmemory is compared with: used_memory minus what Redis does not count
    for eviction (replica output buffers, AOF buffers: mem_not_counted_for_evict)."""
    info = parse_info(raw_info(client, "memory"))
    return int(info["used_memory"]) - int(info.get("mem_not_counted_for_evict", 0))


def bytes_per_key(client, value_bytes: int, ttl_s: int, n: int = 2000, keys: list | None = None) -> float:
    """Evictable memory added per key by probe keys like the trace's (then deleted).

    Measured twice, the second time counts: the first writes on a primary grow its
    replication buffer (up to repl-backlog-size), which would be charged to the keys."""
    keys = keys if keys is not None else [b"tok:%d" % (900000 + i) for i in range(n)]
    sha = client.script_load(GET_OR_SET)
    per_key = 1.0
    for _ in range(2):
        client.flushall()
        time.sleep(0.05)
        before = evictable_memory(client)
        pipe = client.pipeline(transaction=False)
        for k in keys:
            pipe.evalsha(sha, 1, k, value_bytes, ttl_s)
        pipe.execute()
        per_key = max(1.0, (evictable_memory(client) - before) / max(1, len(keys)))
    client.flushall()
    return per_key


@dataclass
class ReplayResult:
    label: str
    results: np.ndarray  # per measured request: 1 hit, 0 miss stored, -1 miss refused
    info_before: dict
    info_after: dict
    dbsize_median: float
    maxmemory: int
    bytes_per_key: float
    target_keys: int
    filled: bool
    seconds: float
    raw_infos: dict = field(default_factory=dict)
    idle_max_s: int | None = None  # largest OBJECT IDLETIME among up to 200 cached keys at the end
    # the server's own settings, read back (read_config) after the warm-up and after the measured
    # replay, on every server or node: {"node": ADDRESS, "when": ..., "sized": bytes, ...}
    config_read: list = field(default_factory=list)
    probe: dict | None = None  # recency_probe's counts (the LRU stand-in's instrument), when asked

    @property
    def hits(self) -> int:
        return int((self.results == 1).sum())

    @property
    def refused(self) -> int:
        return int((self.results == -1).sum())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _measure(client, keys: list[bytes], warm: int, value_bytes: int, ttl: int, batch: int):
    """Warm up (fill past maxmemory), reset the counters, replay the rest; INFO around it."""
    warm_res = replay(client, keys[:warm], value_bytes, ttl, batch)
    read = [dict(read_config(client), when="after the warm-up")]
    info_warm = parse_info(raw_info(client))
    filled = info_warm.get("evicted_keys", 0) > 0 or bool((warm_res == -1).any())
    client.config_resetstat()
    before = parse_info(raw_info(client))
    samples: list = []
    t0 = time.perf_counter()
    res = replay(client, keys[warm:], value_bytes, ttl, batch, samples)
    secs = time.perf_counter() - t0
    read.append(dict(read_config(client), when="after the measured replay"))
    after_raw = raw_info(client)
    # Redis's LRU clock ticks once a second: the spread of OBJECT IDLETIME shows how much
    # recency information approximated LRU had to work with
    import redis

    try:
        idle = [client.object("idletime", k) for k in list(client.scan_iter(count=1000))[:200]]
        idle_max = max([i for i in idle if i is not None] or [0])
    except redis.ResponseError:  # LFU policies do not track idle time
        idle_max = None
    return res, before, parse_info(after_raw), samples, filled, secs, after_raw, idle_max, read


RECENCY_PROBE_KEYS = 200  # keys per group of the recency probe
RECENCY_PROBE_SLEEP_S = 2.1  # over Redis's 1 s LRU clock resolution, twice


def recency_probe(client, value_bytes: int, bpk: float, n: int = RECENCY_PROBE_KEYS) -> dict:
    """The LRU stand-in's own instrument, on its own server after the replay (same policy and
    knobs): a sequence whose outcome under LRU is known. Room for 2.5 n keys; n keys `touched`
    and n keys `idle` written, a sleep over the LRU clock's resolution, the touched ones read
    again, then n new keys written (about n/2 evictions). LRU evicts idle keys first, so it keeps
    every touched key; random eviction loses about a fifth of them. Returns the kept counts."""
    client.flushall()
    time.sleep(0.05)
    base = evictable_memory(client)
    client.config_set("maxmemory", int(base + 2.5 * n * bpk))
    value = b"x" * value_bytes
    groups = {g: [b"probe:%s:%d" % (g.encode(), i) for i in range(n)] for g in ("touched", "idle", "new")}

    def write(names) -> None:
        pipe = client.pipeline(transaction=False)
        for k in names:
            pipe.set(k, value)
        pipe.execute(raise_on_error=False)

    write(groups["touched"])
    write(groups["idle"])
    time.sleep(RECENCY_PROBE_SLEEP_S)
    pipe = client.pipeline(transaction=False)
    for k in groups["touched"]:
        pipe.get(k)
    pipe.execute()
    write(groups["new"])
    kept = {}
    for g, names in groups.items():
        pipe = client.pipeline(transaction=False)
        for k in names:
            pipe.exists(k)
        kept[g] = int(sum(pipe.execute()))
    return {
        "keys_per_group": n,
        "kept": kept,
        "evicted_keys": int(parse_info(raw_info(client, "stats")).get("evicted_keys", 0)),
    }


def replay_standalone(
    spec: RunSpec,
    keys: list[bytes],
    warm: int,
    folder,
    *,
    n_distinct: int,
    capacity_fraction: float,
    value_bytes: int,
    ttl_s: int,
    batch: int,
    probe: bool = False,
) -> ReplayResult:
    """A fresh redis-server for one configuration: size maxmemory, warm up, measure; with
    `probe`, then the recency probe on the same server (the LRU stand-in's instrument)."""

    ttl = ttl_s if spec.volatile else 0
    proc = RedisProcess("127.0.0.1", _free_port(), folder, config=spec.config())
    with proc:
        c = proc.client()
        bpk = bytes_per_key(c, value_bytes, ttl)
        base = evictable_memory(c)
        target = max(1, round(capacity_fraction * n_distinct))
        maxmem = int(base + target * bpk)
        c.config_set("maxmemory", maxmem)
        res, before, after, samples, filled, secs, after_raw, idle_max, read = _measure(
            c, keys, warm, value_bytes, ttl, batch
        )
        probed = recency_probe(c, value_bytes, bpk) if probe else None
        c.close()
    read = [dict(r, node="standalone", sized=maxmem) for r in read]
    return ReplayResult(
        spec.label,
        res,
        counters(before),
        counters(after),
        float(np.median(samples)),
        maxmem,
        bpk,
        target,
        filled,
        secs,
        {"standalone": after_raw},
        idle_max,
        read,
        probed,
    )


def _owners_and_probes(target, keys: list) -> tuple[dict, dict[str, list]]:
    """Each key's primary ("host:port"), and per primary up to 500 keys outside the trace's
    (tok:900000 on) to probe its bytes per key with."""
    rc = target.cluster_client()
    try:
        owner_of = {}
        for k in set(keys):
            n = rc.get_node_from_key(k)
            owner_of[k] = f"{n.host}:{n.port}"
        probes: dict[str, list] = {}
        i = 900000
        while any(len(probes.get(p.address, [])) < 500 for p in target.primaries) and i < 990000:
            k = b"tok:%d" % i
            n = rc.get_node_from_key(k)
            probes.setdefault(f"{n.host}:{n.port}", []).append(k)
            i += 1
    finally:
        rc.close()
    return owner_of, probes


def replay_cluster(
    spec: RunSpec,
    target,
    ids: np.ndarray,
    warm: int,
    *,
    capacity_fraction: float,
    value_bytes: int,
    ttl_s: int,
    batch: int,
    log=print,
) -> ReplayResult:
    """The same replay on a Redis Cluster: maxmemory is per node, so every primary gets
    maxmemory for its share of the key space; each primary replays, in trace order, the
    requests for the keys it owns (eviction is per node, so this is what a cluster client
    would cause); INFO counters are summed over the primaries."""
    ttl = ttl_s if spec.volatile else 0
    keys = key_names(ids)
    owner_of, probes = _owners_and_probes(target, keys)
    nodes = {n.address: n for n in target.primaries}
    unknown = set(owner_of.values()) - set(nodes)
    if unknown:
        raise RuntimeError(f"keys are owned by {sorted(unknown)[0]}, which is not a primary of the target")
    pos = np.arange(len(keys))
    results = np.zeros(len(keys) - warm, dtype=np.int8)
    befores, afters, raws, dbs = [], [], {}, []
    maxmem_total, bpks, target_total, filled_all, secs, idle_max, reads = 0, [], 0, True, 0.0, None, []
    for addr, node in nodes.items():
        c = target.client(node)
        old = {k: v for k, v in c.config_get("maxmemory*").items()}
        old.update(c.config_get("lfu-*"))
        mine = np.array([owner_of[k] == addr for k in keys])
        node_keys = [k for k, m in zip(keys, mine) if m]
        node_warm = int((mine[:warm]).sum())
        try:
            for k, v in spec.config().items():
                c.config_set(k, v)
            bpk = bytes_per_key(c, value_bytes, ttl, keys=probes.get(addr, []))
            base = evictable_memory(c)
            tgt = max(1, round(capacity_fraction * len(set(node_keys))))
            maxmem = int(base + tgt * bpk)
            c.config_set("maxmemory", maxmem)
            log(f"{spec.label} on {addr}: {len(node_keys)} requests, maxmemory {maxmem} for ~{tgt} keys")
            res, before, after, samples, filled, s, after_raw, idle, read = _measure(
                c, node_keys, node_warm, value_bytes, ttl, batch
            )
            reads += [dict(r, node=addr, sized=maxmem) for r in read]
            idle_max = None if idle is None else max(idle_max or 0, idle)
            results[(pos[mine] - warm)[pos[mine] >= warm]] = res
            befores.append(counters(before))
            afters.append(counters(after))
            raws[addr] = after_raw
            dbs.append(float(np.median(samples)) if samples else 0.0)
            maxmem_total += maxmem
            bpks.append(bpk)
            target_total += tgt
            filled_all = filled_all and filled
            secs += s
        finally:
            c.flushall()
            for k, v in old.items():
                try:
                    c.config_set(k, v)
                except Exception:  # noqa: BLE001 - restore what can be restored
                    pass
            c.close()
    return ReplayResult(
        spec.label,
        results,
        sum_counters(befores),
        sum_counters(afters),
        float(sum(dbs)),
        maxmem_total,
        float(np.mean(bpks)),
        target_total,
        filled_all,
        secs,
        raws,
        idle_max,
        reads,
    )
