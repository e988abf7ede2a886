"""Per-metric change between a baseline and a run, with significance and size.

The baseline is one earlier run (its repetitions) or a pooled baseline: the median of the
last N runs' medians (default 7), the way Redis's benchmark runner compares. A change
counts only when it is both

- large: past max(FACTOR, the baseline's coefficient of variation), and
- clear of the noise: the run's repetitions lie wholly outside the baseline's range (the
  repetitions of one baseline run, or the per-run medians of a pool).

A metric whose baseline varies by more than UNSTABLE_CV (10%) is marked unstable and is
never a regression. The Mann-Whitney p-value is shown beside each change: with 3
repetitions per side no two-sided test can reach p < 0.05 (the smallest possible p is
0.1), so the range rule carries the decision and the p-value informs.

The two sides must be comparable: the same profile, the same host class, the same key
package and tool versions (harness.verdict.metric_history.comparison_facts) and, for the cases both ran, the same
resolved parameters. Otherwise `check_sides` says what
differs and the command exits 2, unless the user allows it (then it is a warning line).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from harness.base import stats
from harness.base.errors import BadInput
from harness.base.safe_text import LINE, NAME, TEXT, bound_strings, for_markdown, for_terminal
from harness.model.stored_run import MANIFEST, load_run
from harness.verdict import verdicts_json as verdicts
from harness.verdict.analysis import Analysis, MetricSummary, analyze
from harness.verdict.display import fmt
from harness.verdict.metric_history import comparison_facts, find_runs, load_runs
from harness.verdict.summary import table

FACTOR = 0.05  # 5%: past this a change in the worse direction is a regression
UNSTABLE_CV = 0.10  # a baseline that varies more than this cannot show a regression
POOL = 7  # runs in a pooled baseline
# the order of the rows: regressions first
ORDER = ("regression", "improvement", "changed", "unstable", "missing", "new", "within noise", "no change")


def baseline_of(analyses: list[Analysis]) -> dict[tuple, MetricSummary]:
    """One run: its repetitions (its own summaries); several: the summary of their per-run
    medians, which the baseline's median is the median of."""
    if len(analyses) == 1:
        return {(m.suite, m.case, m.metric): m for m in analyses[0].metrics}
    grouped: dict[tuple[str, str, str], list[MetricSummary]] = {}
    for a in analyses:
        for m in a.metrics:
            grouped.setdefault((m.suite, m.case, m.metric), []).append(m)
    return {
        key: MetricSummary.of(*key, ms[-1].unit, ms[-1].better, [m.median for m in ms], note=ms[-1].note, runs=len(ms))
        for key, ms in grouped.items()
    }


def _row(b: MetricSummary, m, factor: float) -> dict:
    change = stats.relative_change(b.median, m.median)
    cv = b.cv
    limit = max(factor, cv)
    p = stats.mann_whitney_p(b.values, m.values)
    clear = m.min > b.max or m.max < b.min
    if cv > UNSTABLE_CV:
        status = "unstable"
    elif abs(change) <= limit:
        status = "no change"
    elif m.better is None:
        status = "changed" if clear else "within noise"
    elif not clear:
        status = "within noise"
    else:
        worse = (change > 0) == (m.better == "lower")
        status = "regression" if worse else "improvement"
    assessment = status
    if status == "unstable":
        assessment = f"unstable: the baseline varies {cv:.0%} (over {UNSTABLE_CV:.0%}); not judged" + (
            f" ({change:+.0%}, outside the baseline's whole range)"
            if clear and abs(change) > limit and not math.isinf(change)
            else ""
        )
    elif m.noisy and status in ("regression", "improvement"):
        assessment += " (noisy: re-run with more repetitions)"
    css = {
        "regression": "fail",
        "improvement": "pass",
        "unstable": "missing",
        "changed": "skipped",
        "within noise": "skipped",
        "no change": "ok",
    }[status]
    return {
        "suite": m.suite,
        "case": m.case,
        "metric": m.metric,
        "unit": m.unit,
        "better": m.better,
        "baseline": f"{fmt(b.median)} {m.unit}".strip(),
        "current": f"{fmt(m.median)} {m.unit}".strip(),
        "baseline_value": b.median,
        "current_value": m.median,
        "baseline_runs": b.runs,
        "change_value": None if math.isinf(change) else change,
        "change": "inf" if math.isinf(change) else f"{change:+.1%}",
        "limit": f"{limit:.1%}",
        "cv": None if math.isinf(cv) else cv,
        "p": f"{p:.3f}",
        "status": status,
        "assessment": assessment,
        "css": css,
        "regression": status == "regression",
    }


