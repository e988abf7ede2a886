"""Strict YAML loading and the field checks shared by the suite model (harness/model/spec.py),
the claims ledger (harness/model/ledger.py, harness/model/ledger_parse.py) and claim packs
(harness/model/packs.py).

A spec is read as UTF-8 text of at most MAX_SPEC_BYTES; YAML aliases are refused (a 1 KB
alias bomb expands to gigabytes), as are folders, devices and binary files. `Fields` reads one
mapping, refusing unknown fields (naming the file, the field and a close match), wrong types
and non-finite numbers. `stored_names` and `stored_number` check the values a results file
gives back (which the user may have edited).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from harness.base.errors import BadInput, did_you_mean
from harness.model import driver_contract

MAX_SPEC_BYTES = 1 << 20  # 1 MiB: a suite spec is a page of YAML


# ---- YAML loading -------------------------------------------------------------------------
class AliasRefused(BadInput):
    """A YAML alias in a spec or a --set value (refused: a 1 KB alias bomb expands to gigabytes)."""


# libyaml's parser (7x faster than PyYAML's own; it also caps nesting at 1000 levels) with the
# safe constructor; PyYAML's pure-Python SafeLoader where libyaml is not installed.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _refuse_aliases(text: str) -> None:
    """Aliases (and so alias bombs) are refused before anything is built."""
    for ev in yaml.parse(text, Loader=_LOADER):
        if isinstance(ev, yaml.AliasEvent):
            raise AliasRefused(
                f"YAML aliases (*{ev.anchor}) are not allowed in specs; write the value out "
                f"(line {getattr(ev.start_mark, 'line', -1) + 1})"
            )


def parse_yaml_text(text: str, where: str):
    try:
        _refuse_aliases(text)
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 - CSafeLoader or SafeLoader
    except BadInput as e:
        raise type(e)(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        raise BadInput(f"{where}: not valid YAML: {e}".replace("\n", " ")) from None
    except (RecursionError, ValueError, OverflowError) as e:
        raise BadInput(f"{where}: YAML that cannot be read ({type(e).__name__}); simplify the file") from None


def load_yaml(path: Path, what: str = "spec file"):
    """Read a YAML file, refusing folders, devices, huge or binary files with one line."""
    path = Path(path)
    try:
        if not path.exists():
            raise BadInput(f"{path}: no such {what}")
        if path.is_dir():
            raise BadInput(f"{path}: is a folder, not a {what}; give a .yaml file")
        if not path.is_file():
            raise BadInput(f"{path}: is not a regular file (a device or a pipe?); give a .yaml file")
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise BadInput(f"{path}: {size} bytes is too large for a {what} (at most {MAX_SPEC_BYTES})")
        raw = path.read_bytes()
    except OSError as e:
        raise BadInput(f"{path}: cannot be read ({e.strerror or e})") from None
    if b"\x00" in raw:
        raise BadInput(f"{path}: is a binary file, not a YAML {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path}: is not UTF-8 text; save the {what} as UTF-8") from None
    return parse_yaml_text(text, str(path))


# ---- field reader -------------------------------------------------------------------------
class Fields:
    """Reads one mapping of a spec, refusing unknown keys and wrong types."""

    def __init__(self, where: str, data: Any, allowed: dict[str, tuple]):
        if not isinstance(data, dict):
            raise BadInput(f"{where}: expected a mapping, got {type(data).__name__}")
        for k in data:
            if not isinstance(k, str):
                raise BadInput(f"{where}: field names must be text, got {k!r}; quote it or remove it")
        unknown = [k for k in data if k not in allowed]
        if unknown:
            k = unknown[0]
            raise BadInput(
                f"{where}: unknown field {k!r}{did_you_mean(k, allowed)}; allowed fields: {', '.join(allowed)}"
            )
        self.where, self.data, self.allowed = where, data, allowed

    def get(self, key: str, default: Any = driver_contract.REQUIRED):
        types = self.allowed[key]
        if key not in self.data or self.data[key] is None:
            if default is driver_contract.REQUIRED:
                raise BadInput(f"{self.where}: field {key!r} is missing; add it ({types[1]})")
            return default
        value = self.data[key]
        want = types[0]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise BadInput(f"{self.where}.{key}: {value} is too large for a number; {types[1]}") from None
        if not isinstance(value, want) or (isinstance(value, bool) and want is not bool):
            raise BadInput(
                f"{self.where}.{key}: expected {getattr(want, '__name__', want)}, "
                f"got {type(value).__name__} ({str(value)[:60]!r}); {types[1]}"
            )
        if want is float and not math.isfinite(value):
            raise BadInput(f"{self.where}.{key}: {value} is not a finite number; {types[1]}")
        if want is dict:
            for k in value:
                if not isinstance(k, str):
                    raise BadInput(f"{self.where}.{key}: keys must be text, got {k!r}")
        return value


def finite(where: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadInput(f"{where}: expected a number, got {type(v).__name__} ({str(v)[:60]!r})")
    try:
        f = float(v)
    except OverflowError:
        raise BadInput(f"{where}: {v} is too large for a number") from None
    if not math.isfinite(f):
        raise BadInput(f"{where}: {v} is not a finite number")
    return f


# ---- values read back from a results file ----------------------------------------------------
def stored_names(d: dict, *keys: str) -> list[str]:
    """The names (case, metric, suite) of a threshold or check stored in a results file: text,
    or BadInput naming the field (the file was edited)."""
    out = []
    for k in keys:
        v = d[k]
        if not isinstance(v, str):
            raise BadInput(
                f"a stored threshold or claim check has a {k} that is a {type(v).__name__}, not text; "
                f"the results file is damaged, re-run the suites"
            )
        out.append(v)
    return out


def stored_number(where: str, v: Any) -> float:
    """A threshold's limit read back: a number, or BadInput. NaN is kept (an edited file's NaN
    limit fails its check and draws no line in the history); an infinite one is refused, since
    `<= Infinity` would pass whatever was measured."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadInput(
            f"{where}: expected a number, got {type(v).__name__} ({str(v)[:60]!r}); "
            f"the results file is damaged, re-run the suites"
        )
    try:
        f = float(v)
    except OverflowError:
        raise BadInput(
            f"{where}: {str(v)[:40]}... is too large for a number; the results file is damaged, re-run the suites"
        ) from None
    if math.isinf(f):
        raise BadInput(f"{where}: the limit {f} is not a finite number; the results file is damaged, re-run the suites")
    return f
