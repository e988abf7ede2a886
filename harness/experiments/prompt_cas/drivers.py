"""Compare-and-swap of prompt/response pairs with version vectors (source section 4.3, C20).

Each pair lives in one Redis hash (`prompt`, `response`, `vv`) on the real cluster; `vv` is
a version vector with one counter per writer. Writer threads read a pair, pick a new
(prompt, response) from real text, and write it back under one of these rules:

- `plain`: no CAS; three separate HSETs (prompt, response, vector), as a naive client does.
  The control for mix-ups: the checker must see mixed pairs here, or its zeros below
  prove nothing.
- `atomic`: no CAS, but one HSET of prompt, response and vector (an atomic write with no
  version check). The control for lost updates: no mix-ups (the write is atomic) but lost
  updates (nothing stops a writer from overwriting a change it never read), so mix-ups
  from non-atomic writes and lost updates from missing CAS are told apart.
- `as-written`: the source's rule taken literally: apply only when the stored vector is
  dominated by the client's, the client sending the vector it read (its context). The
  stored vector then equals the client's, which is not dominated, so nothing is applied.
- `incremented`: the same dominance rule, the client sending the vector it read with its
  own counter incremented. Stored <= read < sent, so "stored dominated by sent" holds
  exactly when stored == read: a real CAS.
- `equal`: the classic CAS: apply when the stored vector equals the one the client read;
  the server increments the writer's counter.

The CAS rules run as one Lua script (atomic on the primary, replicated as a whole).

Nothing judged comes from the mechanism under test (issue 39): a CAS script that applies every
write and stores the element-wise max of the vectors keeps its vectors' arithmetic consistent,
so lost updates counted from the vectors (applied - final sum) come out 0 for it. Every write
carries a unique id, stored with the pair; each writer keeps its history (the id it read just
before writing, what it sent, what it was told), and after the rule every pair is read back
once. history.py judges the histories against the read-back (lost updates, refusals with no
conflict) and the pairs the readers saw against the histories (mix-ups). Readers check every
pair they see on the primaries and, with READONLY, on the replicas. A reader that read too
little (it died, or was starved) would see "0 mix-ups" for nothing: the mix-up counts of a rule
are measured only when every reader made at least `min_reads_per_reader` reads on the
primaries (and as many on the replicas, where there are replicas); else they are left out (not
measured), with the fewest reads shown. A canary pair (CANARY), mixed on purpose, with two blind
acknowledged writes of the harness in its history, is read by the same readers and read back
with the rest: in every rule the checks must flag it and find its one lost write, or they
cannot see. After each rule the replicas must converge to their primaries. The vectors' own
count and the script's replies are reported as mechanism.RULE.* (shown, never judged).

A rule's `seconds` start when all its threads have connected and met at a start gate,
and a rule in which no writer made an update fails the case with the first error.
The threads of a rule stop at its deadline or when the run is interrupted: a Ctrl-C, a
SIGTERM or a SIGHUP in the main thread sets their stop event and joins them (interrupts held back
meanwhile) before it goes on, so that no thread outlives the run or meets a stopped cluster.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any, cast

from harness.base import stats
from harness.base.errors import BadInput
from harness.base.signals import deferred_interrupts
from harness.base.text_data import GPTCACHE_FILE, texts_from_records
from harness.experiments.prompt_cas import history, known, metrics
from harness.experiments.prompt_cas.series import RULES
from harness.infra.cluster import slot_owners
from harness.model.driver_contract import CaseContext, Metric, Param, Record, register

MODES = ("plain", "atomic", "as-written", "incremented", "equal")
GATE_TIMEOUT_S = 60.0  # the longest the threads of a rule wait for each other to connect
CANARY = "pp:{canary}"  # a pair mixed on purpose, with one lost write in its history: the instruments' control
CANARY_SHARE = 0.1  # the share of reads that go to the canary pair

# KEYS[1]: the pair's hash. ARGV: rule ('dominated' | 'equal'), the client's vector,
# prompt, response, the writer's 1-based index, the write's id. Returns 1 when applied, 0 when
# refused.
CAS_LUA = """
local function parse(s)
  local t = {}
  for x in string.gmatch(s or '', '[^,]+') do t[#t + 1] = tonumber(x) end
  return t
end
local s = parse(redis.call('HGET', KEYS[1], 'vv'))
local c = parse(ARGV[2])
if #s ~= #c then
  return redis.error_reply('version vector: ' .. #s .. ' counters stored, ' .. #c .. ' sent')
end
local le, eq = true, true
for i = 1, #c do
  if s[i] > c[i] then le = false end
  if s[i] ~= c[i] then eq = false end
end
local new
if ARGV[1] == 'dominated' then
  if not (le and not eq) then return 0 end
  new = ARGV[2]
elseif ARGV[1] == 'equal' then
  if not eq then return 0 end
  local w = tonumber(ARGV[5])
  c[w] = c[w] + 1
  new = table.concat(c, ',')
else
  return redis.error_reply('unknown rule ' .. tostring(ARGV[1]))
end
redis.call('HSET', KEYS[1], 'prompt', ARGV[3], 'response', ARGV[4], 'vv', new, 'wid', ARGV[6])
return 1
"""

PARAMS = {
    "modes": Param(list, list(MODES), "update rules to run; the order rotates by one per repetition", choices=MODES),
    "seconds": Param(float, 3.0, "how long writers and readers run per rule", min=0.1),
    "writers": Param(int, 8, "writer threads (one version-vector counter each)", min=1),
    "readers": Param(int, 2, "reader threads; each alternates between primaries and replicas", min=1),
    "keys": Param(int, 8, "pairs written concurrently (fewer keys, more contention)", min=1),
    "pairs": Param(
        str,
        str(GPTCACHE_FILE),
        "JSON list of {origin, similar}: origin is the prompt, similar its only correct partner",
    ),
    "seed": Param(int, 20261129, "seed of the writers' choices"),
    "min_reads_per_reader": Param(
        int,
        50,
        "reads each reader must make on the primaries (and on the replicas) for "
        "a rule's mix-up counts to be measured; fewer: not measured (50 reads miss "
        "a 25% mix-up rate, the plain control's here, with odds 0.75^50 < 1e-6)",
        min=1,
    ),
}


def _check(where: str, p: dict) -> None:
    if not p["modes"]:
        raise BadInput(f"{where}.modes: give at least one of {', '.join(MODES)}")


def load_pairs(path: str) -> dict[str, str]:
    """prompt -> its one correct response, from a JSON list of {origin, similar}. A prompt
    that appears twice with different partners is dropped (it has no single partner)."""

    texts = texts_from_records(path, ("origin", "similar"), "prompt-cas pairs")
    if len(texts) % 2:
        raise BadInput(f"{path}: every record needs both 'origin' and 'similar' (prompt and response)")
    pairs: dict[str, str] = {}
    clash = set()
    for prompt, response in zip(texts[0::2], texts[1::2]):
        if pairs.get(prompt, response) != response:
            clash.add(prompt)
        pairs[prompt] = response
    for p in clash:
        del pairs[p]
    if len(pairs) < 2:
        raise BadInput(f"{path}: fewer than 2 prompts with a single partner; give more pairs")
    return pairs


def encode(vv: list[int]) -> str:
    return ",".join(str(int(x)) for x in vv)


def decode(text: bytes | str | None, n: int) -> list[int]:
    if text is None:
        return [0] * n
    if isinstance(text, bytes):
        text = text.decode()
    return [int(float(x)) for x in text.split(",")]


def _s(v) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


class Tally:
    """Counters and histories shared by the threads of one rule."""

    def __init__(self):
        self.lock = threading.Lock()
        self.n = {
            "attempts": 0,
            "told_applied": 0,
            "errors": 0,
            "reads": 0,
            "replica_reads": 0,
            "reader_errors": 0,
            "replica_connections_not_replica": 0,
        }
        self.per_reader: dict[int, dict[str, int]] = {}  # reader -> {"reads": n, "replica_reads": n}
        self.latencies: list[float] = []
        self.history: list[history.Attempt] = []  # every write, as its writer saw it
        self.seen: Counter = Counter()  # (key, Value read, on a replica) -> times read
        # (key, Value read, on a replica) -> reads whose value differed from the same reader's previous
        # read of that pair on that side: the server's reply changed (a write landed between them)
        self.fresh: Counter = Counter()
        self.first_error = ""
        self.first_reader_error = ""
        self.stop = threading.Event()  # set on an interrupt
        self.deadline = 0.0  # set by the start gate's action, when every thread has connected
        self.gate: threading.Barrier | None = None

    def open_gate(self, parties: int, seconds: float, timeout: float = GATE_TIMEOUT_S) -> None:
        """The rule's clock starts when all `parties` threads are connected and at the gate,
        not when they were created: connecting a cluster client on a loaded machine can
        take longer than a short rule, which then made no attempt at all."""

        def start():
            self.deadline = time.monotonic() + seconds

        self.gate = threading.Barrier(parties, action=start, timeout=timeout)

    def wait_gate(self) -> bool:
        """Wait at the start gate; False when it was broken (an interrupt, or a thread that
        never came within the gate's timeout): the thread then makes no attempt."""
        try:
            cast(threading.Barrier, self.gate).wait()  # open_gate comes first, before any thread starts
            return True
        except threading.BrokenBarrierError:
            return False

    def running(self) -> bool:
        return time.monotonic() < self.deadline and not self.stop.is_set()

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                self.n[k] += v


def _send(c, script, mode: str, w: int, key: str, read: list[int], wid: str, prompt: str, response: str) -> bool:
    """Write one pair under `mode`, based on the vector `read`; True when the mechanism said applied."""
    if mode == "plain":
        read[w] += 1
        c.hset(key, "prompt", prompt)
        c.hset(key, "response", response)
        c.hset(key, mapping={"vv": encode(read), "wid": wid})
        return True
    if mode == "atomic":
        read[w] += 1
        c.hset(key, mapping={"prompt": prompt, "response": response, "vv": encode(read), "wid": wid})
        return True
    sent = list(read)
    if mode == "incremented":
        sent[w] += 1
    rule = "equal" if mode == "equal" else "dominated"
    return bool(int(script(keys=[key], args=[rule, encode(sent), prompt, response, w + 1, wid])))


def _writer(target, mode: str, w: int, n: int, keys: list[str], pairs: list[tuple], seed: int, tally: Tally) -> None:
    """Write random pairs to random keys until the deadline, each write with a unique id, and
    keep this writer's history: what it read (the parent id), what it sent, what it was told."""
    rng = random.Random(seed * 1000 + w)
    lat: list[float] = []
    mine: list[history.Attempt] = []
    try:
        c = target.cluster_client()
    except Exception as e:  # noqa: BLE001 - a writer that cannot connect makes no attempt; reported
        tally.first_error = tally.first_error or f"{type(e).__name__}: {e}"
        tally.wait_gate()
        return
    script = c.register_script(CAS_LUA)
    try:
        if not tally.wait_gate():
            return
        while tally.running():
            key = rng.choice(keys)
            prompt, response = rng.choice(pairs)
            wid, parent = f"w{w}.{len(mine) + 1}", None
            t0 = time.perf_counter()
            try:
                vv, parent = c.hmget(key, ["vv", "wid"])
                parent = _s(parent)
                ok = _send(c, script, mode, w, key, decode(vv, n), wid, prompt, response)
            except Exception as e:  # noqa: BLE001 - counted and reported, the run goes on
                mine.append(history.Attempt(key, wid, parent, prompt, response, history.ERROR))
                tally.add(attempts=1, errors=1)
                tally.first_error = tally.first_error or f"{type(e).__name__}: {e}"
                continue
            lat.append(time.perf_counter() - t0)
            mine.append(history.Attempt(key, wid, parent, prompt, response, history.APPLIED if ok else history.REFUSED))
            tally.add(attempts=1, told_applied=int(ok))
    finally:
        c.close()
        with tally.lock:
            tally.latencies += lat
            tally.history += mine


def _reader(target, r: int, keys: list[str], owners: dict, tally: Tally) -> None:
    """Read random pairs, alternately on primaries and (READONLY) replicas, and keep every pair
    read; they are judged against the writers' histories once the writers are done. About one
    read in CANARY_SHARE goes to the canary pair (mixed on purpose), counted apart."""
    from redis.crc import key_slot

    rng = random.Random(r)
    clients: dict
    seen: Counter
    fresh: Counter
    last: dict
    clients, seen, fresh, last = {}, Counter(), Counter(), {}
    with tally.lock:
        mine = tally.per_reader.setdefault(r, {"reads": 0, "replica_reads": 0})

    def conn(node, replica: bool):
        k = (node.address, replica)
        if k not in clients:
            clients[k] = target.client(node)
            if replica:
                clients[k].execute_command("READONLY")
                # the node itself says whether it is a replica (not the reader's own bookkeeping):
                # a "replica" read that reaches a primary would see every write at once
                role = clients[k].execute_command("ROLE")
                if str(role[0].decode() if isinstance(role[0], bytes) else role[0]) != "slave":
                    tally.add(replica_connections_not_replica=1)
        return clients[k]

    try:
        if not tally.wait_gate():
            return
        i = 0
        while tally.running():
            key = CANARY if rng.random() < CANARY_SHARE else rng.choice(keys)
            primary, replicas = owners[key_slot(key.encode())]
            replica = bool(replicas) and i % 2 == 1
            node = rng.choice(replicas) if replica else primary
            i += 1
            v = as_value(conn(node, replica).hgetall(key))
            seen[(key, v, replica)] += 1
            if last.get((key, replica), ()) != v:  # the server's reply changed since this reader's last read there
                fresh[(key, v, replica)] += 1
                last[(key, replica)] = v
            if key != CANARY:
                with tally.lock:
                    mine["replica_reads" if replica else "reads"] += 1
    except Exception as e:  # noqa: BLE001 - a reader that fails stops; its short count is what tells
        tally.add(reader_errors=1)
        tally.first_reader_error = tally.first_reader_error or f"reader {r}: {type(e).__name__}: {e}"
    finally:
        for cl in clients.values():
            cl.close()
        with tally.lock:
            tally.seen.update(seen)
            tally.fresh.update(fresh)


def as_value(h: dict) -> history.Value | None:
    """An HGETALL reply as a pair (None: no pair there)."""
    if not h:
        return None
    return history.Value(_s(h.get(b"wid")), _s(h.get(b"prompt")), _s(h.get(b"response")))


def read_back(target, keys: list[str], owners: dict, wait_s: float = 5.0) -> dict:
    """Each key's pair on its primary, and on its replicas once they converge to it (or
    `wait_s` passes): {"primary": {key: HGETALL}, "replicas": {key: [HGETALL, ...]}, "diverged": n}."""
    from redis.crc import key_slot

    out: dict[str, Any] = {"primary": {}, "replicas": {}, "diverged": 0}
    deadline = time.monotonic() + wait_s
    for key in keys:
        primary, replicas = owners[key_slot(key.encode())]
        pc = target.client(primary)
        ph = out["primary"][key] = pc.hgetall(key)
        pc.close()
        out["replicas"][key] = []
        for rep in replicas:
            rc = target.client(rep)
            rc.execute_command("READONLY")
            rh = rc.hgetall(key)
            while rh != ph and time.monotonic() < deadline:
                time.sleep(0.05)
                rh = rc.hgetall(key)
            rc.close()
            out["replicas"][key].append(rh)
            out["diverged"] += int(rh != ph)
    return out


def seed_pairs(target, keys: list[str], items: list[tuple], n: int) -> tuple[dict, list]:
    """Seed every key (vectors at zero) and the canary pair: a mixed pair (a prompt with another
    prompt's partner) that readers must flag, then overwritten blindly by two acknowledged
    writes of the harness that both read the seed, so that the read-back must find one of
    them lost; a third write read the second and was written, though its history says it was
    refused, which the read-back must find applied; a fourth read the third and was refused
    with nothing in conflict (never sent), which the read-back must find. Returns ({key: seed
    Value}, the canary's history)."""
    seeds = {key: history.Value(f"seed.{i}", *items[i % len(items)]) for i, key in enumerate(keys)}
    prompt = items[0][0]
    wrong = next(r for p, r in items if r != items[0][1])
    seeds[CANARY] = history.Value("canary.seed", prompt, wrong)
    canary = [history.Attempt(CANARY, f"canary.{i}", "canary.seed", prompt, wrong, history.APPLIED) for i in (1, 2)]
    canary.append(history.Attempt(CANARY, "canary.4", "canary.2", prompt, wrong, history.REFUSED))
    refused = history.Attempt(CANARY, "canary.3", "canary.4", prompt, wrong, history.REFUSED)
    c = target.cluster_client()
    try:
        for key, s in seeds.items():
            c.delete(key)
            c.hset(key, mapping={"prompt": s.prompt, "response": s.response, "vv": encode([0] * n), "wid": s.wid})
        for a in canary:  # what a client without CAS does: read the seed, write over whatever is there
            c.hset(CANARY, mapping={"prompt": a.prompt, "response": a.response, "wid": a.wid})
    finally:
        c.close()
    return seeds, canary + [refused]


def judge_rule(tally: Tally, seeds: dict, back: dict, pairs: dict, n: int) -> dict:
    """The rule's observed counts: the writers' histories against the final read-back, the
    readers' pairs against the histories; and the mechanism's own (vectors, replies), shown only."""
    final = {k: as_value(h) for k, h in back["primary"].items()}
    verdicts = history.judge_writes(tally.history, seeds, final)
    sent = {a.wid: history.Value(a.wid, a.prompt, a.response) for a in tally.history}
    sent.update({s.wid: s for s in seeds.values()})
    real = [k for k in seeds if k != CANARY]
    out = {
        k: sum(getattr(verdicts[key], k) for key in real)
        for k in ("chain", "lost", "refused_but_applied", "unjustified_refusals")
    }
    out["foreign_final_keys"] = sum(verdicts[k].foreign for k in real)
    out["canary_lost_updates"] = verdicts[CANARY].lost
    out["canary_unjustified_refusals"] = verdicts[CANARY].unjustified_refusals
    out["canary_refused_but_applied"] = verdicts[CANARY].refused_but_applied
    for name in (
        "mixups_read",
        "replica_mixups_read",
        "canary_mixups_read",
        "canary_replica_mixups_read",
        "canary_reads",
        "canary_replica_reads",
    ):
        out[name] = 0
    for (key, v, replica), count in tally.seen.items():
        where = ("canary_" if key == CANARY else "") + ("replica_" if replica else "")
        out[where + "mixups_read"] += count * int(v is None or history.mixed(v, pairs, sent))
        if key == CANARY:
            out[where + "reads"] += count
    out["mixups_final"] = sum((got := final[k]) is None or history.mixed(got, pairs, sent) for k in real)
    out["replica_mixups_final"] = sum(
        (got := as_value(h)) is None or history.mixed(got, pairs, sent) for k in real for h in back["replicas"][k]
    )
    told = Counter(a.key for a in tally.history if a.told == history.APPLIED)
    out["vv_lost_updates"] = sum(told[k] - sum(decode(back["primary"][k].get(b"vv"), n)) for k in real)
    out.update(exercise_counts(tally, real, back))
    return out


def exercise_counts(tally: Tally, real: list[str], back: dict) -> dict:
    """What shows that the situations C20's zeros are about arose in this rule, and what each zero
    is out of, counted outside the mechanism (issue 52): from the writers' histories (the write id
    each read before sending, what it was told) and from the readers' and the read-back's server
    replies; never from the vectors or the script's own counts."""
    ex = history.exercise(tally.history, real)
    writes = {a.wid: a.key for a in tally.history if a.key in set(real)}
    return {
        "acked_writes": ex.acked,
        "refused_writes": ex.refused,
        "conflicting_writes": ex.conflicting,
        "conflicts_refused": ex.conflicts_refused,
        "reads_of_new_writes": history.reads_of_new_writes(tally.fresh, writes, replica=False),
        "replica_reads_of_new_writes": history.reads_of_new_writes(tally.fresh, writes, replica=True),
        "replica_copies_read_back": sum(len(back["replicas"][k]) for k in real),
    }


def run_mode(target, mode: str, p: dict, pairs: dict, items: list[tuple], owners: dict, log) -> dict:
    """One rule: seed the pairs, run writers and readers, then judge what the writers were told
    against the final read-back. `items` is `pairs` as a sorted list (what the writers pick from)."""
    n = p["writers"]
    keys = [f"pp:{{k{i}}}" for i in range(p["keys"])]
    seeds, canary = seed_pairs(target, keys, items, n)
    read_back(target, keys + [CANARY], owners)  # replicas hold the seeds before anyone reads them
    tally = Tally()
    tally.history += canary
    tally.open_gate(n + p["readers"], p["seconds"])
    threads = [
        threading.Thread(
            target=_writer, args=(target, mode, w, n, keys, items, p["seed"], tally), name=f"prompt-cas-writer-{w}"
        )
        for w in range(n)
    ]
    threads += [
        threading.Thread(target=_reader, args=(target, r, keys, owners, tally), name=f"prompt-cas-reader-{r}")
        for r in range(p["readers"])
    ]
    run_threads(threads, tally.stop, tally.gate)
    back = read_back(target, keys + [CANARY], owners)
    lat_ms = [1000 * x for x in tally.latencies]
    reads = {
        k: sum(c for (key, _, rep), c in tally.seen.items() if key != CANARY and rep == (k == "replica_reads"))
        for k in ("reads", "replica_reads")
    }
    out = dict(
        tally.n,
        **reads,
        **judge_rule(tally, seeds, back, pairs, n),
        replica_diverged_keys=back["diverged"] - sum(h != back["primary"][CANARY] for h in back["replicas"][CANARY]),
        p50_ms=stats.percentile(lat_ms, 50) if lat_ms else None,
        p99_ms=stats.percentile(lat_ms, 99) if lat_ms else None,
        first_error=tally.first_error,
        first_reader_error=tally.first_reader_error,
        **reads_per_reader(tally.per_reader, p["readers"]),
    )
    log(
        f"{mode}: {out['attempts']} attempts, {out['told_applied']} told applied, {out['chain']} found applied, "
        f"{out['lost']} lost, {out['unjustified_refusals']} refused without a conflict, mix-ups seen "
        f"{out['mixups_read']}/{out['reads']} on primaries and {out['replica_mixups_read']}/{out['replica_reads']} "
        f"on replicas, {out['errors']} errors" + (f"; {tally.first_reader_error}" if tally.first_reader_error else "")
    )
    return out


def run_threads(threads: list[threading.Thread], stop: threading.Event, gate: threading.Barrier | None = None) -> None:
    """Start the threads and join them; on an interrupt (KeyboardInterrupt, Terminated, HungUp) set
    `stop`, break the start `gate` (threads still waiting there leave) and join them all,
    with further interrupts held back, then let it go on."""
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:
        with deferred_interrupts():
            stop.set()
            if gate is not None:
                gate.abort()
            for t in threads:
                if t.ident is not None:
                    t.join()
        raise


def reads_per_reader(per_reader: dict[int, dict[str, int]], readers: int) -> dict:
    """The fewest reads any reader made, on primaries and on replicas (a reader that never
    started counts 0)."""
    rows = [per_reader.get(r, {"reads": 0, "replica_reads": 0}) for r in range(readers)]
    return {
        "reader_min_reads": min(x["reads"] for x in rows),
        "reader_min_replica_reads": min(x["replica_reads"] for x in rows),
    }


def mixups_measured(r: dict, min_reads: int, replicas: bool) -> tuple[bool, bool]:
    """(primary mix-ups measured, replica mix-ups measured): every reader read at least
    `min_reads` times there. Without replicas the replica count is never measured."""
    return r["reader_min_reads"] >= min_reads, replicas and r["reader_min_replica_reads"] >= min_reads


def rule_metrics(r: dict, min_reads: int, replicas: bool) -> dict[str, Metric]:
    """One rule's metrics, each observed outside the mechanism (the writers' histories against
    the final read-back; the readers' pairs against the histories). The mix-up counts read are
    left out (not measured) unless every reader made `min_reads` reads where they were counted;
    their row values become None. The mechanism's own numbers: mechanism_metrics."""
    r["applied"] = r["chain"]
    r["applied_pct"] = 100.0 * r["chain"] / r["attempts"] if r["attempts"] else None
    r["lost_updates"] = r["lost"]
    r["update_p50_ms"], r["update_p99_ms"] = r["p50_ms"], r["p99_ms"]
    primary_ok, replica_ok = mixups_measured(r, min_reads, replicas)
    r["mixups_read"] = r["mixups_read"] if primary_ok else None
    r["replica_mixups_read"] = r["replica_mixups_read"] if replica_ok else None
    m = {
        "attempts": Metric(r["attempts"], "updates"),
        "applied_pct": Metric(
            r["applied_pct"],
            "%",
            "higher",
            "writes found in the final read-back (on a pair's chain of write ids) per attempt",
        ),
        "lost_updates": Metric(
            r["lost"], "updates", "lower", "writes told applied whose effect the final read-back lacks (off the chain)"
        ),
        "unjustified_refusals": Metric(
            r["unjustified_refusals"],
            "updates",
            "lower",
            "writes told refused though the value they read is still the final one",
        ),
        "refused_but_applied": Metric(
            r["refused_but_applied"], "updates", "lower", "writes told refused that the final read-back contains"
        ),
        "foreign_final_keys": Metric(
            r["foreign_final_keys"],
            "keys",
            "lower",
            "pairs whose final value no write sent, or whose chain misses the seed",
        ),
        "mixups_read": Metric(
            r["mixups_read"],
            "reads",
            "lower",
            f"mixed pairs read on primaries (against the prompt's partner and the writers' "
            f"histories); measured when every reader read >= {min_reads} times",
        ),
        "replica_mixups_read": Metric(
            r["replica_mixups_read"],
            "reads",
            "lower",
            f"mixed pairs read on replicas; measured when every reader read them >= {min_reads} times",
        ),
        **{k: Metric(r[k], u, None, d) for k, u, d in CANARY_METRICS},
        "reader_min_reads": Metric(r["reader_min_reads"], "reads", "higher", "fewest primary reads of one reader"),
        "reader_min_replica_reads": Metric(
            r["reader_min_replica_reads"], "reads", "higher", "fewest replica reads of one reader"
        ),
        "reader_errors": Metric(r["reader_errors"], "readers", "lower", "readers stopped by an error"),
        "mixups_final": Metric(r["mixups_final"], "keys", "lower"),
        "replica_mixups_final": Metric(r["replica_mixups_final"], "keys", "lower"),
        "replica_diverged_keys": Metric(r["replica_diverged_keys"], "keys", "lower"),
        "replica_connections_not_replica": Metric(
            r["replica_connections_not_replica"],
            "connections",
            "lower",
            "readers' replica connections whose node answered ROLE as anything but a replica",
        ),
        **{k: Metric(r[k], u, None, d) for k, u, d in EXERCISE_METRICS},
        "errors": Metric(r["errors"], "updates", "lower"),
        "update_p50_ms": Metric(r["p50_ms"], "ms", "lower"),
        "update_p99_ms": Metric(r["p99_ms"], "ms", "lower"),
    }
    return {k: v for k, v in m.items() if v.value is not None}


# What each of C20's zeros is out of, and what shows that its situation arose in the rule (issue
# 52): counted from the writers' histories and the servers' replies, outside the mechanism.
EXERCISE_METRICS = (
    ("reads", "reads", "pairs read on primaries and checked for mix-ups (the canary's apart)"),
    ("replica_reads", "reads", "pairs read on replicas (READONLY) and checked for mix-ups (the canary's apart)"),
    ("acked_writes", "updates", "writes whose writer was told applied (the writers' histories)"),
    ("refused_writes", "updates", "writes whose writer was told refused (the writers' histories)"),
    (
        "conflicting_writes",
        "updates",
        "writes that raced another: per value a writer read (its write id, in the "
        "server's reply), every write sent on it but one; a CAS may apply only one",
    ),
    (
        "conflicts_refused",
        "updates",
        "writes told refused that read the same value as another write sent: "
        "conflicting writes that reached the CAS and were refused",
    ),
    (
        "reads_of_new_writes",
        "reads",
        "primary reads whose reply was a write made in this rule (its id in the "
        "writers' histories) and differed from that reader's previous read of the pair: "
        "served by the server after a concurrent write, not a copy",
    ),
    (
        "replica_reads_of_new_writes",
        "reads",
        "replica reads (READONLY) whose reply was a write made in this rule "
        "and differed from that reader's previous replica read of the pair: "
        "the replica served a write made during the run",
    ),
    ("replica_copies_read_back", "keys", "replica copies of the pairs read back after the rule (pairs x replicas)"),
)

CANARY_METRICS = (
    ("canary_mixups_read", "reads", "reads of the canary pair (mixed on purpose) on primaries flagged mixed"),
    ("canary_replica_mixups_read", "reads", "reads of the canary pair on replicas flagged mixed"),
    ("canary_reads", "reads", "reads of the canary pair on primaries"),
    ("canary_replica_reads", "reads", "reads of the canary pair on replicas"),
    ("canary_lost_updates", "updates", "the canary's two blind acknowledged writes: the read-back must find 1 lost"),
    (
        "canary_unjustified_refusals",
        "updates",
        "the canary's write refused with nothing in conflict: the read-back must find 1",
    ),
    (
        "canary_refused_but_applied",
        "updates",
        "the canary's write recorded as refused but written: the read-back must find 1",
    ),
)


def mechanism_metrics(r: dict) -> dict[str, Metric]:
    """The mechanism's own bookkeeping, shown beside the observed numbers and never judged: the
    share of writes it said it applied, and lost updates computed from the version vectors it
    wrote (told applied minus the final vectors' sum)."""
    told_pct = 100.0 * r["told_applied"] / r["attempts"] if r["attempts"] else None
    m = {
        "told_applied_pct": Metric(told_pct, "%", None, "writes the mechanism said it applied (its replies)"),
        "vv_lost_updates": Metric(
            r["vv_lost_updates"],
            "updates",
            None,
            "told applied minus the final version vectors' sum (the mechanism's vectors)",
        ),
    }
    return {k: v for k, v in m.items() if v.value is not None}


ROW_COLUMNS = tuple(c.name for c in RULES.columns if c.name != "rule")  # a rule's row: its counts, as declared


def order_for(modes: list[str], repetition: int) -> list[str]:
    """The rules' order in one repetition: rotated by one per repetition, so that controls
    and CAS rules are interleaved rather than always first or last."""
    k = (repetition - 1) % len(modes)
    return list(modes[k:]) + list(modes[:k])


@register(
    "prompt-cas-rules",
    params=PARAMS,
    needs="cluster",
    check=_check,
    metrics=metrics.RULES,
    description="prompt/response pairs updated by concurrent writers under version-vector CAS rules",
)
def run(ctx: CaseContext) -> Record:
    p = ctx.params
    pairs = load_pairs(p["pairs"])
    items = sorted(pairs.items())
    owners = slot_owners(ctx.target)
    replicas = any(reps for _, reps in owners.values())
    metrics: dict[str, Metric] = {}
    cols: dict[str, list] = {RULES["rule"]: [], **{c: [] for c in ROW_COLUMNS}}
    order = order_for(p["modes"], ctx.repetition)
    short: dict[str, list] = {}
    for mode in order:
        r = run_mode(ctx.target, mode, p, pairs, items, owners, ctx.log)
        if not r["attempts"]:
            return Record(
                "failed",
                f"{mode}: no writer made an update"
                + (f"; first error: {r['first_error']}" if r["first_error"] else ""),
                metrics=metrics,
            )
        if r["errors"] == r["attempts"]:
            return Record("failed", f"{mode}: every update failed; first error: {r['first_error']}", metrics=metrics)
        m = rule_metrics(r, p["min_reads_per_reader"], replicas)
        metrics.update({f"{mode}.{k}": v for k, v in m.items()})
        metrics.update({f"mechanism.{mode}.{k}": v for k, v in mechanism_metrics(r).items()})
        cols[RULES["rule"]].append(mode)
        for c in ROW_COLUMNS:
            cols[c].append(r[c])
        if r["first_reader_error"] or "mixups_read" not in m or (replicas and "replica_mixups_read" not in m):
            short.setdefault("mixups_not_measured", []).append(
                f"{mode}: fewest reads per reader {r['reader_min_reads']} on primaries, "
                f"{r['reader_min_replica_reads']} on replicas (need {p['min_reads_per_reader']})"
                + (f"; {r['first_reader_error']}" if r["first_reader_error"] else "")
            )
    series = {
        RULES.name: RULES.make(
            cols,
            f"{p['writers']} writers and {p['readers']} readers on {p['keys']} pairs for {p['seconds']:g} s per rule",
        )
    }
    metrics.update(known_metrics())
    wrong = known.failures(exercise_counts)
    if wrong:
        short["exercise_counters_wrong"] = wrong
    return Record("ok", metrics=metrics, series=series, details={"order": order, **short})


def known_metrics() -> dict[str, Metric]:
    """The exercise counters' own instrument (issue 52): the counting code the rules are judged
    with (exercise_counts), run on small histories whose counts are known (known.py); per counter,
    the share of those it counts right. A counter that counts the wrong thing clears its minimum
    in the run and fails here."""
    pct = known.known_pct(exercise_counts)
    out = {
        f"instrument.{k}_known_pct": Metric(
            v, "%", "higher", f"known histories whose {k.replace('_', ' ')} this run's counting code gives right"
        )
        for k, v in pct.items()
        if k != "exercise_counters"
    }
    out["instrument.exercise_counters_known_pct"] = Metric(
        pct["exercise_counters"],
        "%",
        "higher",
        "known counts (every exercise counter on every known history) this run's counting code gives right",
    )
    return out
