"""What a driver measures: a `Metric` (one number with its unit and which direction is
better) or a `Series` (named columns of equal length: the raw sequence a view turns into a
table or a chart), and the facts a case reports (flat names to a string, number or boolean).

The lowest layer of the data model: the driver contract (harness.model.driver_contract), the stored run
(harness.model.stored_run) and the views all build on it; it imports nothing of the harness.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("ok", "failed", "invalid", "skipped")
BETTER = (None, "lower", "higher")


def finite_number(v: Any) -> float | None:
    """A number from a file the user may have edited, as a float: None unless it is a finite
    int or float (not a bool; an int too large for a float is None, not an OverflowError)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def finite_or_none(v: Any) -> Any:
    """NaN and infinities never reach a results file (they are not JSON): None instead; so
    is an int past a float's range (a damaged file's), which no statistic could use."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and finite_number(v) is None:
        return None
    return v


@dataclass(frozen=True)
class Metric:
    """A measured value with its unit and which direction is better."""

    value: float | None
    unit: str
    better: str | None = None  # "lower", "higher" or None (neither)
    note: str = ""

    def __post_init__(self):
        if self.better not in BETTER:
            raise ValueError(f"Metric.better must be 'lower', 'higher' or None, not {self.better!r}")
        if self.value is not None:
            if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
                raise ValueError(f"Metric value must be a number, got {self.value!r}")
            v = finite_number(self.value)
            if v is None:
                raise ValueError(f"Metric value must be finite, got {str(self.value)[:60]}")
            object.__setattr__(self, "value", v)

    def to_json(self) -> dict:
        out = {"value": self.value, "unit": self.unit}
        if self.better:
            out["better"] = self.better
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Metric":
        return cls(data["value"], data.get("unit", ""), data.get("better"), data.get("note", ""))


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class MetricDecl:
    """A metric a case may report, declared beside its parameters: its name, unit and better
    side. The name may hold placeholders: `{arm}` stands for one name part or more (any text
    without spaces), `{GET|SET}` for one of the words given. A threshold or a ledger check
    naming a metric no declaration of its case matches is refused by `harness validate` and
    before a run; a metric a case reports that no declaration matches is a bug of the case.

    Example: MetricDecl("{GET|SET}.p99_ms", "ms", "lower", "the 99th percentile latency")"""

    name: str
    unit: str | None  # None: the unit varies with the case's parameters (each metric states its own)
    better: str | None = None  # "lower", "higher" or None (neither: a control, a count, a setting)
    text: str = ""
    _regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.better not in BETTER:
            raise ValueError(f"MetricDecl.better must be 'lower', 'higher' or None, not {self.better!r}")
        if not self.name or self.name != self.name.strip() or not self.name.isprintable():
            raise ValueError(f"a declared metric name is printable text, no outer spaces: {self.name!r}")
        if _PLACEHOLDER.search(self.name) and len(re.sub(r"[._]", "", _PLACEHOLDER.sub("", self.name))) < 3:
            raise ValueError(f"a declared metric name needs a literal part, not placeholders alone: {self.name!r}")
        object.__setattr__(self, "_regex", re.compile(self.regex()))

    def regex(self) -> str:
        out, at = [], 0
        for m in _PLACEHOLDER.finditer(self.name):
            out.append(re.escape(self.name[at : m.start()]))
            words = m.group(1).split("|")
            out.append("(?:" + "|".join(re.escape(w) for w in words) + ")" if len(words) > 1 else r"\S+")
            at = m.end()
        out.append(re.escape(self.name[at:]))
        return "".join(out)

    def examples(self, limit: int = 200) -> list[str]:
        """The names it stands for, each closed placeholder spelt out (`{GET|SET}.p99_ms`:
        GET.p99_ms, SET.p99_ms) and each open one left as it is: what a "did you mean" offers."""
        out = [""]
        at = 0
        for m in _PLACEHOLDER.finditer(self.name):
            words = m.group(1).split("|")
            head = self.name[at : m.start()]
            out = [o + head + (w if len(words) > 1 else m.group()) for o in out for w in words][:limit]
            at = m.end()
        return [o + self.name[at:] for o in out]

    def matches(self, name: str) -> bool:
        return bool(self._regex.fullmatch(name))


def declared(decls: tuple[MetricDecl, ...], name: str) -> MetricDecl | None:
    """The first declaration that `name` matches, or None."""
    return next((d for d in decls if d.matches(name)), None)


@dataclass(frozen=True)
class Series:
    """A raw measured sequence: named columns of equal length. Values are numbers, strings
    or None (not measured); NaN and infinities become None. `units` names a column's unit.

    Example: Series({"second": [-1, 0, 1], "store_reads": [40, 100, 56]}, {"store_reads": "reads/s"})
    """

    columns: dict[str, list]
    units: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self):
        if not isinstance(self.columns, dict) or not self.columns:
            raise ValueError("a Series needs at least one column")
        lengths = {k: len(v) for k, v in self.columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"Series columns differ in length: {lengths}")
        clean = {}
        for k, col in self.columns.items():
            vals = []
            for v in col:
                if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars
                    v = v.item()
                if v is not None and not isinstance(v, (int, float, str)):
                    raise ValueError(f"Series column {k!r}: {type(v).__name__} is not a number, string or None")
                vals.append(finite_or_none(v))
            clean[str(k)] = vals
        object.__setattr__(self, "columns", clean)
        unknown = set(self.units) - set(clean)
        if unknown:
            raise ValueError(f"Series units name unknown columns: {sorted(unknown)}")

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def column(self, name: str) -> list:
        return self.columns[name]

    def rows(self) -> list[list]:
        cols = list(self.columns.values())
        return [list(r) for r in zip(*cols)]

    def take(self, idx: list[int]) -> "Series":
        """The rows `idx`, in that order: the same columns, units and note (a view's subset)."""
        return Series({c: [v[i] for i in idx] for c, v in self.columns.items()}, dict(self.units), self.note)

    def select(self, names: list[str]) -> "Series":
        """The columns `names`, in that order, with their units (a view's column order)."""
        return Series(
            {c: self.columns[c] for c in names}, {c: u for c, u in self.units.items() if c in names}, self.note
        )

    def to_json(self) -> dict:
        out: dict = {"columns": self.columns}
        if self.units:
            out["units"] = self.units
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Series":
        return cls(data["columns"], data.get("units", {}), data.get("note", ""))


KINDS = {"number": (int, float), "text": (str,), "int": (int,), "flag": (bool,), "value": (int, float, str)}


@dataclass(frozen=True)
class Column:
    """One column of a series, declared once (in the suite folder's series.py) for the driver
    that writes it and the view that reads it. `kind`: "number", "int", "text", "flag" (a
    boolean) or "value" (a number or a text, row by row: a column whose summary row names
    several numbers at once, "24/160/640"); a value may always be None (not measured). `family`: the name is a prefix, and every column that
    starts with it is one of these (`errors.` for `errors.MOVED`, `errors.timeout` ...)."""

    name: str
    kind: str = "number"
    unit: str = ""
    family: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Column {self.name!r}: kind {self.kind!r} is not one of {sorted(KINDS)}")

    def holds(self, name: str) -> bool:
        return name.startswith(self.name) if self.family else name == self.name

    def check(self, name: str, values: list) -> None:
        want = KINDS[self.kind]
        for v in values:
            if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars, as Series takes them
                v = v.item()
            if v is not None and (isinstance(v, bool) != (self.kind == "flag") or not isinstance(v, want)):
                raise ValueError(f"Series column {name!r}: {v!r} is not {self.kind}")


@dataclass(frozen=True)
class SeriesShape:
    """A series' name and its typed columns: the one declaration its driver builds it from
    (`make`) and its view reads it by (`shape["col"]`, `ctx.aggregate(case, shape)`). A column
    a driver does not declare is an error where it is written; one a view asks for that is not
    declared is an error where it is read."""

    name: str
    columns: tuple[Column, ...]
    note: str = ""

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.holds(name):
                return c
        raise KeyError(
            f"series {self.name!r} declares no column {name!r} (declared: "
            f"{', '.join(c.name + ('*' if c.family else '') for c in self.columns)})"
        )

    def __getitem__(self, name: str) -> str:
        """The column's name, checked against the declaration (what a view indexes a series by)."""
        self.column(name)
        return name

    def make(self, columns: dict[str, list], note: str | None = None, units: dict[str, str] | None = None) -> Series:
        """The series, its columns checked against the declaration: every declared column that
        is not a family is there, no other, each value of its kind. Units are the declared
        ones; `units` gives a column declared without one its unit for this series."""
        missing = [c.name for c in self.columns if not c.family and c.name not in columns]
        if missing:
            raise ValueError(f"series {self.name!r}: declared columns missing: {missing}")
        out_units: dict[str, str] = {}
        for name, values in columns.items():
            try:
                col = self.column(name)
            except KeyError as e:
                raise ValueError(e.args[0]) from None
            col.check(name, values)
            if col.unit:
                out_units[name] = col.unit
        for name, unit in (units or {}).items():
            if self.column(name).unit:
                raise ValueError(
                    f"series {self.name!r}: column {name!r} has its unit declared ({self.column(name).unit})"
                )
            out_units[name] = unit
        return Series(dict(columns), out_units, self.note if note is None else note)

    def lists(self, rows: list[list], note: str | None = None, units: dict[str, str] | None = None) -> Series:
        """`make` from rows given as lists, their cells in the declared column order."""
        if any(len(r) != len(self.columns) for r in rows):
            raise ValueError(f"series {self.name!r}: a row's cells are not its {len(self.columns)} declared columns")
        return self.make({c.name: [r[i] for r in rows] for i, c in enumerate(self.columns)}, note, units)

    def rows(self, rows: list[dict], note: str | None = None, units: dict[str, str] | None = None) -> Series:
        """`make` from a list of row dicts, in the declared order (families as the rows have them)."""
        names = [c.name for c in self.columns if not c.family]
        names += [k for k in (rows[0] if rows else {}) if k not in names]
        return self.make({n: [r.get(n) for r in rows] for n in names}, note, units)


FACT_TYPES = (str, int, float, bool)


def check_facts(facts: dict) -> dict:
    """Facts are flat: names to a string, number or boolean (what a ledger condition compares)."""
    if not isinstance(facts, dict):
        raise ValueError(f"facts must be a mapping, not {type(facts).__name__}")
    for k, v in facts.items():
        if not isinstance(k, str) or not isinstance(v, FACT_TYPES):
            raise ValueError(f"fact {k!r}: {type(v).__name__} is not a string, number or boolean")
    return facts
