"""Run an external tool with a timeout and keep its output in the raw folder, on this
machine or on a load-generator host over SSH; secrets never reach what is kept.

Redaction: one path for whatever is kept, shown or logged. `redact()` (text: a line, a
tool's or a peer's output), `redact_command()` (an argv), `redact_json()` / `redact_file()`
(a JSON value, a kept file) hide every secret the process knows (`add_secret()`, the passwords in REDIS_CLUSTER_PASSWORD, REDIS_CACHE_READER_PASSWORD
and HARNESS_TARGET_PASSWORD, the API keys in OPENAI_API_KEY, VLLM_API_KEY, HF_TOKEN), the
value after a password flag (`-a X`, `--authenticate=X`, `--api-key X`) whatever it is,
the password of every URL (read as a hostile user writes it: a password may hold an
unencoded '#', '?', '/' or '@'; see `userinfo_end()`), the values of secret-looking query
parameters (`?api_key=`, `&sig=`), a credential in a URL's path (`/t/sk-...`, `/token/X`; see
`path_token()`), Authorization and Bearer headers, and `name=value` pairs whose name is a
secret's (`api_key='...'`, `PASSWORD=...`; never a path's last part or a file's name:
`/etc/passwd: no such file` keeps its words). A known secret shorter
than MIN_BARE_SECRET characters ("e") is hidden only where it stands as such a value (a
URL's password, a flag's value, a header, `name=value`), never as a bare string
everywhere: that would rewrite every "e" of every result.

Display is pure: `url_for_display()` hides a URL's credentials and remembers nothing, so
that text from a server (a Location header, an error) cannot make the harness "redact"
strings of its choosing. Only the user's own configured URLs (an LlmEndpoint, the
Prometheus URL) are registered, explicitly, with `note_url_secrets()`, so that a child
that echoes them (vLLM's client prints its arguments) is redacted too. `url_origin()` is
what a refusal line may show of a refused URL: scheme and host only, or nothing.

Remote runs: `ssh [-F CONFIG] [options] -- ADDRESS 'read secrets; exec timeout T cmd'`: the
options end before the destination, and every field of a RemoteHost is checked when it is
made (a host name or an IP address, a user name, a port, file paths), so nothing from an
inventory becomes an ssh option (`-oProxyCommand=...`) or reaches a local shell. Secrets
travel on ssh's stdin and reach the tool through shell variables, so they are in neither
ssh's command line nor anything kept here. Files the tool is told to write into its raw
folder are written in a temporary folder on the host and copied back afterwards.

Which host: `run_tool(host=...)`: the load tools run on the target's load generator
(harness.infra.target.Target.loadgen, from the inventory's `loadgen` group), None: here. A local
cluster has none, so its tools always run here.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence, cast

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.files import write_atomic
from harness.base.hostnames import check_host, check_user

REDACTED = "***"
SECRET_ENV = ("REDIS_CLUSTER_PASSWORD", "REDIS_CACHE_READER_PASSWORD", "HARNESS_TARGET_PASSWORD")
# API keys a peer or a library may read from the environment (vLLM's client sends
# OPENAI_API_KEY as a Bearer token): hidden too, but not taken from children like SECRET_ENV.
KEY_ENV = ("OPENAI_API_KEY", "VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
SECRET_FLAGS = (
    "-a",
    "--pass",
    "--password",
    "--requirepass",
    "--masterauth",
    "--authenticate",
    "--api-key",
    "--hf-token",
)
SECRET_PREFIXES = (
    "--authenticate=",
    "--pass=",
    "--password=",
    "-redis.password=",
    "--redis.password=",
    "--api-key=",
    "--hf-token=",
)
_SECRETS: set[str] = set()
# A known secret shorter than this is not replaced as a bare string (replacing every "e"
# would rewrite the results' own keys and words); it is still hidden wherever it stands
# as a secret's value: a URL's password, a password flag's value, a header, `name=value`.
MIN_BARE_SECRET = 6
_PCT_HEX = re.compile(r"%[0-9A-F]{2}")
# What display shows of a string that does not read as scheme://[userinfo@]host[:port]...:
# never the string itself (it may be a URL whose password ends its host part early).
UNPARSED_URL = "(a URL not shown: it does not read as scheme://host[:port])"

# What a name must hold for its value to be a secret (a JSON key, `name=value` or `name:
# value` in a tool's output: api_key='...', PASSWORD=..., "access_token": ...); a count of
# tokens, a tokenizer, an author or a token id is no secret.
_SECRET_WORD = (
    r"api[_-]?key|secret|passw(?:or)?d|(?:^|[_.-])pass(?:phrase)?(?:$|[_.-])|requirepass|pwd"
    r"|token(?!s|iz|_?ids?\b|_?(?:count|len))|auth(?!or)|credential|cookie|signature|jwt|sessionid"
)
SECRET_NAME = re.compile(rf"(?i){_SECRET_WORD}")
# A query parameter's name (?key=, &sig=, &X-Amz-Signature=): a lone `key` or `sig` too.
SECRET_PARAM = re.compile(rf"(?i){_SECRET_WORD}|(?:^|[_.-])(?:sig|key)(?:$|[_.-])")


def add_secret(value: str | None, user: str | None = None) -> None:
    """Remember a secret so that every later redact() hides it in every form it travels in
    (secret_forms()): as given, escaped as a Python repr or JSON string (a child that prints
    its arguments that way), percent-encoded, and in base64; `user`: the user name it is the
    password of, so that the HTTP Basic credentials `base64(user:password)` are hidden too."""
    if value:
        _SECRETS.update(secret_forms(str(value), user))


def secret_forms(value: str, user: str | None = None) -> set[str]:
    """Every encoding a secret travels in: as given; a repr's and JSON's escapes; percent-encoded
    (every character but letters and digits, or with '/' kept, '+' for a space, either case of
    hex digits); base64 of its UTF-8 bytes, standard and URL-safe alphabets, with or without
    padding, and the part of any base64 text that the secret alone determines, at each of the
    three alignments (a secret inside a longer encoded string: `user:password` in an
    Authorization header, a token in a JSON blob encoded whole). With `user`: base64 of
    `user:password` too, as an HTTP client sends Basic credentials. Forms shorter than
    MIN_BARE_SECRET are only ever hidden where they stand as a value (see redact())."""
    import base64
    from urllib.parse import quote, quote_plus

    out = {value}
    for escaped in (repr(value)[1:-1], json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
        out.add(escaped)
    for enc in (quote(value, safe=""), quote(value), quote_plus(value), quote_plus(value, safe="")):
        out.add(enc)
        out.add(_PCT_HEX.sub(lambda m: m.group(0).lower(), enc))
    raw = value.encode("utf-8", "surrogateescape")
    plain = [raw]
    if user is not None:
        plain.append(f"{user}:".encode("utf-8", "surrogateescape") + raw)
    for data in plain:
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            full = encode(data).decode()
            out.update((full, full.rstrip("=")))
    n = len(raw)
    for shift in range(3):  # the characters of any base64 text that the secret's bytes alone make
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * shift + raw).decode()
            core = text[-(-8 * shift // 6) : (8 * (shift + n)) // 6]
            if len(core) >= MIN_BARE_SECRET + 2:  # long enough to be no chance match in other text
                out.add(core)
    out.discard("")
    return out


def _env_forms() -> set[str]:
    found: set[str] = set()
    for e in SECRET_ENV + KEY_ENV:
        if os.environ.get(e):
            found |= _cached_forms(os.environ[e])
    return found


@functools.lru_cache(maxsize=64)
def _cached_forms(value: str) -> frozenset[str]:
    return frozenset(secret_forms(value))


def known_secrets(extra=()) -> list[str]:
    """Every form (secret_forms()) of every secret known: remembered, in the environment, `extra`."""
    found = set(_SECRETS) | _env_forms()
    for s in extra:
        if s:
            found |= _cached_forms(str(s))
    return sorted(found, key=len, reverse=True)  # longest first: one secret may contain another


def is_secret_name(name: str, param: bool = False) -> bool:
    """True when a key or variable called `name` holds a secret (api_key, access_token,
    client_secret, PASSWORD, Authorization); `param`: a URL's query parameter, where a
    lone `key` or `sig` is one too. A count of tokens or a tokenizer is not."""
    return bool((SECRET_PARAM if param else SECRET_NAME).search(str(name)))


def redact(text: str, extra=(), *, known: bool = True, secrets: list[str] | None = None) -> str:
    """`text` (a line, a tool's output, one argument) made safe to keep or show: every known
    secret, the password (or lone token) of every URL in it, the values of secret-looking
    query parameters (`?api_key=`), Authorization and Bearer headers and `name=value` pairs
    whose name is a secret's (`api_key='...'`, `PASSWORD=...`) replaced by ***.
    `known=False`: only those patterns, no known secret replaced as a bare string (a JSON
    key of the harness's own schema must stay what it is). `secrets`: known_secrets() as the
    caller already has it (a whole results file is redacted string by string).
    Linear in the text: every pattern is anchored and bounded."""
    text = str(text)
    for s in (known_secrets(extra) if secrets is None else secrets) if known else ():
        if len(s) >= MIN_BARE_SECRET:  # a short one only where it stands as a value (below)
            text = text.replace(s, REDACTED)
    if "--" in text:
        text = _FLAG_VALUE.sub(_hide_flag_value, text)
    if "://" in text:
        text = redact_url_credentials(text)
    if "=" in text:
        text = _QUERY_PARAM.sub(_hide_query_value, text)
    if ":" in text or "=" in text:
        text = _AUTH_HEADER.sub(_hide_header, text)
        text = _NAME_VALUE.sub(_hide_name_value, text)
    if "asic" in text or "ASIC" in text:
        text = _BASIC.sub(_hide_basic, text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text) if "earer" in text.lower() else text


# A URL in a line of text: its scheme, then everything up to a space, a quote or <>.
_URL_IN_TEXT = re.compile(r"(?i)(?<![A-Za-z0-9+.-])([a-z][a-z0-9+.-]{0,30}://)([^\s'\"<>]*)")
# host[:port] as it may follow the userinfo: a name, an IPv4 address or [an IPv6 one].
_HOSTPORT = re.compile(r"(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252})(?::[0-9]{0,5})?")
_HOST_WITH_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}):[0-9]{1,5}")
_AT_HOST_WITH_PORT = re.compile(
    r"@(?=(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}):[0-9]{1,5}"
    r"(?:[/?#]|\Z))"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}")
_USER = re.compile(r"[A-Za-z0-9_.~%+-]{1,64}")
_QUERY_PARAM = re.compile(r"([?&#])([^=&#?\s'\"<>]{1,100})=([^&#\s'\"<>]*)")
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])((?:proxy-)?authorization|x-api-key|api-key|x-auth-token)"
    r"(['\"]?[ \t]*[:=][ \t]*['\"]?)(?:(basic|bearer|token|digest|negotiate)[ \t]+)?"
    r"([^\s'\",;]+)"
)
# HTTP Basic credentials without their header's name (a server that echoes the value):
# hidden when the text after "Basic" decodes as base64 to `user:password`.
_BASIC = re.compile(r"(?i)(?<![A-Za-z0-9_])(basic)([ \t]+)([A-Za-z0-9+/_-]{4,4096}={0,2})(?![A-Za-z0-9+/=_-])")
_BEARER = re.compile(r"(?i)(?<![A-Za-z0-9_])(bearer)[ \t]+(?!\*\*\*)[A-Za-z0-9._~+/=-]{8,}")
# A password flag and its value in a line of text (`--api-key X`, `--password=X`): the
# value hidden whatever it is (a short password too); a value starting with '-' is the next flag.
_FLAG_VALUE = re.compile(
    r"(?<![A-Za-z0-9_-])("
    + "|".join(re.escape(f) for f in SECRET_FLAGS if f.startswith("--"))
    + r")([ \t]+|=)(['\"]?)(?!\*\*\*)(?!-)([^\s'\"]{1,4096})"
)
_NOT_A_VALUE = ("none", "null", "true", "false", "bearer", "basic", "token", "digest", "negotiate")
# `name=value`, `name: value`; before a ':' a name that ends a path (`/etc/passwd: no such
# file`, `C:\\secrets\\x: ...`) or is a file's (`secrets.yaml: claim C1 ...`) is no secret's
# name: the word after it is the message, not a value (`_names_a_path`). After '=', and after
# anything that is no path (`username/password: u/s3cret`), it is.
_NAME_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]{1,100})(['\"]?[ \t]*[:=][ \t]*)(['\"]?)"
    r"(?!\*\*\*)([^\s'\",;&)}\]]{1,4096})"
)


def _split_first(text: str, chars: str = "/?#") -> int:
    """Where the first of `chars` is in `text` (len(text) when none is)."""
    return min((i for i in (text.find(c) for c in chars) if i >= 0), default=len(text))


def userinfo_end(rest: str) -> int:
    """In `rest` (a URL after its "scheme://"), the index of the '@' that ends its user name
    and password, or -1 when it has none. A password may hold an unencoded '#', '?', '/' or
    '@', which end the standard reading of the host part early: an '@' past that point
    followed by a host with its port (`u:12/x@h:80`) ends the userinfo; else what the
    standard reading takes for the host must look like one, or everything up to the last
    '@' is userinfo. Linear: each '@' is looked at up to the next one."""
    cut = _split_first(rest)
    later = _later_host(rest, cut)
    if later >= 0:
        return later
    at = rest.rfind("@", 0, cut)
    if _HOSTPORT.fullmatch(rest[at + 1 : cut]):  # the standard reading is sound
        return at
    return rest.rfind("@")


def _later_host(rest: str, cut: int) -> int:
    """The last '@' after `cut` that a host with its port follows (up to '/', '?', '#' or
    the end), or -1."""
    found = -1
    for m in _AT_HOST_WITH_PORT.finditer(rest, cut):
        found = m.start()
    return found


def _display_url(url: str) -> str:
    """One URL with its user name and password (kept: a plain user name before ':'), and
    the values of its secret-looking query and path parameters (`;api_key=`), replaced by ***."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = userinfo_end(rest)
    if end >= 0:
        user, colon, _ = rest[:end].partition(":")
        shown = f"{user}:{REDACTED}@" if colon and _USER.fullmatch(user) else f"{REDACTED}@"
        rest = shown + rest[end + 1 :]
    rest = _QUERY_PARAM.sub(_hide_query_value, rest)
    rest = _hide_path_tokens(rest)
    return scheme + sep + (_MATRIX_PARAM.sub(_hide_query_value, rest) if ";" in rest else rest)


# A URL's path segment that is a credential (`http://h:8000/t/sk-abc123.../v1`, a proxy's
# `/token/XYZ...`): a well-known key's prefix and a body with a digit in it (or 20 long); a
# segment after one named like a secret's (`/api_key/...`, `/token/...`) with a digit in it
# or 16 characters long; or a run of 20 letters and digits with both in it (a hex or base62
# key; a model's name has dashes between its words). Punctuation that ends a sentence is
# not part of it.
_KEY_PREFIX = re.compile(
    r"(?:sk|pk|rk|hf|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abprs])[_-]([A-Za-z0-9_-]{8,})"
    r"|(?:AKIA|ASIA)[A-Z0-9]{12,}|eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){0,2}"
)
_RANDOM_RUN = re.compile(r"[A-Za-z0-9]{20,}")
# the segments a revision follows in a public address (github.com/o/r/blob/SHA/..., a model
# hub's resolve/SHA/...): a hash there names a version, never a credential
_REVISION_BEFORE = ("commit", "commits", "blob", "tree", "raw", "resolve", "archive", "releases", "tag", "revision")
_SEGMENT = re.compile(r"[^/?#;\s'\"<>]+")
_SENTENCE_END = ".,:!)]}"


def _has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def path_token(segment: str, previous: str = "") -> str | None:
    """The credential that a URL's path segment `segment` (after the segment `previous`)
    is, without the punctuation after it, or None when it is none."""
    core = segment.rstrip(_SENTENCE_END)
    m = _KEY_PREFIX.fullmatch(core)
    if m and (m.group(1) is None or _has_digit(m.group(1)) or len(m.group(1)) >= 20):
        return core
    if previous and len(core) >= 8 and is_secret_name(previous, True) and (len(core) >= 16 or _has_digit(core)):
        return core
    if previous.lower() in _REVISION_BEFORE:  # a commit or a model's revision (a hash), public
        return None
    runs = _RANDOM_RUN.findall(core)
    return core if any(_has_digit(r) and any(c.isalpha() for c in r) for r in runs) else None


def _path_segments(rest: str):
    """(match, previous segment) of each path segment of `rest` (a URL after its scheme://,
    from the host on); the host itself is none."""
    cut = _split_first(rest, "?#")
    start = rest.find("/", 0, cut)
    previous = ""
    for m in _SEGMENT.finditer(rest, start, cut) if start >= 0 else ():
        yield m, previous
        previous = m.group(0)


def path_tokens(rest: str) -> list[str]:
    """The credentials in the path of `rest` (a URL after its scheme://; see path_token)."""
    return [t for m, previous in _path_segments(rest) if (t := path_token(m.group(0), previous))]


def _hide_path_tokens(rest: str) -> str:
    """`rest` (a URL after its scheme://) with each credential of its path replaced by ***."""
    if "/" not in rest:
        return rest
    parts, at = [], 0
    for m, previous in _path_segments(rest):
        token = path_token(m.group(0), previous)
        if token:
            parts += [rest[at : m.start()], REDACTED]
            at = m.start() + len(token)
    return "".join(parts) + rest[at:]


def _hide_basic(m: re.Match) -> str:
    import base64
    import binascii

    value = m.group(3)
    try:
        data = base64.b64decode(
            value.replace("-", "+").replace("_", "/").rstrip("=") + "=" * (-len(value.rstrip("=")) % 4), validate=True
        )
    except (binascii.Error, ValueError):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{REDACTED}" if b":" in data else m.group(0)


def _hide_flag_value(m: re.Match) -> str:
    return f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}"


def _hide_query_value(m: re.Match) -> str:
    return f"{m.group(1)}{m.group(2)}={REDACTED}" if is_secret_name(m.group(2), True) and m.group(3) else m.group(0)


def _hide_header(m: re.Match) -> str:
    scheme = f"{m.group(3)} " if m.group(3) else ""
    return f"{m.group(1)}{m.group(2)}{scheme}{REDACTED}"


_FILE_NAME = re.compile(
    r"(?i)\.(?:ya?ml|json|jsonl|txt|toml|md|py|log|csv|html?|xml|conf|cfg|ini|pem|crt|sh|gz|tar|zip|db)$"
)


_PATH_START = re.compile(r"(?:/|\./|\.\./|~/|[A-Za-z]:\\|\\\\)")
_TOKEN_START = re.compile(r"[^\s'\"(<\[{=,;]*$")


def _names_a_path(m: re.Match) -> bool:
    """The match's name, before a ':', is a file's name or the end of a path: a token that
    starts as a path does (/, ./, ../, ~/, C:\\, \\\\) and ends in a separator before the name."""
    if "=" in m.group(2):
        return False
    if _FILE_NAME.search(m.group(1)):
        return True
    before = m.string[: m.start()]
    token = before[_TOKEN_START.search(before).start() :]  # type: ignore[union-attr]
    return token[-1:] in ("/", "\\") and _PATH_START.match(token) is not None


def _hide_name_value(m: re.Match) -> str:
    if not is_secret_name(m.group(1)) or m.group(4).lower() in _NOT_A_VALUE or _names_a_path(m):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}"


