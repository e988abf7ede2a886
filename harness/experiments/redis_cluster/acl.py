"""Redis ACLs for the source's read-only inference user (source section 4.4, claim C21).

The source gives the rule `~cache:* +get +hgetall -@all` for a user that "can only read the
cache". Its inference user is called `trt-infer` here; the notes do not give a separate rule
for it, so it is the least-privilege inference user the source describes: GET and HGETALL on
`cache:*` keys and nothing else. Each rule is installed for that user on every node (ACL
users are per node; a cluster does not replicate them) and tried with the same probes on
the node that owns the probe keys:

- reads: what the user must be able to do (GET and HGETALL of cache keys);
- forbidden: at least 10 things it must not do (writes, FLUSHALL, CONFIG, EVAL, KEYS,
  SCAN, ACL, CLUSTER RESET, other key prefixes...). Only a NOPERM reply counts as refused;
  any other error (a wrong type, a cluster error) is counted apart and is NOT a denial.

Rules apply left to right: as written, the final `-@all` removes what came before it. The
working order `-@all +get +hgetall ~cache:*` is the control that shows the same probes can
grant the reads, and `-@all +@read ~*` (every read command on every key) is the control
that shows a refusal check can fail. FLUSHALL and CLUSTER RESET are first asked with
ACL DRYRUN: when a rule would grant them they are counted as granted and never sent.

What the node itself saw (issue 52: a count of refusals is evidence only if the probes reached
the node under test): around every probe the owning node's INFO commandstats is read through
the harness's admin connection, and the probe counts as reached when its own command's
counters there (calls + rejected_calls + failed_calls, e.g. `cmdstat_config|get`) grew; a
probe that ACL DRYRUN granted counts as reached when the node's `acl|dryrun` calls grew. Only
the probe's own entry counts: the harness's own commands on that node (its INFO, ACL LOG) and
the node's housekeeping (REPLCONF from its replicas, connection set-up) grow whatever the probe
does and are left out (NOT_PROBES). The node's ACL LOG entries for the user (their counts,
before and after each rule) are the server's own record of the denials: the ledger asks for at
least one logged denial per NOPERM the client saw. Neither is the probe client's count.

Whose connection a probe goes on (issue 63): each probe is sent on a connection of its own,
logged in as the user, and only once `ACL WHOAMI` on that very connection has named the user
(`as_user`; the user is granted ACL WHOAMI for it, after the rule). A login that did not take
effect (a proxy that answers AUTH itself, a server that ignores it) would leave the connection
running as the admin: the case then fails with one line and sends no probe. The user may not be
`default` nor the identity the harness administers the cluster with. Destructive probes
(FLUSHALL, CLUSTER RESET; `destructive`) are sent only to a cluster the harness started
(`started_by_harness`: every node's process is one a cluster state file of the harness names,
with its start time); elsewhere a harmless command the same rules refuse stands in (STAND_INS),
and the record says so.
"""

from __future__ import annotations

import ipaddress
import secrets
from pathlib import Path

from harness.base.errors import BadInput, EnvironmentProblem
from harness.experiments.redis_cluster.series import PROBE_REPLIES
from harness.infra import ownership
from harness.model.driver_contract import CaseContext, Metric, Param, Record

SOURCE_RULE = "~cache:* +get +hgetall -@all"
WORKING_RULE = "-@all +get +hgetall ~cache:*"
READ_ALL_RULE = "-@all +@read ~*"
# "source": as written; "fixed": the working order; "read-all": the refusal control
DEFAULT_RULES = {"source": SOURCE_RULE, "fixed": WORKING_RULE, "read-all": READ_ALL_RULE}
DESTRUCTIVE = ("FLUSHALL", "CLUSTER")  # asked with ACL DRYRUN first: never run, even if a rule grants them
# Commands that change or end what a server holds (its data, its cluster membership, its
# configuration, the server itself): as probes they go only to a cluster the harness started.
DESTRUCTIVE_COMMANDS = frozenset(
    {"FLUSHALL", "FLUSHDB", "SHUTDOWN", "DEBUG", "SWAPDB", "MIGRATE", "RESTORE", "REPLICAOF", "SLAVEOF", "FAILOVER"}
    | {"MODULE", "SAVE", "BGSAVE", "BGREWRITEAOF"}
)
DESTRUCTIVE_SUBCOMMANDS = {
    "CLUSTER": frozenset(
        {"RESET", "FAILOVER", "FORGET", "MEET", "REPLICATE", "ADDSLOTS", "ADDSLOTSRANGE", "DELSLOTS", "DELSLOTSRANGE"}
        | {"FLUSHSLOTS", "SETSLOT", "SAVECONFIG", "SET-CONFIG-EPOCH", "BUMPEPOCH"}
    ),
    "CONFIG": frozenset({"SET", "RESETSTAT", "REWRITE"}),
    "SCRIPT": frozenset({"FLUSH", "KILL"}),
    "FUNCTION": frozenset({"FLUSH", "DELETE", "RESTORE", "LOAD", "KILL"}),
    "ACL": frozenset({"SETUSER", "DELUSER", "LOAD", "SAVE"}),
    "CLIENT": frozenset({"KILL", "PAUSE"}),
}
# On a cluster the harness did not start, a destructive probe is asked with ACL DRYRUN as it is
# and this harmless command, which every rule here refuses as it refuses the probe, is sent instead
STAND_INS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("FLUSHALL",): ("LASTSAVE",),
    ("CLUSTER", "RESET", "SOFT"): ("CLUSTER", "MYID"),
}
WHOAMI_GRANT = "+acl|whoami"  # granted after the rule: the harness checks each probe connection's login with it

