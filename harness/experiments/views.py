"""Views: one per suite (<suite>/view.py), building the report's tables and charts from the stored run.

Drivers measure; views present. A view is a function registered with `@view("suite")`
that receives a ViewContext (the run, its analysis, the ledger's claimed figures) and
returns Table and Chart blocks. Views aggregate across repetitions (`ctx.aggregate`:
the median per row with min and max), never pick one repetition, and take claimed numbers
only from the ledger (`ctx.figure`). A suite without a view of its own gets the default
view: every series as an aggregated table.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

from harness.base import stats
from harness.base.metrics_model import SeriesShape
from harness.model.driver_contract import SUITES_PACKAGE
from harness.model.ledger import claim_figure
from harness.model.stored_run import RunData, Series
from harness.verdict.analysis import Analysis, MetricSummary


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list]
    note: str = ""
    case: str = ""  # the case it belongs to; "" = the suite as a whole


@dataclass
class Chart:
    """series: [{"name": str, "points": [[x, y], ...]}]; a point may carry [x, y, ymin, ymax]
    for a min-max whisker across repetitions."""

    title: str
    series: list[dict]
    x_label: str = ""
    y_label: str = ""
    kind: str = "line"  # line | scatter | bar
    x_log: bool = False
    y_log: bool = False
    note: str = ""
    case: str = ""


Block = Table | Chart


@dataclass
class ViewContext:
    run: RunData
    analysis: Analysis
    suite: str
    _cache: dict = field(default_factory=dict)

    def case_names(self) -> list[str]:
        s = self.run.suites.get(self.suite)
        return s.case_names() if s else []

    def series(self, case: str, name: str | SeriesShape) -> list[tuple[int, Series]]:
        """(repetition, series) of every ok repetition that kept a series called `name` (a
        declared SeriesShape, or its name)."""
        name = name.name if isinstance(name, SeriesShape) else name
        return [(r.repetition, r.series[name]) for r in self.run.ok_records(self.suite, case) if name in r.series]

    def series_names(self, case: str) -> list[str]:
        names: list[str] = []
        for r in self.run.ok_records(self.suite, case):
            for n in r.series:
                if n not in names:
                    names.append(n)
        return names

    def metric(self, case: str, name: str) -> MetricSummary | None:
        return self.analysis.metric(self.suite, case, name)

    def figure(self, claim_id: str, name: str):
        """A claimed number (or list) from the ledger's figures; None when the ledger has none."""
        return claim_figure(self.run.claims, claim_id, name)

    def aggregate(self, case: str, name: str | SeriesShape, key: str | list[str] | None = None) -> Series | None:
        """The series `name` of `case` over every ok repetition: one row per value of the
        `key` column(s) (in first-seen order; by row index when key is None); numeric
        columns become their median, with `<col>.min` and `<col>.max` beside them when
        there is more than one repetition; other columns keep their first value."""
        runs = self.series(case, name)
        if not runs:
            return None
        keys = [key] if isinstance(key, str) else list(key or [])
        order: list = []
        groups: dict = {}
        for _, s in runs:
            cols = s.columns
            for i in range(len(s)):
                k = tuple(cols[c][i] for c in keys) if keys else i
                if k not in groups:
                    groups[k] = []
                    order.append(k)
                groups[k].append({c: cols[c][i] for c in cols})
        first = runs[0][1]
        multi = len(runs) > 1
        out: dict[str, list] = {}
        for c in first.columns:
            numeric = c not in keys and any(
                isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool)
                for k in order
                for row in groups[k]
            )
            out[c] = []
            if numeric and multi:
                out[c + ".min"], out[c + ".max"] = [], []
            for k in order:
                rows = groups[k]
                if numeric:
                    vals = [row[c] for row in rows if isinstance(row.get(c), (int, float))]
                    out[c].append(stats.median(vals) if vals else None)
                    if multi:
                        out[c + ".min"].append(min(vals) if vals else None)
                        out[c + ".max"].append(max(vals) if vals else None)
                else:
                    out[c].append(rows[0].get(c))
        return Series(out, dict(first.units), first.note)


ViewFn = Callable[[ViewContext], list]
VIEWS: dict[str, ViewFn] = {}
_LOADED = False


def view(suite: str):
    """Decorator: register `fn(ctx) -> [Table | Chart]` as the view of `suite`."""

    def deco(fn: ViewFn) -> ViewFn:
        VIEWS[suite] = fn
        return fn

    return deco


def _load() -> None:
    """Import every suite folder's view.py (harness/experiments/<suite>/view.py) so that its
    view registers; a suite without one gets the default view."""
    global _LOADED
    if not _LOADED:
        suites = importlib.import_module(SUITES_PACKAGE)
        for mod in pkgutil.iter_modules(suites.__path__, suites.__name__ + "."):
            if mod.ispkg and importlib.util.find_spec(mod.name + ".view") is not None:
                importlib.import_module(mod.name + ".view")
        _LOADED = True


def default_view(ctx: ViewContext) -> list:
    """Every series of every case as a table aggregated across repetitions."""
    blocks: list = []
    for case in ctx.case_names():
        for name in ctx.series_names(case):
            s = ctx.aggregate(case, name)
            if s is not None:
                blocks.append(series_table(s, name, case))
    return blocks


def series_table(s: Series, title: str, case: str = "", note: str = "", with_range: bool = True) -> Table:
    """A Series as a Table; `col`, `col.min`, `col.max` become one 'median (min-max)' cell."""
    cols = [c for c in s.columns if not (c.endswith(".min") or c.endswith(".max"))]
    headers = [f"{c} ({s.units[c]})" if c in s.units else c for c in cols]
    rows = []
    for i in range(len(s)):
        row = []
        for c in cols:
            v = s.columns[c][i]
            lo, hi = s.columns.get(c + ".min"), s.columns.get(c + ".max")
            if (
                with_range
                and lo is not None
                and hi is not None
                and lo[i] is not None
                and hi[i] is not None
                and lo[i] != hi[i]
            ):
                row.append((v, lo[i], hi[i]))
            else:
                row.append(v)
        rows.append(row)
    return Table(title, headers, rows, note or s.note, case)


def points(s: Series, x: str, y: str) -> list[list]:
    """Chart points [x, y] (or [x, y, min, max] when the aggregate has a range) of a Series."""
    lo, hi = s.columns.get(y + ".min"), s.columns.get(y + ".max")
    out = []
    for i, (xv, yv) in enumerate(zip(s.columns[x], s.columns[y])):
        if yv is None:
            continue
        if lo is not None and hi is not None and lo[i] is not None and hi[i] is not None:
            out.append([xv, yv, lo[i], hi[i]])
        else:
            out.append([xv, yv])
    return out


def build(run: RunData, analysis: Analysis, suite: str) -> list:
    """The blocks of one suite: its own view, else the default view."""
    _load()
    ctx = ViewContext(run, analysis, suite)
    fn = VIEWS.get(suite, default_view)
    return list(fn(ctx) or [])
