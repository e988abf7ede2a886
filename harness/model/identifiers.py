"""The rules for the names the harness keys things by: suite, case and profile names, claim
ids, claim pack names and metric names. Each is one rule, checked by this one module where a
name comes in (a suite spec, the claims ledger, a claim pack, `harness run --pack`) and where
it is read back (a results folder's results.json, verdicts.json), so that what the harness
accepts it can always read back (issue 63).

Every rule matches the whole text (`re.fullmatch`: `^...$` would let a trailing newline
through) and is ASCII where the name becomes a folder, an HTML id or a sort key: a claim id
holds at most 64 characters of ASCII letters, digits, '.', '_' and '-', so that its number
(C2 before C10) is read from ASCII digits alone and is never huge. A metric name is freer (a
load tool's test names have spaces and parentheses: `LRANGE_300 (first 300 elements).rps`)
but holds no control, format or separator character and no surrounding white space.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.base.errors import BadInput
from harness.base.safe_text import for_terminal, is_unsafe

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", re.ASCII)
_PACK = re.compile(r"[a-z0-9][a-z0-9-]{0,40}", re.ASCII)
MAX_METRIC = 200
ORDER_DIGITS = 18  # at most this many digits of an id make its number (an int64, whatever the id)


def _metric_ok(text: str) -> bool:
    return 1 <= len(text) <= MAX_METRIC and text == text.strip() and not any(is_unsafe(ch) for ch in text)


@dataclass(frozen=True)
class Rule:
    """One kind of name: what it is called in a message, the rule in words, the test."""

    kind: str
    words: str
    test: Callable[[str], bool]

    def ok(self, value: Any) -> bool:
        return isinstance(value, str) and self.test(value)

    def problem(self, value: Any) -> str:
        """'' for a name this rule accepts, else what is wrong (escaped and bounded: one line)."""
        if not isinstance(value, str):
            return f"a {self.kind} is a {type(value).__name__}, not text"
        if self.test(value):
            return ""
        return f"{self.kind} {for_terminal(repr(value), 80)} is not {self.words}"

    def check(self, where: str, value: Any) -> str:
        """`value`, or BadInput naming `where` and the rule."""
        bad = self.problem(value)
        if bad:
            raise BadInput(f"{where}: {bad}")
        return value


NAME_WORDS = "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64 characters"
NAME = Rule("name", NAME_WORDS, lambda s: _NAME.fullmatch(s) is not None)
CLAIM_ID = Rule(
    "claim id",
    "1-64 ASCII letters, digits, '.', '_' and '-', starting with a letter or digit (C1, C11a, I23)",
    lambda s: _NAME.fullmatch(s) is not None,
)
PACK_NAME = Rule(
    "pack name",
    "lower-case ASCII letters, digits and dashes, starting with a letter or digit (at most 41)",
    lambda s: _PACK.fullmatch(s) is not None,
)
METRIC = Rule(
    "metric name",
    f"1-{MAX_METRIC} printable characters (no control, format or line-separator character, no space at either end)",
    _metric_ok,
)


def id_order(cid: str) -> tuple[int, str]:
    """C2 before C10: the number the id's ASCII digits make (at most 18 of them; none: last),
    then the id. Never raises, whatever the text (a superscript digit is no digit here)."""
    digits = "".join(ch for ch in str(cid) if "0" <= ch <= "9")[:ORDER_DIGITS]
    return (int(digits) if digits else 10**ORDER_DIGITS, str(cid))