def redact_url_credentials(text: str) -> str:
    """Every URL in `text` with its password (or its lone token: `https://TOKEN@host`), and
    its secret-looking query values, replaced by ***; the user name stays, it says whose
    credentials they were. A URL ends at a space or a quote."""
    return _URL_IN_TEXT.sub(lambda m: m.group(1) + _display_url(m.group(0))[len(m.group(1)) :], text)


def note_url_secrets(url: str | None) -> None:
    """Remember the password (or lone token) of `url`, and its secret query values, as
    secrets (as given and percent-decoded), so that redact() hides them wherever they turn
    up on their own: in a child's output that echoes its arguments, say."""
    from urllib.parse import unquote

    if not url or "://" not in str(url):
        return
    rest = str(url).partition("://")[2]
    end = userinfo_end(rest)
    if end >= 0:
        user, colon, password = rest[:end].partition(":")
        if colon:  # an HTTP client sends them as `Basic base64(user:password)`, percent-decoded
            add_secret(password, user)
            add_secret(unquote(password), unquote(user))
        else:
            add_secret(user)
            add_secret(unquote(user))
    for m in (*_QUERY_PARAM.finditer(rest), *_MATRIX_PARAM.finditer(rest)):
        if is_secret_name(m.group(2), True) and m.group(3):
            add_secret(m.group(3))
            add_secret(unquote(m.group(3)))
    for token in path_tokens(rest[end + 1 :]):
        add_secret(token)
        add_secret(unquote(token))


