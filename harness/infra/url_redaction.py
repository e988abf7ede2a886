"""URLs read as a hostile user writes them, and shown without their credentials.

A password may hold an unencoded '#', '?', '/' or '@' (see `userinfo_end()`); a URL's
credentials are its password (or lone token), the values of its secret-looking query and
path parameters (`?api_key=`, `&sig=`, `;jsessionid=`) and a credential in its path
(`/t/sk-...`, `/token/X`; see `path_token()`).

Display is pure: `url_for_display()` hides a URL's credentials and remembers nothing, so
that text from a server (a Location header, an error) cannot make the harness "redact"
strings of its choosing. Only the user's own configured URLs (an LlmEndpoint, the
Prometheus URL) are registered, explicitly, with `note_url_secrets()`, so that a child
that echoes them (vLLM's client prints its arguments) is redacted too. `url_origin()` is
what a refusal line may show of a refused URL: scheme and host only, or nothing.
`redact_url_credentials()` and `redact_query_values()` are the URL rules of
harness.infra.redaction.redact().
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from harness.infra.secret_store import REDACTED, add_secret, is_secret_name

# What display shows of a string that does not read as scheme://[userinfo@]host[:port]...:
# never the string itself (it may be a URL whose password ends its host part early).
UNPARSED_URL = "(a URL not shown: it does not read as scheme://host[:port])"

# A URL in a line of text: its scheme, then everything up to a space, a quote or <>.
_URL_IN_TEXT = re.compile(r"(?i)(?<![A-Za-z0-9+.-])([a-z][a-z0-9+.-]{0,30}://)([^\s'\"<>]*)")
# host[:port] as it may follow the userinfo: a name, an IPv4 address or [an IPv6 one].
_HOSTPORT = re.compile(r"(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252})(?::[0-9]{0,5})?")
_AT_HOST_WITH_PORT = re.compile(
    r"@(?=(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}):[0-9]{1,5}"
    r"(?:[/?#]|\Z))"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}")
_USER = re.compile(r"[A-Za-z0-9_.~%+-]{1,64}")
_QUERY_PARAM = re.compile(r"([?&#])([^=&#?\s'\"<>]{1,100})=([^&#\s'\"<>]*)")
# A path parameter (`/v1;api_key=X`, `;jsessionid=X`): hidden like a query value.
_MATRIX_PARAM = re.compile(r"(;)([^=;/?#&\s'\"<>]{1,100})=([^;/?#&\s'\"<>]*)")


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


def _hide_query_value(m: re.Match) -> str:
    return f"{m.group(1)}{m.group(2)}={REDACTED}" if is_secret_name(m.group(2), True) and m.group(3) else m.group(0)


def redact_query_values(text: str) -> str:
    """`text` with the value of every secret-looking query parameter (`?api_key=X`,
    `&sig=X`) replaced by ***."""
    return _QUERY_PARAM.sub(_hide_query_value, text)


def redact_url_credentials(text: str) -> str:
    """Every URL in `text` with its password (or its lone token: `https://TOKEN@host`), and
    its secret-looking query values, replaced by ***; the user name stays, it says whose
    credentials they were. A URL ends at a space or a quote."""
    return _URL_IN_TEXT.sub(lambda m: m.group(1) + _display_url(m.group(0))[len(m.group(1)) :], text)


def url_credentials(rest: str) -> list[tuple[str, str | None]]:
    """The secrets of one URL after its "scheme://" (`rest`), each as given and
    percent-decoded, as (secret, the user name it is the password of, or None): its
    password (or lone token), its secret query and path-parameter values, the credentials
    of its path (see path_token)."""
    found: list[tuple[str, str | None]] = []
    end = userinfo_end(rest)
    if end >= 0:
        user, colon, password = rest[:end].partition(":")
        if colon:  # an HTTP client sends them as `Basic base64(user:password)`, percent-decoded
            found += [(password, user), (unquote(password), unquote(user))]
        else:
            found += [(user, None), (unquote(user), None)]
    for m in (*_QUERY_PARAM.finditer(rest), *_MATRIX_PARAM.finditer(rest)):
        if is_secret_name(m.group(2), True) and m.group(3):
            found += [(m.group(3), None), (unquote(m.group(3)), None)]
    for token in path_tokens(rest[end + 1 :]):
        found += [(token, None), (unquote(token), None)]
    return found


def url_credentials_in(text: str) -> list[tuple[str, str | None]]:
    """url_credentials() of every URL in `text` (a URL ends at a space or a quote)."""
    return [found for m in _URL_IN_TEXT.finditer(text) for found in url_credentials(m.group(2))]


def note_url_secrets(url: str | None) -> None:
    """Remember the password (or lone token) of `url`, and its secret query values, as
    secrets (as given and percent-decoded), so that redact() hides them wherever they turn
    up on their own: in a child's output that echoes its arguments, say."""
    if not url or "://" not in str(url):
        return
    for value, user in url_credentials(str(url).partition("://")[2]):
        add_secret(value, user)


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
