"""The contract between the runner and everything that measures.

A *driver* is one function that runs one case once (one repetition) and returns a
CaseOutcome. Tool wrappers (`harness/tools/`) and experiments (`harness/experiments/`)
register drivers with `@register(...)`, declaring their parameters so that
`harness validate` can check a spec without running anything.

Driver modules must stay cheap to import: import heavy libraries (torch, onnxruntime,
libcachesim, ...) inside the driver function, never at module level.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.errors import BadInput

REQUIRED = object()
STATUSES = ("ok", "failed", "invalid", "skipped")
TARGET_KINDS = ("cluster", "none")


@dataclass(frozen=True)
class Param:
    """One declared driver parameter: its type, default and a line of help."""

    type: type | tuple
    default: Any = REQUIRED
    help: str = ""
    choices: tuple | None = None

    def check(self, where: str, value: Any) -> Any:
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if bool not in types and isinstance(value, bool):
            raise BadInput(f"{where}: expected {_type_names(types)}, got a boolean ({value!r})")
        if value is not None and not isinstance(value, types):
            raise BadInput(
                f"{where}: expected {_type_names(types)}, got {type(value).__name__} ({value!r})"
            )
        if self.choices is not None:
            values = value if isinstance(value, list) else [value]
            bad = [v for v in values if v not in self.choices]
            if bad:
                raise BadInput(f"{where}: {bad[0]!r} is not one of {', '.join(map(str, self.choices))}")
        return value


def _type_names(types: tuple) -> str:
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


@dataclass(frozen=True)
class Metric:
    """A measured value with its unit and which direction is better."""

    value: float | None
    unit: str
    better: str | None = None  # "lower", "higher" or None (neither)
    note: str = ""

    def __post_init__(self):
        if self.better not in (None, "lower", "higher"):
            raise ValueError(f"Metric.better must be 'lower', 'higher' or None, not {self.better!r}")
        if self.value is not None:
            v = float(self.value)
            if math.isnan(v) or math.isinf(v):
                raise ValueError(f"Metric value must be finite, got {self.value!r}")
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
        return cls(data["value"], data["unit"], data.get("better"), data.get("note", ""))


@dataclass
class CaseOutcome:
    """What one repetition of one case produced.

    `details` is free JSON for the report: a list of `tables`
    ({title, columns, rows, note}) and `charts` ({title, x_label, y_label, kind
    'line'|'scatter'|'bar', x_log, series: [{name, points: [[x, y], ...]}]}), plus anything
    the experiment wants to keep.
    """

    status: str = "ok"
    reason: str = ""
    metrics: dict[str, Metric] = field(default_factory=dict)
    details: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if self.status != "ok" and not self.reason:
            raise ValueError(f"a {self.status} outcome needs a reason")


@dataclass
class Node:
    host: str
    port: int
    role: str | None = None  # "primary", "replica" or None when unknown

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Target:
    """Where a suite's servers are: the local cluster, an inventory's hosts, or nothing."""

    name: str
    kind: str = "none"
    nodes: list[Node] = field(default_factory=list)
    password: str | None = None
    username: str | None = None

    @property
    def primaries(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "primary"] or self.nodes[:1]

    @property
    def entry(self) -> Node:
        if not self.nodes:
            raise BadInput(f"target {self.name!r} has no Redis nodes; this case needs a cluster")
        return self.primaries[0]

    def client(self, node: Node, **kwargs):
        import redis

        return redis.Redis(host=node.host, port=node.port, password=self.password,
                           username=self.username, **kwargs)

    def cluster_client(self, **kwargs):
        from redis.cluster import RedisCluster

        e = self.entry
        return RedisCluster(host=e.host, port=e.port, password=self.password,
                            username=self.username, **kwargs)

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind,
                "nodes": [{"host": n.host, "port": n.port, "role": n.role} for n in self.nodes]}


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
        """A path in this repetition's raw folder; the runner lists every file there."""
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        return self.raw_dir / name


@dataclass
class Driver:
    name: str
    run: Callable[[CaseContext], CaseOutcome]
    params: dict[str, Param]
    needs: str = "none"  # target kind the driver needs
    description: str = ""
    check: Callable[[str, dict], None] | None = None  # extra spec checks; raise BadInput

    def resolve_params(self, where: str, given: dict) -> dict:
        """Check `given` against the declared parameters and fill in defaults."""
        if not isinstance(given, dict):
            raise BadInput(f"{where}: params must be a mapping, got {type(given).__name__}")
        unknown = sorted(set(given) - set(self.params))
        if unknown:
            known = ", ".join(sorted(self.params)) or "none"
            hint = _close_match(unknown[0], self.params)
            raise BadInput(
                f"{where}: unknown parameter {unknown[0]!r} for driver {self.name!r}"
                f"{hint}; known parameters: {known}"
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


def _close_match(word: str, options) -> str:
    import difflib

    m = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


REGISTRY: dict[str, Driver] = {}


def register(name: str, *, params: dict[str, Param], needs: str = "none", description: str = "",
             check: Callable[[str, dict], None] | None = None):
    """Decorator: register `fn(ctx) -> CaseOutcome` as the driver called `name`."""
    if needs not in TARGET_KINDS:
        raise ValueError(f"needs must be one of {TARGET_KINDS}")

    def deco(fn):
        if name in REGISTRY and REGISTRY[name].run is not fn:
            raise ValueError(f"driver {name!r} registered twice")
        REGISTRY[name] = Driver(name, fn, params, needs, description or (fn.__doc__ or "").strip(), check)
        return fn

    return deco


_LOADED = False


def load_all() -> dict[str, Driver]:
    """Import every tool wrapper and experiment module so that they register."""
    global _LOADED
    if not _LOADED:
        import harness.experiments
        import harness.tools

        for pkg in (harness.tools, harness.experiments):
            for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
                importlib.import_module(mod.name)
        _LOADED = True
    return REGISTRY


def get(name: str, where: str = "driver") -> Driver:
    drivers = load_all()
    if name not in drivers:
        raise BadInput(
            f"{where}: unknown driver {name!r}{_close_match(name, drivers)}; "
            f"known drivers: {', '.join(sorted(drivers))}"
        )
    return drivers[name]
