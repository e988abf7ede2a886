"""Targets from an Ansible inventory (YAML): the hosts of the `redis` group, the load
generator of its `loadgen` group (loadgen_host) and the Prometheus of its `monitoring`
group (prometheus_url).

Each Redis host gives its address (`ansible_host`, else the host name) and its port
(`redis_cluster_port`, else 6379). The cluster's roles are read from the live cluster.

The load generators are the hosts of group `loadgen`: the harness runs redis-benchmark on
the first and memtier_benchmark on every one at once (loadgen_hosts), over SSH (as `ansible_user` at `ansible_host`:`ansible_port`,
with the ssh_config named by `harness_ssh_config` or by `-F` in `ansible_ssh_common_args`,
and `ansible_ssh_private_key_file`), like a lab whose Redis hosts are not the machine that
runs the harness. No loadgen host, `ansible_connection: local`, or HARNESS_LOADGEN=local:
the tools run on this machine.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import yaml

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.files import read_bounded
from harness.infra.cluster import parse_cluster_nodes
from harness.infra.process import RemoteHost
from harness.infra.process import where as tools_machine
from harness.infra.secret_store import add_secret
from harness.infra.target import Node, Target, check_host

REDIS_GROUP = "redis"
LOADGEN_GROUP = "loadgen"
MONITORING_GROUP = "monitoring"
LOADGEN_ENV = "HARNESS_LOADGEN"  # "local": run the load tools here even when the inventory has a loadgen host
MAX_INVENTORY_BYTES = 4 << 20  # an inventory (or a group_vars file) is a page of YAML
MAX_GROUP_DEPTH = 32  # groups inside groups
MAX_GROUP_VISITS = 10_000  # groups visited in one walk (aliases can repeat one group)
MAX_SSH_CONFIG_BYTES = 1 << 20
# ssh_config keywords that run a command on this machine (or read more config unchecked)
SSH_COMMAND_KEYWORDS = ("proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "include")


def _load_yaml(path: Path, what: str):
    """One YAML file of an inventory: a regular file of at most MAX_INVENTORY_BYTES, UTF-8,
    nested no deeper than Python can read."""
    raw = read_bounded(path, MAX_INVENTORY_BYTES, what, "give an Ansible YAML inventory")
    if b"\0" in raw:
        raise BadInput(f"{path}: is a binary file, not {what}")
    try:
        return yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not a text (UTF-8) file; give an Ansible YAML inventory") from None
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: not valid YAML: {e}".replace("\n", " ")[:400]) from None
    except (RecursionError, MemoryError, ValueError, OverflowError) as e:
        raise BadInput(
            f"{path}: YAML that cannot be read ({type(e).__name__}: nested too deeply or too "
            f"large); simplify the inventory"
        ) from None


def _read(path: Path, what: str = "--target") -> dict:
    if not path.exists() and not path.is_symlink():
        raise BadInput(f"{what} {path}: no such inventory file; give 'local' or a path to an Ansible YAML inventory")
    if path.is_dir():
        raise BadInput(f"{what} {path}: is a folder, not a file; give a path to an Ansible YAML inventory")
    tree = _load_yaml(path, "an inventory")
    if not isinstance(tree, dict):
        raise BadInput(f"{path}: expected an Ansible YAML inventory (a mapping of groups)")
    return tree


def _mapping(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadInput(
            f"{where}: expected a mapping, got {type(value).__name__}; see ansible/inventories/lab.yml for the shape"
        )
    return value


def _walk(group: dict, inherited: dict, out: dict, where: str, budget: list, depth: int = 0) -> None:
    """Hosts of `group` and its children with their merged variables. `budget`: how many
    more groups may be visited (YAML aliases can make a small file name a group millions of
    times), shared by the whole walk."""
    _spend(budget, depth, where)
    group = _mapping(group, where)
    vars_ = {**inherited, **_mapping(group.get("vars"), f"{where}.vars")}
    for host, hvars in _mapping(group.get("hosts"), f"{where}.hosts").items():
        out[str(host)] = {**vars_, **_mapping(hvars, f"{where}.hosts.{host}")}
    for name, child in _mapping(group.get("children"), f"{where}.children").items():
        _walk(child, vars_, out, f"{where}.children.{name}", budget, depth + 1)


def _spend(budget: list, depth: int, where: str) -> None:
    if depth > MAX_GROUP_DEPTH:
        raise BadInput(f"{where[:200]}: groups nested more than {MAX_GROUP_DEPTH} deep; flatten the inventory")
    budget[0] -= 1
    if budget[0] < 0:
        raise BadInput(
            f"{where[:200]}: more than {MAX_GROUP_VISITS} groups (YAML aliases repeating a group?); "
            f"simplify the inventory"
        )


def _find_group(tree: dict, name: str, budget: list | None = None, depth: int = 0) -> dict | None:
    budget = [MAX_GROUP_VISITS] if budget is None else budget
    for gname, group in tree.items():
        _spend(budget, depth, str(gname))
        if not isinstance(group, dict):
            group = {}
        if gname == name:
            return group
        children = group.get("children")
        found = _find_group(children, name, budget, depth + 1) if isinstance(children, dict) else None
        if found is not None:
            return found
    return None


def _group_vars(path: Path, group: str) -> dict:
    gv = path.parent / "group_vars"
    merged = {}
    for name in ("all", group):
        for f in (gv / f"{name}.yml", gv / f"{name}.yaml", gv / name / "main.yml"):
            if f.exists() or f.is_symlink():
                try:
                    data = _load_yaml(f, "a group_vars file")
                except BadInput as e:
                    raise BadInput(f"group_vars: {e}") from None
                merged.update(_mapping(data, str(f)))
    return merged


def group_hosts(path: str | Path, name: str) -> dict[str, dict] | None:
    """{host: its variables} of group `name` (None when the inventory has no such group)."""
    path = Path(path)
    tree = _read(path)
    try:
        group = _find_group(tree, name)
    except BadInput as e:
        raise BadInput(f"{path}: {e}") from None
    if group is None:
        return None
    all_vars = _mapping(_mapping(tree.get("all"), "all").get("vars"), "all.vars")
    base_vars = {**_group_vars(path, "all"), **all_vars, **_group_vars(path, name)}
    hosts: dict = {}
    try:
        _walk(group, base_vars, hosts, name, [MAX_GROUP_VISITS])
    except BadInput as e:
        raise BadInput(f"{path}: {e}") from None
    return hosts


def _literal(value) -> str | None:
    """A variable's value when it is a plain value (not a Jinja expression)."""
    if value is None or (isinstance(value, str) and "{{" in value):
        return None
    return str(value)