def url_for_display(url: str | None) -> str:
    """A URL (Prometheus, an endpoint, a server's Location) as it may be kept or shown:
    credentials and secret-looking query and path-parameter values (`;api_key=`) hidden.
    Pure: it remembers nothing (a server's text must not choose what redact() hides; the
    user's own URLs are registered with note_url_secrets() where they are read). A string
    that does not read as scheme://host[:port]... one way only is not shown at all
    (UNPARSED_URL): `http:/user:pw@h`, `//user:pw@h`, `http://pa/ss@h` may hold a password."""
    if not url:
        return ""
    url = str(url)
    if url_origin(url) is None:
        return UNPARSED_URL
    return _display_url(url)


# A path parameter (`/v1;api_key=X`, `;jsessionid=X`): hidden like a query value.
_MATRIX_PARAM = re.compile(r"(;)([^=;/?#&\s'\"<>]{1,100})=([^;/?#&\s'\"<>]*)")


def url_origin(value) -> str | None:
    """What a refusal line may show of a URL that is refused: `scheme://host[:port]`, with
    `***@` where it had a user name or password, or None when scheme and host cannot be
    told apart from the rest safely (then say "the URL given in X" instead). Never its
    path, query or userinfo: any of them may hold a credential."""
    if not isinstance(value, str) or "://" not in value:
        return None
    scheme, _, rest = value.partition("://")
    end = userinfo_end(rest)
    after = rest[end + 1 :]
    host = after[: _split_first(after)]
    if "@" in after:  # an '@' past what was taken for the host: `u:12/x@h` reads two ways
        return None
    if not _SCHEME.fullmatch(scheme) or not host or not _HOSTPORT.fullmatch(host) or len(host) > 120:
        return None
    return f"{scheme}://{REDACTED + '@' if end >= 0 else ''}{host}"


