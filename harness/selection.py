"""Which cases a run runs: `harness run SUITE`, `SUITE/CASE`, `-k PATTERN`, and the plan
that `--dry-run` prints without starting anything.

A selection narrows the suites before anything starts: unselected cases and their
thresholds are left out of the run (their claims say "not run"), so a run of one case
never reports the others' thresholds as missing.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path
from typing import Callable

from harness import spec
from harness.errors import BadInput, did_you_mean


def split_names(names: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """'suite' / 'suite/case' / a spec path -> (suite names or paths, {suite: [cases]})."""
    known = spec.load_all_suites()
    suites, cases = [], {}
    for n in names:
        head, sep, tail = n.partition("/")
        if sep and head in known and not n.endswith((".yaml", ".yml")) and not Path(n).exists():
            if not tail:
                raise BadInput(f"{n!r}: no case after '/'; give SUITE/CASE, e.g. redis-cluster/acl")
            if head not in suites:
                suites.append(head)
            if head not in cases or cases[head] is not None:
                cases.setdefault(head, []).append(tail)
        else:
            if not cases.get(n):  # not already there through SUITE/CASE; named twice: select_suites says so
                suites.append(n)
            cases[n] = None  # the whole suite: a SUITE/CASE beside it narrows nothing
    return suites, {k: v for k, v in cases.items() if v is not None}


def matches(pattern: str, suite: str, case: str) -> bool:
    """-k: a glob (with * ? [) or else a case-insensitive substring of 'suite/case'."""
    key = f"{suite}/{case}".lower()
    p = pattern.lower()
    if any(ch in p for ch in "*?["):
        return fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(case.lower(), p)
    return p in key


def narrow(s: spec.Suite, keep: list[str]) -> spec.Suite:
    """The suite with only `keep` cases (and only their thresholds in every profile)."""
    profiles = {name: dataclasses.replace(p, thresholds=[t for t in p.thresholds if t.case in keep])
                for name, p in s.profiles.items()}
    return dataclasses.replace(s, cases=[c for c in s.cases if c.name in keep], profiles=profiles)


def choose(names: list[str], profile: str, keyword: str | None, log: Callable[[str], None]) -> list[spec.Suite]:
    from harness.runner import choose_suites

    suite_names, wanted = split_names(list(names))
    suites = choose_suites(suite_names, profile, log)
    out = []
    for s in suites:
        keep = [c.name for c in s.cases]
        if s.name in wanted:
            for c in wanted[s.name]:
                if c not in keep:
                    raise BadInput(f"suite {s.name!r} has no case {c!r}{did_you_mean(c, keep)}; "
                                   f"its cases: {', '.join(keep)}")
            keep = [c for c in keep if c in wanted[s.name]]
        if keyword:
            keep = [c for c in keep if matches(keyword, s.name, c)]
        if keep:
            out.append(s if len(keep) == len(s.cases) else narrow(s, keep))
    if not out:
        raise BadInput(f"-k {keyword!r} selects no case; 'harness list' shows the suites and cases")
    return out


def plan_lines(plans, *, profile: str, target: str, base_port: int, results_dir: Path, monitoring: bool) -> list[str]:
    """What `harness run --dry-run` prints: suites, cases, repetitions, parameters, target."""
    needs_cluster = any(p.suite.target == "cluster" for p in plans)
    if not needs_cluster:
        where = "no cluster (none of these suites needs one)"
    elif target == "local":
        where = (f"local Redis Cluster on 127.0.0.1:{base_port}-{base_port + 5} "
                 f"(a healthy one already there is used, else one is started and stopped)")
    else:
        where = f"the inventory {target}"
    total = sum(len(p.suite.cases) * p.repetitions for p in plans)
    lines = [f"plan: {len(plans)} suite(s), {total} case repetition(s), profile {profile}",
             f"target: {where}", f"results: a new folder under {results_dir}"
             + ("; Prometheus monitoring on" if monitoring else "")]
    for p in plans:
        lines.append(f"{p.suite.name}: {p.repetitions} repetition(s) per case")
        for c in p.run.cases:
            params = ", ".join(f"{k}={v}" for k, v in c.params.items())
            lines.append(f"  - {c.name} [{c.driver}] {params}")
        for t in p.run.thresholds:
            lines.append(f"    threshold: {t.case} {t.metric} {t.text()}".rstrip())
    lines.append("dry run: nothing was started")
    return lines
