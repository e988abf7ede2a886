"""Redaction: one path for whatever is kept, shown or logged.

`redact()` (text: a line, a tool's or a peer's output), `redact_command()` (an argv),
`redact_json()` / `redact_file()` (a JSON value, a kept file) hide every secret the process
knows (harness.infra.secret_store: `add_secret()`, the passwords in REDIS_CLUSTER_PASSWORD,
REDIS_CACHE_READER_PASSWORD and HARNESS_TARGET_PASSWORD, the API keys in OPENAI_API_KEY,
VLLM_API_KEY, HF_TOKEN), the value after a password flag (`-a X`, `--authenticate=X`,
`--api-key X`) whatever it is, the credentials of every URL (harness.infra.url_redaction:
its password, read as a hostile user writes it, its secret-looking query parameters
(`?api_key=`, `&sig=`), a credential in its path (`/t/sk-...`, `/token/X`)), Authorization
and Bearer headers, and `name=value` pairs whose name is a secret's (`api_key='...'`,
`PASSWORD=...`; never a path's last part or a file's name: `/etc/passwd: no such file`
keeps its words). A known secret shorter than MIN_BARE_SECRET characters ("e") is hidden
only where it stands as such a value (a URL's password, a flag's value, a header,
`name=value`), never as a bare string everywhere: that would rewrite every "e" of every
result. `secrets_revealed()`: the secrets a results folder's own values reveal.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from harness.base.files import write_atomic
from harness.infra.secret_store import MIN_BARE_SECRET, REDACTED, is_secret_name, known_secrets, secret_forms
from harness.infra.url_redaction import redact_query_values, redact_url_credentials, url_credentials_in

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
        text = redact_query_values(text)
    if ":" in text or "=" in text:
        text = _AUTH_HEADER.sub(_hide_header, text)
        text = _NAME_VALUE.sub(_hide_name_value, text)
    if "asic" in text or "ASIC" in text:
        text = _BASIC.sub(_hide_basic, text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text) if "earer" in text.lower() else text


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


def secrets_revealed(*values) -> set[str]:
    """The secrets that JSON-like values (a results folder's manifest and results, say)
    reveal themselves, in every form they travel in (secret_forms()): the password (or lone
    token) and the secret query values of every URL in them, and the string under every
    secret-looking key (`password`, `api_key`). Pure: nothing is remembered, so that a
    folder's text hides its own secrets wherever else they stand in it (a password copied
    into a reason, its base64 in an echoed header) and chooses nothing else."""
    found: set[str] = set()

    def add(value: str, user: str | None = None) -> None:
        if value and REDACTED not in value:
            found.update(secret_forms(value, user))

    secret_key: dict = {}  # key -> is_secret_name(key): a results file repeats its keys
    scalars = (int, float, bool, type(None))

    def walk(o, hide: bool = False) -> None:
        if isinstance(o, str):
            if hide:
                add(o)
            if "://" in o:
                for value, user in url_credentials_in(o):
                    add(value, user)
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
