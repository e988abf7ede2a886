"""The stored manifest (manifest.json) as a typed record: what a run ran on and when.

The runner builds a `Manifest` when a run starts, adds to it with `dataclasses.replace` as
the run goes (the target's facts, the window, each suite's wall time, the serving engines,
the end, an interruption) and writes its `to_json()` (harness.model.stored_run.write_manifest).
Every field it writes is declared here; a field of the wrong type is refused when the
object is made.

`Manifest.from_json` reads any manifest this harness wrote (format 0, written before the
format version, and MANIFEST_FORMAT): each known field is checked for its type once, here;
a value of the wrong type (a hand-edited file) reads as absent, so that no reader past this
point checks types again. Fields this version does not know are kept as they are.
`get(key)` reads the checked fields by their JSON name, for code that takes a mapping.
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
