"""A metric's history across stored runs: `harness history RESULTS_ROOT`.

RESULTS_ROOT holds results folders (each written by `harness run`). Every metric becomes a
series over the runs, oldest first: the median of the run's repetitions with their min-max
as whiskers, the threshold of the run's profile as a line, and the steps that
harness.verdict.stepdetect finds in the medians. Each run is annotated with its date, git
revision, profile, host and key package versions, so that a step can be read against
what changed. The page (history.html: self-contained, inline SVG, no script, the report's
Content-Security-Policy) is rendered by harness.publish.history_page from the data computed here,
which is also kept as history.json.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.base import stats
from harness.base.errors import BadInput
from harness.base.files import write_atomic
from harness.base.format_versions import HISTORY_FORMAT
from harness.base.metrics_model import finite_number
from harness.base.safe_text import NAME, TEXT, bound_strings, for_terminal
from harness.model.stored_run import MANIFEST, RESULTS, RunData, json_safe, load_run
from harness.verdict.analysis import analyze
from harness.verdict.stepdetect import detect_steps

HISTORY_HTML = "history.html"
HISTORY_JSON = "history.json"
# Versions whose change can move a measurement: compared by `harness compare`, shown here.
KEY_PACKAGES = (
    "redis",
    "numpy",
    "torch",
    "transformers",
    "sentence-transformers",
    "onnxruntime",
    "libcachesim",
    "hdrhistogram",
)
KEY_TOOLS = ("redis-server", "redis-benchmark", "memtier_benchmark")


def anchor(suite: str, case: str, metric: str) -> str:
    """A stable HTML id for a metric (any name is safe: unusual characters are replaced and
    a short digest keeps ids distinct)."""
    key = f"{suite}/{case}/{metric}"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", key)[:80].strip("-")
    # surrogatepass: a lone surrogate in a name (valid JSON) still has a digest
    return f"m-{slug}-{hashlib.sha1(key.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def comparison_facts(run: RunData) -> dict:
    """What a run ran on: profile, host class, key versions; the sides of a comparison must
    agree on these. The host is its hardware and the target (not the hostname, which a CI
    runner changes every night)."""
    man = run.manifest  # a typed record: every field already has its type (harness.model.manifest)
    host, git, packages, tools = man.host, man.git, man.packages, man.tools
    versions = {k: packages.get(k) for k in KEY_PACKAGES if k in packages}
    for t in KEY_TOOLS:
        v = tools.get(t)
        if isinstance(v, dict) and v.get("version"):
            versions[t] = _tool_version(v["version"])
    return {
        "run_id": man.run_id or run.run_dir.name,
        "started": man.started,
        "revision": str(git.get("revision") or "unknown"),
        "dirty": bool(git.get("dirty")),
        "profile": man.profile or "?",
        "host": f"{host.get('cpu_model', '?')}, {host.get('cpu_logical', '?')} cores, "
        f"{host.get('memory_total_gib', '?')} GiB; target {man.target if man.target is not None else '?'}",
        "hostname": str(host.get("hostname") or "?"),
        "versions": versions,
        "constraints": man.constraints.get("sha256") if man.constraints else None,
        "params": {f"{name}/{c.name}": c.params for name, srun in run.suites.items() for c in srun.cases},
    }


def _tool_version(text: str) -> str:
    """'Redis server v=7.0.15 sha=... build=...' -> '7.0.15' (the build id varies by package);
    a value that is not text (an edited manifest) is compared as its text."""
    text = text if isinstance(text, str) else str(text)[:200]
    m = re.search(r"v=(\S+)", text) or re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else text


def date_text(ts) -> str:
    if not isinstance(ts, (int, float)):
        return "-"
    try:
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "-"


def find_runs(root: Path, log=None) -> list[Path]:
    """Results folders directly under root (or root itself), oldest first by start time. A
    folder with a manifest and no results.json (a run refused before it saved anything)
    is left out with a note."""
    root = Path(root)
    if not root.is_dir():
        raise BadInput(f"{root}: no such folder; give the folder that holds the results folders of earlier runs")
    if (root / MANIFEST).exists():
        return [root]
    dirs = []
    for d in sorted(root.iterdir()):
        if not d.is_dir() or not (d / MANIFEST).exists():
            continue
        if (d / RESULTS).exists():
            dirs.append(d)
        elif log:
            log(
                f"left out: {for_terminal(d, TEXT)}: no results.json (a run refused or stopped before it saved "
                f"anything); nothing to show"
            )
    if not dirs:
        raise BadInput(
            f"{root}: holds no results folders (folders with manifest.json and results.json); "
            f"give the folder that 'harness run --results-dir' wrote into"
        )
    return dirs


def load_runs(dirs: list[Path], log=None) -> list[RunData]:
    """Loaded runs, oldest first; a damaged folder, and one with no records (a run refused
    before its first case), is left out with one line, not fatal."""
    out = []
    for d in dirs:
        try:
            run = load_run(d)
        except BadInput as e:
            if log:
                log(f"left out: {for_terminal(e, TEXT)}")
            continue
        if run.records:
            out.append(run)
        elif log:
            log(
                f"left out: {for_terminal(d, TEXT)}: no records (a run refused or stopped before its first case); "
                f"nothing to show"
            )
    out.sort(key=lambda r: (r.manifest.started or 0.0, r.run_dir.name))
    return out


@dataclass
class MetricHistory:
    suite: str
    case: str
    metric: str
    unit: str
    better: str | None
    points: list[dict] = field(default_factory=list)  # {"run": index, "median", "min", "max", "n"}
    thresholds: list[dict] = field(default_factory=list)  # {"run": index, "op", "value"}
    steps: list[dict] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return anchor(self.suite, self.case, self.metric)

    def to_json(self) -> dict:
        return {
            "suite": self.suite,
            "case": self.case,
            "metric": self.metric,
            "unit": self.unit,
            "better": self.better,
            "anchor": self.anchor,
            "points": self.points,
            "thresholds": self.thresholds,
            "steps": self.steps,
        }


def build_history(runs: list[RunData]) -> dict:
    """The history of every metric over `runs` (oldest first): {"runs": [...], "metrics": [...]}."""
    facts: list[dict] = []
    series: dict[tuple[str, str, str], MetricHistory] = {}
    h: MetricHistory | None
    for i, run in enumerate(runs):
        facts.append({"index": i + 1, **comparison_facts(run), "date": date_text(run.manifest.started)})
        a = analyze(run)
        for m in a.metrics:
            h = series.setdefault(
                (m.suite, m.case, m.metric), MetricHistory(m.suite, m.case, m.metric, m.unit, m.better)
            )
            h.points.append({"run": i + 1, "median": m.median, "min": m.min, "max": m.max, "n": len(m.values)})
        for t in a.thresholds:
            h = series.get((t.suite, t.case, t.metric))
            if (
                h is not None and finite_number(t.threshold.value) is not None
            ):  # a NaN limit (edited file) draws no line
                h.thresholds.append({"run": i + 1, "op": t.threshold.op, "value": t.threshold.value})
    for h in series.values():
        medians = [p["median"] for p in h.points]
        for s in detect_steps(medians):
            at = h.points[s.index]["run"]
            worse = None if h.better is None else ((s.after > s.before) == (h.better == "lower"))
            h.steps.append(
                {
                    **s.to_json(),
                    "run": at,
                    "run_id": facts[at - 1]["run_id"],
                    "revision": facts[at - 1]["revision"],
                    "date": facts[at - 1]["date"],
                    "kind": "changed" if worse is None else ("regression" if worse else "improvement"),
                }
            )
    metrics = sorted(series.values(), key=lambda h: (h.suite, h.case, h.metric))
    return {"runs": facts, "metrics": [h.to_json() for h in metrics]}


def level_points(h: dict) -> list[list]:
    """The fitted levels (median of each segment between steps), one point per run."""
    pts = h["points"]
    cuts = [0] + [next(i for i, p in enumerate(pts) if p["run"] == s["run"]) for s in h["steps"]] + [len(pts)]
    out = []
    for a, b in zip(cuts, cuts[1:]):
        if a == b:
            continue
        level = stats.median([p["median"] for p in pts[a:b]])
        out += [[p["run"], level] for p in pts[a:b]]
    return out


def select_runs(root: Path, last: int | None = None, log=None, profile: str | None = None) -> list[RunData]:
    """The runs under `root` of one profile (default: the newest run's), the `last` newest of
    them: a series that mixes profiles would show their difference as a step."""
    runs = load_runs(find_runs(Path(root), log), log)
    if runs:
        want = profile or runs[-1].manifest.profile or "?"
        other = [r for r in runs if (r.manifest.profile or "?") != want]
        runs = [r for r in runs if (r.manifest.profile or "?") == want]
        if not runs:
            profiles = sorted({for_terminal(str(r.manifest.profile), NAME) for r in other})
            more = f" and {len(profiles) - 10} more" if len(profiles) > 10 else ""
            raise BadInput(
                f"{root}: no run of profile {for_terminal(repr(want), NAME)}; its runs have profiles "
                f"{', '.join(profiles[:10])}{more}"
            )
        if other and log:
            log(
                f"profile {for_terminal(want, NAME)}: left out {len(other)} run(s) of other profiles (--profile chooses)"
            )
    if last is not None:
        if last < 1:
            raise BadInput(f"--last must be at least 1, got {last}")
        runs = runs[-last:]
    if not runs:
        raise BadInput(f"{root}: none of its results folders could be read; see the lines above")
    return runs


def write_history_json(path: Path, data: dict) -> None:
    """history.json: the data of the page, with its format version."""
    # every string bounded (a 7 MB name is not kept whole); non-ASCII written as JSON escapes
    data = bound_strings({"format_version": HISTORY_FORMAT, **data}, TEXT)
    try:  # compact: the C encoder (indent would take the pure-Python one, a second per 1,000 runs)
        text = json.dumps(data, allow_nan=False)
    except ValueError:  # a NaN from a hand-edited results file: null
        text = json.dumps(json_safe(data), allow_nan=False)
    write_atomic(path, text)


def out_folder(out_dir: Path, given: bool) -> Path:
    """The folder history.html goes to, made when missing; one line when it cannot be."""
    flag = "--out " if given else ""
    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"{flag}{out_dir}: is a file, not a folder; give a folder for history.html and history.json")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"{flag}{out_dir}: cannot be made ({e.strerror or e}); give a writable folder") from None
    return out_dir
