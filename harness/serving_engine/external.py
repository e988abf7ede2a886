"""A serving engine the user already runs ("bring your own endpoint"): the harness starts
nothing and measures that server as it is.

Two ways to name it, checked before anything starts (bad values: one line, exit 2):
- the environment: HARNESS_LLM_URL (base URL, http or https, without /v1; credentials in it
  are never shown) and HARNESS_LLM_MODEL (the served model name);
- an inventory's `llm` group (with `--target INVENTORY`): its first host's address
  (`ansible_host`, else the host name), `llm_port` (default 8000) and `llm_model`
  (default smollm2), and `llm_scheme` http/https (default http).
The environment wins when both are there. Either gives `{"external": LlmEndpoint(...)}`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from harness.errors import BadInput
from harness.process import url_for_display
from harness.target import LlmEndpoint, check_host

URL_ENV = "HARNESS_LLM_URL"
MODEL_ENV = "HARNESS_LLM_MODEL"
LLM_GROUP = "llm"
EXTERNAL = "external"
DEFAULT_PORT = 8000
DEFAULT_MODEL = "smollm2"
# A served model name: what vLLM's --served-model-name or a Hugging Face id looks like.
MODEL_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+/-]{0,199}")
MODEL_RULE = "a plain model name (letters, digits and . _ - : @ + /, at most 200 characters)"


def check_model(value, where: str) -> str:
    if isinstance(value, str) and MODEL_RE.fullmatch(value) and ".." not in value:
        return value
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise BadInput(f"{where}: {shown} is not {MODEL_RULE}; give the name the server serves (GET /v1/models)")


def check_url(value: str, where: str = URL_ENV) -> str:
    """An http(s) base URL with a host and nothing after the path; returned without a
    trailing slash (a trailing /v1 is taken off: the harness adds it)."""
    shown = url_for_display(value)[:120]
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as e:
        raise BadInput(f"{where}: {shown!r} is not a URL ({e}); give e.g. http://127.0.0.1:8000") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{where}: {shown!r} is not an http:// or https:// URL with a host; "
                       f"give e.g. http://127.0.0.1:8000")
    if parts.query or parts.fragment or any(c in value for c in " \t\r\n\0"):
        raise BadInput(f"{where}: {shown!r} has a query, a fragment or spaces; give only scheme://host:port[/path]")
    if port == 0:
        raise BadInput(f"{where}: {shown!r}: port 0 is not a TCP port (1-65535)")
    check_host(parts.hostname, f"{where}: its host")
    url = value.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def from_env(environ=None) -> dict[str, LlmEndpoint] | None:
    """{"external": endpoint} from HARNESS_LLM_URL / HARNESS_LLM_MODEL, or None when unset."""
    environ = os.environ if environ is None else environ
    url = (environ.get(URL_ENV) or "").strip()
    model = (environ.get(MODEL_ENV) or "").strip()
    if not url:
        if model:
            raise BadInput(f"{MODEL_ENV} is set but {URL_ENV} is not; set {URL_ENV} to the server's base URL "
                           f"(e.g. http://127.0.0.1:8000), or unset {MODEL_ENV}")
        return None
    url = check_url(url)
    if not model:
        raise BadInput(f"{URL_ENV} is set but {MODEL_ENV} is not; set {MODEL_ENV} to the name the server serves "
                       f"(GET {url_for_display(url)}/v1/models)")
    return {EXTERNAL: LlmEndpoint(url, check_model(model, MODEL_ENV), managed=False)}


def _port(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise BadInput(f"{where}: llm_port must be a port number (1-65535), got {str(value)[:40]!r}; fix the inventory")
    return value


def from_inventory(path: str | Path) -> dict[str, LlmEndpoint] | None:
    """{"external": endpoint} from the inventory's `llm` group, or None when it has none."""
    from harness.inventory import _literal, group_hosts

    path = Path(path)
    hosts = group_hosts(path, LLM_GROUP)
    if not hosts:
        return None
    name, hv = next(iter(hosts.items()))
    where = f"{path}: llm host {str(name)[:80]!r}"
    host = check_host(_literal(hv.get("ansible_host")) or name, f"{where}: ansible_host")
    port = _port(hv.get("llm_port", DEFAULT_PORT), where)
    model = check_model(hv.get("llm_model", DEFAULT_MODEL), f"{where}: llm_model")
    scheme = hv.get("llm_scheme", "http")
    if scheme not in ("http", "https"):
        raise BadInput(f"{where}: llm_scheme must be http or https, got {str(scheme)[:40]!r}; fix the inventory")
    shown = f"[{host}]" if ":" in host else host
    return {EXTERNAL: LlmEndpoint(f"{scheme}://{shown}:{port}", model, managed=False)}


def external_engines(target: str) -> dict[str, LlmEndpoint] | None:
    """The endpoint the user points at (environment first, then `--target`'s `llm` group);
    None when there is none and the harness should start its own."""
    found = from_env()
    if found is None and target not in ("", "local"):
        found = from_inventory(target)
    return found
