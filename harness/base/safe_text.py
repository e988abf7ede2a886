"""Text from outside made safe for the place it goes: one small pure function per sink.

Text the harness did not write itself (a server's model ids and status lines, the names,
reasons and facts of a results folder, a trace, a manifest) can carry anything: escape
sequences that clear the screen, set the window title or write the clipboard (OSC 52),
a newline that forges an `error:` line, NUL and other characters that XML 1.0 forbids,
lone surrogates (valid JSON, not encodable as UTF-8), bidi overrides that reorder what a
reader sees, Markdown that becomes a link or an image, and megabytes in one field. What
is stored is kept as it came; it is made safe where it is shown:

- `for_terminal`: one line for a terminal; every control character (C0, C1, DEL),
  line and paragraph separator, format character (bidi overrides, zero-width ones) and
  lone surrogate is shown as a visible escape (ESC as `\\x1b`, U+202E as `\\u202e`), so
  no escape sequence reaches the terminal whole and no line can be forged.
  `for_terminal_lines` keeps the newlines of a block (a log tail) and nothing else.
- `for_xml`: text or an attribute value of JUnit XML: the same escapes, so only
  characters XML 1.0 allows remain (newlines and tabs are kept in element text).
- `for_html`: a field of an HTML page (Jinja autoescapes the markup itself): bounded,
  with the same escapes, newlines and tabs kept.
- `for_markdown`: one line of Markdown: the escapes, then every character that makes
  Markdown structure (links, images, emphasis, code, HTML, table cells, headings) is
  backslash-escaped, so it renders as the text it is.
- `bounded`: every field is cut at a limit with a visible "... (N more characters)";
  `bound_strings` does it to every string of a JSON-like value.

The escapes follow Python's own (`\\xNN`, `\\uNNNN`, `\\UNNNNNNNN`).
"""

from __future__ import annotations

import re
import unicodedata

NAME = 200  # a name in a table cell or a message: a metric, a case, a model id, a run id
TEXT = 1000  # a reason, a value, one line of a message
BLOCK = 4000  # a field of a file: an HTML field, JUnit element text
LINE = 4000  # a whole line for the terminal (an error line with a log tail, a header line)

# unicodedata categories shown as escapes: controls, format characters (bidi overrides and
# isolates, zero-width characters, the BOM), surrogates, line and paragraph separators,
# and code points with no character (U+FFFE, U+FFFF and the unassigned)
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Cn"})
_PLAIN = frozenset({int, float, bool, type(None)})  # values bound_strings leaves as they are
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")
# ':' and '@' too: GitHub's Markdown links bare URLs (https://...) and pings @names; and the
# dot of "www." (an autolink without a scheme)
_MARKDOWN = re.compile(r"([\\`*_\[\]()#!|<>~&:@])")
_WWW = re.compile(r"(?i)\b(www)\.")


def bounded(text, limit: int = TEXT) -> str:
    """`text` as a string of at most `limit` characters, then a visible marker of what was cut."""
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def bound_strings(value, limit: int = TEXT):
    """A JSON-like value with every string in it (keys too) bounded to `limit` characters.
    Numbers are passed over without a call each: history.json of 3,000 runs is mostly numbers."""
    kind = type(value)
    if kind is str:
        return value if len(value) <= limit else bounded(value, limit)
    if kind is dict or isinstance(value, dict):
        return {
            (k if type(k) is not str or len(k) <= limit else bounded(k, limit)): (
                v if type(v) in _PLAIN else bound_strings(v, limit)
            )
            for k, v in value.items()
        }
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        return [v if type(v) in _PLAIN else bound_strings(v, limit) for v in value]
    if isinstance(value, str):
        return bounded(value, limit)
    return value


def escape_char(ch: str) -> str:
    """One character as a visible escape: `\\n`, `\\x1b`, `\\u202e`, `\\U000e0001`."""
    n = ord(ch)
    if ch in _SHORT:
        return _SHORT[ch]
    if n < 0x100:
        return f"\\x{n:02x}"
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def is_unsafe(ch: str) -> bool:
    """A character that must not reach a terminal or a file as it is (see the module's docstring)."""
    n = ord(ch)
    if 0x20 <= n < 0x7F:
        return False
    return n < 0x20 or 0x7F <= n <= 0x9F or unicodedata.category(ch) in _UNSAFE_CATEGORIES


def neutralise(text, keep: str = "") -> str:
    """Every unsafe character of `text` but those in `keep` replaced by its visible escape."""
    text = "" if text is None else str(text)

    def one(m: re.Match) -> str:
        ch = m.group(0)
        return ch if ch in keep or not is_unsafe(ch) else escape_char(ch)

    return _NOT_PRINTABLE_ASCII.sub(one, text)


def _cut(text, limit: int) -> tuple[str, str]:
    """`text` cut to `limit` characters and the marker of the rest ('' when nothing was cut):
    cut before escaping, so that a 7 MB field costs no more than its first `limit` characters."""
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"... ({len(text) - limit:,} more characters)"


def for_terminal(text, limit: int = TEXT) -> str:
    """One line for a terminal: bounded, every control, separator, format character and
    lone surrogate (newlines and carriage returns too) shown as an escape."""
    head, rest = _cut(text, limit)
    return neutralise(head) + rest


def for_terminal_lines(text, limit: int = BLOCK) -> str:
    """A block of lines for a terminal (a log tail): as `for_terminal`, newlines kept."""
    head, rest = _cut(text, limit)
    return neutralise(head, keep="\n") + rest


def for_xml(text, limit: int = BLOCK, *, one_line: bool = False) -> str:
    """Element text (newlines and tabs kept) or, `one_line`, an attribute value of an XML
    1.0 file: only characters XML allows remain, the others shown as escapes."""
    head, rest = _cut(text, limit)
    return neutralise(head, keep="" if one_line else "\n\t") + rest


def for_html(text, limit: int = BLOCK) -> str:
    """A field of an HTML page, before autoescaping: bounded, unsafe characters escaped
    (newlines and tabs kept); markup itself is escaped by Jinja (or harness.verdict.display.esc)."""
    head, rest = _cut(text, limit)
    return neutralise(head, keep="\n\t") + rest


def for_markdown(text, limit: int = TEXT) -> str:
    """One line of Markdown (a table cell, a list item): as `for_terminal`, and every
    character that makes Markdown structure backslash-escaped (links, images, emphasis,
    code, HTML, table cells, headings), so that it renders as the text it is."""
    return _WWW.sub(r"\1\\.", _MARKDOWN.sub(r"\\\1", for_terminal(text, limit)))
