"""The stored manifest (manifest.json) as a typed record: what a run ran on and when.

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
OBJECT_FIELDS = ("git", "host", "tools", "packages", "gpu", "storage", "constraints", "target_nodes", "loadgen",
                 "servers", "window", "suite_wall_s", "interrupted", "hosts", "monitoring", "host_identity")


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
    format_version: int = MANIFEST_FORMAT
    extra: dict = field(default_factory=dict)  # fields this version does not know
    _json: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_json", self._to_json())

    @classmethod
    def from_json(cls, d: dict, where: str = "manifest.json") -> "Manifest":
        if not isinstance(d, dict):
            raise BadInput(f"{where}: expected a JSON object; the manifest is damaged, re-run the suites")
        version = d.get("format_version", 0)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise BadInput(f"{where}: format_version {for_terminal(repr(version), NAME)} is not a version number; "
                           f"the manifest is damaged, re-run the suites")
        if version > MANIFEST_FORMAT:
            raise BadInput(f"{where}: format_version {version}, this harness reads up to {MANIFEST_FORMAT}; "
                           f"upgrade the harness to read it")
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