def secrets_revealed(*values) -> set[str]:
    """The secrets that JSON-like values (a results folder's manifest and results, say)
    reveal themselves, in every form they travel in (secret_forms()): the password (or lone
    token) and the secret query values of every URL in them, and the string under every
    secret-looking key (`password`, `api_key`). Pure: nothing is remembered, so that a
    folder's text hides its own secrets wherever else they stand in it (a password copied
    into a reason, its base64 in an echoed header) and chooses nothing else."""
    from urllib.parse import unquote

    found: set[str] = set()

    def add(value: str, user: str | None = None) -> None:
        if value and REDACTED not in value:
            found.update(secret_forms(value, user))

    def from_text(text: str) -> None:
        for m in _URL_IN_TEXT.finditer(text):
            rest = m.group(2)
            end = userinfo_end(rest)
            if end >= 0:
                user, colon, password = rest[:end].partition(":")
                add(password if colon else user, user if colon else None)
                add(unquote(password if colon else user), unquote(user) if colon else None)
            for q in (*_QUERY_PARAM.finditer(rest), *_MATRIX_PARAM.finditer(rest)):
                if is_secret_name(q.group(2), True) and q.group(3):
                    add(q.group(3))
                    add(unquote(q.group(3)))
            for token in path_tokens(rest[end + 1 :]):
                add(token)
                add(unquote(token))

    secret_key: dict = {}  # key -> is_secret_name(key): a results file repeats its keys
    scalars = (int, float, bool, type(None))

    def walk(o, hide: bool = False) -> None:
        if isinstance(o, str):
            if hide:
                add(o)
            if "://" in o:
                from_text(o)
        elif isinstance(o, dict):
            for k, v in o.items():
                if v.__class__ in scalars:
                    continue
                hidden = secret_key.get(k)
                if hidden is None:
                    hidden = secret_key[k] = isinstance(k, str) and is_secret_name(k)
                walk(v, hidden)
        elif isinstance(o, (list, tuple)):
            for v in o:
                if v.__class__ not in scalars:
                    walk(v, hide)

    for v in values:
        walk(v)
    return found


