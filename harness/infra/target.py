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
from typing import Mapping
from urllib.parse import urlsplit

from harness.base.errors import BadInput
from harness.base.hostnames import HOST_RE, HOST_RULE, USER_RE, check_host, check_user
from harness.infra.process import RemoteHost
from harness.infra.url_redaction import note_url_secrets, url_origin, userinfo_end

__all__ = [
    "HOST_RE",
    "HOST_RULE",
    "USER_RE",
    "check_host",
    "check_user",
    "Node",
    "LlmEndpoint",
    "Target",
    "PASSWORD_ENV",
    "USERNAME_ENV",
    "check_llm_url",
    "check_http_url",
    "check_prometheus_url",
]

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

    def __post_init__(self):
        """The credentials in `base_url` are remembered as secrets in every process that
        holds the endpoint (a case's own process too), so that what a child echoes of them
        (vLLM's client prints its arguments) is hidden wherever it is kept."""
        note_url_secrets(self.base_url)

    def to_json(self) -> dict:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "managed": self.managed,
            "prefix_caching": self.prefix_caching,
        }

    @classmethod
    def from_json(cls, d: dict) -> "LlmEndpoint":
        return cls(str(d["base_url"]), str(d["model"]), bool(d.get("managed", False)), d.get("prefix_caching"))


URL_EXAMPLE = "give e.g. http://127.0.0.1:8000"
PROMETHEUS_EXAMPLE = "give e.g. http://127.0.0.1:9090"
# What a user name or password may not hold unencoded (RFC 3986 allows none of them but
# the quote): a quote or a backslash is escaped by whatever prints it as a Python repr or
# JSON, so the secret would no longer be found in its output; aiohttp refuses a backslash
# at the first request, which would blame the server.
_NOT_IN_USERINFO = set("\"'\\`<> ")


def check_llm_url(value, where: str) -> str:
    """An http(s) base URL of a serving engine (`where` names where it came from), returned
    without a trailing slash (and without a trailing /v1: the harness adds it); else
    BadInput (see check_http_url)."""
    url = check_http_url(value, where, URL_EXAMPLE)
    return url[: -len("/v1")] if url.endswith("/v1") else url


def check_prometheus_url(value, where: str) -> str:
    """A Prometheus base URL (HARNESS_PROMETHEUS_URL, an inventory's), checked as an
    engine's URL is (check_http_url), without a trailing slash; else BadInput."""
    return check_http_url(value, where, PROMETHEUS_EXAMPLE)


def check_http_url(value, where: str, example: str = URL_EXAMPLE) -> str:
    """An http(s) base URL the user configured, returned without a trailing slash; else
    BadInput. Its credentials are remembered as secrets (it is the user's own URL) before
    anything is said about it, and a refusal shows only its scheme and host (`***@` where
    it had credentials), or no part of it where those cannot be told apart: a password may
    hold an unencoded '#', '?', '/' or '@', and the query (?api_key=) a key."""
    origin = url_origin(value)
    shown = repr(origin) if origin else "the URL given (not shown: it may hold a credential)"
    if not isinstance(value, str) or not value:
        raise BadInput(f"{where}: {shown} is not an http:// or https:// URL with a host; {example}")
    note_url_secrets(value)
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise BadInput(f"{where}: {shown} is not an http:// or https:// URL with a host; {example}")
    if any(ord(c) <= 32 or c == "\x7f" for c in value):
        raise BadInput(
            f"{where}: {shown} has a query, a fragment or spaces (or control characters); "
            f"give only scheme://host:port[/path]"
        )
    end = userinfo_end(rest)
    _check_userinfo(rest[: max(end, 0)], where, shown)
    hostpart = rest[end + 1 :]
    cut = _first_of(hostpart, "/?#")
    if "@" in hostpart:
        raise BadInput(
            f"{where}: {shown}: an '@' follows the host (or the password holds an unencoded '/', '?' "
            f"or '#'); percent-encode them in the URL (%40, %2F, %3F, %23)"
        )
    if "?" in hostpart or "#" in hostpart or ";" in hostpart:
        raise BadInput(
            f"{where}: {shown} has a query, a fragment, a path parameter (;) or spaces; give only "
            f"scheme://host:port[/path]"
        )
    host, port = _host_port(hostpart[:cut], where, shown, example)
    check_host(host, f"{where}: its host")
    try:  # the standard parser must read the same host and port (no second reading to exploit)
        parts = urlsplit(value)
        same = (parts.hostname or "") == host.lower() and parts.port == port
    except ValueError:
        same = False
    if not same:
        raise BadInput(
            f"{where}: {shown} is not a URL that reads one way only; percent-encode the user name "
            f"and password, {example}"
        )
    return value.rstrip("/")


