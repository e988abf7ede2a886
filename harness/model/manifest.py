"""The stored manifest (manifest.json) as a typed record: what a run ran on and when.

The runner builds a `Manifest` when a run starts, adds to it with `dataclasses.replace` as
the run goes (the target's facts, the window, each suite's wall time, the serving engines,
the end, an interruption) and writes its `to_json()` (harness.model.stored_run.write_manifest).
Every field it writes is declared here; a field of the wrong type is refused when the
object is made.

`Manifest.from_json` reads any manifest this harness wrote (format 0, written before the
format version, and MANIFEST_FORMAT): each known field is checked for its type once, here;
a value of the wrong type (a hand-edited file) reads as absent, and so does a part of a
field that a reader iterates or formats (SHAPES: a GPU list, a constraints diff, the target's
nodes) when it has another type, so that no reader past this point checks types again.
The claim pack a run judged (`pack`: name, title, source with its quotes) is the exception:
reading it as absent would show the run as judged by the seed's ledger, so a pack block of
the wrong shape is refused (BadInput: one line naming the file and the field). Fields this
version does not know are kept as they are. `get(key)` reads the checked fields by their
JSON name, for code that takes a mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from harness.base.errors import BadInput
from harness.base.format_versions import MANIFEST_FORMAT
from harness.base.metrics_model import finite_number
from harness.base.safe_text import NAME, for_terminal

TEXT_FIELDS = ("run_id", "profile", "target", "harness_version")
TIME_FIELDS = ("started", "ended")
OBJECT_FIELDS = (
    "git",
    "host",
    "tools",
    "packages",
    "gpu",
    "storage",
    "constraints",
    "target_nodes",
    "loadgen",
    "servers",
    "window",
    "suite_wall_s",
    "interrupted",
    "hosts",
    "monitoring",
    "host_identity",
    "engines",
    "engines_start",
    "references",
    "pack",
)

# The parts of an object field that readers iterate or format (harness.publish.render,
# harness.model.conditions, harness.verdict.summary): a part of another type reads as absent.
# A dict declares keys ("*": every key), a one-item list a list of that, a type itself.
_ANY = object()
_ABSENT = object()
SHAPES: dict = {
    "gpu": {"gpus": [dict]},
    "target_nodes": {"nodes": [dict], "engines": dict},
    "loadgen": {"others": [dict]},
    "constraints": {"differs": dict},
    "references": {"*": {"reaches": [str]}},
    "suite_wall_s": {"*": float},
    "host_identity": {"*": dict},
    "servers": {"*": dict},
    "tools": {"*": dict},
}
# What a run of a claim pack stores (harness.model.packs.Pack.record): every part has this type.
PACK_SHAPE: dict = {
    "name": str,
    "title": str,
    "source": {"kind": str, "title": str, "url": str, "no_url": str, "quotes": [{"text": str, "where": str}]},
}
_TYPE_NAMES = {str: "a string", dict: "an object", list: "a list", float: "a number"}


@dataclass(frozen=True)
class Manifest:
    run_id: str | None = None
    profile: str | None = None
    target: str | None = None
    harness_version: str | None = None
    suites: tuple[str, ...] = ()
    started: float | None = None
    ended: float | None = None
    git: dict = field(default_factory=dict)
    host: dict = field(default_factory=dict)
    tools: dict = field(default_factory=dict)
    packages: dict = field(default_factory=dict)
    gpu: dict = field(default_factory=dict)
    storage: dict = field(default_factory=dict)
    constraints: dict = field(default_factory=dict)
    target_nodes: dict = field(default_factory=dict)
    loadgen: dict = field(default_factory=dict)
    servers: dict = field(default_factory=dict)
    host_identity: dict = field(default_factory=dict)  # per address: {boot_id, machine_id, ...} or {error}
    window: dict = field(default_factory=dict)
    suite_wall_s: dict = field(default_factory=dict)
    interrupted: dict = field(default_factory=dict)
    hosts: dict = field(default_factory=dict)
    monitoring: dict = field(default_factory=dict)  # format 0 of a schema-1 run kept the monitoring series here
    engines: dict = field(default_factory=dict)  # per configuration: the serving engine a run used
    engines_start: dict = field(default_factory=dict)  # how the run's engines were started, and how long it took
    # per reference module of the ledger: {"reaches": [the modules it must not import that it does]} or
    # {"missing": true}, read from the run's own source files (harness.base.import_graph)
    references: dict = field(default_factory=dict)
    pack: dict = field(default_factory=dict)  # the claim pack a run judged ({} for the seed's ledger)
    format_version: int = MANIFEST_FORMAT
    extra: dict = field(default_factory=dict)  # fields this version does not know
    _json: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "suites", tuple(self.suites))
        self._check_types()
        object.__setattr__(self, "_json", self._to_json())

    def _check_types(self) -> None:
        """What the runner writes is what a reader expects: text, times, objects, suite names."""
        wrong = [k for k in TEXT_FIELDS if not isinstance(getattr(self, k), (str, type(None)))]
        wrong += [k for k in TIME_FIELDS if getattr(self, k) is not None and finite_number(getattr(self, k)) is None]
        wrong += [k for k in OBJECT_FIELDS if not isinstance(getattr(self, k), dict)]
        wrong += ["suites"] if not all(isinstance(s, str) for s in self.suites) else []
        if wrong:
            raise TypeError(
                f"manifest field {wrong[0]!r}: {type(getattr(self, wrong[0])).__name__} is not what "
                f"a manifest holds there"
            )

    @classmethod
    def from_json(cls, d: dict, where: str = "manifest.json") -> "Manifest":
        if not isinstance(d, dict):
            raise BadInput(f"{where}: expected a JSON object; the manifest is damaged, re-run the suites")
        version = d.get("format_version", 0)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise BadInput(
                f"{where}: format_version {for_terminal(repr(version), NAME)} is not a version number; "
                f"the manifest is damaged, re-run the suites"
            )
        if version > MANIFEST_FORMAT:
            raise BadInput(
                f"{where}: format_version {version}, this harness reads up to {MANIFEST_FORMAT}; "
                f"upgrade the harness to read it"
            )
        known = {f.name for f in fields(cls)} - {"extra", "_json", "format_version"}
        kw: dict = {k: v for k in TEXT_FIELDS if isinstance(v := d.get(k), str)}
        kw.update({k: v for k in TIME_FIELDS if (v := finite_number(d.get(k))) is not None})
        kw.update({k: v for k in OBJECT_FIELDS if isinstance(v := d.get(k), dict)})
        kw.update({k: _shaped(kw[k], shape) for k, shape in SHAPES.items() if k in kw})
        if "pack" in d:
            check_pack(d["pack"], where)
        suites = d.get("suites")
        if isinstance(suites, list):
            kw["suites"] = tuple(str(s) for s in suites)
        extra = {k: v for k, v in d.items() if k not in known and k != "format_version"}
        return cls(**kw, format_version=MANIFEST_FORMAT, extra=extra)

    def _to_json(self) -> dict:
        out: dict = {"format_version": self.format_version}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("extra", "_json", "format_version") or v is None or (f.name in OBJECT_FIELDS and not v):
                continue
            out[f.name] = list(v) if f.name == "suites" else v
        return {**out, **self.extra}

    def to_json(self) -> dict:
        return dict(self._json)

    def get(self, key: str, default=None):
        return self._json.get(key, default)

    def __getitem__(self, key: str):
        return self._json[key]

    def __contains__(self, key: str) -> bool:
        return key in self._json

    @property
    def duration_s(self) -> float | None:
        return None if self.started is None or self.ended is None else self.ended - self.started


def _shaped(value, shape):
    """`value` with every part that `shape` (see SHAPES) declares and that has another type
    left out: _ABSENT when `value` itself has another type."""
    if shape is _ANY:
        return value
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return _ABSENT
        kept = ((k, _shaped(v, shape.get(k, shape.get("*", _ANY)))) for k, v in value.items())
        return {k: v for k, v in kept if v is not _ABSENT}
    if isinstance(shape, list):
        if not isinstance(value, list):
            return _ABSENT
        return [v for v in (_shaped(item, shape[0]) for item in value) if v is not _ABSENT]
    if shape is float:
        return value if finite_number(value) is not None else _ABSENT
    return value if isinstance(value, shape) else _ABSENT


def _kind(value) -> str:
    """What a JSON value is, in words: 'a number', 'null', 'a list'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _pack_problem(value, shape, name: str) -> str | None:
    """'FIELD is KIND, not KIND' for the first part of `value` whose type is not `shape`'s."""
    want = dict if isinstance(shape, dict) else list if isinstance(shape, list) else shape
    if not isinstance(value, want):
        return f"{name} is {_kind(value)}, not {_TYPE_NAMES[want]}"
    if isinstance(shape, dict):
        parts = ((f"{name}.{k}", value[k], s) for k, s in shape.items() if k in value)
    elif isinstance(shape, list):
        parts = ((f"{name}[{i}]", v, shape[0]) for i, v in enumerate(value))
    else:
        return None
    return next((p for n, v, s in parts if (p := _pack_problem(v, s, n))), None)


def check_pack(value, where: str = "manifest.json") -> None:
    """The claim pack a stored run judged (`pack` of its manifest) has the shape a run
    writes (PACK_SHAPE), or BadInput: one line naming the file and the field."""
    problem = _pack_problem(value, PACK_SHAPE, "pack")
    if problem:
        raise BadInput(
            f"{for_terminal(where, NAME)}: {problem}; the manifest's claim pack is damaged (edited by hand?): "
            f"re-run the pack (harness run --pack NAME), or restore the folder's manifest.json"
        )
