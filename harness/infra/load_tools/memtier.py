"""memtier_benchmark: build the command line, run it, parse its --json-out-file, validate.

memtier exits 0 on failed runs, so the exit code proves nothing: a run is valid only when
it did work (Count > 0, Ops/sec > 0, a positive duration), had no connection errors and no
error responses, and every percentile is a finite number > 0 that lies within the
section's min/max latency.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import cast

from harness.base.files import loads_json
from harness.base.metrics_model import Column, Metric, Series, SeriesShape
from harness.infra.process import tool_missing, where

INSTALL_HINT = "the Ansible loadgen role installs it on lab hosts"

ROW_KINDS = ("Sets", "Gets", "Totals")
ERROR_PATTERNS = (
    re.compile(r"Connection error", re.I),
    re.compile(r"handle error response", re.I),
    re.compile(r"server returned error", re.I),
)


def build_command(
    p: dict,
    host: str,
    port: int,
    cluster: bool,
    json_path: str,
    password: str | None = None,
    *,
    key_range: tuple[int, int] | None = None,
    hdr_prefix: str | None = None,
) -> list[str]:
    """The command line. `key_range` (first, last key): one load generator's share of the
    keys, with a seed of its own per client (several load generators); `hdr_prefix`: where
    memtier writes its HDR histogram logs."""
    keys = [f"--key-maximum={p['key_maximum']}"]
    if key_range is not None:
        keys = [
            f"--key-minimum={key_range[0]}",
            f"--key-maximum={key_range[1]}",
            "--distinct-client-seed",
            "--randomize",
        ]
    cmd = [
        "memtier_benchmark",
        "-s",
        host,
        "-p",
        str(port),
        "--protocol=redis",
        f"--clients={p['clients']}",
        f"--threads={p['threads']}",
        f"--ratio={p['ratio']}",
        *keys,
        f"--data-size={p['data_size']}",
        f"--pipeline={p['pipeline']}",
        f"--key-pattern={p['key_pattern']}",
        "--run-count=1",
        "--hide-histogram",
        f"--json-out-file={json_path}",
        "--print-percentiles=" + ",".join(f"{q:g}" for q in p["percentiles"]),
    ]
    cmd.append(f"--test-time={p['test_time']}" if p["test_time"] else f"--requests={p['requests']}")
    if hdr_prefix is not None:
        cmd.append(f"--hdr-file-prefix={hdr_prefix}")
    if cluster:
        cmd.append("--cluster-mode")  # without it a cluster answers MOVED and memtier "succeeds"
    if password:  # memtier has no environment form: redacted wherever the command is kept
        cmd.append(f"--authenticate={password}")
    return cmd


def missing_on(host) -> str:
    """'' when memtier_benchmark is on `host` (a load generator; None: here)."""
    return tool_missing("memtier_benchmark", host, INSTALL_HINT)


def ran_on(target) -> str:
    """Which machine runs memtier_benchmark for this target: for the record's details and the report."""
    return where(target.loadgen)


def percentile_name(key: str) -> str:
    """'p99.90' -> 'p99.9', 'p50.00' -> 'p50', 'p99.999' -> 'p99.999'."""
    num = key[1:]
    return "p" + (num.rstrip("0").rstrip(".") if "." in num else num)


@dataclass
class Section:
    name: str
    rows: dict[str, dict]  # Sets / Gets / Totals -> the JSON row
    duration_ms: float | None
    problems: list[str] = field(default_factory=list)
    histograms: dict[str, str] = field(default_factory=dict)  # kind -> memtier's compressed HDR histogram
    # When the process ran, by its own clock (Runtime, ms since the epoch), and its Totals'
    # operations in each second of the run (Time-Serie): what several load generators'
    # windows are checked and summed with (harness.infra.load_tools.loadgen_merge).
    start_ms: float | None = None
    finish_ms: float | None = None
    per_second: list[int] = field(default_factory=list)


@dataclass
class MemtierResult:
    sections: dict[str, Section]
    chosen: str | None
    problems: list[str]  # empty = valid
    metrics: dict[str, Metric]

    @property
    def valid(self) -> bool:
        return not self.problems and self.chosen is not None

    @property
    def histograms(self) -> dict[str, str]:
        """The chosen section's latency histograms (kind -> compressed HDR histogram); for
        --run-count > 1 the aggregated section's is empty (memtier does not merge them)."""
        return self.sections[self.chosen].histograms if self.chosen else {}