def load_generators_only(path: str | Path) -> Target:
    """A target without Redis (a suite that needs no cluster) that still has the inventory's
    load generators, for the serving client; nothing is contacted here."""
    loadgens = loadgen_hosts(path)
    return Target(
        name=str(path),
        kind="none",
        loadgen=loadgens[0] if loadgens else None,
        other_loadgens=loadgens[1:],
        loadgen_python=loadgen_python(path),
    )


def load_target(path: str | Path) -> Target:
    path = Path(path)
    hosts = group_hosts(path, REDIS_GROUP)
    if hosts is None:
        raise BadInput(
            f"{path}: no group named {REDIS_GROUP!r}; put the Redis Cluster hosts in a group called {REDIS_GROUP!r}"
        )
    if not hosts:
        raise BadInput(f"{path}: group {REDIS_GROUP!r} has no hosts")
    nodes = []
    for name, hv in hosts.items():
        port = hv.get("redis_cluster_port", 6379)
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise BadInput(f"{path}: host {name}: redis_cluster_port must be a port number (1-65535), got {port!r}")
        address = check_host(_literal(hv.get("ansible_host")) or name, f"{path}: host {name[:80]!r}: ansible_host")
        nodes.append(Node(address, port))
    password = os.environ.get("REDIS_CLUSTER_PASSWORD") or None
    add_secret(password)
    loadgens = loadgen_hosts(path)  # a broken loadgen entry is bad input here, never a silent local run
    for host in loadgens:
        problem = host.check()
        if problem:
            raise EnvironmentProblem(problem)
    target = Target(
        name=str(path),
        kind="cluster",
        nodes=nodes,
        password=password,
        loadgen=loadgens[0] if loadgens else None,
        other_loadgens=loadgens[1:],
        loadgen_python=loadgen_python(path),
    )
    return _with_roles(target)


