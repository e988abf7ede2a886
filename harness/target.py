"""Where a suite's servers are: the local cluster, an inventory's hosts, or nothing.

A Target serialises itself (to_json/from_json) so that a case run in its own process gets
the same target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import BadInput


@dataclass
class Node:
    host: str
    port: int
    role: str | None = None  # "primary", "replica" or None when unknown

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Target:
    """Where a suite's servers are: the local cluster, an inventory's hosts, or nothing."""

    name: str
    kind: str = "none"
    nodes: list[Node] = field(default_factory=list)
    password: str | None = None
    username: str | None = None

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
                "nodes": [{"host": n.host, "port": n.port, "role": n.role} for n in self.nodes]}

    @classmethod
    def from_json(cls, d: dict) -> "Target":
        return cls(d.get("name", ""), d.get("kind", "none"),
                   [Node(n["host"], int(n["port"]), n.get("role")) for n in d.get("nodes", [])])
