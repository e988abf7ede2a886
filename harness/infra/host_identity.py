"""Which machine each host of a run really is, read on the host itself.

A claim made on six Redis hosts and a separate load generator needs six machines, not six
addresses: six network namespaces of one machine (the lab in a box) or six /etc/hosts
aliases of one machine are one host. So each host is asked, over the path the harness
reaches it by (SSH as the inventory names it, like the load generator; this machine read
directly for loopback), for the kernel's boot id (/proc/sys/kernel/random/boot_id: a
random UUID drawn at every boot, the same in every namespace and container of one kernel)
and its machine id (/etc/machine-id, shown beside it). Two hosts are one machine when they
share a boot id.

The manifest keeps `host_identity`: per address (a Redis node's host, the load
generator's address, and HERE for the harness's own machine) either
`{boot_id, machine_id, hostname, via}` or `{error, via}`. harness.model.conditions counts hosts
from it; a host that could not be measured makes the count unknown, never a guess.

A Redis host's identity is read twice, by different paths (issue 52): each server's run_id
(INFO server: 40 hex digits drawn when the server starts) through the harness's own Redis
connection (redis-py, as the cases reach it), and again on the host, in the same SSH session
that reads the boot id (redis-cli INFO server run there, against the address the server is
bound to; for this machine, redis-cli run here). Both land in the address's entry as
`servers: {PORT: {run_id | run_id_error, on_host | on_host_error}}`, and
harness.model.conditions places each node on the machine whose host reported its run_id; a
disagreement with the boot ids makes the host facts not comparable, with both readings.
Limit: redis-cli on the host asks the bound address, which a host could reach over the
network; the run_id shows that the server answering the harness is the one that host
reaches, the boot id read in that same session which machine the session ran on.
"""

from __future__ import annotations

import ipaddress
import platform
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.infra.process import RemoteHost
from harness.infra.redaction import redact
from harness.infra.target import Target