def compare_baseline(base: dict[tuple, MetricSummary], new: Analysis, factor: float = FACTOR) -> list[dict]:
    rows = []
    seen = set()
    for m in new.metrics:
        key = (m.suite, m.case, m.metric)
        b = base.get(key)
        if b is None:
            rows.append(
                {
                    "suite": m.suite,
                    "case": m.case,
                    "metric": m.metric,
                    "unit": m.unit,
                    "better": m.better,
                    "baseline": "-",
                    "current": f"{fmt(m.median)} {m.unit}".strip(),
                    "baseline_value": None,
                    "current_value": m.median,
                    "baseline_runs": 0,
                    "change_value": None,
                    "change": "-",
                    "limit": "-",
                    "cv": None,
                    "p": "-",
                    "status": "new",
                    "assessment": "new: not in the baseline",
                    "css": "skipped",
                    "regression": False,
                }
            )
            continue
        seen.add(key)
        rows.append(_row(b, m, factor))
    for key, b in base.items():
        if key not in seen:
            rows.append(
                {
                    "suite": b.suite,
                    "case": b.case,
                    "metric": b.metric,
                    "unit": b.unit,
                    "better": b.better,
                    "baseline": f"{fmt(b.median)} {b.unit}".strip(),
                    "current": "-",
                    "baseline_value": b.median,
                    "current_value": None,
                    "baseline_runs": b.runs,
                    "change_value": None,
                    "change": "-",
                    "limit": "-",
                    "cv": None,
                    "p": "-",
                    "status": "missing",
                    "assessment": "missing: measured in the baseline, not in this run",
                    "css": "missing",
                    "regression": False,
                }
            )
    rows.sort(key=lambda r: (ORDER.index(r["status"]), r["suite"], r["case"], r["metric"]))
    return rows


def compare(base: Analysis, new: Analysis, factor: float = FACTOR) -> list[dict]:
    """One run against another (the report's comparison section): the metrics of both."""
    return [r for r in compare_baseline(baseline_of([base]), new, factor) if r["status"] not in ("new", "missing")]


def _shown(text) -> str:
    """A name or value from a results folder, as a message shows it: one bounded line,
    control characters and lone surrogates as visible escapes (harness.base.safe_text)."""
    return for_terminal(text, NAME)


def check_sides(base_facts: list[dict], new_facts: dict) -> list[str]:
    """What differs between the baseline runs and the run: profile, host, key versions."""
    out = []
    for name, label in (("profile", "profile"), ("host", "host")):
        theirs = sorted({f[name] for f in base_facts})
        if theirs != [new_facts[name]]:
            out.append(
                f"{label}: baseline {' / '.join(_shown(t) for t in theirs[:5])}, this run {_shown(new_facts[name])}"
            )
    keys = sorted({k for f in base_facts for k in f["versions"]} | set(new_facts["versions"]))
    for k in keys:
        theirs = sorted({str(f["versions"].get(k)) for f in base_facts})
        if theirs != [str(new_facts["versions"].get(k))]:
            out.append(
                f"{_shown(k)}: baseline {' / '.join(_shown(t) for t in theirs[:5])}, "
                f"this run {_shown(new_facts['versions'].get(k))}"
            )
    cons = sorted({str(f.get("constraints")) for f in base_facts})
    if cons != [str(new_facts.get("constraints"))]:
        out.append("constraints file: the installed versions were pinned differently")
    out += params_differ(base_facts, new_facts)
    return out


def params_differ(base_facts: list[dict], new_facts: dict) -> list[str]:
    """Cases run on both sides with different resolved parameters: a different workload."""
    out = []
    new_params = new_facts.get("params") or {}
    for case, mine in sorted(new_params.items()):
        for f in base_facts:
            theirs = (f.get("params") or {}).get(case)
            if theirs is None or theirs == mine:
                continue
            keys = sorted(set(theirs) | set(mine), key=str)
            diff = [
                f"{_shown(k)}: baseline {_shown(repr(theirs.get(k)))}, this run {_shown(repr(mine.get(k)))}"
                for k in keys
                if theirs.get(k) != mine.get(k)
            ]
            out.append(f"parameters of {_shown(case)} differ ({'; '.join(diff[:3])})")
            break
    return out


