"""The results folder: manifest.json, results.json (versioned records) and raw/.

A report can be rebuilt from this folder alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.drivers import STATUSES, Metric
from harness.errors import BadInput

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
RESULTS = "results.json"
RAW = "raw"


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
    details: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    started: float = 0.0
    duration_s: float = 0.0

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"record status must be one of {STATUSES}, not {self.status!r}")
        if self.status != "ok" and not self.reason:
            raise ValueError(f"a {self.status} record needs a reason")
        if self.repetition < 1:
            raise ValueError("repetitions count from 1")

    def to_json(self) -> dict:
        return {
            "suite": self.suite, "case": self.case, "repetition": self.repetition,
            "status": self.status, "reason": self.reason,
            "metrics": {k: m.to_json() for k, m in self.metrics.items()},
            "raw_files": self.raw_files, "details": self.details, "params": self.params,
            "started": self.started, "duration_s": self.duration_s,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        return cls(d["suite"], d["case"], d["repetition"], d["status"], d.get("reason", ""),
                   {k: Metric.from_json(m) for k, m in d.get("metrics", {}).items()},
                   d.get("raw_files", []), d.get("details", {}), d.get("params", {}),
                   d.get("started", 0.0), d.get("duration_s", 0.0))


@dataclass
class RunData:
    run_dir: Path
    manifest: dict
    records: list[Record]
    suites: dict  # suite name -> the spec as run (claim, thresholds of the profile, cases)
    claims: list  # the claims ledger as it was when the run started


def _atomic_write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False, default=str))
    os.replace(tmp, path)


def write_manifest(run_dir: Path, manifest: dict) -> None:
    _atomic_write(run_dir / MANIFEST, manifest)


def write_results(run_dir: Path, records: list[Record], suites: dict, claims: list | None = None) -> None:
    """Written after every record, so that nothing measured is lost if a later case breaks."""
    _atomic_write(run_dir / RESULTS, {
        "schema_version": SCHEMA_VERSION,
        "suites": suites,
        "claims": claims or [],
        "records": [r.to_json() for r in records],
    })


def load_run(run_dir: Path) -> RunData:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise BadInput(f"{run_dir}: no such results folder; give a folder written by 'harness run'")
    for name in (MANIFEST, RESULTS):
        if not (run_dir / name).exists():
            raise BadInput(f"{run_dir}: {name} is missing; this is not a results folder written by 'harness run'")
    try:
        manifest = json.loads((run_dir / MANIFEST).read_text())
        data = json.loads((run_dir / RESULTS).read_text())
    except json.JSONDecodeError as e:
        raise BadInput(f"{run_dir}: a results file is not valid JSON ({e})") from None
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise BadInput(
            f"{run_dir / RESULTS}: schema_version {version!r}, this harness reads {SCHEMA_VERSION}; "
            + ("upgrade the harness to read it" if newer else "re-run the suites to write it anew")
        )
    return RunData(run_dir, manifest, [Record.from_json(r) for r in data["records"]],
                   data.get("suites", {}), data.get("claims", []))
