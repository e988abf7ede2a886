"""The stored run: typed records and the results folder (manifest.json, results.json, raw/).

What a driver measures (`Metric`, `Series`) is defined in harness.base.metrics_model (re-exported
here). A `Record` is one repetition of one case (harness.model.result, re-exported here: the
same type a driver returns). Objects check themselves when created
and load any older schema version they know (schema 1 had no series and kept the spec
as plain dicts). A report can be rebuilt from this folder alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.errors import BadInput
from harness.base.files import loads_json, read_bounded, write_atomic
from harness.base.format_versions import RESULTS_READABLE, RESULTS_SCHEMA
from harness.base.metrics_model import STATUSES, Metric, Series, finite_or_none
from harness.base.safe_text import NAME, TEXT, for_terminal
from harness.infra.load_tools import memtier
from harness.infra.redaction import redact, secrets_revealed
from harness.infra.secret_store import known_secrets
from harness.model import identifiers
from harness.model.ledger import Claim
from harness.model.manifest import Manifest
from harness.model.result import Record
from harness.model.spec import SuiteRun

SCHEMA_VERSION = RESULTS_SCHEMA
READABLE_VERSIONS = RESULTS_READABLE
MANIFEST = "manifest.json"
RESULTS = "results.json"
MAX_MANIFEST_BYTES = 16 << 20  # a manifest is a few KB of facts
MAX_RESULTS_BYTES = 256 << 20  # the largest real runs keep a few MB of records and series


@dataclass
class RunData:
    """A results folder, loaded: the manifest, the suites as run, the ledger, the records."""

    run_dir: Path
    manifest: Manifest  # a mapping given here (a test's) is read into one
    records: list[Record]
    suites: dict  # suite name -> spec.SuiteRun
    claims: list  # ledger.Claim, in claim order
    schema_version: int = SCHEMA_VERSION
    monitoring: dict | None = None  # the Prometheus series of the run window (see harness.infra.monitoring)
    interrupted: dict | None = None  # {"at": time, "case": "suite/case/rep"} when the run was cut short
    # "suite/case" -> {"repetition": n, "tables": [...], "charts": [...]}: what a schema-1 case kept in
    # its details instead of series (the last ok repetition's), found when the folder is loaded
    legacy_blocks: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.manifest, Manifest):
            self.manifest = Manifest.from_json(dict(self.manifest or {}))

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


def _sanitize(o, secrets: list[str] | None = None):
    """NaN/inf -> None everywhere, so results files stay valid JSON; known secrets in any
    string value -> ***. A key is never rewritten by known-secret replacement (the keys of
    the harness's own schema must read back as written, whatever a secret is): only a
    URL's password or a `name=value` secret in it is hidden. A record's status ("failed")
    is kept as it is, whatever a password is."""
    if secrets is None:
        secrets = known_secrets()  # once per file, not once per string
    if isinstance(o, float):
        return finite_or_none(o)
    if isinstance(o, str):
        return redact(o, secrets=secrets)
    if isinstance(o, dict):
        return {
            redact(str(k), known=False): v if k == "status" and v in STATUSES else _sanitize(v, secrets)
            for k, v in o.items()
        }
    if isinstance(o, (list, tuple)):
        return [_sanitize(v, secrets) for v in o]
    if hasattr(o, "to_json"):
        return _sanitize(o.to_json(), secrets)
    return o


def json_safe(o):
    """`o` as valid JSON data: NaN and infinities (from a hand-edited file, say) become None."""
    return _sanitize(o)


def atomic_write_json(path: Path, data) -> None:
    """Write JSON atomically (harness.base.files.write_atomic: never through a link, a full disk
    is one line and exit 3); known secrets and the credentials of any URL are redacted as a
    last line of defence (a driver that keeps a raw command cannot leak a password into a
    results file)."""
    secrets = known_secrets()
    write_atomic(path, json.dumps(_sanitize(data, secrets), indent=1, default=_json_default, allow_nan=False))


def write_manifest(run_dir: Path, manifest: Manifest | dict) -> None:
    """manifest.json: the Manifest's own JSON (with its format_version); a mapping given
    here (a test's) is read into one first, as a reader would."""
    if not isinstance(manifest, Manifest):
        manifest = Manifest.from_json(dict(manifest))
    atomic_write_json(run_dir / MANIFEST, manifest.to_json())


def write_results(
    run_dir: Path,
    records: list[Record],
    suites: dict,
    claims: list | None = None,
    *,
    monitoring: dict | None = None,
    interrupted: dict | None = None,
) -> None:
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
    raw = read_bounded(path, limit, what, "give a results folder written by 'harness run'", follow=False)
    try:
        return loads_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise BadInput(f"{path}: not valid JSON ({type(e).__name__}); {what} is damaged, re-run the suites") from None


def _redacted(run_dir: Path, manifest, data):
    """The manifest and results as read, redacted again (a folder written by an older
    version, or edited by hand, may hold a password: `http://user:pw@host` in the manifest's
    engines, the password alone or its base64 in a reason): every secret the folder itself
    reveals (secrets_revealed()) and every one this process knows, in every form, hidden in
    every string before anything is built from them, so that no report, verdicts.json,
    history page or `harness measurements` copies one out. Keys and statuses as _sanitize."""
    try:
        secrets = sorted(set(known_secrets()) | secrets_revealed(manifest, data), key=len, reverse=True)
        seen: dict = {}
        return _strings_redacted(manifest, secrets, seen), _strings_redacted(data, secrets, seen)
    except RecursionError:
        raise BadInput(
            f"{run_dir}: its manifest or results.json is nested too deeply; the folder is damaged, re-run the suites"
        ) from None


def _strings_redacted(o, secrets: list[str], seen: dict):
    """`o` with every string redacted (see _sanitize; numbers stay as they are); `seen`: the
    strings and keys already redacted (a results file repeats its units, names and keys)."""
    if isinstance(o, str):
        out = seen.get(o)
        if out is None:
            out = seen[o] = redact(o, secrets=secrets)
        return out
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if isinstance(k, str):
                key = seen.get((k,))
                if key is None:
                    key = seen[(k,)] = redact(k, known=False)
            else:
                key = k
            out[key] = v if k == "status" and v in STATUSES else _strings_redacted(v, secrets, seen)
        return out
    if isinstance(o, list):
        return [v if v.__class__ in (int, float) else _strings_redacted(v, secrets, seen) for v in o]
    return o


def redacted_by_folder(run_dir: Path, value):
    """`value` (a document read from a results folder beside its results: its verdicts.json)
    with every string redacted of the secrets it and the folder's manifest reveal
    (secrets_revealed()) and those this process knows; a manifest that cannot be read
    reveals nothing here (load_run() says what is wrong with it)."""
    try:
        manifest = _read_json(Path(run_dir) / MANIFEST, "the manifest", MAX_MANIFEST_BYTES)
    except (BadInput, OSError):
        manifest = None
    try:
        secrets = sorted(set(known_secrets()) | secrets_revealed(manifest, value), key=len, reverse=True)
        return _strings_redacted(value, secrets, {})
    except RecursionError:
        raise BadInput(f"{run_dir}: a file of the folder is nested too deeply; it is damaged") from None


def load_run(run_dir: Path) -> RunData:
    """A results folder, checked and upgraded to the current formats: everything wrong with
    the folder is found here (BadInput naming the file), nothing past here reads old formats."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise BadInput(f"{run_dir}: no such results folder; give a folder written by 'harness run'")
    for name in (MANIFEST, RESULTS):
        if not (run_dir / name).exists():
            raise BadInput(f"{run_dir}: {name} is missing; this is not a results folder written by 'harness run'")
    raw_manifest = _read_json(run_dir / MANIFEST, "the manifest", MAX_MANIFEST_BYTES)
    data = _read_json(run_dir / RESULTS, "results.json", MAX_RESULTS_BYTES)
    raw_manifest, data = _redacted(run_dir, raw_manifest, data)
    manifest = Manifest.from_json(raw_manifest, str(run_dir / MANIFEST))
    if not isinstance(data, dict):
        raise BadInput(
            f"{run_dir / RESULTS}: expected a JSON object with schema_version and records; re-run the suites"
        )
    version = _results_version(run_dir / RESULTS, data)
    try:
        records = [Record.from_json(r) for r in data["records"]]
        suites = {str(k): SuiteRun.from_json(str(k), v) for k, v in (data.get("suites") or {}).items()}
        claims = [Claim.from_json(c) for c in (data.get("claims") or [])]
    except BadInput:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
        # the error's text quotes the file (a name, a value): one bounded line, escapes shown
        raise BadInput(
            f"{run_dir / RESULTS}: a record or suite is malformed ({type(e).__name__}: "
            f"{for_terminal(e, TEXT)}); "
            f"the file is damaged, re-run the suites"
        ) from None
    _check_claims(run_dir / RESULTS, claims)
    for key in ("monitoring", "interrupted"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise BadInput(
                f"{run_dir / RESULTS}: {key!r} is a {type(data[key]).__name__}, not an object; "
                f"the file is damaged, re-run the suites"
            )
    monitoring = data.get("monitoring")
    if monitoring is None and manifest.monitoring:  # schema 1 kept it in the manifest
        monitoring = manifest.monitoring
    memtier_histograms(run_dir, records)
    return RunData(
        run_dir,
        manifest,
        records,
        suites,
        claims,
        version,
        monitoring,
        data.get("interrupted"),
        legacy_blocks(records) if version == 1 else {},
    )


OPS = ("<", "<=", ">", ">=")


def claim_id_problem(cid) -> str:
    """'' for a claim id the ledger's loader accepts, else what is wrong: the one rule
    (harness.model.identifiers.CLAIM_ID) both apply, so that a run that judged a claim can
    read its own results back. An id keys boards, anchors and comparisons."""
    return identifiers.CLAIM_ID.problem(cid)


def _number(x, none_ok: bool = True) -> bool:
    if x is None:
        return none_ok
    try:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and finite_or_none(float(x)) is not None
    except OverflowError:  # an integer past a float's range
        return False


def _check_claims(path: Path, claims: list) -> None:
    """The ledger as results.json keeps it, checked by its schema: ids, operators, numbers
    and bands of the types the analysis compares (an edited file, one line naming the claim)."""
    seen = set()
    for c in claims:
        bad = claim_id_problem(c.id)
        if not bad and c.id in seen:
            bad = f"claim {c.id} is listed twice"
        seen.add(c.id)
        for k in c.checks if not bad else []:
            band_ok = k.band is None or (len(k.band) == 2 and all(_number(b, False) for b in k.band))
            if not band_ok:
                bad = "a band is not two finite numbers"
            elif k.band is None and (k.op not in OPS or not _number(k.value, False)):
                bad = "a check's op and value are not one of <, <=, >, >= and a finite number"
            elif k.direction is not None and (k.direction.op not in OPS or not _number(k.direction.value, False)):
                bad = "a check's direction is not an operator and a finite number"
            for ctl in [x for x in k.controls] + [x.instrument for x in k.controls if x.instrument is not None]:
                if bad:
                    break
                if (
                    ctl.op not in OPS
                    or not _number(ctl.value)
                    or not _number(ctl.factor, False)
                    or not isinstance(ctl.than, (str, type(None)))
                    or (ctl.value is None and ctl.than is None)
                ):
                    bad = (
                        f"a control of {for_terminal(k.metric, NAME)} has no operator and number (or metric) to compare"
                    )
            if bad:
                break
        if bad:
            raise BadInput(
                f"{path}: claims: {bad} (claim {for_terminal(str(c.id), 80)}); the file was edited or "
                f"damaged, re-run the suites"
            )


MEMTIER_RAW = {"memtier.json": "measured", "memtier-control.json": "control"}  # the memtier driver's raw files
MAX_RAW_JSON_BYTES = 64 << 20


def memtier_histograms(run_dir: Path, records: list[Record]) -> None:
    """A memtier repetition stored before its HDR histograms were kept as a series (issue 20):
    the `histograms` series built from the raw memtier JSON it kept, so that the report pools
    its requests as for a new run. A raw file that is gone or damaged adds nothing."""
    root = run_dir.resolve()
    for r in records:
        files = r.raw_files if isinstance(r.raw_files, list) else []
        raw = [(f, MEMTIER_RAW[Path(f).name]) for f in files if isinstance(f, str) and Path(f).name in MEMTIER_RAW]
        if r.status != "ok" or not isinstance(r.series, dict) or "histograms" in r.series or not raw:
            continue
        cols = memtier.histogram_columns()
        for f, run in raw:
            try:
                path = (run_dir / f).resolve()
                if not path.is_relative_to(root):
                    continue
                data = json.loads(read_bounded(path, MAX_RAW_JSON_BYTES, "a memtier JSON file"))
                histograms = memtier.parse_json(data).histograms if isinstance(data, dict) else {}
            except (
                BadInput,
                ValueError,
                TypeError,
                KeyError,
                AttributeError,
                RecursionError,
                OSError,
                RuntimeError,
                OverflowError,
            ):  # gone, damaged, a link loop: nothing to add
                continue
            memtier.histogram_rows(cols, run, histograms)
        r.series.update(memtier.histogram_series(cols))


def legacy_blocks(records: list[Record]) -> dict:
    """Schema 1: the tables and charts a case kept in its details (drivers now keep series),
    of its last ok repetition that kept any."""
    out: dict = {}
    for r in records:
        tables, charts = r.details.get("tables") or [], r.details.get("charts") or []
        if r.status == "ok" and (tables or charts) and isinstance(tables, list) and isinstance(charts, list):
            out[f"{r.suite}/{r.case}"] = {
                "repetition": r.repetition,
                "tables": [t for t in tables if isinstance(t, dict)],
                "charts": [c for c in charts if isinstance(c, dict)],
            }
    return out


def _results_version(path: Path, data: dict) -> int:
    """The schema version of results.json, when this harness reads it, and its records are a list."""
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION
        raise BadInput(
            f"{path}: schema_version {for_terminal(repr(version), NAME)}, "
            f"this harness reads {', '.join(map(str, READABLE_VERSIONS))}; "
            + ("upgrade the harness to read it" if newer else "re-run the suites to write it anew")
        )
    if not isinstance(data.get("records"), list):
        raise BadInput(
            f"{path}: no list of records (found {type(data.get('records')).__name__}); "
            f"the file is damaged, re-run the suites"
        )
    return version