def _section_problems(name: str, rows: dict, duration_ms: float | None) -> list[str]:
    problems = []
    totals = rows.get("Totals")
    if totals is None:
        return [f"{name}: no Totals row"]
    if not totals.get("Count", 0) > 0:
        problems.append(f"{name}: Count is {totals.get('Count')}: the run did no work")
    ops = totals.get("Ops/sec")
    if not (isinstance(ops, (int, float)) and math.isfinite(ops) and ops > 0):
        problems.append(f"{name}: Totals Ops/sec is {ops}")
    if duration_ms is not None and duration_ms <= 0 and not name.startswith("AGGREGATED"):
        problems.append(f"{name}: Runtime 'Total duration' is {duration_ms} ms")
    for kind in ROW_KINDS:
        row = rows.get(kind)
        if not row:
            continue
        if row.get("Connection Errors", 0):
            problems.append(f"{name}: {kind} had {row['Connection Errors']} connection errors")
        if not row.get("Count", 0):
            continue
        lo, hi = row.get("Min Latency"), row.get("Max Latency")
        for key, value in (row.get("Percentile Latencies") or {}).items():
            if not key.startswith("p"):
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                problems.append(f"{name}: {kind} {key} is {value}")
            elif isinstance(hi, (int, float)) and hi > 0 and not (lo - 1e-9 <= value <= hi + 1e-9):
                problems.append(f"{name}: {kind} {key} = {value} ms lies outside min/max latency {lo}..{hi} ms")
            elif isinstance(hi, (int, float)) and hi <= 0:
                problems.append(f"{name}: {kind} {key} = {value} ms but max latency is {hi} ms (empty histogram)")
                break
    return problems


def _epoch_ms(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def per_second_counts(totals: dict) -> list[int]:
    """The Totals row's operations per second of the run, in order (its 'Time-Serie', keyed
    '0', '1', ...); [] when the JSON has none or a second is missing or not a count."""
    ts = totals.get("Time-Serie") if isinstance(totals, dict) else None
    if not isinstance(ts, dict) or not ts:
        return []
    try:
        keys = sorted(ts, key=int)
    except ValueError:
        return []
    counts = [ts[k].get("Count") if isinstance(ts[k], dict) else None for k in keys]
    if [int(k) for k in keys] != list(range(len(keys))) or not all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts
    ):
        return []
    return cast(list[int], counts)  # each checked above to be an int


def parse_json(data: dict, stderr: str = "") -> MemtierResult:
    """Read every results section of a memtier JSON file and validate it.

    Layouts: 'ALL STATS' (one run), or 'BEST RUN RESULTS' / 'WORST RUN RESULTS' /
    'AGGREGATED AVERAGE RESULTS (N runs)' / 'RUN #i RESULTS' (--run-count > 1).
    Metrics come from 'ALL STATS' or else from the aggregated section; the aggregated
    section's percentiles are averages of per-run percentiles (not percentiles), which the
    metric note says.
    """
    sections: dict[str, Section] = {}
    for name, body in data.items():
        if name in ("configuration", "run information") or not isinstance(body, dict):
            continue
        if "Totals" not in body:
            continue
        rows = {k: body[k] for k in ROW_KINDS if isinstance(body.get(k), dict)}
        runtime = body["Runtime"] if isinstance(body.get("Runtime"), dict) else {}
        dur = runtime.get("Total duration")
        sections[name] = Section(
            name,
            rows,
            dur,
            _section_problems(name, rows, dur),
            {k: h for k, r in rows.items() if (h := histogram_text(r))},
            _epoch_ms(runtime.get("Start time")),
            _epoch_ms(runtime.get("Finish time")),
            per_second_counts(rows.get("Totals", {})),
        )
    chosen = None
    if "ALL STATS" in sections:
        chosen = "ALL STATS"
    else:
        agg = [n for n in sections if n.startswith("AGGREGATED")]
        chosen = agg[0] if agg else (next(iter(sections)) if sections else None)
    problems = []
    if chosen is None:
        problems.append("no results section in the JSON")
    else:
        problems += sections[chosen].problems
    err_lines = [line.strip() for line in stderr.splitlines() if any(p.search(line) for p in ERROR_PATTERNS)]
    if err_lines:
        problems.append(f"stderr reports errors ({len(err_lines)} lines), first: {err_lines[0]}")
    metrics = section_metrics(sections[chosen]) if chosen else {}
    return MemtierResult(sections, chosen, problems, metrics)


def section_metrics(section: Section) -> dict[str, Metric]:
    note = "average of per-run percentiles, not a percentile" if section.name.startswith("AGGREGATED") else ""
    out: dict[str, Metric] = {}
    for kind, row in section.rows.items():
        if not row.get("Count"):
            continue
        ops = row.get("Ops/sec")
        if isinstance(ops, (int, float)) and math.isfinite(ops):
            out[f"{kind}.ops_per_sec"] = Metric(ops, "ops/s", "higher")
        acc, count = row.get("Accumulated Latency"), row.get("Count")
        if isinstance(acc, (int, float)) and acc > 0 and count:
            # memtier's JSON rounds the Totals 'Average Latency' (2.0 where stdout says
            # 2.514): the accumulated latency over the count is exact.
            out[f"{kind}.avg_ms"] = Metric(acc / count, "ms", "lower", "Accumulated Latency / Count")
        for key, value in (row.get("Percentile Latencies") or {}).items():
            if key.startswith("p") and isinstance(value, (int, float)) and math.isfinite(value):
                out[f"{kind}.{percentile_name(key)}_ms"] = Metric(value, "ms", "lower", note)
        if kind == "Gets":
            for k, name in (("Hits/sec", "hits_per_sec"), ("Misses/sec", "misses_per_sec")):
                v = row.get(k)
                if isinstance(v, (int, float)) and math.isfinite(v):
                    out[f"Gets.{name}"] = Metric(v, "ops/s", None)
    return out


