"""The secrets this process knows, and every form they travel in.

`add_secret()` remembers one (a run's password, the password of a user's own URL); the
passwords in SECRET_ENV and the API keys in KEY_ENV are known while they are in the
environment. `secret_forms()` is every encoding a secret may travel in (escaped,
percent-encoded, base64), `known_secrets()` every form of every secret known, longest
first: harness.infra.redaction hides them. `is_secret_name()` says whether a key,
variable or query parameter called so holds a secret.
"""

from __future__ import annotations

import functools
import json
import os
import re

REDACTED = "***"
SECRET_ENV = ("REDIS_CLUSTER_PASSWORD", "REDIS_CACHE_READER_PASSWORD", "HARNESS_TARGET_PASSWORD")
# API keys a peer or a library may read from the environment (vLLM's client sends
# OPENAI_API_KEY as a Bearer token): hidden too, but not taken from children like SECRET_ENV.
KEY_ENV = ("OPENAI_API_KEY", "VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
_SECRETS: set[str] = set()
# A known secret shorter than this is not replaced as a bare string (replacing every "e"
# would rewrite the results' own keys and words); it is still hidden wherever it stands
# as a secret's value: a URL's password, a password flag's value, a header, `name=value`.
MIN_BARE_SECRET = 6
_PCT_HEX = re.compile(r"%[0-9A-F]{2}")

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
    """Remember a secret so that every later redact() (harness.infra.redaction) hides it in
    every form it travels in (secret_forms()): as given, escaped as a Python repr or JSON string (a child that prints
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
    MIN_BARE_SECRET are only ever hidden where they stand as a value (see
    harness.infra.redaction.redact())."""
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
