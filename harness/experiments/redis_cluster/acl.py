"""Redis ACLs for a read-only cache user (source section 4.4, claim C21).

The source's rule `~cache:* +get +hgetall -@all` is applied as written and in the working
order `-@all +get +hgetall ~cache:*`; each is tried with reads and writes on cache keys and
a read outside them. ACL rules apply left to right, so a trailing `-@all` removes what came
before it. ACL users are per node (a cluster does not replicate them): the user is created
on every node, and each command goes to the node that owns the key's slot.
"""

from __future__ import annotations

import secrets

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register

SOURCE_RULE = "~cache:* +get +hgetall -@all"
FIXED_RULE = "-@all +get +hgetall ~cache:*"
# (operation, command, args, kind): kind says what a read-only cache user should get
PROBES = (
    ("GET cache key", "GET", ("cache:{acl}:s",), "read"),
    ("HGETALL cache key", "HGETALL", ("cache:{acl}:h",), "read"),
    ("SET cache key", "SET", ("cache:{acl}:s", "x"), "write"),
    ("DEL cache key", "DEL", ("cache:{acl}:s",), "write"),
    ("GET other key", "GET", ("other:{acl}",), "other"),
)

PARAMS = {
    "rules": Param(dict, {"source": SOURCE_RULE, "fixed": FIXED_RULE}, "name -> ACL rule text to try"),
    "username": Param(str, "cache-reader", "the ACL user created (and deleted) on every node"),
}


def _try(target, node, user: str, password: str, cmd: str, args: tuple) -> str:
    import redis

    c = redis.Redis(host=node.host, port=node.port, username=user, password=password, socket_timeout=5)
    try:
        c.execute_command(cmd, *args)
        return "allowed"
    except redis.exceptions.NoPermissionError:
        return "denied"
    except redis.RedisError as e:
        return f"error: {e}"
    finally:
        c.close()


@register("redis-cluster-acl", params=PARAMS, needs="cluster",
          description="a read-only cache user from ACL rules, tried on the cluster")
def run(ctx: CaseContext) -> CaseOutcome:
    tgt = ctx.target
    admin = tgt.cluster_client()
    admin.set("cache:{acl}:s", "v")
    admin.hset("cache:{acl}:h", mapping={"f": "v"})
    admin.set("other:{acl}", "v")
    owner = admin.get_node_from_key("cache:{acl}:s")
    node = next(n for n in tgt.nodes if (n.host, n.port) == (owner.host, owner.port))
    password = secrets.token_hex(12)
    rows, metrics = [], {}
    try:
        for name, rule in ctx.params["rules"].items():
            for n in tgt.nodes:  # ACLs are per node
                tgt.client(n).execute_command("ACL", "SETUSER", ctx.params["username"], "reset", "on",
                                              f">{password}", *rule.split())
            acl = tgt.client(node, decode_responses=True).execute_command("ACL", "GETUSER", ctx.params["username"])
            counts = {"read": 0, "write": 0, "other": 0}
            for op, cmd, args, kind in PROBES:
                verdict = _try(tgt, node, ctx.params["username"], password, cmd, args)
                if verdict == "allowed":
                    counts[kind] += 1
                rows.append([name, rule, op, verdict])
            metrics[f"{name}.reads_allowed"] = Metric(counts["read"], "of 2", "higher")
            metrics[f"{name}.writes_allowed"] = Metric(counts["write"], "of 2", "lower")
            metrics[f"{name}.other_keys_allowed"] = Metric(counts["other"], "of 1", "lower")
            ctx.log(f"{name}: {rule!r} -> reads {counts['read']}/2, writes {counts['write']}/2, "
                    f"other keys {counts['other']}/1 (ACL GETUSER commands: {_commands(acl)})")
    finally:
        for n in tgt.nodes:
            tgt.client(n).execute_command("ACL", "DELUSER", ctx.params["username"])
        admin.delete("cache:{acl}:s", "cache:{acl}:h", "other:{acl}")
        admin.close()
    return CaseOutcome("ok", metrics=metrics, details={"tables": [{
        "title": "ACL rules tried as a read-only cache user",
        "note": "Rules apply left to right: in the source's order the final -@all removes +get and +hgetall.",
        "columns": ["rule", "ACL rule text", "operation", "result"], "rows": rows}]})


def _commands(getuser) -> str:
    if isinstance(getuser, dict):
        return str(getuser.get("commands"))
    items = list(getuser)
    for i, v in enumerate(items[:-1]):
        if v == "commands":
            return str(items[i + 1])
    return "?"
