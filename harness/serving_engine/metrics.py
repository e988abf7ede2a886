"""What a serving engine says about itself over HTTP: `/v1/models` (is it up, what does it
serve) and `/metrics` (Prometheus text: vLLM's cache configuration and prefix-cache counters).

Plain `urllib` with a timeout: these are a few small GETs, made between measurements, never
inside one. A server that is not vLLM has no `vllm:*` metrics: the readers return None, and
a case reports its metric as missing.
"""

from __future__ import annotations

import base64
import json
import math
import re
import urllib.error
import urllib.request
from urllib.parse import unquote, urlsplit, urlunsplit

from harness.process import url_for_display
from harness.target import LlmEndpoint

MAX_BODY = 8 << 20  # a /metrics page is tens of kB; never read an unbounded body
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
CACHE_INFO = "vllm:cache_config_info"
INT_LABELS = ("block_size", "num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens")


class EngineHttpError(Exception):
    """A GET to the engine failed: the message says where and why (credentials hidden)."""


def _request(url: str) -> urllib.request.Request:
    """A request for `url` with any user:password in it moved to a Basic auth header."""
    parts = urlsplit(url)
    headers = {}
    if parts.username is not None or parts.password is not None:
        cred = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = f"[{netloc}]"
        if parts.port:
            netloc += f":{parts.port}"
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return urllib.request.Request(url, headers=headers)


def get(endpoint: LlmEndpoint | str, path: str, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body text) of GET base_url + path; EngineHttpError when nothing answers."""
    base = endpoint.base_url if isinstance(endpoint, LlmEndpoint) else str(endpoint)
    url = base.rstrip("/") + path
    shown = url_for_display(url)
    try:
        with urllib.request.urlopen(_request(url), timeout=timeout) as r:  # noqa: S310 (http/https checked)
            return r.status, r.read(MAX_BODY).decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read(4096).decode("utf-8", "replace") if e.fp else ""
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise EngineHttpError(f"{shown}: {reason}") from None


def served_models(endpoint: LlmEndpoint | str, timeout: float = 5.0) -> list[str]:
    """The model ids `/v1/models` lists; EngineHttpError when it does not answer 200 with JSON."""
    status, body = get(endpoint, "/v1/models", timeout)
    if status != 200:
        raise EngineHttpError(f"/v1/models answered HTTP {status}")
    try:
        data = json.loads(body)
        return [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        raise EngineHttpError("/v1/models did not answer JSON with a 'data' list") from None


def alive(endpoint: LlmEndpoint, timeout: float = 2.0) -> str | None:
    """None when the engine answers `/v1/models`, serves its model and its `/health` (where it
    has one) does not fail; else one line on what is wrong (for a case to fail with, or the
    runner to note)."""
    try:
        models = served_models(endpoint, timeout)
    except EngineHttpError as e:
        return f"the engine at {url_for_display(endpoint.base_url)} does not answer ({e})"
    if endpoint.model not in models:
        return (f"the engine at {url_for_display(endpoint.base_url)} does not serve model {endpoint.model!r} "
                f"(it serves: {', '.join(models) or 'nothing'})")
    try:  # vLLM's /health fails once its EngineCore is gone, while /v1/models may still answer
        status, _ = get(endpoint, "/health", timeout)
    except EngineHttpError as e:
        return f"the engine at {url_for_display(endpoint.base_url)} does not answer /health ({e})"
    if status >= 500:
        return f"the engine at {url_for_display(endpoint.base_url)} is not healthy (/health answered HTTP {status})"
    return None  # 200, or a server without /health (404)


def _labels(text: str) -> dict[str, str]:
    out = {}
    for m in _LABEL.finditer(text or ""):
        out[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
    return out


def parse_prometheus(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text exposition -> {metric name: [(labels, value), ...]}; lines that do not
    parse (and comments) are skipped."""
    out: dict[str, list] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        out.setdefault(m.group(1), []).append((_labels(m.group(3) or ""), value))
    return out


def metrics(endpoint: LlmEndpoint, timeout: float = 5.0) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The engine's `/metrics`, parsed; {} when it has none (HTTP 404, say)."""
    status, body = get(endpoint, "/metrics", timeout)
    return parse_prometheus(body) if status == 200 else {}


def _typed(labels: dict[str, str]) -> dict:
    out: dict = dict(labels)
    for key in INT_LABELS:
        if key in out:
            try:
                out[key] = int(float(out[key]))
            except ValueError:
                out[key] = None
    if "enable_prefix_caching" in out:
        out["enable_prefix_caching"] = str(out["enable_prefix_caching"]).lower() == "true"
    out.setdefault("kv_cache_size_tokens", None)
    if out["kv_cache_size_tokens"] is None and out.get("block_size") and out.get("num_gpu_blocks"):
        out["kv_cache_size_tokens"] = out["block_size"] * out["num_gpu_blocks"]
    return out


def cache_config_from(parsed: dict) -> dict | None:
    samples = parsed.get(CACHE_INFO)
    return _typed(samples[0][0]) if samples else None


def cache_config(endpoint: LlmEndpoint, timeout: float = 5.0) -> dict | None:
    """The labels of `vllm:cache_config_info` (block_size, num_gpu_blocks, kv_cache_size_tokens
    as ints, enable_prefix_caching as a bool, the rest as text); None when the server has no
    such metric (not vLLM) or does not answer."""
    try:
        return cache_config_from(metrics(endpoint, timeout))
    except EngineHttpError:
        return None


def _total(parsed: dict, name: str) -> float | None:
    samples = parsed.get(name) or parsed.get(name.removesuffix("_total"))
    if not samples:
        return None
    total = sum(v for _, v in samples)
    return total if math.isfinite(total) else None


def prefix_cache_counters(endpoint: LlmEndpoint, timeout: float = 5.0) -> dict | None:
    """{"queries": tokens queried, "hits": tokens hit} of vLLM's prefix cache since the engine
    started (take deltas around a measurement); None when the server has no such counters."""
    try:
        parsed = metrics(endpoint, timeout)
    except EngineHttpError:
        return None
    queries = _total(parsed, "vllm:prefix_cache_queries_total")
    hits = _total(parsed, "vllm:prefix_cache_hits_total")
    if queries is None or hits is None:
        return None
    return {"queries": queries, "hits": hits}
