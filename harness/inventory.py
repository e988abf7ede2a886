"""Targets from an Ansible inventory (YAML): the hosts of the `redis` group, and the
Prometheus of its `monitoring` group (prometheus_url).

Each host gives its address (`ansible_host`, else the host name) and its port
(`redis_cluster_port`, else 6379). The cluster's roles are read from the live cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from harness.drivers import Node, Target
from harness.errors import BadInput, EnvironmentProblem

REDIS_GROUP = "redis"


def _walk(group: dict, inherited: dict, out: dict) -> None:
    vars_ = {**inherited, **(group.get("vars") or {})}
    for host, hvars in (group.get("hosts") or {}).items():
        out[host] = {**vars_, **(hvars or {})}
    for child in (group.get("children") or {}).values():
        _walk(child or {}, vars_, out)


def _find_group(tree: dict, name: str) -> dict | None:
    for gname, group in tree.items():
        group = group or {}
        if gname == name:
            return group
        found = _find_group(group.get("children") or {}, name)
        if found is not None:
            return found
    return None


def _group_vars(path: Path, group: str) -> dict:
    gv = path.parent / "group_vars"
    merged = {}
    for name in ("all", group):
        for f in (gv / f"{name}.yml", gv / f"{name}.yaml", gv / name / "main.yml"):
            if f.exists():
                merged.update(yaml.safe_load(f.read_text()) or {})
    return merged


def load_target(path: str | Path) -> Target:
    path = Path(path)
    if not path.exists():
        raise BadInput(f"--target {path}: no such inventory file; give 'local' or a path to an Ansible YAML inventory")
    try:
        tree = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: not valid YAML: {e}".replace("\n", " ")) from None
    if not isinstance(tree, dict):
        raise BadInput(f"{path}: expected an Ansible YAML inventory (a mapping of groups)")
    group = _find_group(tree, REDIS_GROUP)
    if group is None:
        raise BadInput(f"{path}: no group named {REDIS_GROUP!r}; put the Redis Cluster hosts in a group called {REDIS_GROUP!r}")
    base_vars = {**_group_vars(path, "all"), **((tree.get("all") or {}).get("vars") or {}),
                 **_group_vars(path, REDIS_GROUP)}
    hosts: dict = {}
    _walk(group, base_vars, hosts)
    if not hosts:
        raise BadInput(f"{path}: group {REDIS_GROUP!r} has no hosts")
    nodes = []
    for name, hv in hosts.items():
        port = hv.get("redis_cluster_port", 6379)
        if not isinstance(port, int):
            raise BadInput(f"{path}: host {name}: redis_cluster_port must be a number, got {port!r}")
        nodes.append(Node(str(hv.get("ansible_host", name)), port))
    password = os.environ.get("REDIS_CLUSTER_PASSWORD") or None
    target = Target(name=str(path), kind="cluster", nodes=nodes, password=password)
    return _with_roles(target)


def _with_roles(target: Target) -> Target:
    """Read CLUSTER NODES from the first node that answers to learn each node's role."""
    import redis

    from harness.cluster import parse_cluster_nodes

    errors = []
    for node in target.nodes:
        try:
            text = target.client(node, socket_timeout=3, decode_responses=True).execute_command("CLUSTER NODES")
        except redis.RedisError as e:
            errors.append(f"{node.address}: {e}")
            continue
        live = {(n.host, n.port): n.role for n in parse_cluster_nodes(text)}
        for n in target.nodes:
            n.role = live.get((n.host, n.port))
        return target
    raise EnvironmentProblem(f"no Redis node of {target.name} answers ({errors[0] if errors else 'no nodes'}); "
                             f"provision it first: make provision INVENTORY={target.name}")


MONITORING_GROUP = "monitoring"


def prometheus_url(path: str | Path) -> str | None:
    """The Prometheus that the `monitoring` role runs for this inventory: the first host
    of the `monitoring` group, port `monitoring_prometheus_port` (default 9090); None when
    the inventory has no such host."""
    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(tree, dict):
        return None
    group = _find_group(tree, MONITORING_GROUP)
    if group is None:
        return None
    base_vars = {**_group_vars(path, "all"), **((tree.get("all") or {}).get("vars") or {}),
                 **_group_vars(path, MONITORING_GROUP)}
    hosts: dict = {}
    _walk(group, base_vars, hosts)
    for name, hv in hosts.items():
        return f"http://{hv.get('ansible_host', name)}:{hv.get('monitoring_prometheus_port', 9090)}"
    return None