CACHE_STRING, CACHE_HASH = "cache:{acl}:s", "cache:{acl}:h"
OTHER_STRING, OTHER_HASH = "other:{acl}:s", "other:{acl}:h"
# (what it tries, command and arguments, kind): "read" must work; every other kind (a write, a key
# of another prefix, a command outside the allowed set) must be refused with NOPERM
PROBES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("GET a cache key", ("GET", CACHE_STRING), "read"),
    ("HGETALL a cache key", ("HGETALL", CACHE_HASH), "read"),
    ("SET a cache key", ("SET", CACHE_STRING, "x"), "write"),
    ("DEL a cache key", ("DEL", CACHE_STRING), "write"),
    ("HSET a cache key", ("HSET", CACHE_HASH, "f", "x"), "write"),
    ("EXPIRE a cache key", ("EXPIRE", CACHE_STRING, "1"), "write"),
    ("GET another prefix", ("GET", OTHER_STRING), "other-key"),
    ("HGETALL another prefix", ("HGETALL", OTHER_HASH), "other-key"),
    ("MGET cache keys", ("MGET", CACHE_STRING, CACHE_STRING), "command"),
    ("KEYS", ("KEYS", "cache:*"), "command"),
    ("SCAN", ("SCAN", "0"), "command"),
    ("FLUSHALL", ("FLUSHALL",), "command"),
    ("CONFIG GET", ("CONFIG", "GET", "maxmemory"), "command"),
    ("EVAL", ("EVAL", "return 1", "0"), "command"),
    ("ACL LIST", ("ACL", "LIST"), "command"),
    ("CLUSTER RESET", ("CLUSTER", "RESET", "SOFT"), "command"),
)
N_ALLOWED = sum(k == "read" for _, _, k in PROBES)
N_FORBIDDEN = len(PROBES) - N_ALLOWED
N_WRITES = sum(k == "write" for _, _, k in PROBES)
N_OTHER_KEYS = sum(k == "other-key" for _, _, k in PROBES)
CONTAINERS = ("CONFIG", "ACL", "CLUSTER")  # commands whose subcommand names the commandstats entry
# Commands that grow on the owning node whatever the probes do: the harness's own reads of it (INFO
# commandstats, ACL LOG), connection set-up, and the replicas' and the cluster's housekeeping
# (REPLCONF ACK every second). They are left out of what a probe is judged to have grown: the
# admin's INFO alone grows `info` around every probe, so "something grew" says nothing (issue 52).
NOT_PROBES = frozenset(
    {
        "info",
        "acl|log",
        "replconf",
        "ping",
        "auth",
        "hello",
        "client|setinfo",
        "client|setname",
        "select",
        "readonly",
        "cluster|slots",
        "cluster|shards",
        "cluster|nodes",
        "cluster|info",
        "command",
        "command|docs",
        "acl|whoami",
    }
)


def stat_name(args: tuple) -> str:
    """The INFO commandstats entry a command is counted under: 'get', 'config|get'."""
    name = str(args[0]).lower()
    return f"{name}|{str(args[1]).lower()}" if args[0] in CONTAINERS and len(args) > 1 else name