def redact_json(value, extra=()):
    """A JSON-like value with every string redacted (see redact()), and the string under
    a secret-looking key (api_key, password, token) replaced by *** whole; numbers and
    the shape stay, so that the file is still read as it was."""
    secrets = known_secrets(extra)

    def walk(o, hide: bool = False):
        if isinstance(o, str):
            return REDACTED if hide and o else redact(o, secrets)
        if isinstance(o, dict):
            return {redact(str(k), secrets): walk(v, is_secret_name(str(k))) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [walk(v, hide) for v in o]
        return o

    return walk(value)


def redact_file(path: Path, extra=()) -> None:
    """Rewrite a kept file (a peer's result, a tool's JSON) with its secrets hidden: JSON
    value by value (see redact_json), any other text line by line. A missing file is left
    missing; a file without secrets is left as it is."""
    try:
        text = path.read_bytes().decode(errors="surrogateescape")
    except (FileNotFoundError, IsADirectoryError):
        return
    try:
        data = json.loads(text)
        new = json.dumps(redact_json(data, extra), indent=1) if redact_json(data, extra) != data else text
    except (ValueError, RecursionError):
        new = redact(text, extra)
    if new != text:
        write_atomic(path, new.encode(errors="surrogateescape"))


def redact_command(cmd: list[str], extra=()) -> list[str]:
    """An argv that is safe to keep: values of password flags and known secrets hidden."""
    out, hide_next = [], False
    for arg in map(str, cmd):
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg in SECRET_FLAGS:
            hide_next = True
        else:
            for prefix in SECRET_PREFIXES:
                if arg.startswith(prefix):
                    arg = prefix + REDACTED
        out.append(redact(arg, extra))
    return out


def command_line(cmd: list[str], extra=()) -> str:
    """The redacted command as one shell-quoted line."""
    return shlex.join(redact_command(cmd, extra))


@dataclass(frozen=True)
class RemoteHost:
    """A host that runs tools over SSH, as an Ansible inventory names it."""

    name: str
    address: str
    user: str | None = None
    port: int | None = None
    ssh_config: str | None = None
    identity: str | None = None  # ssh -i

    def __post_init__(self):
        """Every field may come from an inventory: each is checked to be what it claims, so
        that none can become an ssh option or shell text."""
        where = f"load generator {str(self.name)[:60]!r}"
        check_host(self.name, f"{where}: its host name")
        check_host(self.address, f"{where}: ansible_host")
        if self.user is not None:
            check_user(self.user, f"{where}: ansible_user")
        if self.port is not None and (
            isinstance(self.port, bool) or not isinstance(self.port, int) or not 1 <= self.port <= 65535
        ):
            raise _bad(f"{where}: ansible_port must be a port number (1-65535), got {self.port!r}")
        for key, value in (("ssh config", self.ssh_config), ("ssh private key file", self.identity)):
            if value is not None and (
                not isinstance(value, str) or not value or value.startswith("-") or any(c in value for c in "\0\n\r")
            ):
                raise _bad(f"{where}: its {key} {str(value)[:80]!r} is not a file path; fix the inventory")

    @property
    def label(self) -> str:
        return f"{self.name} ({self.address}) over SSH"

    def ssh_argv(self, remote_command: str, connect_timeout: int = 10) -> list[str]:
        argv = ["ssh"]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}"]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.identity:
            argv += ["-i", self.identity]
        return argv + ["--", self.address, remote_command]  # options end before the destination

    def run(
        self, remote_command: str, timeout: float = 30, stdin: bytes | None = None, processes: list | None = None
    ) -> subprocess.CompletedProcess:
        """Run a shell command on the host; ssh's own failure is returncode 255. `processes`:
        see run_process."""
        try:
            return run_process(self.ssh_argv(remote_command), stdin or b"", timeout, processes=processes)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(
                e.cmd, 255, e.stdout or b"", (e.stderr or b"") + f"ssh: no answer within {timeout:.0f} s".encode()
            )

    def check(self, timeout: float = 20) -> str:
        """'' when the host answers SSH, else one line saying what is wrong."""
        p = self.run("true", timeout=timeout)
        if p.returncode == 0:
            return ""
        err = (
            " | ".join(redact(p.stderr.decode(errors="replace")).strip().splitlines()[-2:])
            or f"exit code {p.returncode}"
        )
        how = f"ssh{' -F ' + self.ssh_config if self.ssh_config else ''} {self.address}"
        return (
            f"load generator {self.name} ({self.address}) does not answer SSH ({err}); check that the "
            f"host is up and that `{how} true` works (the inventory's loadgen group names it)"
        )

    def fetch(self, remote_path: str, local_path: Path, timeout: float = 60, remove: bool = True) -> bool:
        """Copy a file from the host (cat over SSH); True when it existed."""
        rm = f" && rm -f {shlex.quote(remote_path)}" if remove else ""
        p = self.run(f"cat {shlex.quote(remote_path)}{rm}", timeout=timeout)
        if p.returncode != 0:
            return False
        local_path.write_bytes(redact(p.stdout.decode(errors="surrogateescape")).encode(errors="surrogateescape"))
        return True

    def temp_path(self, name: str) -> str:
        return f"/tmp/harness-{uuid.uuid4().hex[:12]}-{name}"


