"""One result, from the driver that measured it to the results file: `Record`.

A driver returns a Record (harness.model.driver_contract names it for drivers) with what it
measured: status, reason, metrics (numbers with units), series (raw sequences for the
suite's view), details (free JSON worth keeping, such as the command that ran; never tables
or charts) and facts: the conditions the case measured (clients really used, which memory
was measured, the share of keys on the node), which the ledger compares with what a claim
needs. Those six may be given by position, in that order.

The runner completes it with `stored(...)`, by keyword only: which suite, case and
repetition, the resolved parameters, when it started and how long it took, the raw files it
left and whether it failed on the user's input. A record not stored yet has repetition 0.
Every field is checked here, once, when a record is made or read back.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, replace

from harness.base.metrics_model import STATUSES, Metric, Series, check_facts
from harness.base.safe_text import NAME, for_terminal


@dataclass
class Record:
    """One repetition of one case: what its driver measured and, once stored, where and when."""

    # what the driver fills
    status: str = "ok"
    reason: str = ""
    metrics: dict[str, Metric] = field(default_factory=dict)
    details: dict = field(default_factory=dict)  # free JSON the experiment keeps (commands, digests)
    series: dict[str, Series] = field(default_factory=dict)
    facts: dict = field(default_factory=dict)  # conditions the case measured
    # what the runner adds when it stores the outcome (keywords only)
    _: KW_ONLY
    suite: str = ""
    case: str = ""
    repetition: int = 0  # counts from 1; 0 while the outcome is not stored
    params: dict = field(default_factory=dict)
    started: float = 0.0
    duration_s: float = 0.0
    raw_files: list[str] = field(default_factory=list)  # relative to the run folder
    bad_input: bool = False  # the case failed on the user's input (spec, dataset, model file)
    # the machine while it ran (harness.base.machine_load): load1_start, load1_end, cores, steal_pct
    machine_load: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("suite", "case", "reason"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"a record's {name} must be text, not {type(getattr(self, name)).__name__}")
        if self.status not in STATUSES:
            shown = for_terminal(repr(self.status), NAME)  # a damaged file's value: one bounded line
            raise ValueError(f"record status must be one of {STATUSES}, not {shown}")
        if self.status != "ok" and not self.reason:
            raise ValueError(f"a {self.status} record needs a reason")
        check_facts(self.facts)
        if isinstance(self.repetition, bool) or not isinstance(self.repetition, int) or self.repetition < 0:
            raise ValueError(f"a repetition is a whole number (from 1; 0 until stored), not {self.repetition!r:.40}")
        # a driver's outcome; a stored schema-1 record kept its tables in details, and still loads
        if self.repetition == 0:
            _drivers_measure(self.details)

    def stored(
        self,
        *,
        suite: str,
        case: str,
        repetition: int,
        params: dict | None = None,
        started: float = 0.0,
        duration_s: float = 0.0,
        raw_files: list[str] | None = None,
        bad_input: bool = False,
        details: dict | None = None,
    ) -> "Record":
        """This outcome as the runner stores it: the same measurements, with where and when.
        `details`, when given, replaces the driver's (the runner's own facts with them)."""
        if self.repetition == 0:  # the driver's outcome, its details perhaps changed after it was made
            _drivers_measure(self.details)
        return _as_stored(
            replace(
                self,
                suite=suite,
                case=case,
                repetition=repetition,
                params=dict(params or {}),
                started=started,
                duration_s=duration_s,
                raw_files=list(raw_files or []),
                bad_input=bad_input,
                details=self.details if details is None else details,
            )
        )

    def to_json(self) -> dict:
        out = {
            "suite": self.suite,
            "case": self.case,
            "repetition": self.repetition,
            "status": self.status,
            "reason": self.reason,
            "bad_input": self.bad_input,
            "metrics": {k: m.to_json() for k, m in self.metrics.items()},
            "series": {k: s.to_json() for k, s in self.series.items()},
            "raw_files": self.raw_files,
            "details": self.details,
            "params": self.params,
            "started": self.started,
            "duration_s": self.duration_s,
            "facts": self.facts,
        }
        if self.machine_load:  # added in issue 53: older readers leave it out, an older record has none
            out["machine_load"] = self.machine_load
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        """A stored record (results.json, or a case's own process): suite, case and repetition
        are required, the rest may be absent (older files)."""
        details = dict(d.get("details") or {})
        return _as_stored(
            cls(
                d["status"],
                d.get("reason", ""),
                {k: Metric.from_json(m) for k, m in (d.get("metrics") or {}).items()},
                details,
                {k: Series.from_json(s) for k, s in (d.get("series") or {}).items()},
                dict(d.get("facts") or {}),
                suite=d["suite"],
                case=d["case"],
                repetition=d["repetition"],
                params=dict(d.get("params") or {}),
                started=float(d.get("started") or 0.0),
                duration_s=float(d.get("duration_s") or 0.0),
                raw_files=list(d.get("raw_files") or []),
                bad_input=bool(d.get("bad_input") or details.get("bad_input")),
                machine_load=_machine_load(d.get("machine_load")),
            )
        )


def _machine_load(m) -> dict:
    """A stored record's machine_load: numbers (or null) under text keys; absent in older files."""
    if m is None:
        return {}
    if not isinstance(m, dict) or not all(
        isinstance(k, str) and (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)))
        for k, v in m.items()
    ):
        raise ValueError("a record's machine_load is not an object of numbers")
    return dict(m)


def _drivers_measure(details: dict) -> None:
    if "tables" in details or "charts" in details:
        raise ValueError("drivers measure: return series, and let the suite's view build tables and charts")


def _as_stored(r: Record) -> Record:
    """`r`, which the runner stores or a file held: it names its repetition."""
    if r.repetition < 1:
        raise ValueError("repetitions count from 1")
    return r
