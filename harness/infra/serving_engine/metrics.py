"""What a serving engine says about itself over HTTP: `/v1/models` (is it up, what does it
serve) and `/metrics` (Prometheus text: vLLM's cache configuration and prefix-cache counters).

Every GET goes through harness.infra.http_get: a total deadline per request, a cap on the body, no
redirect followed, credentials sent to the engine's own host only. These are a few small GETs,
made between measurements, never inside one. A server that is not vLLM has no `vllm:*`
metrics: the readers return None, and a case reports its metric as missing.

What the server says is checked where it is read: the Prometheus text is parsed in time
linear in its size (label values and label sets bounded; a line that does not parse is
skipped); `/v1/models` may list at most MAX_MODELS ids of at most MAX_MODEL_ID characters;
a cache configuration whose numbers are not whole numbers in their range (block_size="inf",
"-16", "nan") is the server's answer being wrong: EngineAnswerWrong (exit 3) naming the
server and the label, never the user's input.
"""

from __future__ import annotations

import json
import math
import re
from typing import cast

from harness.base.errors import EnvironmentProblem
from harness.infra import http_get
from harness.infra.http_get import display
from harness.infra.target import LlmEndpoint

CACHE_INFO = "vllm:cache_config_info"
QUERIES = "vllm:prefix_cache_queries_total"
HITS = "vllm:prefix_cache_hits_total"
# Whole-number labels of vllm:cache_config_info and the range a real engine's value lies in.
INT_LABELS = {
    "block_size": (1, 1 << 16),
    "num_gpu_blocks": (0, 10**9),
    "num_cpu_blocks": (0, 10**9),
    "kv_cache_size_tokens": (0, 10**12),
}
MAX_MODELS = 1000
MAX_MODEL_ID = 256
MAX_LABEL_VALUE = 1024  # characters; vLLM's longest is tens
MAX_LABELS = 256  # per sample; vLLM's cache_config_info has about 40
MAX_VALUE_PART = 200  # characters after the label set: a value and a timestamp

# Each pattern is matched at a fixed position and cannot backtrack more than it consumed:
# the parser's time is linear in its input, whatever a server sends.
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_NAME = re.compile(r'[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*"')
_PLAIN = re.compile(r'[^"\\]{0,%d}' % (MAX_LABEL_VALUE + 1))
_SPACE = re.compile(r"[ \t]*")
_WHOLE = re.compile(r"[0-9]{1,13}(?:\.0{0,6})?")
# A sample's value as the text format writes it: decimal ASCII digits with a sign, a point and
# an exponent, or NaN and (+/-)Inf in any case, as Prometheus's own parser (Go's ParseFloat)
# reads them, without its hexadecimal and underscored forms; Python's float() never sees
# "1_000", "0x10" or "١٢٣".
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?ai:[+-]?inf(?:inity)?|nan)")
_TIMESTAMP = re.compile(r"-?[0-9]{1,19}")  # milliseconds since the epoch
_FIELDS = re.compile(r"[ \t]+")  # the format's only separators between a sample's fields
_UNESCAPE = {"n": "\n", "\\": "\\", '"': '"'}


class EngineHttpError(http_get.HttpGetError):
    """A GET to the engine failed or its answer is unusable: the message says where and why
    (credentials hidden)."""


class EngineAnswerWrong(EnvironmentProblem):
    """The engine answered, with a value no real engine has (exit 3: the server, not the user)."""


def get(endpoint: LlmEndpoint | str, path: str, timeout: float = 5.0, cap: int = http_get.JSON_CAP) -> tuple[int, str]:
    """(status, body text) of GET base_url + path within `timeout` in all; EngineHttpError
    when nothing answers in time, the body is over `cap`, or the server redirects."""
    base = endpoint.base_url if isinstance(endpoint, LlmEndpoint) else str(endpoint)
    try:
        ans = http_get.get(base.rstrip("/") + path, timeout=timeout, cap=cap)
    except http_get.HttpGetError as e:
        raise EngineHttpError(str(e)) from None
    return ans.status, ans.text()


def _base(endpoint: LlmEndpoint | str) -> str:
    return display(endpoint.base_url if isinstance(endpoint, LlmEndpoint) else str(endpoint))


def _model_ids(data, where: str) -> list[str]:
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise EngineHttpError(f"{where} did not answer JSON with a 'data' list")
    if len(items) > MAX_MODELS:
        raise EngineHttpError(f"{where} lists {len(items)} models, over {MAX_MODELS}; is this the right server?")
    ids: list[str] = [m["id"] for m in items if isinstance(m, dict) and isinstance(m.get("id"), str)]
    long = next((i for i in ids if len(i) > MAX_MODEL_ID), None)
    if long is not None:
        raise EngineHttpError(
            f"{where} lists a model id of {len(long)} characters, over {MAX_MODEL_ID}; is this the right server?"
        )
    return ids