def _check_userinfo(userinfo: str, where: str, shown: str) -> None:
    """A user name and password (`user:password`) that every reader takes the same way:
    no unencoded '/', '?', '#' (they end the host part early), no quote, backslash,
    backtick, '<', '>', space or control character. The refusal shows none of it."""
    if any(c in userinfo for c in "/?#"):
        raise BadInput(
            f"{where}: {shown}: its user name or password holds an unencoded '/', '?' or '#' (or an "
            f"'@' follows the host); percent-encode them in the URL (%2F, %3F, %23, %40)"
        )
    if any(c in _NOT_IN_USERINFO or not c.isprintable() for c in userinfo):
        raise BadInput(
            f"{where}: {shown}: its user name or password holds a character a URL may not hold "
            f"unencoded (a quote, a backslash, a backtick, '<', '>', a space or a control character); "
            f"percent-encode it (e.g. %5C for \\, %22 for \", %27 for ')"
        )


def _first_of(text: str, chars: str) -> int:
    return min((i for i in (text.find(c) for c in chars) if i >= 0), default=len(text))


def _host_port(authority: str, where: str, shown: str, example: str = URL_EXAMPLE) -> tuple[str, int | None]:
    """(host, port or None) of `host[:port]` or `[v6][:port]`."""
    if authority.startswith("["):
        host, close, port = authority[1:].partition("]")
        if not close or (port and not port.startswith(":")):
            raise BadInput(f"{where}: {shown} is not a URL (a bracketed IPv6 host must end with ']'); {example}")
        port = port[1:]
    else:
        host, _, port = authority.partition(":")
    if not host:
        raise BadInput(f"{where}: {shown} is not an http:// or https:// URL with a host; {example}")
    if not port and ":" not in authority.rpartition("]")[2]:
        return host, None
    if not (port.isascii() and port.isdigit()) or len(port) > 5 or int(port) > 65535:
        raise BadInput(f"{where}: {shown} is not a URL (its port must be a number 1-65535); {example}")
    if int(port) == 0:
        raise BadInput(f"{where}: {shown}: port 0 is not a TCP port (1-65535)")
    return host, int(port)


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
    # The inventory's further load generators: memtier runs on every one of them at once
    # (harness.infra.load_tools.loadgen_merge); the other tools run on `loadgen` only.
    other_loadgens: list[RemoteHost] = field(default_factory=list)
    # The harness's Python on the load generators (the loadgen role's checkout): the serving
    # client runs there with it (harness.experiments.serving.client_fleet).
    loadgen_python: str | None = None

    @property
    def load_generators(self) -> list[RemoteHost | None]:
        """Every load generator, the first one first; [None] when the tools run here."""
        return [self.loadgen, *self.other_loadgens] if self.loadgen is not None else [None]

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

        return redis.Redis(host=node.host, port=node.port, password=self.password, username=self.username, **kwargs)

    def cluster_client(self, **kwargs):
        from redis.cluster import RedisCluster

        e = self.entry
        return RedisCluster(host=e.host, port=e.port, password=self.password, username=self.username, **kwargs)

    def async_cluster_client(self, **kwargs):
        """An asyncio cluster client (redis.asyncio); `await c.initialize()` before use."""
        from redis.asyncio.cluster import RedisCluster

        e = self.entry
        return RedisCluster(host=e.host, port=e.port, password=self.password, username=self.username, **kwargs)

    def to_json(self) -> dict:
        """Where (no secrets): nodes, engines and, when there is one, the load generator."""
        out = {
            "name": self.name,
            "kind": self.kind,
            "nodes": [{"host": n.host, "port": n.port, "role": n.role} for n in self.nodes],
            "engines": {k: e.to_json() for k, e in self.engines.items()},
        }
        if self.loadgen is not None:
            out["loadgen"] = asdict(self.loadgen)
        if self.other_loadgens:
            out["other_loadgens"] = [asdict(h) for h in self.other_loadgens]
        if self.loadgen_python:
            out["loadgen_python"] = self.loadgen_python
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Target":
        loadgen = d.get("loadgen")
        return cls(
            d.get("name", ""),
            d.get("kind", "none"),
            [Node(n["host"], int(n["port"]), n.get("role")) for n in d.get("nodes", [])],
            engines={k: LlmEndpoint.from_json(e) for k, e in (d.get("engines") or {}).items()},
            loadgen=RemoteHost(**loadgen) if isinstance(loadgen, dict) else None,
            other_loadgens=[RemoteHost(**h) for h in d.get("other_loadgens") or [] if isinstance(h, dict)],
            loadgen_python=d.get("loadgen_python") if isinstance(d.get("loadgen_python"), str) else None,
        )

    def to_env(self) -> dict[str, str]:
        """The credentials as environment variables for a child process (never its argv or job file)."""
        env = {}
        if self.password:
            env[PASSWORD_ENV] = self.password
        if self.username:
            env[USERNAME_ENV] = self.username
        return env

    @classmethod
    def from_env(cls, d: dict, environ: Mapping[str, str] | None = None) -> "Target":
        """The target of to_json() `d`, with the credentials that to_env() handed over."""
        environ = os.environ if environ is None else environ
        target = cls.from_json(d)
        target.password = environ.get(PASSWORD_ENV) or None
        target.username = environ.get(USERNAME_ENV) or None
        return target
