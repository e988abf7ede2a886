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

from harness.base.errors import BadInput
from harness.infra.http_get import display
from harness.infra.inventory import _literal, group_hosts
from harness.infra.target import LlmEndpoint, check_host, check_llm_url

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
    trailing slash (a trailing /v1 is taken off: the harness adds it). The one validator of
    an engine's URL (harness.infra.target.check_llm_url): a refusal shows no credential, not even
    a piece of a password with an unencoded '#', '?', '/' or '@', and no query value."""
    return check_llm_url(value, where)


def from_env(environ=None) -> dict[str, LlmEndpoint] | None:
    """{"external": endpoint} from HARNESS_LLM_URL / HARNESS_LLM_MODEL, or None when unset."""
    environ = os.environ if environ is None else environ
    url = (environ.get(URL_ENV) or "").strip()
    model = (environ.get(MODEL_ENV) or "").strip()
    if not url:
        if model:
            raise BadInput(
                f"{MODEL_ENV} is set but {URL_ENV} is not; set {URL_ENV} to the server's base URL "
                f"(e.g. http://127.0.0.1:8000), or unset {MODEL_ENV}"
            )
        return None
    url = check_url(url)
    if not model:
        raise BadInput(
            f"{URL_ENV} is set but {MODEL_ENV} is not; set {MODEL_ENV} to the name the server serves "
            f"(GET {display(url)}/v1/models)"
        )
    return {EXTERNAL: LlmEndpoint(url, check_model(model, MODEL_ENV), managed=False)}


def _port(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise BadInput(f"{where}: llm_port must be a port number (1-65535), got {str(value)[:40]!r}; fix the inventory")
    return value


def from_inventory(path: str | Path) -> dict[str, LlmEndpoint] | None:
    """{"external": endpoint} from the inventory's `llm` group, or None when it has none."""

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