def _with_roles(target: Target) -> Target:
    """Read CLUSTER NODES from the first node that answers to learn each node's role."""
    import redis

    errors = []
    for node in target.nodes:
        try:
            text = target.client(
                node, socket_timeout=3, socket_connect_timeout=3, decode_responses=True
            ).execute_command("CLUSTER NODES")
        except redis.AuthenticationError as e:
            if target.password:
                raise BadInput(
                    f"Redis at {node.address} refused the password in REDIS_CLUSTER_PASSWORD ({e}); "
                    f"export the password the cluster was provisioned with"
                ) from None
            raise BadInput(
                f"Redis at {node.address} needs a password ({e}); export REDIS_CLUSTER_PASSWORD "
                f"with the cluster's password"
            ) from None
        except redis.ResponseError as e:
            if "AUTH" in str(e).upper() and target.password:
                raise BadInput(
                    f"Redis at {node.address} does not take the password in REDIS_CLUSTER_PASSWORD ({e}); "
                    f"unset it or give the cluster's own"
                ) from None
            errors.append(f"{node.address}: {e}")
            continue
        except redis.RedisError as e:
            errors.append(f"{node.address}: {e}")
            continue
        live = {(n.host, n.port): n.role for n in parse_cluster_nodes(text)}
        for n in target.nodes:
            n.role = live.get((n.host, n.port))
        return target
    raise EnvironmentProblem(
        f"no Redis node of {target.name} answers ({errors[0] if errors else 'no nodes'}); "
        f"check the hosts, or provision them: make provision INVENTORY={target.name}"
    )


def loadgen_host(path: str | Path) -> RemoteHost | None:
    """The inventory's first load generator as an SSH host, or None when the load tools run
    on this machine."""
    hosts = loadgen_hosts(path)
    return hosts[0] if hosts else None


def loadgen_hosts(path: str | Path) -> list[RemoteHost]:
    """Every host of group `loadgen`, in the inventory's order, as SSH hosts; [] when the
    load tools run on this machine (no such host, HARNESS_LOADGEN=local, or one host with
    `ansible_connection: local`). Several hosts of which one is this machine is refused:
    this machine would run its share beside the harness itself."""
    if os.environ.get(LOADGEN_ENV, "").strip().lower() == "local":
        return []
    hosts = group_hosts(path, LOADGEN_GROUP)
    if not hosts:
        return []
    local = [name for name, hv in hosts.items() if _literal(hv.get("ansible_connection")) == "local"]
    if local and len(hosts) == 1:
        return []
    if local:
        raise BadInput(
            f"{path}: the {LOADGEN_GROUP} group has {len(hosts)} hosts and {local[0][:80]!r} is "
            f"ansible_connection: local (this machine); give every load generator its own address, "
            f"or keep one host in the group"
        )
    return [_remote_host(path, name, hv) for name, hv in hosts.items()]


DEFAULT_HARNESS_DIR = "/opt/llm-cache-harness"  # the loadgen role's loadgen_harness_dir


def loadgen_python(path: str | Path) -> str | None:
    """The harness's Python on the load generators: `loadgen_harness_python`, else the
    loadgen role's venv (`loadgen_harness_dir`/.venv/bin/python); None without load
    generators. An absolute path of plain characters, else BadInput."""
    hosts = group_hosts(path, LOADGEN_GROUP) if loadgen_hosts(path) else None
    if not hosts:
        return None
    hv = next(iter(hosts.values()))
    given = _literal(hv.get("loadgen_harness_python"))
    python = given or f"{(_literal(hv.get('loadgen_harness_dir')) or DEFAULT_HARNESS_DIR).rstrip('/')}/.venv/bin/python"
    if not python.startswith("/") or any(not (c.isalnum() or c in "/._-+") for c in python):
        raise BadInput(
            f"{path}: the load generators' harness Python {python[:120]!r} is not an absolute path of "
            f"letters, digits and / . _ - +; set loadgen_harness_python (or loadgen_harness_dir)"
        )
    return python


def redis_ssh_hosts(path: str | Path) -> dict[str, RemoteHost | str | None]:
    """How the harness reaches each host of the `redis` group over SSH, by its address (as
    the target's nodes name it), with the same connection data as the load generator:
    a RemoteHost, None for `ansible_connection: local` (this machine), or a string saying
    why it cannot be reached (a broken entry: harness.infra.host_identity then records that its
    identity was not measured, and the host counts as unknown)."""
    out: dict[str, RemoteHost | str | None] = {}
    for name, hv in (group_hosts(path, REDIS_GROUP) or {}).items():
        address = _literal(hv.get("ansible_host")) or name
        if _literal(hv.get("ansible_connection")) == "local":
            out.setdefault(address, None)
            continue
        try:
            out.setdefault(address, _remote_host(path, name, hv))
        except BadInput as e:
            out.setdefault(address, f"no SSH connection to it: {e}")
    return out