def probe_growth(before: dict[str, int], after: dict[str, int]) -> set[str]:
    """The commandstats entries that grew between two readings, the harness's own and the
    node's housekeeping (NOT_PROBES) left out: what the probe itself can have made the node count."""
    return {k for k, v in after.items() if v > before.get(k, 0) and k not in NOT_PROBES}


def reached(args: tuple, reply: str, grew: set[str]) -> bool:
    """The probe reached the node: its own command's entry grew there, or, for a probe that ACL
    DRYRUN granted (never sent), the node's acl|dryrun calls did. Another command growing (the
    harness's INFO, another client's traffic) is no sign of this probe."""
    return stat_name(args) in grew or (reply.startswith("ok (ACL DRYRUN") and "acl|dryrun" in grew)


def command_counts(admin_node_client) -> dict[str, int]:
    """The node's own count of the calls that reached each command (INFO commandstats:
    calls + rejected_calls + failed_calls), by entry name ('get', 'config|get')."""
    stats = admin_node_client.info("commandstats")
    return {
        k[len("cmdstat_") :]: int(v.get("calls", 0)) + int(v.get("rejected_calls", 0)) + int(v.get("failed_calls", 0))
        for k, v in stats.items()
        if k.startswith("cmdstat_") and isinstance(v, dict)
    }


def denials_logged(admin_node_client, user: str) -> int:
    """The node's ACL LOG: the denials it recorded for `user` (entries' counts, summed)."""
    entries = admin_node_client.execute_command("ACL", "LOG", "1000") or []
    total = 0
    for e in entries:
        e = e if isinstance(e, dict) else dict(zip(e[::2], e[1::2]))
        e = {(k.decode() if isinstance(k, bytes) else k): v for k, v in e.items()}
        who = e.get("username")
        if (who.decode() if isinstance(who, bytes) else who) == user:
            total += int(e.get("count", 0))
    return total


def destructive(args: tuple) -> bool:
    """Whether a command changes or ends what the server holds (FLUSHALL, CLUSTER RESET,
    CONFIG SET, SHUTDOWN...): never sent as a probe to a cluster the harness did not start."""
    name = str(args[0]).upper()
    sub = str(args[1]).upper() if len(args) > 1 else ""
    return name in DESTRUCTIVE_COMMANDS or sub in DESTRUCTIVE_SUBCOMMANDS.get(name, ())


def _check(where: str, p: dict) -> None:
    import re

    user = p.get("username", "trt-infer")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", str(user)) or str(user).lower() == "default":
        raise BadInput(
            f"{where}.username: {str(user)[:40]!r} cannot be the restricted user (the harness itself and every "
            f"client without a login run as 'default'); give a name of letters, digits, '.', '-' and '_', "
            f"e.g. trt-infer"
        )
    if not p["rules"]:
        raise BadInput(f"{where}.rules: give at least one rule, e.g. {{fixed: {WORKING_RULE!r}}}")
    for name, rule in p["rules"].items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}", str(name)):
            raise BadInput(
                f"{where}.rules: rule name {str(name)[:40]!r} is not allowed; use letters, digits, "
                f"'-' and '_' (it names metrics such as fixed.reads_allowed)"
            )
        if not isinstance(rule, str) or not rule.strip():
            raise BadInput(f"{where}.rules.{name}: expected ACL rule text such as {WORKING_RULE!r}")
        for word in rule.split():
            if word.startswith((">", "<", "#", "!")) or word.lower() in ("nopass", "resetpass"):
                raise BadInput(
                    f"{where}.rules.{name}: remove the password part; the harness sets the user's "
                    f"password itself (a rule gives permissions only)"
                )
            if word.lower() in ("reset", "off"):
                raise BadInput(
                    f"{where}.rules.{name}: remove {word!r}; the harness resets the user and turns it on itself"
                )


PARAMS = {
    "rules": Param(dict, DEFAULT_RULES, "name -> ACL rule text to try (reads only)"),
    "username": Param(str, "trt-infer", "the ACL user created (and deleted) on every node"),
}


def classify(reply) -> str:
    """'ok' when the command ran, 'NOPERM' when the ACL refused it, else 'error: ...'.
    Only NOPERM is a denial: any other error is reported as such."""
    import redis

    if isinstance(reply, redis.exceptions.NoPermissionError) or (
        isinstance(reply, redis.RedisError) and str(reply).startswith("NOPERM")
    ):
        return "NOPERM"
    if isinstance(reply, Exception):
        return f"error: {type(reply).__name__}: {str(reply)[:120]}"
    return "ok"


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return repr((text[0] if text else type(e).__name__)[:160])


