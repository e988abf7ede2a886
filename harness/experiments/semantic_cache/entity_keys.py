"""Section 3.3: keys made of a prompt template id plus the sorted, normalized entity set
(the batching of equal keys is dispatcher.py).

Entity extractor "rules-v1" (regular expressions, no model): e-mail addresses, URLs,
dates (ISO 2023-04-03, 3/4/2023, "April 3, 2023", "3 April 2023"), numbers and version
strings (42, 3.14, 2.10.0, 1,000), code-like tokens (snake_case, dotted.names, CamelCase,
words in backticks) and capitalized spans (runs of capitalized words; a lone capitalized
first word of a sentence is not an entity). Entities are normalized (case-folded, trailing
punctuation dropped) and replaced by typed slots (<email>, <date>, ...) in the text; the
template is the normalized slotted text and the template id its SHA-256 prefix.

Key: `tpl_<template id>_<sha256 of the sorted entity set>`; two prompts share a key only
when both their template and their entity set are equal.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from harness.mechanisms.semantic.keys import normalize

EXTRACTOR = "rules-v1"
_MONTHS = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|jun(?:e)?|jul(?:y)?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
RULES: list[tuple[str, re.Pattern]] = [
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("url", re.compile(r"\bhttps?://\S+|\bwww\.\S+", re.I)),
    (
        "date",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
            rf"|\b{_MONTHS}\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b"
            rf"|\b\d{{1,2}}(?:st|nd|rd|th)? {_MONTHS}\.?,? \d{{4}}\b",
            re.I,
        ),
    ),
    ("number", re.compile(r"\b\d+(?:[.,]\d+)*\b")),
    (
        "code",
        re.compile(
            r"`[^`]+`|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?|\b[a-z]+_[\w]+\b"
            r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b|\b[A-Z]{2,}\w*\b"
        ),
    ),
    ("name", re.compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")),
]


@dataclass(frozen=True)
class Extracted:
    template: str
    entities: tuple[tuple[str, str], ...]  # sorted (type, normalized value)

    @property
    def template_id(self) -> str:
        return hashlib.sha256(self.template.encode()).hexdigest()[:16]

    @property
    def key(self) -> str:
        ents = "\x1f".join(f"{t}:{v}" for t, v in self.entities)
        return f"tpl_{self.template_id}_{hashlib.sha256(ents.encode()).hexdigest()[:16]}"


def _sentence_starts(text: str) -> set[int]:
    starts = {0}
    for m in re.finditer(r"[.!?]\s+", text):
        starts.add(m.end())
    return starts


def extract(text: str) -> Extracted:
    """Entities by the rules above, first rule wins on overlaps; the slotted template."""
    taken: list[tuple[int, int, str, str]] = []
    starts = _sentence_starts(text)
    for kind, rx in RULES:
        for m in rx.finditer(text):
            s, e = m.span()
            value = m.group(0)
            if kind == "name" and s in starts:  # a capitalized first word just starts a sentence
                rest = re.match(r"\S+\s+", value)
                if rest is None:
                    continue
                s, value = s + rest.end(), value[rest.end() :]
            if kind == "name" and value == "I":
                continue
            if any(s < e2 and s2 < e for s2, e2, _, _ in taken):
                continue
            taken.append((s, e, kind, value))
    taken.sort()
    parts, pos = [], 0
    for s, e, kind, _ in taken:
        parts.append(text[pos:s])
        parts.append(f" {kind.upper()}SLOT ")
        pos = e
    parts.append(text[pos:])
    template = normalize("".join(parts))
    ents = tuple(sorted({(k, normalize(v) or v.strip().casefold()) for _, _, k, v in taken}))
    return Extracted(template, ents)


def entity_key(text: str) -> str:
    return extract(text).key