def served_models(endpoint: LlmEndpoint | str, timeout: float = 5.0) -> list[str]:
    """The model ids `/v1/models` lists; EngineHttpError when it does not answer 200 with JSON,
    or lists more than MAX_MODELS ids or one longer than MAX_MODEL_ID characters."""
    where = f"{_base(endpoint)}/v1/models"
    status, body = get(endpoint, "/v1/models", timeout)
    if status != 200:
        raise EngineHttpError(f"{where} answered HTTP {status}")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise EngineHttpError(f"{where} did not answer JSON with a 'data' list") from None
    return _model_ids(data, where)


def _shown_ids(models: list[str], most: int = 10) -> str:
    shown = [m if m.isprintable() else repr(m) for m in models[:most]]
    more = f", ... ({len(models)} in all)" if len(models) > most else ""
    return ", ".join(shown) + more if shown else "nothing"


def alive(endpoint: LlmEndpoint, timeout: float = 2.0) -> str | None:
    """None when the engine answers `/v1/models`, serves its model and its `/health` (where it
    has one) does not fail; else one line on what is wrong (for a case to fail with, or the
    runner to note)."""
    base = _base(endpoint)
    try:
        models = served_models(endpoint, timeout)
    except EngineHttpError as e:
        return f"the engine at {base} does not answer ({e})"
    if endpoint.model not in models:
        return f"the engine at {base} does not serve model {endpoint.model!r} (it serves: {_shown_ids(models)})"
    try:  # vLLM's /health fails once its EngineCore is gone, while /v1/models may still answer
        status, _ = get(endpoint, "/health", timeout, http_get.SMALL_CAP)
    except EngineHttpError as e:
        return f"the engine at {base} does not answer /health ({e})"
    if status >= 500:
        return f"the engine at {base} is not healthy (/health answered HTTP {status})"
    return None  # 200, or a server without /health (404)


# ---- the Prometheus text format ---------------------------------------------------------
def _at(rx: re.Pattern[str], line: str, pos: int) -> re.Match[str]:
    """`rx` matched at `pos`: _PLAIN and _SPACE match the empty string, so there is always a match."""
    return cast(re.Match[str], rx.match(line, pos))


def _label_value(line: str, pos: int) -> tuple[str | None, int]:
    """The quoted value starting at `pos` (after its opening quote), unescaped, and the
    position after its closing quote; None when it does not end or is too long."""
    parts, size, end = [], 0, len(line)
    while True:
        m = _at(_PLAIN, line, pos)
        size += m.end() - pos
        if size > MAX_LABEL_VALUE:
            return None, pos
        parts.append(m.group())
        pos = m.end()
        if pos >= end:
            return None, pos
        if line[pos] == '"':
            return "".join(parts), pos + 1
        if pos + 1 >= end:  # a backslash at the end of the line
            return None, pos
        esc = line[pos + 1]
        parts.append(_UNESCAPE.get(esc, "\\" + esc))
        size += 1
        pos += 2


def _label_set(line: str, pos: int) -> tuple[dict[str, str] | None, int]:
    """The labels of `{...}` starting at `pos` (after the brace) and the position after the
    closing brace; None when the set does not parse or is too big."""
    labels: dict[str, str] = {}
    end, count = len(line), 0
    while True:
        pos = _at(_SPACE, line, pos).end()
        if pos < end and line[pos] == "}":
            return labels, pos + 1
        m = _LABEL_NAME.match(line, pos)
        count += 1
        if m is None or count > MAX_LABELS:
            return None, pos
        value, pos = _label_value(line, m.end())
        if value is None:
            return None, pos
        labels[m.group(1)] = value
        pos = _at(_SPACE, line, pos).end()
        if pos < end and line[pos] == ",":
            pos += 1
        elif not (pos < end and line[pos] == "}"):
            return None, pos


def _sample(line: str, names) -> tuple[str, dict[str, str], float] | None:
    """(name, labels, value) of one sample line; None when it does not parse or is not wanted."""
    m = _NAME.match(line)
    if m is None or (names is not None and m.group() not in names):
        return None
    labels: dict[str, str] | None = {}
    pos = m.end()
    if pos < len(line) and line[pos] == "{":
        labels, pos = _label_set(line, pos + 1)
        if labels is None:
            return None
    rest = line[pos:]
    if len(rest) > MAX_VALUE_PART or rest[:1] not in (" ", "\t"):
        return None
    value = parse_number(_FIELDS.split(rest.strip(" \t")))
    return None if value is None or labels is None else (m.group(), labels, value)


def parse_number(fields: list[str]) -> float | None:
    """The value of a sample's fields after its labels ([value] or [value, timestamp]); None
    unless the value is written in the Prometheus number grammar (ASCII digits, a sign, '.',
    an exponent, NaN, +Inf, -Inf) and the timestamp, if any, is a whole number."""
    if not 1 <= len(fields) <= 2 or not _NUMBER.fullmatch(fields[0]):
        return None
    if len(fields) == 2 and not _TIMESTAMP.fullmatch(fields[1]):
        return None
    return float(fields[0])


