"""The stored run: typed records and the results folder (manifest.json, results.json, raw/).

Everything a driver measures is a `Metric` (one number with its unit and direction) or a
`Series` (named columns of equal length: the raw sequence a view turns into a table or a
chart). A `Record` is one repetition of one case. Objects check themselves when created
and load any older schema version they know (schema 1 had no series and kept the spec
as plain dicts). A report can be rebuilt from this folder alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.process import redact_url_credentials

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
RESULTS = "results.json"
RAW = "raw"
STATUSES = ("ok", "failed", "invalid", "skipped")
BETTER = (None, "lower", "higher")
MAX_MANIFEST_BYTES = 16 << 20  # a manifest is a few KB of facts
MAX_RESULTS_BYTES = 256 << 20  # the largest real runs keep a few MB of records and series


def finite_or_none(v: Any) -> Any:
    """NaN and infinities never reach a results file (they are not JSON): None instead."""
    if isinstance(v, float) and not math.isfinite(v):
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
            v = float(self.value)
            if not math.isfinite(v):
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
        return cls(data["value"], data.get("unit", ""), data.get("better"), data.get("note", ""))


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


FACT_TYPES = (str, int, float, bool)


def check_facts(facts: dict) -> dict:
    """Facts are flat: names to a string, number or boolean (what a ledger condition compares)."""
    if not isinstance(facts, dict):
        raise ValueError(f"facts must be a mapping, not {type(facts).__name__}")
    for k, v in facts.items():
        if not isinstance(k, str) or not isinstance(v, FACT_TYPES):
            raise ValueError(f"fact {k!r}: {type(v).__name__} is not a string, number or boolean")
    return facts


@dataclass
class Record:
    """One repetition of one case. Checks itself when created."""

    suite: str
    case: str
    repetition: int
    status: str
    reason: str = ""
    metrics: dict[str, Metric] = field(default_factory=dict)
    raw_files: list[str] = field(default_factory=list)  # relative to the run folder
    details: dict = field(default_factory=dict)  # free JSON the experiment keeps (commands, digests)
    params: dict = field(default_factory=dict)
    started: float = 0.0
    duration_s: float = 0.0
    series: dict[str, Series] = field(default_factory=dict)
    bad_input: bool = False  # the case failed on the user's input (spec, dataset, model file)
    facts: dict = field(default_factory=dict)  # conditions the case measured (see CaseOutcome.facts)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"record status must be one of {STATUSES}, not {self.status!r}")
        if self.status != "ok" and not self.reason:
            raise ValueError(f"a {self.status} record needs a reason")
        if isinstance(self.repetition, bool) or not isinstance(self.repetition, int) or self.repetition < 1:
            raise ValueError("repetitions count from 1")

    def to_json(self) -> dict:
        return {
            "suite": self.suite, "case": self.case, "repetition": self.repetition,
            "status": self.status, "reason": self.reason, "bad_input": self.bad_input,
            "metrics": {k: m.to_json() for k, m in self.metrics.items()},
            "series": {k: s.to_json() for k, s in self.series.items()},
            "raw_files": self.raw_files, "details": self.details, "params": self.params,
            "started": self.started, "duration_s": self.duration_s, "facts": self.facts,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        return cls(d["suite"], d["case"], d["repetition"], d["status"], d.get("reason", ""),
                   {k: Metric.from_json(m) for k, m in (d.get("metrics") or {}).items()},
                   list(d.get("raw_files") or []), dict(d.get("details") or {}), dict(d.get("params") or {}),
                   float(d.get("started") or 0.0), float(d.get("duration_s") or 0.0),
                   {k: Series.from_json(s) for k, s in (d.get("series") or {}).items()},
                   bool(d.get("bad_input") or (d.get("details") or {}).get("bad_input")),
                   check_facts(dict(d.get("facts") or {})))


@dataclass
class RunData:
    """A results folder, loaded: the manifest, the suites as run, the ledger, the records."""

    run_dir: Path
    manifest: dict
    records: list[Record]
    suites: dict  # suite name -> spec.SuiteRun
    claims: list  # spec.Claim, in claim order
    schema_version: int = SCHEMA_VERSION
    monitoring: dict | None = None  # the Prometheus series of the run window (see harness.monitoring)
    interrupted: dict | None = None  # {"at": time, "case": "suite/case/rep"} when the run was cut short

    def ok_records(self, suite: str, case: str) -> list[Record]:
        return [r for r in self.records if r.suite == suite and r.case == case and r.status == "ok"]


def _json_default(o):
    if isinstance(o, (Metric, Series, Record)):
        return o.to_json()
    if hasattr(o, "to_json"):
        return o.to_json()
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def _sanitize(o, secrets: list[str] = ()):
    """NaN/inf -> None everywhere, so results files stay valid JSON; known secrets in any
    string -> ***."""
    if isinstance(o, float):
        return finite_or_none(o)
    if isinstance(o, str):
        for sec in secrets:
            o = o.replace(sec, "***")
        return redact_url_credentials(o) if "@" in o and "://" in o else o
    if isinstance(o, dict):
        return {_sanitize(str(k), secrets): _sanitize(v, secrets) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_sanitize(v, secrets) for v in o]
    if hasattr(o, "to_json"):
        return _sanitize(o.to_json(), secrets)
    return o


def json_safe(o):
    """`o` as valid JSON data: NaN and infinities (from a hand-edited file, say) become None."""
    return _sanitize(o)


def atomic_write_json(path: Path, data) -> None:
    """Write JSON atomically (harness.files.write_atomic: never through a link, a full disk
    is one line and exit 3); known secrets and the credentials of any URL are redacted as a
    last line of defence (a driver that keeps a raw command cannot leak a password into a
    results file)."""
    from harness.files import write_atomic
    from harness.process import known_secrets

    secrets = known_secrets()
    write_atomic(path, json.dumps(_sanitize(data, secrets), indent=1, default=_json_default, allow_nan=False))


def write_manifest(run_dir: Path, manifest: dict) -> None:
    atomic_write_json(run_dir / MANIFEST, manifest)


def write_results(run_dir: Path, records: list[Record], suites: dict, claims: list | None = None, *,
                  monitoring: dict | None = None, interrupted: dict | None = None) -> None:
    """Written after every record, so that nothing measured is lost if a later case breaks."""
    data = {
        "schema_version": SCHEMA_VERSION,
        "suites": {k: (v.to_json() if hasattr(v, "to_json") else v) for k, v in suites.items()},
        "claims": [c.to_json() if hasattr(c, "to_json") else c for c in (claims or [])],
        "records": [r.to_json() for r in records],
    }
    if monitoring is not None:
        data["monitoring"] = monitoring
    if interrupted is not None:
        data["interrupted"] = interrupted
    atomic_write_json(run_dir / RESULTS, data)


def _read_json(path: Path, what: str, limit: int):
    from harness.files import read_bounded

    raw = read_bounded(path, limit, what, "give a results folder written by 'harness run'")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise BadInput(f"{path}: not valid JSON ({type(e).__name__}); {what} is damaged, re-run the suites") from None


def load_run(run_dir: Path) -> RunData:
    from harness.spec import Claim, SuiteRun

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise BadInput(f"{run_dir}: no such results folder; give a folder written by 'harness run'")
    for name in (MANIFEST, RESULTS):
        if not (run_dir / name).exists():
            raise BadInput(f"{run_dir}: {name} is missing; this is not a results folder written by 'harness run'")
    manifest = _read_json(run_dir / MANIFEST, "the manifest", MAX_MANIFEST_BYTES)
    data = _read_json(run_dir / RESULTS, "results.json", MAX_RESULTS_BYTES)
    if not isinstance(manifest, dict):
        raise BadInput(f"{run_dir / MANIFEST}: expected a JSON object; the manifest is damaged, re-run the suites")
    if not isinstance(data, dict):
        raise BadInput(f"{run_dir / RESULTS}: expected a JSON object with schema_version and records; re-run the suites")
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
        raise BadInput(
            f"{run_dir / RESULTS}: schema_version {version!r}, this harness reads {', '.join(map(str, READABLE_VERSIONS))}; "
            + ("upgrade the harness to read it" if newer else "re-run the suites to write it anew")
        )
    if not isinstance(data.get("records"), list):
        raise BadInput(f"{run_dir / RESULTS}: no list of records (found {type(data.get('records')).__name__}); "
                       f"the file is damaged, re-run the suites")
    try:
        records = [Record.from_json(r) for r in data["records"]]
        suites = {str(k): SuiteRun.from_json(str(k), v) for k, v in (data.get("suites") or {}).items()}
        claims = [Claim.from_json(c) for c in (data.get("claims") or [])]
    except BadInput:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{run_dir / RESULTS}: a record or suite is malformed ({type(e).__name__}: {e}); "
                       f"the file is damaged, re-run the suites") from None
    for key in ("monitoring", "interrupted"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise BadInput(f"{run_dir / RESULTS}: {key!r} is a {type(data[key]).__name__}, not an object; "
                           f"the file is damaged, re-run the suites")
    monitoring = data.get("monitoring")
    if monitoring is None and isinstance(manifest.get("monitoring"), dict):  # schema 1 kept it in the manifest
        monitoring = manifest["monitoring"]
    return RunData(run_dir, manifest, records, suites, claims, version, monitoring, data.get("interrupted"))