@dataclass
class Comparison:
    rows: list[dict]
    baseline: str  # how the baseline was made, in words
    current: str
    warnings: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # pooled runs left out, with why
    verdict_changes: list[dict] = field(default_factory=list)  # harness.verdict.verdicts_json.changes
    verdicts_from: list[str] = field(default_factory=list)  # where each side's verdicts come from

    def counts(self) -> dict[str, int]:
        return {s: sum(r["status"] == s for r in self.rows) for s in ORDER}

    @property
    def exit_code(self) -> int:
        """1 when a metric regressed or a claim's verdict no longer holds."""
        regressed = any(c["kind"] == verdicts.REGRESSED for c in self.verdict_changes)
        return 1 if regressed or any(r["regression"] for r in self.rows) else 0

    def header(self) -> str:
        c = self.counts()
        return (
            f"{c['regression']} regression(s), {c['improvement']} improvement(s), {c['unstable']} unstable, "
            f"{c['changed'] + c['within noise'] + c['no change']} unchanged or within noise, "
            f"{c['missing']} missing, {c['new']} new"
        )

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline,
            "current": self.current,
            "warnings": self.warnings,
            "left_out": self.left_out,
            "counts": self.counts(),
            "exit_code": self.exit_code,
            "verdict_changes": self.verdict_changes,
            "verdicts_from": self.verdicts_from,
            "rows": self.rows,
        }

    def verdict_lines(self) -> list[str]:
        """The claims whose verdict changed, one line each (regressions first)."""
        if not self.verdict_changes:
            return ["no claim's verdict changed"]
        out = [f"{len(self.verdict_changes)} claim(s) changed verdict:"]
        for c in self.verdict_changes:
            checks = "; ".join(
                f"{k['suite']}/{k['case']} {k['metric']}: {k['before']} -> {k['after']}" for k in c["checks"][:3]
            )
            out.append(f"  {c['id']}: {c['before']} -> {c['after']} ({c['kind']})" + (f" [{checks}]" if checks else ""))
        return out


def changed_only(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] not in ("no change", "within noise")]


COLUMNS = ("suite", "case", "metric", "baseline", "current", "change", "limit", "p", "assessment")


def format_text(c: Comparison, rows: list[dict]) -> str:
    lines = [f"baseline: {c.baseline}", f"this run: {c.current}"] + [f"warning: {w}" for w in c.warnings]
    lines += [f"left out of the pool: {x}" for x in c.left_out] + [f"verdicts: {x}" for x in c.verdicts_from]
    lines += c.verdict_lines()
    lines = [for_terminal(line, LINE) for line in lines]  # paths and facts from the folders: one line each
    lines += [c.header(), ""]
    lines.append(
        table(list(COLUMNS), [[r[k] for k in COLUMNS] for r in rows], max_width=110) if rows else "(no rows to show)"
    )
    return "\n".join(lines)


def _md(v) -> str:
    """A cell or list item of Markdown: no link, image, HTML or table cell can be made of it."""
    return for_markdown(v, TEXT)


def format_markdown(c: Comparison, rows: list[dict]) -> str:
    lines = [f"### {c.header()}", "", f"- baseline: {_md(c.baseline)}", f"- this run: {_md(c.current)}"]
    lines += [f"- **warning**: {_md(w)}" for w in c.warnings] + [
        f"- left out of the pool: {_md(x)}" for x in c.left_out
    ]
    lines += [f"- {_md(line.strip())}" for line in c.verdict_lines()]
    lines.append("")
    if rows:
        lines.append("| " + " | ".join(COLUMNS) + " |")
        lines.append("|" + "---|" * len(COLUMNS))
        for r in rows:
            cells = [_md(r[k]) for k in COLUMNS]
            if r["regression"]:
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append("(no rows to show)")
    return "\n".join(lines) + "\n"


def format_json(c: Comparison, rows: list[dict]) -> str:
    """The comparison as JSON: every string bounded, every character outside ASCII
    (controls and lone surrogates included) written as a JSON escape."""
    return json.dumps(bound_strings({**c.to_json(), "rows": rows}, TEXT), indent=1, allow_nan=False, ensure_ascii=True)


def refuse_same_run(base, new, what: str = "BASELINE") -> None:
    """A run compared with itself shows no change whatever it measured: bad input."""
    same = base.run_dir.resolve() == new.run_dir.resolve()
    base_id, new_id = base.manifest.get("run_id"), new.manifest.get("run_id")
    if same or (isinstance(base_id, str) and base_id and base_id == new_id):
        how = "is the same folder as" if same else f"holds the same run ({for_terminal(new_id, 80)}) as"
        raise BadInput(
            f"{what} {base.run_dir} {how} {new.run_dir}: a run compared with itself shows no change; "
            f"give an earlier run (or the folder of earlier runs)"
        )