def run_process(
    argv: list[str], stdin: bytes | None, timeout: float, env: dict | None = None, processes: list | None = None
) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True) with `stdin` and `timeout`; with `processes`
    (a list shared with the thread that started this one), the child is added to it while it
    runs, so that the other thread can kill it (several load generators at once: a SIGTERM
    that reaches the harness must not wait for every SSH session to end)."""
    if processes is None:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, env=env)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    processes.append(proc)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


CLOCK_COMMAND = "python3 -c 'import time; print(repr(time.time()))'"


def clock_offset_ms(host: RemoteHost) -> tuple[float, float]:
    """(how far `host`'s clock is ahead of this machine's, ms; the SSH round trip it was read
    in, ms: the offset is known to within half of it): the host's time.time() against the
    middle of the round trip. EnvironmentProblem when the host does not tell its time."""
    t0 = time.time()
    p = host.run(CLOCK_COMMAND, timeout=30)
    t1 = time.time()
    try:
        theirs = float(p.stdout.decode().strip())
    except ValueError:
        raise EnvironmentProblem(
            f"load generator {host.name} did not tell its time ({CLOCK_COMMAND}: exit {p.returncode}); it needs python3"
        ) from None
    return 1000 * (theirs - (t0 + t1) / 2), 1000 * (t1 - t0)


def kill_all(processes: list) -> None:
    """Kill every process of `processes` still running (see run_process)."""
    for proc in list(processes):
        if proc.poll() is None:
            proc.kill()


def run_each(jobs: list) -> list:
    """Call every job of `jobs` (each a function of one argument: the shared list of the
    processes it starts, see run_process) at once, one thread each; their answers in order.
    An interrupt or an error kills every process they started at once instead of waiting
    for them."""
    procs: list = []
    pool = ThreadPoolExecutor(max_workers=len(jobs))
    try:
        futures = [pool.submit(job, procs) for job in jobs]
        return [f.result() for f in futures]
    except BaseException:
        kill_all(procs)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _bad(message: str):
    return BadInput(message)


def tool_missing(tool: str, host: RemoteHost | None, hint: str) -> str:
    """'' when `tool` is on PATH here (or on `host`), else the skip reason. A host that does
    not answer SSH is an environment problem, not a missing tool."""
    if host is None:
        return "" if shutil.which(tool) else f"{tool} not found ({hint})"
    p = host.run(f"command -v {shlex.quote(tool)} >/dev/null", timeout=30)
    if p.returncode == 255:
        raise EnvironmentProblem(host.check() or f"ssh to {host.name} ({host.address}) failed")
    return "" if p.returncode == 0 else f"{tool} not found on {host.name} ({host.address}) ({hint})"


def where(host: RemoteHost | None) -> str:
    """Which machine runs the tools: for the record's details and the report."""
    return host.label if host is not None else f"{os.uname().nodename} (the harness's own machine)"