def parse_prometheus(text: str, names=None) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text exposition -> {metric name: [(labels, value), ...]}, only the metrics
    in `names` when given; lines that do not parse (and comments) are skipped. Linear in the
    size of `text`."""
    out: dict[str, list] = {}
    for line in text.split("\n"):  # the format's only line break (a value may hold \r or U+2028)
        line = line.strip()
        if not line or line[0] == "#":
            continue
        sample = _sample(line, names)
        if sample is not None:
            out.setdefault(sample[0], []).append((sample[1], sample[2]))
    return out


def metrics(endpoint: LlmEndpoint, timeout: float = 5.0, names=None) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The engine's `/metrics` (at most http_get.METRICS_CAP bytes), parsed; {} when it has
    none (HTTP 404, say)."""
    status, body = get(endpoint, "/metrics", timeout, http_get.METRICS_CAP)
    return parse_prometheus(body, names) if status == 200 else {}


# ---- what the metrics say ---------------------------------------------------------------
def _whole(labels: dict, key: str, server: str) -> int | None:
    raw = labels[key].strip()
    if raw in ("None", ""):  # vLLM's "not known yet"
        return None
    lo, hi = INT_LABELS[key]
    if _WHOLE.fullmatch(raw) and lo <= int(raw.partition(".")[0]) <= hi:
        return int(raw.partition(".")[0])
    shown = repr(raw[:40] + ("..." if len(raw) > 40 else ""))
    raise EngineAnswerWrong(
        f"the serving engine at {server or 'the server'} reports {key}={shown} in {CACHE_INFO} "
        f"(its /metrics), not a whole number from {lo} to {hi}: the server's answer is wrong "
        f"(not your input); fix or restart that server, or measure another"
    )


def _typed(labels: dict[str, str], server: str = "") -> dict:
    out: dict = dict(labels)
    for key in INT_LABELS:
        if key in out:
            out[key] = _whole(labels, key, server)
    if "enable_prefix_caching" in out:
        out["enable_prefix_caching"] = str(out["enable_prefix_caching"]).lower() == "true"
    out.setdefault("kv_cache_size_tokens", None)
    if out["kv_cache_size_tokens"] is None and out.get("block_size") and out.get("num_gpu_blocks"):
        out["kv_cache_size_tokens"] = out["block_size"] * out["num_gpu_blocks"]
    return out


def cache_config_from(parsed: dict, server: str = "") -> dict | None:
    """The typed labels of the first `vllm:cache_config_info` sample; None when there is
    none. EngineAnswerWrong (naming `server`) when a whole-number label is not one in range."""
    samples = parsed.get(CACHE_INFO)
    return _typed(samples[0][0], server) if samples else None


def cache_config(endpoint: LlmEndpoint, timeout: float = 5.0) -> dict | None:
    """The labels of `vllm:cache_config_info` (block_size, num_gpu_blocks, kv_cache_size_tokens
    as ints, enable_prefix_caching as a bool, the rest as text); None when the server has no
    such metric (not vLLM) or does not answer; EngineAnswerWrong (exit 3, naming the server
    and the label) when it reports a number no engine has."""
    try:
        parsed = metrics(endpoint, timeout, names={CACHE_INFO})
    except EngineHttpError:
        return None
    return cache_config_from(parsed, _base(endpoint))


def _total(parsed: dict, name: str) -> float | None:
    samples = parsed.get(name) or parsed.get(name.removesuffix("_total"))
    if not samples:
        return None
    total = sum(v for _, v in samples)
    return total if math.isfinite(total) else None


def _created(parsed: dict, name: str) -> float | None:
    """When the counter `name` was (re)created: vLLM's `<name>_created`; None without one."""
    values = [v for _, v in parsed.get(name.removesuffix("_total") + "_created") or [] if math.isfinite(v)]
    return max(values) if values else None


def prefix_cache_counters(endpoint: LlmEndpoint, timeout: float = 5.0) -> dict | None:
    """{"queries": tokens queried, "hits": tokens hit, "created": when the counters were
    (re)created, or None} of vLLM's prefix cache since the engine started (take deltas around
    a measurement; a changed "created" means the engine restarted in between); None when the
    server has no such counters (or they are not finite)."""
    wanted = {
        QUERIES,
        HITS,
        QUERIES.removesuffix("_total"),
        HITS.removesuffix("_total"),
        QUERIES.removesuffix("_total") + "_created",
    }
    try:
        parsed = metrics(endpoint, timeout, names=wanted)
    except EngineHttpError:
        return None
    queries = _total(parsed, QUERIES)
    hits = _total(parsed, HITS)
    if queries is None or hits is None:
        return None
    return {"queries": queries, "hits": hits, "created": _created(parsed, QUERIES)}