def _remote_host(path: str | Path, name: str, hv: dict) -> RemoteHost:
    """An inventory host as an SSH host: ansible_user at ansible_host:ansible_port, with the
    ssh_config of `harness_ssh_config` (or `-F` in ansible_ssh_common_args) and the private key."""
    config = _literal(hv.get("harness_ssh_config"))
    extra = []
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        raw = _literal(hv.get(key))
        if raw:
            try:
                extra += shlex.split(raw)
            except ValueError:
                raise BadInput(f"{path}: {key} of {name} is not a valid shell word list: {raw!r}") from None
    if config is None and "-F" in extra[:-1]:
        config = extra[extra.index("-F") + 1]
    port = hv.get("ansible_port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool)):
        raise BadInput(f"{path}: host {name}: ansible_port must be a number, got {port!r}")
    key_file = _literal(hv.get("ansible_ssh_private_key_file") or hv.get("ansible_private_key_file"))
    try:
        host = RemoteHost(
            name, _literal(hv.get("ansible_host")) or name, _literal(hv.get("ansible_user")), port, config, key_file
        )
    except BadInput as e:
        raise BadInput(f"{path}: {e}") from None
    if config is not None:
        check_ssh_config(Path(config), f"{path}: the ssh config of {name}")
    return host


def check_ssh_config(path: Path, where: str) -> None:
    """An ssh_config named by an inventory is data too: one that would run a command on this
    machine (ProxyCommand, LocalCommand, KnownHostsCommand, Match exec) or pull in files
    unchecked (Include) is refused. A missing file is left to ssh, which names it."""
    if not path.exists():
        return
    text = read_bounded(path, MAX_SSH_CONFIG_BYTES, "an ssh config", "fix the inventory").decode("utf-8", "replace")
    for n, line in enumerate(text.splitlines(), 1):
        words = line.strip().replace("=", " ", 1).split()
        if not words or words[0].startswith("#"):
            continue
        key = words[0].lower()
        if key in SSH_COMMAND_KEYWORDS or (key == "match" and "exec" in (w.lower() for w in words[1:])):
            raise BadInput(
                f"{where}: {path} line {n} sets {words[0]}, which runs a command on this machine "
                f"(or reads files unchecked); the harness does not use such a config: remove the "
                f"line or give another harness_ssh_config"
            )
        if key == "proxyjump":
            for hop in ",".join(words[1:]).split(","):
                check_host(hop.rpartition("@")[2].partition(":")[0] or hop, f"{where}: {path} line {n} ProxyJump")


def loadgen_summary(target: Target) -> dict:
    """For the manifest: which machine runs the load tools of this target (the first load
    generator) and, under `others`, the further load generators that memtier runs on too."""
    host = target.loadgen
    out: dict[str, object] = {"ran_on": tools_machine(host)}
    if host is not None:
        out.update(
            {"name": host.name, "address": host.address, "user": host.user, "via": "ssh", "ssh_config": host.ssh_config}
        )
    if target.other_loadgens:
        out["others"] = [
            {"name": h.name, "address": h.address, "user": h.user, "via": "ssh"} for h in target.other_loadgens
        ]
    return out


def prometheus_url(path: str | Path) -> str | None:
    """The Prometheus that the `monitoring` role runs for this inventory: the first host
    of the `monitoring` group, port `monitoring_prometheus_port` (default 9090); None when
    the inventory has no such host."""
    try:
        hosts = group_hosts(path, MONITORING_GROUP)
    except BadInput:
        return None
    for name, hv in (hosts or {}).items():
        given = _literal(hv.get("ansible_host")) or name
        if any("@" in str(v) or "://" in str(v) for v in (name, given)):  # a URL with credentials: none of it shown
            raise BadInput(
                f"{path}: a host of the {MONITORING_GROUP} group is a URL or holds an '@' (not shown: it "
                f"may hold a credential); give its host name or IP address, and its port as "
                f"monitoring_prometheus_port"
            )
        host = check_host(given, f"{path}: monitoring host {name[:80]!r}")
        port = hv.get("monitoring_prometheus_port", 9090)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise BadInput(
                f"{path}: monitoring host {name[:80]!r}: monitoring_prometheus_port must be a port "
                f"number (1-65535), got {str(port)[:40]!r}"
            )
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"
    return None