def _remote_script(
    cmd: list[str], secrets: list[str], timeout: float, raw_dirs: Sequence[str] = (), remote_dir: str | None = None
) -> str:
    """Shell for the remote side: read the secrets from stdin, then exec the tool under
    timeout(1) so that it stops on the host even when the SSH connection is gone. Paths in
    raw_dir become paths in remote_dir (created first)."""
    reads = "".join(f"IFS= read -r HARNESS_S{i}; " for i in range(len(secrets)))
    if remote_dir:
        reads += f"mkdir -p {shlex.quote(remote_dir)} || exit 125; "
    words = []
    for arg in map(str, cmd):
        for prefix in raw_dirs if remote_dir else ():
            if prefix in arg:
                arg = arg.replace(prefix, cast(str, remote_dir))  # the loop runs only with a remote_dir
                break
        for i, s in enumerate(secrets):
            if s in arg:
                arg = f'"$HARNESS_S{i}"'.join(shlex.quote(part) for part in arg.split(s))
                break
        else:
            arg = shlex.quote(arg)
        words.append(arg)
    return f"{reads}exec timeout -k 5 {int(timeout)} {' '.join(words)}"


@dataclass
class ToolRun:
    cmd: list[str]  # redacted
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    files: list[Path]
    ran_on: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def command(self) -> str:
        """The command line as kept (secrets hidden)."""
        return shlex.join(self.cmd)

    def failure(self, tool: str) -> str:
        if self.timed_out:
            return f"{tool} did not finish within its timeout ({self.duration_s:.0f} s)"
        tail = " | ".join((self.stderr or self.stdout).strip().splitlines()[-3:])
        if self.returncode == 255 and self.ran_on.endswith("over SSH"):
            return (
                f"ssh to {self.ran_on.removesuffix(' over SSH')} failed while running {tool}: {tail or '(no output)'}"
            )
        return f"{tool} exited with code {self.returncode}: {tail or '(no output)'}"


