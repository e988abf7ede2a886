"""Where a suite's servers are: the local cluster, an inventory's hosts, or nothing.

A Target serialises itself (to_json/from_json) so that a case run in its own process gets
the same target.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from harness.errors import BadInput

# A host name (or an ssh_config alias): dot-separated labels of letters, digits, '_' and
# '-', none starting with '-'; at most 253 characters. Nothing else reaches a command line.
HOST_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,62}(\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62})*\.?")
USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
HOST_RULE = "a host name (letters, digits, '.', '_', '-', not starting with '-') or an IP address"


def check_host(value, where: str) -> str:
    """`value` when it is an IP address or a host name, else BadInput: an address from an
    inventory is data, never an option (`-oProxyCommand=...`) or shell text."""
    text = value if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    if text is not None and len(text) <= 253:
        try:
            ipaddress.ip_address(text)
            return text
        except ValueError:
            pass
        if HOST_RE.fullmatch(text):
            return text
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise BadInput(f"{where}: {shown} is not {HOST_RULE}; fix the inventory")


def check_user(value, where: str) -> str:
    """A login name: letters, digits, '_', '.', '-', not starting with '-' or '.'."""
    if isinstance(value, str) and USER_RE.fullmatch(value):
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise BadInput(f"{where}: {shown} is not a user name (letters, digits, '_', '.', '-', not starting "
                   f"with '-'); fix the inventory")


@dataclass
class Node:
    host: str
    port: int
    role: str | None = None  # "primary", "replica" or None when unknown

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class LlmEndpoint:
    """An OpenAI-compatible serving engine: where it answers and what it serves.

    `base_url` has no `/v1` (e.g. "http://127.0.0.1:8011"); `model` is the served model
    name the requests carry. `managed` is true when the harness started it (then
    `prefix_caching` says how it was configured); a server the user points at is
    measured as it is (`prefix_caching` None: unknown)."""

    base_url: str
    model: str
    managed: bool = False
    prefix_caching: bool | None = None

    def to_json(self) -> dict:
        return {"base_url": self.base_url, "model": self.model, "managed": self.managed,
                "prefix_caching": self.prefix_caching}

    @classmethod
    def from_json(cls, d: dict) -> "LlmEndpoint":
        return cls(str(d["base_url"]), str(d["model"]), bool(d.get("managed", False)), d.get("prefix_caching"))


@dataclass
class Target:
    """Where a suite's servers are: the local cluster, an inventory's hosts, or nothing."""

    name: str
    kind: str = "none"
    nodes: list[Node] = field(default_factory=list)
    password: str | None = None
    username: str | None = None
    # Serving engines by configuration name ("cached", "uncached" when the harness starts
    # them; "external" for a server the user points at).
    engines: dict[str, LlmEndpoint] = field(default_factory=dict)

    @property
    def primaries(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "primary"] or self.nodes[:1]

    @property
    def entry(self) -> Node:
        if not self.nodes:
            raise BadInput(f"target {self.name!r} has no Redis nodes; this case needs a cluster")
        return self.primaries[0]

    def client(self, node: Node, **kwargs):
        import redis

        return redis.Redis(host=node.host, port=node.port, password=self.password,
                           username=self.username, **kwargs)

    def cluster_client(self, **kwargs):
        from redis.cluster import RedisCluster

        e = self.entry
        return RedisCluster(host=e.host, port=e.port, password=self.password,
                            username=self.username, **kwargs)

    def async_cluster_client(self, **kwargs):
        """An asyncio cluster client (redis.asyncio); `await c.initialize()` before use."""
        from redis.asyncio.cluster import RedisCluster

        e = self.entry
        return RedisCluster(host=e.host, port=e.port, password=self.password,
                            username=self.username, **kwargs)

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind,
                "nodes": [{"host": n.host, "port": n.port, "role": n.role} for n in self.nodes],
                "engines": {k: e.to_json() for k, e in self.engines.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "Target":
        return cls(d.get("name", ""), d.get("kind", "none"),
                   [Node(n["host"], int(n["port"]), n.get("role")) for n in d.get("nodes", [])],
                   engines={k: LlmEndpoint.from_json(e) for k, e in (d.get("engines") or {}).items()})
