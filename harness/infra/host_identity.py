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
"""

from __future__ import annotations

import ipaddress
import platform
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.infra.process import RemoteHost, redact
from harness.infra.target import Target

HERE = "this machine"  # the manifest key of the harness's own machine
LAB_NET = "127.77."  # the lab in a box's hosts: loopback addresses, but other hosts to the harness
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
MACHINE_IDS = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
TIMEOUT_S = 15  # per host (ssh's own connect timeout is 10 s); the hosts are asked at once
# POSIX shell on the host: three lines, each 'name=value' (an empty value when unreadable)
REMOTE_COMMAND = ('echo "boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"; '
                  'echo "machine_id=$(cat /etc/machine-id 2>/dev/null || cat /var/lib/dbus/machine-id 2>/dev/null)"; '
                  'echo "hostname=$(uname -n)"')
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
    return {"boot_id": boot, "machine_id": machine if MACHINE_ID_RE.match(machine) else None,
            "hostname": got.get("hostname", "")[:253] or None, "via": via}


def _read_first(paths) -> str:
    for p in paths:
        try:
            return p.read_text().strip()
        except OSError:
            continue
    return ""


def measure_here() -> dict:
    """This machine's identity, read directly."""
    text = (f"boot_id={_read_first([BOOT_ID])}\nmachine_id={_read_first(MACHINE_IDS)}\n"
            f"hostname={platform.node()}")
    return identity_from(text, HERE)


def measure_remote(host: RemoteHost, timeout: float | None = None) -> dict:
    """One host's identity over SSH (the inventory's connection data), or {error, via}."""
    via = f"ssh {host.name}"
    try:
        p = host.run(REMOTE_COMMAND, timeout=TIMEOUT_S if timeout is None else timeout)
    except OSError as e:  # no ssh client here
        return {"error": f"ssh could not run: {e}"[:MAX_ERROR_CHARS], "via": via}
    if p.returncode != 0:
        err = " | ".join(redact(p.stderr.decode(errors="replace")).strip().splitlines()[-2:])
        return {"error": (f"ssh exit {p.returncode}" + (f": {err}" if err else ""))[:MAX_ERROR_CHARS], "via": via}
    return identity_from(p.stdout.decode(errors="replace"), via)


def measure(target: Target, ssh_hosts: dict[str, RemoteHost | str | None]) -> dict:
    """`host_identity` for the manifest: HERE, every Redis node's host and the load
    generators' addresses. `ssh_hosts` maps an address to the RemoteHost that reaches it (the
    inventory's connection data), to None for this machine, or to a string: why it cannot
    be reached. A loopback address (outside the lab in a box's) is read here.
    The SSH hosts are asked at once, each within TIMEOUT_S."""
    here = measure_here()
    out: dict = {HERE: here}
    wanted = [n.host for n in target.nodes]
    for lg in target.load_generators:
        if lg is not None:
            wanted.append(lg.address)
            ssh_hosts = {lg.address: lg, **ssh_hosts}
    remote: dict[str, RemoteHost] = {}
    for addr in dict.fromkeys(wanted):
        how = None if is_this_machine(addr) else ssh_hosts.get(addr, "no SSH connection data for it")
        if how is None:
            out[addr] = here
        elif isinstance(how, str):
            out[addr] = {"error": how[:MAX_ERROR_CHARS], "via": "none"}
        else:
            remote[addr] = how
    if remote:
        with ThreadPoolExecutor(max_workers=min(16, len(remote))) as pool:
            for addr, got in zip(remote, pool.map(measure_remote, remote.values())):
                out[addr] = got
    return out
