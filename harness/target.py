"""Where a suite's servers are and how to reach them: the local cluster, an inventory's
hosts, or nothing.

A Target holds the Redis nodes, the load generator that runs the load tools against them
(None: this machine), the credentials, and the serving-engine endpoints. It serialises
itself (to_json/from_json: no secrets) and hands its credentials over in the environment
(to_env/from_env), so that a case run in its own process gets the same target.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from harness.errors import BadInput
from harness.hostnames import HOST_RE, HOST_RULE, USER_RE, check_host, check_user
from harness.process import RemoteHost

__all__ = ["HOST_RE", "HOST_RULE", "USER_RE", "check_host", "check_user", "Node", "LlmEndpoint", "Target",
           "PASSWORD_ENV", "USERNAME_ENV"]

PASSWORD_ENV = "HARNESS_TARGET_PASSWORD"  # how a case in its own process gets the target's password (never argv)
USERNAME_ENV = "HARNESS_TARGET_USERNAME"

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
    # The host that runs the load tools (redis-benchmark, memtier) against these nodes; None: here.
    loadgen: RemoteHost | None = None

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
        """Where (no secrets): nodes, engines and, when there is one, the load generator."""
        out = {"name": self.name, "kind": self.kind,
               "nodes": [{"host": n.host, "port": n.port, "role": n.role} for n in self.nodes],
               "engines": {k: e.to_json() for k, e in self.engines.items()}}
        if self.loadgen is not None:
            out["loadgen"] = asdict(self.loadgen)
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Target":
        loadgen = d.get("loadgen")
        return cls(d.get("name", ""), d.get("kind", "none"),
                   [Node(n["host"], int(n["port"]), n.get("role")) for n in d.get("nodes", [])],
                   engines={k: LlmEndpoint.from_json(e) for k, e in (d.get("engines") or {}).items()},
                   loadgen=RemoteHost(**loadgen) if isinstance(loadgen, dict) else None)

    def to_env(self) -> dict[str, str]:
        """The credentials as environment variables for a child process (never its argv or job file)."""
        env = {}
        if self.password:
            env[PASSWORD_ENV] = self.password
        if self.username:
            env[USERNAME_ENV] = self.username
        return env

    @classmethod
    def from_env(cls, d: dict, environ: dict | None = None) -> "Target":
        """The target of to_json() `d`, with the credentials that to_env() handed over."""
        environ = os.environ if environ is None else environ
        target = cls.from_json(d)
        target.password = environ.get(PASSWORD_ENV) or None
        target.username = environ.get(USERNAME_ENV) or None
        return target
