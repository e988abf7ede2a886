"""One bounded HTTP GET for every request the harness makes to a server it measures or reads:
a serving engine's `/metrics`, `/v1/models` and `/health`, Prometheus's `/-/ready` and API.

Why not urllib.request: its timeout bounds each read, not the request (a server that drips
a byte a second holds a run forever), it reads whatever size it is sent, and its redirect
handler copies the Authorization header to wherever the server points.

What `get` promises:
- a total deadline per request (connect, status line, headers and body together): before
  each read the socket's timeout is what is left of the deadline, and a watchdog shuts the
  socket down at the deadline (http.client reads a dripped header in many small reads);
- a cap on the body: over it, one line naming the URL and the cap;
- a redirect is followed only to the same scheme, host and port (at most MAX_REDIRECTS, all
  within the one deadline): older vLLM answers `/metrics` with a 307 to `/metrics/`, and a
  proxy may add a slash the same way. A redirect anywhere else is refused, not followed
  without the credentials: the harness measures the server the user named, and following
  it would send the credentials (user:password@ in the URL, sent as Basic auth) to a host
  they were not given for. One line names the URL and where it pointed;
- credentials in the URL (`http://user:password@host/`) go as Basic auth to that URL's own
  host and port, never anywhere else, and never as part of the host;
- the URL in any message is `display(url)`: password (or a lone token) and every query
  and path-parameter value hidden, so `?api_key=...` is never printed either. Display is
  pure: what a server sends (a Location, an error text) is shown with its credentials
  hidden and never remembered as a secret, so a server cannot choose what the harness
  redacts elsewhere; a string that does not read as a URL one way only is not shown.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

from harness.base.errors import EnvironmentProblem
from harness.infra.redaction import redact
from harness.infra.secret_store import REDACTED
from harness.infra.url_redaction import UNPARSED_URL, url_for_display

SMALL_CAP = 64 << 10  # /health, /-/ready: a few bytes
JSON_CAP = 4 << 20  # /v1/models, Prometheus's targets
METRICS_CAP = 16 << 20  # /metrics of a big engine, a Prometheus range query: a few MB at most
ERROR_BODY = 4096  # of a non-2xx answer, only the start is kept (for the message)
SHOWN_MAX = 300  # characters of a URL in a message
_CHUNK = 64 << 10
MAX_REDIRECTS = 3  # on the same origin: a trailing-slash redirect (older vLLM's /metrics -> /metrics/)
_PATH_PARAM = re.compile(r";([^=;/?#]{0,40})[^=;/?#]*=[^;/?#]*")  # `;api_key=X` in a path: its value hidden


class HttpGetError(EnvironmentProblem):
    """A GET gave no usable answer: the message names the URL (secrets hidden) and why."""


@dataclass(frozen=True)
class Answer:
    shown: str  # the URL as it may be shown
    status: int
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self):
        """The body as JSON; HttpGetError (never a traceback) when it is not."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            raise HttpGetError(f"{self.shown} did not answer JSON; is this the right server?") from None


def display(url) -> str:
    """`url` as it may be shown or kept: its credentials hidden (harness.infra.url_redaction.url_for_display,
    which finds a password with an unencoded '#', '?', '/' or '@', remembers nothing, and
    shows a placeholder for what does not read as a URL), and besides every query value,
    path-parameter value (`;api_key=`) and the fragment, whatever their names: a server's
    URL in a message needs none of them. Printable, at most SHOWN_MAX characters."""
    shown = url_for_display(str(url or ""))
    shown, hashmark, _ = shown.partition("#")
    head, qmark, query = shown.partition("?")
    head = _PATH_PARAM.sub(lambda m: f";{m.group(1)}={REDACTED}", head)
    if qmark:
        keys = (part.partition("=") for part in query.split("&"))  # a part with no '=' may be a key itself
        head += "?" + "&".join(f"{k[:40]}={REDACTED}" if eq else REDACTED for k, eq, _ in keys)
    shown = "".join(c if c.isprintable() else "?" for c in head + (f"#{REDACTED}" if hashmark else ""))
    return shown if len(shown) <= SHOWN_MAX else shown[: SHOWN_MAX - 3] + "..."


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str
    headers: dict