class UserConnection:
    """One connection to a node, logged in as the ACL user; `as_user` checks it before any
    probe goes on it. It never reconnects unseen: a second connect (after a lost socket) would
    be a login nobody checked, so a probe is then refused, never sent."""

    def __init__(self, conn):
        self.conn, self.connects = conn, 0
        conn.register_connect_callback(self._connected)

    def _connected(self, _conn) -> None:
        self.connects += 1

    def execute_command(self, *args):
        import redis

        if self.connects != 1:
            raise redis.ConnectionError("the checked connection was lost; the probe was not sent on another")
        self.conn.send_command(*args)
        return self.conn.read_response()

    def close(self) -> None:
        self.conn.disconnect()


def as_user(node, user: str, password: str) -> UserConnection:
    """A connection to `node` logged in as `user`, on which ACL WHOAMI named `user`: only then
    may a probe go on it. A login that failed, or that did not take effect (a proxy answering
    AUTH itself, a server ignoring it: the connection would run as the admin), is one line
    (EnvironmentProblem) and no probe is sent."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    where = f"{node.host}:{node.port}"
    c = UserConnection(
        redis.Connection(
            host=node.host,
            port=node.port,
            username=user,
            password=password,
            socket_timeout=5,
            retry=Retry(NoBackoff(), 0),
        )
    )
    try:
        c.conn.connect()
        who = c.execute_command("ACL", "WHOAMI")
    except redis.RedisError as e:
        c.close()
        raise EnvironmentProblem(
            f"{where}: the login as ACL user {user!r} could not be checked ({_one_line(e)}); no probe was sent: "
            f"check that the node accepts ACL logins (Redis 6 or later)"
        ) from None
    who = who.decode(errors="replace") if isinstance(who, bytes) else str(who)
    if who != user:
        c.close()
        raise EnvironmentProblem(
            f"{where}: the connection logged in as ACL user {user!r} runs as {who[:60]!r} (ACL WHOAMI): the login "
            f"did not take effect, so no probe was sent; connect the harness to the nodes themselves, not "
            f"through a proxy that answers AUTH on its own"
        )
    return c


def _try(node, user: str, password: str, args: tuple) -> str:
    """Send one probe as `user`, on a connection of its own whose login was checked (as_user)."""
    import redis

    c = as_user(node, user, password)
    try:
        c.execute_command(*args)
        return "ok"
    except redis.RedisError as e:
        return classify(e)
    finally:
        c.close()


def started_by_harness(tgt) -> bool:
    """Whether the harness started every node of the target: a loopback node whose own process
    (INFO server's process_id) a cluster state file of the harness names, the file beside the
    node's folder, with that start time and port (harness.infra.ownership). Anything else, a
    user's lab cluster among them, is not: no destructive probe goes there."""
    return bool(tgt.nodes) and all(_node_started_by_harness(tgt, n) for n in tgt.nodes)


def _node_started_by_harness(tgt, node) -> bool:
    import redis

    try:
        if not ipaddress.ip_address(node.host).is_loopback:
            return False
        c = tgt.client(node, socket_timeout=3)
        try:
            pid = int(c.info("server")["process_id"])
        finally:
            c.close()
    except (ValueError, KeyError, TypeError, redis.RedisError):
        return False
    folder = ownership.cwd_of(pid) if ownership.is_pid(pid) else None
    if folder is None:
        return False
    try:
        state = ownership.open_state(Path(folder).parent / "state.json", "redis-server of this cluster")
        procs = state.procs("procs") if state is not None and ownership.same_boot(state.doc) else []
    except ownership.DamagedState:
        return False
    return any(p.pid == pid and p.port == node.port and ownership.is_ours(p, folder) for p in procs)


def _dry_run(tgt, node, user: str, args: tuple) -> str:
    """'' when ACL DRYRUN says the user may not run `args` (then it is sent and must get
    NOPERM); 'ok (ACL DRYRUN: granted, not sent)' when the rule grants it."""
    answer = tgt.client(node, decode_responses=True).execute_command("ACL", "DRYRUN", user, *args)
    return "ok (ACL DRYRUN: granted, not sent)" if answer == "OK" else ""


def _stand_in(tgt, node, user: str, args: tuple) -> tuple[tuple, str]:
    """On a cluster the harness did not start, for a destructive probe the rule refuses: its
    harmless stand-in and '' (send it), when ACL DRYRUN says the rule refuses the stand-in too;
    else nothing is sent (a rule of the user's may grant LASTSAVE and still refuse FLUSHALL:
    the stand-in's answer would not be the probe's) and the reply says so. Such a probe is
    neither a NOPERM the node saw nor one it ran: the refusal checks read it as not reached."""
    stand_in = STAND_INS[args]
    if _dry_run(tgt, node, user, stand_in):
        return args, (
            f"not sent (ACL DRYRUN refuses {' '.join(args)} but grants its stand-in {' '.join(stand_in)}; "
            "the harness did not start this cluster)"
        )
    return stand_in, ""


def tally(results: list[tuple]) -> dict[str, int]:
    """Counts from (kind, reply[, reached]) tuples: reads that ran; forbidden probes refused
    with NOPERM, that ran, or that failed with another error (not a denial); writes and
    other-prefix reads that ran; forbidden probes the node's own counters saw (reached)."""
    out = {
        "reads_allowed": 0,
        "forbidden_noperm": 0,
        "forbidden_executed": 0,
        "forbidden_other_error": 0,
        "writes_allowed": 0,
        "other_keys_allowed": 0,
        "forbidden_sent": 0,
        "forbidden_reached": 0,
        "writes_sent": 0,
        "other_keys_sent": 0,
    }
    for kind, reply, *seen in results:
        ran = reply.startswith("ok")
        if kind == "read":
            out["reads_allowed"] += ran
            continue
        out["forbidden_sent"] += 1
        out["writes_sent"] += kind == "write"
        out["other_keys_sent"] += kind == "other-key"
        out["forbidden_reached"] += bool(seen and seen[0])
        if reply == "NOPERM":
            out["forbidden_noperm"] += 1
        elif ran:
            out["forbidden_executed"] += 1
            out["writes_allowed"] += kind == "write"
            out["other_keys_allowed"] += kind == "other-key"
        else:
            out["forbidden_other_error"] += 1
    out["forbidden_not_refused"] = out["forbidden_executed"] + out["forbidden_other_error"]
    return out


def run(ctx: CaseContext) -> Record:
    """The redis-cluster-acl driver (registered in drivers.py)."""
    tgt = ctx.target
    user = ctx.params["username"]
    _refuse_the_admins_identity(tgt, user)
    started = started_by_harness(tgt)
    if not started:
        ctx.log(f"the harness did not start this cluster: {_STOOD_IN}")
    admin = tgt.cluster_client()
    admin.set(CACHE_STRING, "v")
    admin.hset(CACHE_HASH, mapping={"f": "v"})
    admin.set(OTHER_STRING, "v")
    admin.hset(OTHER_HASH, mapping={"f": "v"})
    owner = admin.get_node_from_key(CACHE_STRING)
    node = next(n for n in tgt.nodes if (n.host, n.port) == (owner.host, owner.port))
    # the node whose own counters are read: the keys' owner in the cluster's slot map, looked up
    # apart from the node the probes are sent to
    seen_at = tgt.client(
        next(n for n in tgt.nodes if (n.host, n.port) == (owner.host, owner.port)), decode_responses=True
    )
    password = secrets.token_hex(12)
    cols: dict[str, list] = {c.name: [] for c in PROBE_REPLIES.columns}
    metrics: dict[str, Metric] = {}
    rules = list(ctx.params["rules"].items())
    if ctx.repetition % 2 == 0:  # interleave: the rules' order alternates between repetitions
        rules.reverse()
    try:
        for name, rule in rules:
            _install(tgt, user, password, rule)
            results = []
            logged_before = denials_logged(seen_at, user)
            for probe, args, kind in PROBES:
                before = command_counts(seen_at)
                reply = _dry_run(tgt, node, user, args) if args[0] in DESTRUCTIVE else ""
                if not (reply or started or not destructive(args)):
                    args, reply = _stand_in(tgt, node, user, args)
                reply = reply or _try(node, user, password, args)
                after = command_counts(seen_at)
                grew = probe_growth(before, after)
                saw = reached(args, reply, grew)
                results.append((kind, reply, saw))
                for k, v in (
                    ("rule", name),
                    ("probe", probe),
                    ("kind", kind),
                    ("reply", reply),
                    ("node_saw", "yes" if saw else "no"),
                ):
                    cols[k].append(v)
            logged = denials_logged(seen_at, user) - logged_before
            t = tally(results)
            metrics.update(_rule_metrics(name, t, logged))
            ctx.log(
                f"{name}: {rule!r} -> reads {t['reads_allowed']}/{N_ALLOWED}, NOPERM "
                f"{t['forbidden_noperm']}/{N_FORBIDDEN}, ran {t['forbidden_executed']}, "
                f"other errors {t['forbidden_other_error']}; the node saw {t['forbidden_reached']}/"
                f"{t['forbidden_sent']} forbidden probes and logged {logged} denials"
            )
    finally:
        for n in tgt.nodes:
            tgt.client(n).execute_command("ACL", "DELUSER", user)
        admin.delete(CACHE_STRING, CACHE_HASH, OTHER_STRING, OTHER_HASH)
        admin.close()
        seen_at.close()
    return Record(
        "ok",
        metrics=metrics,
        series={PROBE_REPLIES.name: PROBE_REPLIES.make(cols)},
        details={
            "rules": dict(ctx.params["rules"]),
            "user": user,
            "node": node.address,
            "login_checked": f"each probe's connection: ACL WHOAMI named {user!r} before the probe ({WHOAMI_GRANT} "
            f"granted after each rule for it)",
            "destructive_probes": "sent: the harness started this cluster" if started else _STOOD_IN,
        },
    )


_STOOD_IN = "destructive probes are not sent; " + ", ".join(
    f"{' '.join(s)} is sent for {' '.join(d)} (which ACL DRYRUN still asks)" for d, s in STAND_INS.items()
)


def _install(tgt, user: str, password: str, rule: str) -> None:
    """The rule for `user` on every node (ACLs are per node), then ACL WHOAMI for the login check."""
    for n in tgt.nodes:
        tgt.client(n).execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rule.split())
        tgt.client(n).execute_command("ACL", "SETUSER", user, WHOAMI_GRANT)


