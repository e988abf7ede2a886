"""The contract between the runner and everything that measures, and the driver toolkit.

A *driver* is one function that runs one case once (one repetition) and returns a
Record: metrics (numbers) and series (raw sequences). Record is the record the
runner stores (harness.model.result.Record), before the runner says where and when.
Drivers measure; they never build report tables or charts (each suite's view,
harness/experiments/<suite>/view.py, does). Every
experiment lives in harness/experiments/<suite>/ and registers its drivers in one module,
harness/experiments/<suite>/drivers.py, with `@register("<suite>-<what>", params=...)`
(one thin function per driver that calls the case's module), declaring their parameters
so that `harness validate` can check a spec without running anything.

Driver modules must stay cheap to import: import heavy libraries (torch, onnxruntime,
libcachesim, ...) inside the driver function, never at module level. A driver whose
metrics depend on process state (RSS peaks, first-use costs, cached models) registers with
`isolate=True`: the runner then runs each repetition in a fresh process.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import pkgutil
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from harness.base.errors import BadInput, did_you_mean
from harness.base.metrics_model import Metric, MetricDecl, Series, declared
from harness.base.paths import REPO_ROOT
from harness.infra.target import Node, Target
from harness.model.result import Record

__all__ = [
    "REQUIRED",
    "Param",
    "Metric",
    "Series",
    "Record",
    "CaseContext",
    "Driver",
    "Node",
    "Target",
    "register",
    "get",
    "load_all",
    "INPUT_FILE",
]

REQUIRED = object()
TARGET_KINDS = ("cluster", "none")
INPUT_FILE = "input-file"  # Param kind: a path to a file the user gives (relative to the repo or absolute)
INT_LIMIT = 2**31 - 1  # the bound of an integer parameter that declares no max (a C int: what the tools take)
# Bounds a parameter gets from its name when it declares no max: a duration of more than a day
# (`duration_s=1e9` planned a run of years) or a fraction above 1 is a typo, not an experiment;
# any other float is bounded like an integer.
DAY_S = 86_400
_YAML11_EXPONENT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d{1,3}")
NAMED_MAX = (("_ms", DAY_S * 1000), ("_s", DAY_S), ("seconds", DAY_S), ("_fraction", 1))


@dataclass(frozen=True)
class Param:
    """One declared driver parameter: its type, default, a line of help, and optional
    `choices`, `min`/`max` (numbers, or every number of a list) and `kind`
    (INPUT_FILE: a path that must name an existing file)."""

    type: type | tuple
    default: Any = REQUIRED
    help: str = ""
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    kind: str = ""

    def check(self, where: str, value: Any) -> Any:
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        if float in types and str not in types and isinstance(value, str) and _YAML11_EXPONENT.fullmatch(value):
            value = float(value)  # YAML 1.1 reads 1e9 (no dot, no sign) as text; it is a number here
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise BadInput(f"{where}: {value} is too large for a number") from None
        if bool not in types and isinstance(value, bool):
            raise BadInput(f"{where}: expected {_type_names(types)}, got a boolean ({value!r})")
        if value is None and type(None) not in types:
            raise BadInput(f"{where}: expected {_type_names(types)}, got null; give a value or remove the line")
        if value is not None and not isinstance(value, types):
            raise BadInput(f"{where}: expected {_type_names(types)}, got {type(value).__name__} ({str(value)[:60]!r})")
        if isinstance(value, list):
            value = self._check_items(where, value)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, float) and not math.isfinite(v):
                raise BadInput(f"{where}: {v} is not a finite number")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if self.min is not None and v < self.min:
                    raise BadInput(f"{where}: must be at least {self.min:g}, got {_num(v)}")
                if self.max is not None and v > self.max:
                    raise BadInput(f"{where}: must be at most {self.max:g}, got {_num(v)}")
                if self.max is None and isinstance(v, int) and abs(v) > INT_LIMIT:
                    raise BadInput(
                        f"{where}: {_num(v)} is out of range; an integer parameter is at most "
                        f"{INT_LIMIT} (the tools' C int) in size"
                    )
        if self.choices is not None:
            bad = [v for v in values if v not in self.choices]
            if bad:
                raise BadInput(
                    f"{where}: {bad[0]!r} is not one of {', '.join(map(str, self.choices))}"
                    f"{did_you_mean(bad[0], self.choices)}"
                )
        if self.kind == INPUT_FILE and value:
            path = input_path(value)
            if path.exists() and not path.is_file():
                raise BadInput(
                    f"{where}: {value!r}: not a regular file (a folder, a device or a FIFO); give a file's path"
                )
            if not path.is_file():
                raise BadInput(
                    f"{where}: {value!r}: no such file ({path}); give a path relative to the "
                    f"repository or an absolute one"
                )
        return value

    def _check_items(self, where: str, value: list) -> list:
        """The items of a list parameter: at most MAX_LIST_ITEMS, none when its default has
        some and it is no selection (choices), each of the kind its default's items are
        (whole numbers or numbers; numbers when it declares min or max)."""
        if len(value) > MAX_LIST_ITEMS:
            raise BadInput(f"{where}: {len(value)} items; give at most {MAX_LIST_ITEMS}")
        if not value and self.default and self.default is not REQUIRED and self.choices is None:
            raise BadInput(f"{where}: an empty list; give at least one item, such as {self.default[0]!r}")
        kind = _item_kind(self.default, numeric=self.min is not None or self.max is not None)
        if kind == "number":  # YAML 1.1 reads 1e-3 as text
            value = [float(v) if isinstance(v, str) and _YAML11_EXPONENT.fullmatch(v) else v for v in value]
        for i, v in enumerate(value):
            if kind and not _is_kind(v, kind):
                raise BadInput(
                    f"{where}: item {i + 1} is {type(v).__name__} ({str(v)[:60]!r}); every item must be "
                    f"{_KIND_NAMES[kind]}"
                )
        return value


MAX_LIST_ITEMS = 256  # a list parameter's items: a sweep of more is a typo or a run of days
_KIND_NAMES = {"int": "a whole number", "number": "a number"}


def _is_kind(v, kind: str) -> bool:
    return type(v) is int if kind == "int" else type(v) in (int, float)


def _item_kind(default, numeric: bool) -> str:
    """The kind of item a list parameter holds, from its default ('' when it cannot be told)."""
    items = default if isinstance(default, list) else []
    for kind in ("int", "number"):  # text items may be richer (eviction's runs: a name or a mapping)
        if items and all(_is_kind(v, kind) for v in items):
            return kind
    return "number" if numeric else ""


def _num(v) -> str:
    """A number for a message: an int too large for a float (or for a line) is shortened."""
    if isinstance(v, float):
        return f"{v:g}"
    text = str(v) if abs(v) < 10**30 else f"{str(v)[:12]}... ({len(str(abs(v)))} digits)"
    return text


def _type_names(types: tuple) -> str:
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def input_path(value: str) -> Path:
    """The one rule for paths users give in specs: relative to the repository, or absolute."""
    p = Path(value)
    return p if p.is_absolute() else REPO_ROOT / p


@dataclass
class CaseContext:
    """Everything a driver gets for one repetition of one case."""

    suite: str
    case: str
    repetition: int
    profile: str
    params: dict
    raw_dir: Path
    target: Target
    log: Callable[[str], None] = print

    def raw_path(self, name: str) -> Path:
        """A path in this repetition's raw folder (the runner lists every file there). `name`
        is a plain file name chosen by the driver: no folders, nothing outside raw_dir."""
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"raw file name {name!r} must be a plain file name")
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        return self.raw_dir / name


@dataclass
class Driver:
    name: str
    run: Callable[[CaseContext], Record]
    params: dict[str, Param]
    needs: str = "none"  # target kind the driver needs
    description: str = ""
    check: Callable[[str, dict], None] | None = None  # extra spec checks; raise BadInput
    isolate: bool = False  # run each repetition in a fresh process
    module: str = ""
    # Serving-engine configurations the driver measures ("cached", "uncached"): the runner
    # starts the ones a run's selected cases need, once per run, into `target.engines`.
    engines: tuple[str, ...] = ()
    # The metrics the driver may report (harness.base.metrics_model.MetricDecl): thresholds and
    # ledger checks are checked against them (harness.model.metric_names).
    metrics: tuple[MetricDecl, ...] = ()

    def metric(self, name: str) -> MetricDecl | None:
        """The declaration `name` matches, or None (not a metric of this driver)."""
        return declared(self.metrics, name)

    def resolve_params(self, where: str, given: dict) -> dict:
        """Check `given` against the declared parameters and fill in defaults."""
        if not isinstance(given, dict):
            raise BadInput(f"{where}: params must be a mapping, got {type(given).__name__}")
        unknown = sorted((k for k in given if k not in self.params), key=str)
        if unknown:
            known = ", ".join(sorted(self.params)) or "none"
            raise BadInput(
                f"{where}: unknown parameter {unknown[0]!r} for driver {self.name!r}"
                f"{did_you_mean(unknown[0], self.params)}; known parameters: {known}"
            )
        out = {}
        for name, p in self.params.items():
            if name in given:
                out[name] = p.check(f"{where}.{name}", given[name])
            elif p.default is REQUIRED:
                raise BadInput(f"{where}: parameter {name!r} is required by driver {self.name!r} ({p.help})")
            else:
                out[name] = p.default
        if self.check is not None:
            self.check(where, out)
        return out


REGISTRY: dict[str, Driver] = {}


def register(
    name: str,
    *,
    params: dict[str, Param],
    needs: str = "none",
    description: str = "",
    check: Callable[[str, dict], None] | None = None,
    isolate: bool = False,
    engines: tuple[str, ...] = (),
    metrics: tuple[MetricDecl, ...] = (),
):
    """Decorator: register `fn(ctx) -> Record` as the driver called `name`, which reports the
    metrics `metrics` declares (each a MetricDecl: name, unit, better side)."""
    if needs not in TARGET_KINDS:
        raise ValueError(f"needs must be one of {TARGET_KINDS}")
    if not all(isinstance(m, MetricDecl) for m in metrics):
        raise ValueError(f"driver {name!r}: metrics must be MetricDecl declarations")

    params = {k: _with_named_max(k, p) for k, p in params.items()}

    def deco(fn):
        if name in REGISTRY and REGISTRY[name].run is not fn:
            raise ValueError(f"driver {name!r} registered twice")
        REGISTRY[name] = Driver(
            name,
            fn,
            params,
            needs,
            description or (fn.__doc__ or "").strip(),
            check,
            isolate,
            fn.__module__,
            tuple(engines),
            tuple(metrics),
        )
        return fn

    return deco


def _with_named_max(name: str, p: Param) -> Param:
    """`p` with the bound its name implies (NAMED_MAX; INT_LIMIT for any other float) when it
    declares no max of its own. A default past that bound is the driver's mistake."""
    types = p.type if isinstance(p.type, tuple) else (p.type,)
    if p.max is not None or not ({int, float} & set(types)):
        return p
    bound = next((m for suffix, m in NAMED_MAX if name.endswith(suffix)), None)
    if bound is None and float not in types:
        return p  # an integer without a named bound keeps INT_LIMIT (checked in Param.check)
    top = float(bound if bound is not None else INT_LIMIT)
    p = replace(p, max=top)
    defaults = p.default if isinstance(p.default, list) else [p.default]
    if any(isinstance(d, (int, float)) and not isinstance(d, bool) and d > top for d in defaults):
        raise ValueError(f"parameter {name!r}: default {p.default!r} is above its bound {top:g}")
    return p


_LOADED = False
SUITES_PACKAGE = "harness.experiments"  # one package per suite, each with its drivers.py


def load_all() -> dict[str, Driver]:
    """Import every suite's drivers module (harness/experiments/<suite>/drivers.py, the one
    module of a suite that registers drivers) so that its drivers register."""
    global _LOADED
    if not _LOADED:
        # a declared module path, not an import statement: the suites sit above this layer
        suites = importlib.import_module(SUITES_PACKAGE)
        for mod in pkgutil.iter_modules(suites.__path__, suites.__name__ + "."):
            if not mod.ispkg:
                continue
            if importlib.util.find_spec(mod.name + ".drivers") is None:
                raise ImportError(
                    f"suite package {mod.name} has no drivers.py: every suite registers its drivers there"
                )
            importlib.import_module(mod.name + ".drivers")
        _LOADED = True
    return REGISTRY


def get(name: str, where: str = "driver") -> Driver:
    drivers = load_all()
    if name not in drivers:
        raise BadInput(
            f"{where}: unknown driver {name!r}{did_you_mean(name, drivers)}; "
            f"known drivers: {', '.join(sorted(drivers))}"
        )
    return drivers[name]