def _target(url: str, shown: str) -> _Target:
    if shown == UNPARSED_URL:  # `http://pa/ss@prom`: no request (nor DNS lookup) for a piece of a password
        raise HttpGetError(
            f"{shown}; give scheme://host:port, and percent-encode any '#', '?', '/' or '@' in the user or password"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # its text may quote a piece of a mis-encoded password: not shown
        raise HttpGetError(
            f"{shown} is not a URL (its host or port does not parse); percent-encode any "
            f"'#', '?', '/' or '@' in the user or password"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpGetError(f"{shown} is not an http:// or https:// URL with a host")
    headers = {"Accept": "*/*", "User-Agent": "llm-cache-harness"}
    if "@" in parts.netloc:  # credentials: Basic auth to this host and port, never in the host
        token = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    default = 443 if parts.scheme == "https" else 80
    return _Target(parts.scheme, parts.hostname, port or default, path, headers)


def _connection(t: _Target, timeout: float, verify: bool) -> http.client.HTTPConnection:
    if t.scheme == "http":
        return http.client.HTTPConnection(t.host, t.port, timeout=timeout)
    ctx = ssl.create_default_context()
    if not verify:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return http.client.HTTPSConnection(t.host, t.port, timeout=timeout, context=ctx)


def _shut(conn: http.client.HTTPConnection, fired: threading.Event) -> None:
    """At the deadline: wake whatever read is blocked on the connection (it then fails or
    sees an end of file; `fired` tells `get` which)."""
    fired.set()
    sock = conn.sock
    if sock is not None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, also under TLS
        except OSError:
            pass


def _left(deadline: float, conn: http.client.HTTPConnection) -> float:
    """Seconds left; the socket's timeout set to them (so no single read outlives the deadline)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline")
    if conn.sock is not None:
        conn.sock.settimeout(left)
    return left


def _body(resp: http.client.HTTPResponse, conn, deadline: float, cap: int, shown: str) -> bytes:
    """The body, read a chunk at a time within the deadline; over `cap`: HttpGetError, or
    for an error answer (cap=ERROR_BODY) just its start."""
    keep_start = cap == ERROR_BODY
    if not keep_start and resp.length is not None and resp.length > cap:
        raise HttpGetError(
            f"{shown} answered {resp.length} bytes, over the {cap}-byte cap for this request; is this the right server?"
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        _left(deadline, conn)
        chunk = resp.read1(_CHUNK)
        if not chunk:
            if resp.length:  # the server said how long, and closed before
                raise http.client.IncompleteRead(b"", resp.length)
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            if keep_start:
                return b"".join(chunks)[:cap]
            raise HttpGetError(
                f"{shown} answered more than the {cap}-byte cap for this request; is this the right server?"
            )


def _reason(e: BaseException) -> str:
    """Why a request failed, as it may be shown: its text may quote what the server sent,
    so every credential in it is hidden (redact: nothing is remembered from it)."""
    text = " ".join(str(getattr(e, "reason", None) or e or type(e).__name__).split())
    text = "".join(c if c.isprintable() else "?" for c in redact(text))
    return text[:200] or type(e).__name__


def _next_hop(t: _Target, status: int, location: str | None, shown: str) -> _Target:
    """Where a redirect leads, when it is the same scheme, host and port (the credentials
    were given for that origin, so they go along); HttpGetError for anywhere else."""
    host = f"[{t.host}]" if ":" in t.host else t.host
    try:
        parts = urlsplit(urljoin(f"{t.scheme}://{host}:{t.port}{t.path}", location or ""))
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        parts, port = None, None
    if not location:
        raise HttpGetError(
            f"{shown} answered HTTP {status} with no Location to follow; is this the right server? "
            f"give the server's own address"
        )
    if (
        parts is None
        or "@" in parts.netloc
        or parts.scheme != t.scheme
        or (parts.hostname or "").lower() != t.host.lower()
        or port != t.port
    ):
        where = display(parts.geturl()) if parts is not None else display(location)  # resolved: never relative
        raise HttpGetError(
            f"{shown} answered a redirect to another scheme, host or port (HTTP {status} to "
            f"{where}); the harness follows a redirect only to the same "
            f"scheme, host and port (credentials stay with the host they were given for): give "
            f"the server's own address"
        )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(t.scheme, t.host, t.port, path, t.headers)


def _once(t: _Target, deadline: float, verify: bool, cap: int, shown: str) -> tuple[int, str | None, bytes]:
    """One GET of `t` within the deadline: (status, Location of a redirect or None, body)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline")
    conn = _connection(t, left, verify)
    fired = threading.Event()
    watchdog = threading.Timer(left, _shut, (conn, fired))
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.request("GET", t.path, headers=t.headers)
        _left(deadline, conn)
        resp = conn.getresponse()
        if 300 <= resp.status < 400:
            return resp.status, resp.getheader("Location") or "", b""
        body = _body(resp, conn, deadline, cap if 200 <= resp.status < 300 else ERROR_BODY, shown)
        if fired.is_set():  # the watchdog cut the body short: no complete answer
            raise TimeoutError("deadline")
        return resp.status, None, body
    except (OSError, http.client.HTTPException, ValueError):
        if fired.is_set():
            raise TimeoutError("deadline") from None
        raise
    finally:
        watchdog.cancel()
        conn.close()


def get(url: str, *, timeout: float, cap: int = JSON_CAP, verify: bool = True) -> Answer:
    """GET `url` within `timeout` seconds in all (redirects on the same origin included): its
    status and body (at most `cap` bytes; of a non-2xx answer only the start). HttpGetError,
    one line, when there is no answer in time, the body is over the cap, the server
    redirects elsewhere (or more than MAX_REDIRECTS times), or the URL is not http(s)."""
    shown = display(url)
    t = _target(str(url), shown)
    deadline = time.monotonic() + timeout
    try:
        for _ in range(MAX_REDIRECTS + 1):
            status, location, body = _once(t, deadline, verify, cap, shown)
            if location is None:
                return Answer(shown, status, body)
            t = _next_hop(t, status, location, shown)
    except HttpGetError:
        raise
    except TimeoutError:
        raise HttpGetError(f"{shown}: no complete answer within {timeout:g} s") from None
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise HttpGetError(f"{shown}: {_reason(e)}") from None
    raise HttpGetError(f"{shown} redirected more than {MAX_REDIRECTS} times; give the server's own address")