def _refuse_the_admins_identity(tgt, user: str) -> None:
    """The restricted user must not be the identity the harness administers the cluster with
    (its rule would restrict the harness, and its removal fail): BadInput before anything is set."""
    c = tgt.client(tgt.entry, decode_responses=True, socket_timeout=5)
    try:
        admin = c.execute_command("ACL", "WHOAMI")
    finally:
        c.close()
    if str(user).lower() == "default" or admin == user:
        raise BadInput(
            f"params.username: {str(user)[:40]!r} cannot be the restricted user: the harness administers this "
            f"cluster as {str(admin)[:40]!r} and every client without a login runs as 'default'; give another "
            f"name, e.g. trt-infer"
        )


def _rule_metrics(name: str, t: dict, logged: int) -> dict[str, Metric]:
    """One rule's metrics from its probes' tally and the denials the owning node logged."""
    out: dict[str, Metric] = {}
    out[f"{name}.reads_allowed"] = Metric(t["reads_allowed"], f"of {N_ALLOWED}", "higher")
    out[f"{name}.forbidden_noperm"] = Metric(
        t["forbidden_noperm"], f"of {N_FORBIDDEN}", "higher", "forbidden probes refused with NOPERM"
    )
    out[f"{name}.forbidden_not_refused"] = Metric(
        t["forbidden_not_refused"],
        f"of {N_FORBIDDEN}",
        "lower",
        "forbidden probes that ran or failed with an error other than NOPERM",
    )
    out[f"{name}.forbidden_executed"] = Metric(t["forbidden_executed"], f"of {N_FORBIDDEN}", "lower")
    out[f"{name}.forbidden_sent"] = Metric(
        t["forbidden_sent"], "probes", None, "forbidden probes tried as the user (sent, or asked with ACL DRYRUN)"
    )
    out[f"{name}.writes_sent"] = Metric(t["writes_sent"], "probes", None, "write probes tried as the user")
    out[f"{name}.other_keys_sent"] = Metric(
        t["other_keys_sent"], "probes", None, "reads of keys outside cache:* tried as the user"
    )
    out[f"{name}.forbidden_reached"] = Metric(
        t["forbidden_reached"],
        "probes",
        None,
        "forbidden probes the owning node's own INFO commandstats counted (calls, rejected or failed calls of "
        "the probe's command; acl|dryrun for a probe DRYRUN granted): the probes that reached it",
    )
    out[f"{name}.denials_logged"] = Metric(
        logged, "denials", None, "the owning node's ACL LOG: denials it recorded for the user under this rule"
    )
    out[f"{name}.writes_allowed"] = Metric(t["writes_allowed"], f"of {N_WRITES}", "lower")
    out[f"{name}.other_keys_allowed"] = Metric(t["other_keys_allowed"], f"of {N_OTHER_KEYS}", "lower")
    return out