def _fetch_dir(host: RemoteHost, remote_dir: str, raw_dir: Path, secrets: list[str]) -> None:
    """Copy the files the tool wrote on the host back into raw_dir, then remove them there."""
    p = host.run(
        f"cd {shlex.quote(remote_dir)} 2>/dev/null && tar cf - . ; rm -rf {shlex.quote(remote_dir)}", timeout=120
    )
    if not p.stdout:
        return
    try:
        with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
            for m in tar.getmembers():
                dest = (raw_dir / m.name).resolve()
                if not m.isfile() or not dest.is_relative_to(raw_dir.resolve()):
                    continue
                # extractfile() is None only for a member that is not a regular file: skipped above
                data = cast(IO[bytes], tar.extractfile(m)).read().decode(errors="surrogateescape")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(redact(data, secrets).encode(errors="surrogateescape"))
    except tarfile.TarError:
        pass


def run_tool(
    cmd: list[str],
    raw_dir: Path,
    name: str,
    timeout: float,
    env: dict | None = None,
    *,
    host: RemoteHost | None = None,
    secrets=(),
    processes: list | None = None,
) -> ToolRun:
    """Run `cmd` here or on a load-generator host over SSH (`host`, e.g. the target's
    loadgen), writing NAME.cmd, NAME.stdout and NAME.stderr under raw_dir. Every known
    secret (and `secrets`) is redacted from all three and, on a host, sent over stdin
    instead of the command line. `processes`: see run_process."""
    secrets = [str(s) for s in secrets if s]
    for s in secrets:
        add_secret(s)
    secrets = known_secrets(secrets)
    raw_dir.mkdir(parents=True, exist_ok=True)
    files = [raw_dir / f"{name}.cmd", raw_dir / f"{name}.stdout", raw_dir / f"{name}.stderr"]
    kept = redact_command(cmd, secrets)
    ran_on = where(host)
    files[0].write_text((f"# ran on {ran_on}\n" if host is not None else "") + shlex.join(kept) + "\n")
    remote_dir = None
    if host is not None:
        prefixes = sorted({str(raw_dir.resolve()), str(raw_dir)}, key=len, reverse=True)
        if any(p in str(a) for p in prefixes for a in cmd):
            remote_dir = host.temp_path(name)
        argv = host.ssh_argv(
            _remote_script(cmd, [s for s in secrets if any(s in str(a) for a in cmd)], timeout, prefixes, remote_dir)
        )
        stdin = "".join(s + "\n" for s in secrets if any(s in str(a) for a in cmd)).encode()
        limit = timeout + 30  # the remote timeout(1) stops the tool first
    else:
        argv, stdin, limit = cmd, None, timeout
    t0 = time.monotonic()
    try:
        p = run_process(argv, stdin, limit, env, processes)
        rc, out, err, timed_out = p.returncode, p.stdout, p.stderr, False
        if host is not None and rc in (124, 137) and time.monotonic() - t0 >= timeout:
            timed_out = True  # timeout(1) on the host stopped it
    except subprocess.TimeoutExpired as e:
        rc, out, err, timed_out = None, e.stdout or b"", e.stderr or b"", True
    dt = time.monotonic() - t0
    if remote_dir is not None and host is not None:  # remote_dir is only ever set with a host
        _fetch_dir(host, remote_dir, raw_dir, secrets)
    out_s = redact(out.decode(errors="replace"), secrets)
    err_s = redact(err.decode(errors="replace"), secrets)
    files[1].write_bytes(redact(out.decode(errors="surrogateescape"), secrets).encode(errors="surrogateescape"))
    files[2].write_bytes(redact(err.decode(errors="surrogateescape"), secrets).encode(errors="surrogateescape"))
    return ToolRun(kept, rc, out_s, err_s, dt, timed_out, files, ran_on)