def parse_files(json_text: str, stderr: str = "") -> MemtierResult:
    try:
        data = loads_json(json_text)
    except json.JSONDecodeError as e:
        return MemtierResult({}, None, [f"the JSON output is not valid JSON ({e})"], {})
    return parse_json(data, stderr)


# ---- pooled tail percentiles: memtier's HDR histograms merged across repetitions ----------
# memtier records latencies in microseconds into an HdrHistogram (the JSON's are 2 significant
# digits in memtier 2.x) and writes it base64-compressed ("HISTFAAA...") under Percentile
# Latencies / Histogram log format / Compressed Histogram; its printed percentiles are the
# histogram's values / 1000.
# The median of per-run P99s is not a P99 of the pooled requests: merging the histograms
# (the hdrhistogram package) gives the percentile of every request of every repetition.
HISTOGRAM_US_PER_MS = 1000.0


def histogram_text(row: dict) -> str | None:
    """The compressed histogram of a Sets/Gets/Totals row, or None."""
    pl = row.get("Percentile Latencies") if isinstance(row, dict) else None
    fmt = pl.get("Histogram log format") if isinstance(pl, dict) else None
    text = fmt.get("Compressed Histogram") if isinstance(fmt, dict) else None
    return text if isinstance(text, str) and text else None


def merge_histograms(encoded: list[str]):
    """One HdrHistogram holding every recorded value of `encoded`; empty ones are skipped.
    Raises ValueError on a histogram that does not decode."""
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError:  # a core dependency; say so in one line
        raise ValueError("the hdrhistogram package is not installed (pip install -c constraints.txt -e .)") from None
    decoded = []
    for text in encoded:
        try:
            h = HdrHistogram.decode(text)
        except Exception as e:  # the package raises several kinds for damaged input
            raise ValueError(f"a compressed histogram does not decode ({type(e).__name__})") from None
        if h.get_total_count() > 0:
            decoded.append(h)
    if len(decoded) < 2:
        return decoded[0] if decoded else None
    # one histogram wide and fine enough for all of them (add() refuses a value beyond its range)
    merged = HdrHistogram(
        min(h.lowest_trackable_value for h in decoded),
        max(h.highest_trackable_value for h in decoded),
        max(h.significant_figures for h in decoded),
    )
    for h in decoded:
        try:
            merged.add(h)
        except (IndexError, ValueError) as e:
            raise ValueError(f"the histograms cannot be added ({type(e).__name__})") from None
    return merged


def pooled_percentiles(encoded: list[str], qs=(50, 99, 99.9)) -> tuple[dict[float, float], int]:
    """({q: latency in ms}, requests) over the merged histograms; ({}, 0) when all are empty."""
    merged = merge_histograms(encoded)
    if merged is None:
        return {}, 0
    return ({q: merged.get_value_at_percentile(q) / HISTOGRAM_US_PER_MS for q in qs}, merged.get_total_count())


HDR_KINDS = ("Totals", "Gets", "Sets")
HDR_QS = (50, 99, 99.9)
# The `histograms` series, declared here (the infra layer builds it; the redis-cluster view reads it).
HISTOGRAMS = SeriesShape(
    "histograms",
    (
        Column("run", "text"),
        Column("kind", "text"),
        Column("requests", "int"),
        *(Column(f"p{q:g}_ms", unit="ms") for q in HDR_QS),
        Column("histogram", "text"),
    ),
    "memtier's HDR histogram of every request of the run, per kind (compressed)",
)


def histogram_columns() -> dict[str, list]:
    """The empty columns of the `histograms` series (histogram_rows fills them)."""
    return {c.name: [] for c in HISTOGRAMS.columns}


def histogram_rows(cols: dict[str, list], run: str, histograms: dict[str, str]) -> None:
    """One row per kind of request: this run's percentiles from memtier's HDR histogram and
    the histogram itself (compressed, as memtier wrote it), so that the view can pool the
    requests of every repetition without reading the tool's files again."""
    for kind in HDR_KINDS:
        enc = histograms.get(kind)
        if not enc:
            continue
        try:
            pct, n = pooled_percentiles([enc], HDR_QS)
        except ValueError:  # a histogram that does not decode: the per-run metrics still stand
            continue
        if not pct:
            continue
        cols["run"].append(run)
        cols["kind"].append(kind)
        cols["requests"].append(n)
        for q in HDR_QS:
            cols[f"p{q:g}_ms"].append(pct[q])
        cols["histogram"].append(enc)


def histogram_series(cols: dict[str, list]) -> dict[str, Series]:
    """{"histograms": the series} when a row was kept, else {}."""
    if not cols["run"]:
        return {}
    return {HISTOGRAMS.name: HISTOGRAMS.make(cols)}