def refuse_empty(run, what: str):
    """A results folder with no records (a run refused or stopped before its first case)
    has nothing to compare: one line, not a comparison of nothing."""
    if not run.records:
        raise BadInput(
            f"{what} {run.run_dir}: holds no records (a run refused or stopped before its first case); "
            f"give a results folder of a run that measured something"
        )
    return run


def compare_dirs(
    baseline, current, *, last: int = POOL, factor: float = FACTOR, allow_mismatch: bool = False, log=None
) -> Comparison:
    """BASELINE: one results folder, or a folder of them (pooled: the last `last` runs
    before CURRENT that match its profile, host and key versions; the others are left out
    and named)."""
    if not 1 <= last <= 1000:
        raise BadInput(f"--last must be between 1 and 1000, got {last}")
    if factor < 0 or not math.isfinite(factor):
        raise BadInput(f"--factor must be a non-negative fraction (0.05 = 5%), got {factor}")
    new = refuse_empty(load_run(Path(current)), "RUN_DIR")
    nf = comparison_facts(new)
    baseline = Path(baseline)
    left_out: list[str] = []
    if (baseline / MANIFEST).exists():
        pool = [refuse_empty(load_run(baseline), "BASELINE")]
        refuse_same_run(pool[0], new)
        what = f"{baseline} (one run, {pool[0].manifest.profile or '?'} profile)"
    else:
        pool, left_out = _pool(baseline, new, nf, last, allow_mismatch, log)
        what = (
            f"median of the last {len(pool)} run(s) under {baseline} "
            f"({pool[0].run_dir.name} .. {pool[-1].run_dir.name})"
        )
    warnings = []
    diff = check_sides([comparison_facts(r) for r in pool], nf)
    if diff:
        if not allow_mismatch:
            raise BadInput(
                f"the sides are not comparable: {'; '.join(diff)}; compare runs of the same profile, "
                f"host and versions, or give --allow-mismatch to compare anyway"
            )
        warnings += [f"compared anyway (--allow-mismatch): {d}" for d in diff]
    analyses = [analyze(r) for r in pool]
    a_new = analyze(new)
    base = baseline_of(analyses)
    common = set(base) & {(m.suite, m.case, m.metric) for m in a_new.metrics}
    if not common:
        raise BadInput(
            f"no metric in common between the baseline ({len(base)} metrics) and {new.run_dir} "
            f"({len(a_new.metrics)} metrics); compare runs of the same suites and cases"
        )
    rows = compare_baseline(base, a_new, factor)
    before, before_from = verdicts.load(pool[-1].run_dir)
    after, after_from = verdicts.load(new.run_dir)
    return Comparison(
        rows,
        what,
        f"{new.run_dir} ({nf['profile']} profile, revision {nf['revision'][:10]})",
        warnings,
        left_out,
        verdicts.changes(before, after),
        [
            f"baseline {pool[-1].run_dir.name}: {before_from}",
            f"this run: {after_from}",
            *filter(None, [verdicts.ledger_note(before, after)]),
        ],
    )


def _pool(baseline: Path, new, nf: dict, last: int, allow_mismatch: bool, log) -> tuple[list, list[str]]:
    """The last `last` runs under `baseline` before `new` that match it, and the ones left out (named)."""
    left_out: list[str] = []
    runs = [
        r
        for r in load_runs(find_runs(baseline, log), log)
        if r.run_dir.resolve() != new.run_dir.resolve() and comparison_facts(r)["run_id"] != nf["run_id"]
    ]
    started = nf["started"]
    if started is not None:
        runs = [r for r in runs if (comparison_facts(r)["started"] or 0) < started]
    matching = []
    for r in runs:
        diff = check_sides([comparison_facts(r)], nf)
        if diff and not allow_mismatch:
            left_out.append(f"{_shown(r.run_dir.name)}: {diff[0]}")
        else:
            matching.append(r)
    if not runs:
        raise BadInput(f"{baseline}: no earlier results folder to compare with")
    if not matching:
        raise BadInput(
            f"{baseline}: none of its {len(runs)} earlier runs matches this run "
            f"({left_out[-1]}); compare like with like, or give --allow-mismatch"
        )
    return matching[-last:], left_out[-last:]