HERE = "this machine"  # the manifest key of the harness's own machine
LAB_NET = "127.77."  # the lab in a box's hosts: loopback addresses, but other hosts to the harness
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
MACHINE_IDS = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
TIMEOUT_S = 15  # per host (ssh's own connect timeout is 10 s); the hosts are asked at once
# POSIX shell on the host: three lines, each 'name=value' (an empty value when unreadable)
REMOTE_COMMAND = (
    'echo "boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"; '
    'echo "machine_id=$(cat /etc/machine-id 2>/dev/null || cat /var/lib/dbus/machine-id 2>/dev/null)"; '
    'echo "hostname=$(uname -n)"'
)
# POSIX shell, appended to REMOTE_COMMAND for a Redis host (and run here for this machine):
# the password and the user name come on stdin (never argv), then one line per port,
# 'redis.PORT=RUN_ID' or 'redis.PORT=ERR why'. A port nothing listens on in this host's
# network namespace (/proc/net/tcp*, state 0A) is not asked: redis-cli would reach it
# over the network, and another machine's server is not this host's.
REDIS_COMMAND = (
    "IFS= read -r HARNESS_P; IFS= read -r HARNESS_U; "
    'if [ -n "$HARNESS_P" ]; then REDISCLI_AUTH="$HARNESS_P"; export REDISCLI_AUTH; fi; '
    "for p in {ports}; do "
    'h=$(printf ":%04X" "$p"); '
    "if ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null "
    '| awk -v h="$h" \'substr($2, length($2) - 4) == h && $4 == "0A" {{f = 1}} END {{exit !f}}\'; '
    'then echo "redis.$p=ERR nothing listens on port $p on this host"; continue; fi; '
    'out=$(timeout 5 redis-cli --no-auth-warning -h {address} -p "$p" '
    '${{HARNESS_U:+--user "$HARNESS_U"}} INFO server 2>&1 | tr -d "\\r"); '
    'id=$(printf "%s\\n" "$out" | sed -n "s/^run_id://p" | head -n 1); '
    'if [ -n "$id" ]; then echo "redis.$p=$id"; '
    'else echo "redis.$p=ERR $(printf "%s\\n" "$out" | head -n 1)"; fi; done'
)
RUN_ID_RE = re.compile(r"^[0-9a-f]{40}$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MACHINE_ID_RE = re.compile(r"^[0-9a-f]{32}$")
MAX_ERROR_CHARS = 300


def is_loopback(host: str) -> bool:
    """A loopback address or name: the harness's own kernel answers it (127.0.0.0/8, ::1)."""
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_this_machine(host: str) -> bool:
    """Loopback outside the lab in a box's 127.77.0.0/24: the harness reaches it on this
    machine without SSH, so its identity is read here."""
    return is_loopback(host) and not host.startswith(LAB_NET)


def redis_command(address: str, ports) -> str:
    """REDIS_COMMAND for the servers at `address` on `ports` (checked: a host name or an IP
    address from the target, whole port numbers)."""
    import shlex

    return REDIS_COMMAND.format(address=shlex.quote(address), ports=" ".join(str(int(p)) for p in ports))


def run_ids_from(text: str, ports) -> dict:
    """{PORT: {'on_host': run_id} or {'on_host_error': text}} from REDIS_COMMAND's answer."""
    got = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.startswith("redis."):
            got[name[len("redis.") :]] = value.strip()
    out = {}
    for p in map(str, ports):
        value = got.get(p, "")
        if RUN_ID_RE.match(value.lower()):
            out[p] = {"on_host": value.lower()}
        else:
            shown = value[4:] if value.startswith("ERR ") else value
            out[p] = {"on_host_error": redact(shown.strip() or "no answer")[:MAX_ERROR_CHARS]}
    return out


def identity_from(text: str, via: str) -> dict:
    """{boot_id, machine_id, hostname, via} from REMOTE_COMMAND's answer, or {error, via}.
    A boot id that is not a UUID is no identity (a host that answers oddly is not counted)."""
    got = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name in ("boot_id", "machine_id", "hostname"):
            got[name] = value.strip()
    boot = got.get("boot_id", "").lower()
    if not UUID_RE.match(boot):
        shown = boot[:60] or "nothing"
        return {"error": f"its boot id is not readable ({shown!r} in /proc/sys/kernel/random/boot_id)", "via": via}
    machine = got.get("machine_id", "").lower()
    return {
        "boot_id": boot,
        "machine_id": machine if MACHINE_ID_RE.match(machine) else None,
        "hostname": got.get("hostname", "")[:253] or None,
        "via": via,
    }


def _read_first(paths) -> str:
    for p in paths:
        try:
            return p.read_text().strip()
        except OSError:
            continue
    return ""


def measure_here() -> dict:
    """This machine's identity, read directly."""
    text = f"boot_id={_read_first([BOOT_ID])}\nmachine_id={_read_first(MACHINE_IDS)}\nhostname={platform.node()}"
    return identity_from(text, HERE)


def _secrets_stdin(target: Target | None) -> bytes:
    """The password and the user name, one line each, for REDIS_COMMAND's `read`s."""
    pw = (target.password or "") if target is not None else ""
    user = (target.username or "") if target is not None else ""
    return f"{pw}\n{user}\n".encode()


def measure_remote(host: RemoteHost, timeout: float | None = None, redis: tuple | None = None) -> dict:
    """One host's identity over SSH (the inventory's connection data), or {error, via}.
    `redis`: (address, ports, target): the Redis servers there are asked for their run_id in
    the same session (the entry's `servers`, PORT -> on_host or on_host_error)."""
    via = f"ssh {host.name}"
    command, stdin = REMOTE_COMMAND, None
    if redis is not None:
        address, ports, target = redis
        command = f"{REMOTE_COMMAND}; {redis_command(address, ports)}"
        stdin = _secrets_stdin(target)
    try:
        p = host.run(command, timeout=TIMEOUT_S if timeout is None else timeout, stdin=stdin)
    except OSError as e:  # no ssh client here
        return {"error": f"ssh could not run: {e}"[:MAX_ERROR_CHARS], "via": via}
    if p.returncode != 0:
        err = " | ".join(redact(p.stderr.decode(errors="replace")).strip().splitlines()[-2:])
        return {"error": (f"ssh exit {p.returncode}" + (f": {err}" if err else ""))[:MAX_ERROR_CHARS], "via": via}
    text = p.stdout.decode(errors="replace")
    got = identity_from(text, via)
    if redis is not None and "error" not in got:
        got["servers"] = run_ids_from(text, redis[1])
    return got


def run_ids_here(address: str, ports, target: Target | None) -> dict:
    """The run_ids of the servers at `address` on this machine, asked with redis-cli here
    (not through the harness's Redis client): as run_ids_from."""
    try:
        p = subprocess.run(
            ["sh", "-c", redis_command(address, ports)],
            input=_secrets_stdin(target),
            capture_output=True,
            timeout=TIMEOUT_S,
        )
        text = p.stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        text = "\n".join(f"redis.{port}=ERR redis-cli could not run here: {e}" for port in ports)
    return run_ids_from(text, ports)


def run_ids_through_connection(target: Target, nodes) -> dict:
    """{(host, port): {'run_id': ...} or {'run_id_error': ...}}: each server's run_id read
    through the harness's own Redis connection (INFO server)."""
    from redis.backoff import NoBackoff  # the redis client is imported where it is used (target.client)
    from redis.retry import Retry

    def one(node):
        try:  # one try each: redis-py retries a connect timeout with backoff by default (34 s for one dead host)
            c = target.client(
                node, socket_timeout=3, socket_connect_timeout=3, decode_responses=True, retry=Retry(NoBackoff(), 0)
            )
            try:
                rid = str(c.info("server").get("run_id") or "")
            finally:
                c.close()
        except Exception as e:  # redis.RedisError, OSError: recorded, never raised
            return {"run_id_error": redact(f"{type(e).__name__}: {e}")[:MAX_ERROR_CHARS]}
        if RUN_ID_RE.match(rid):
            return {"run_id": rid}
        return {"run_id_error": f"INFO server gave no run_id ({rid[:60]!r})"}

    nodes = list(nodes)
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        return {(n.host, n.port): got for n, got in zip(nodes, pool.map(one, nodes))}


def measure(target: Target, ssh_hosts: dict[str, RemoteHost | str | None]) -> dict:
    """`host_identity` for the manifest: HERE, every Redis node's host and the load
    generators' addresses. `ssh_hosts` maps an address to the RemoteHost that reaches it (the
    inventory's connection data), to None for this machine, or to a string: why it cannot
    be reached. A loopback address (outside the lab in a box's) is read here.
    The SSH hosts are asked at once, each within TIMEOUT_S. Each Redis host's entry also
    holds `servers`: per port, the server's run_id through the harness's connection
    (`run_id`) and as the host reported it (`on_host`), or why either was not read."""
    here = measure_here()
    out: dict = {HERE: here}
    wanted = [n.host for n in target.nodes]
    # every Redis address is asked for the servers on every port of the target: aliases of one
    # machine then each report all of its servers, and a run_id reported by two machines is seen
    all_ports = sorted({n.port for n in target.nodes})
    ports: dict[str, list[int]] = {n.host: all_ports for n in target.nodes}
    for lg in target.load_generators:
        if lg is not None:
            wanted.append(lg.address)
            ssh_hosts = {lg.address: lg, **ssh_hosts}
    remote: dict[str, RemoteHost] = {}
    for addr in dict.fromkeys(wanted):
        how = None if is_this_machine(addr) else ssh_hosts.get(addr, "no SSH connection data for it")
        if how is None:
            out[addr] = {**here, "servers": run_ids_here(addr, ports[addr], target)} if addr in ports else here
        elif isinstance(how, str):
            out[addr] = {"error": how[:MAX_ERROR_CHARS], "via": "none"}
        else:
            remote[addr] = how
    if remote:

        def ask(addr: str) -> dict:
            return measure_remote(remote[addr], redis=(addr, ports[addr], target) if addr in ports else None)

        with ThreadPoolExecutor(max_workers=min(16, len(remote))) as pool:
            for addr, got in zip(remote, pool.map(ask, remote)):
                out[addr] = got
    for (addr, port), got in run_ids_through_connection(target, target.nodes).items():
        entry = out.get(addr)
        if isinstance(entry, dict) and "servers" in entry:
            entry["servers"].setdefault(str(port), {}).update(got)
    return out
