"""What a run runs: `harness run SUITE`, `SUITE/CASE`, `-k PATTERN` and `--set`, resolved
into plans (`plan()`, used by `harness run` and by `--dry-run`, which prints the plan
without starting anything).

A selection narrows the suites before anything starts: unselected cases and their
thresholds are left out of the run (their claims say "not run"), so a run of one case
never reports the others' thresholds as missing.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, cast

from harness.base.errors import BadInput, did_you_mean
from harness.base.safe_text import LINE, for_terminal
from harness.infra import inventory
from harness.model import driver_contract, ledger_parse, metric_names, packs, spec, yaml_fields

MAX_REPEAT = 1000


def split_names(names: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """'suite' / 'suite/case' / a spec path -> (suite names or paths, {suite: [cases]})."""
    known = spec.load_all_suites()
    suites: list[str] = []
    cases: dict[str, list[str] | None] = {}  # None: the whole suite
    for n in names:
        head, sep, tail = n.partition("/")
        if sep and head in known and not n.endswith((".yaml", ".yml")) and not Path(n).exists():
            if not tail:
                raise BadInput(f"{n!r}: no case after '/'; give SUITE/CASE, e.g. redis-cluster/acl")
            if head not in suites:
                suites.append(head)
            if head not in cases or cases[head] is not None:
                cast(list[str], cases.setdefault(head, [])).append(tail)  # not None: the test above
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
    profiles = {
        name: dataclasses.replace(p, thresholds=[t for t in p.thresholds if t.case in keep])
        for name, p in s.profiles.items()
    }
    return dataclasses.replace(s, cases=[c for c in s.cases if c.name in keep], profiles=profiles)


def profile_cases(s: spec.Suite, profile: str, keep: list[str], log: Callable[[str], None]) -> list[str]:
    """The cases a run of the whole suite runs with `profile` (its `cases`, where it names them)."""
    prof = s.profiles.get(profile)
    if prof is None or prof.cases is None:
        return keep
    left = [c for c in keep if c not in prof.cases]
    if left:
        log(
            f"note: profile {profile} of {s.name} leaves out {', '.join(left)} ({prof.leaves_out.strip()}); "
            f"select {s.name}/{left[0]} to run it"
        )
    return [c for c in keep if c in prof.cases]


def choose(
    names: list[str], profile: str, keyword: str | None, log: Callable[[str], None], notes: list[str] | None = None
) -> list[spec.Suite]:
    """The suites (narrowed to the selected cases) that SUITE, SUITE/CASE and -k select;
    what a profile leaves out goes to `notes` (to `log` without)."""
    suite_names, wanted = split_names(list(names))
    suites = choose_suites(suite_names, profile, log)
    out = []
    for s in suites:
        keep = [c.name for c in s.cases]
        if s.name in wanted:
            for c in wanted[s.name]:
                if c not in keep:
                    raise BadInput(
                        f"suite {s.name!r} has no case {c!r}{did_you_mean(c, keep)}; its cases: {', '.join(keep)}"
                    )
            keep = [c for c in keep if c in wanted[s.name]]
        else:
            keep = profile_cases(s, profile, keep, log if notes is None else notes.append)
        if keyword:
            keep = [c for c in keep if matches(keyword, s.name, c)]
        if keep:
            out.append(s if len(keep) == len(s.cases) else narrow(s, keep))
    if not out:
        raise BadInput(f"-k {keyword!r} selects no case; 'harness list' shows the suites and cases")
    return out


def parse_overrides(items: list[str]) -> dict[str, dict]:
    """--set CASE.PARAM=VALUE (VALUE read as YAML, aliases refused) -> {case: {param: value}}."""
    out: dict[str, dict] = {}
    for item in items:
        key, sep, value = item.partition("=")
        case, dot, param = key.partition(".")
        if not sep or not dot or not case or not param:
            raise BadInput(f"--set {item!r}: expected CASE.PARAM=VALUE, e.g. --set semantic.dataset=pairs.tsv")
        if value.strip() == "":
            raise BadInput(
                f"--set {item!r}: the value is empty; give one after '=' (quote it for an empty string: '\"\"')"
            )
        try:
            parsed = yaml_fields.parse_yaml_text(value, f"--set {key}")
        except yaml_fields.AliasRefused:
            raise
        except BadInput:  # not YAML: the text as it is
            parsed = value
        out.setdefault(case, {})[param] = parsed
    return out


def check_set(case: spec.Case, given: dict) -> None:
    """Each --set value checked on its own first, so that its error names --set (not the spec
    file it overrides)."""
    drv = driver_contract.get(case.driver)
    for param, value in given.items():
        where = f"--set {case.name}.{param}"
        if param not in drv.params:
            known = ", ".join(sorted(drv.params)) or "none"
            raise BadInput(
                f"{where}: case {case.name!r} (driver {drv.name!r}) has no parameter {param!r}"
                f"{did_you_mean(param, drv.params)}; its parameters: {known}"
            )
        drv.params[param].check(where, value)


@dataclass
class Plan:
    suite: spec.Suite
    run: spec.SuiteRun

    @property
    def repetitions(self) -> int:
        return self.run.repetitions

    def reps(self, case: str) -> int:
        """The repetitions of one case (fewer where the profile repeats it less)."""
        return next((self.run.reps(c) for c in self.run.cases if c.name == case), self.run.repetitions)

    def params(self, case: str) -> dict:
        return next(c.params for c in self.run.cases if c.name == case)


def choose_suites(names: list[str], profile: str, log: Callable[[str], None]) -> list[spec.Suite]:
    """Named suites; with none named, every suite that has the profile (saying which not)."""
    suites = spec.select_suites(names)
    if names:
        return suites
    having = [s for s in suites if profile in s.profiles]
    left = [s.name for s in suites if profile not in s.profiles]
    if not having:
        raise BadInput(
            f"no suite has a profile {profile!r}; profiles: "
            f"{', '.join(sorted({p for s in suites for p in s.profiles}))}"
        )
    if left:
        log(f"profile {profile}: not in {', '.join(left)}; running {', '.join(s.name for s in having)}")
    return having


def make_plans(
    suites: list[spec.Suite],
    profile: str,
    repeat: int | None,
    overrides: dict[str, dict],
    pack: packs.Pack | None = None,
) -> list[Plan]:
    """Check everything that can be checked before anything starts. A claim pack's claims
    are the ledger, and its parameters (the source's setup) come before the --set ones."""
    plans, used = [], set()
    claims = pack.claims() if pack is not None else ledger_parse.load_claims()
    metric_names.refuse_undeclared({s.name: s for s in suites}, claims)  # a misspelt metric, before anything runs
    fixed = ledger_parse.fixed_params(claims)
    for s in suites:
        prof = s.profile(profile)
        params = {}
        for case in s.cases:
            if case.name in overrides:
                used.add(case.name)
                check_set(case, overrides[case.name])
            own = fixed.get((s.name, case.name), {})
            for param in own:
                if param in overrides.get(case.name, {}):
                    raise BadInput(
                        f"--set {case.name}.{param}: fixed by the ledger (claim {own[param][1]}'s stand-in "
                        f"runs with {param}={own[param][0]!r}); a weaker stand-in would make a broken "
                        f"mechanism look attributable, so the ledger is the one place to change it"
                    )
            setup = pack.params.get(s.name, {}).get(case.name, {}) if pack is not None else {}
            given = {**setup, **overrides.get(case.name, {}), **{k: v for k, (v, _) in own.items()}}
            params[case.name] = s.case_params(case, profile, given or None)
        plans.append(Plan(s, s.as_run(profile, repeat or prof.repetitions, params, repeat_given=repeat is not None)))
    unknown = set(overrides) - used
    if unknown:
        raise BadInput(f"--set names case {sorted(unknown)[0]!r}, which no selected suite has")
    return plans


def check_repeat(repeat: int | None) -> None:
    if repeat is not None and not 1 <= repeat <= MAX_REPEAT:
        raise BadInput(f"--repeat must be between 1 and {MAX_REPEAT}, got {repeat}")


def plan(
    names: list[str],
    *,
    profile: str,
    keyword: str | None = None,
    repeat: int | None = None,
    overrides: Sequence[str] = (),
    log: Callable[[str], None] = print,
    pack: packs.Pack | None = None,
) -> list[Plan]:
    """What a run runs, every parameter resolved and checked: the one planning step of
    `harness run` and `harness run --dry-run`. With a claim pack and no names, the cases its
    claims need."""
    check_repeat(repeat)
    notes: list[str] = []  # said once the plan holds: bad input stays one line
    if pack is not None and not names:
        names = pack.cases()
    plans = make_plans(
        choose(list(names), profile, keyword, log, notes), profile, repeat, parse_overrides(list(overrides)), pack
    )
    for line in notes:
        log(line)
    return plans


def loadgen_lines(target: str) -> list[str]:
    """Which machine runs which load tool, from the inventory alone (nothing is contacted)."""
    hosts = inventory.loadgen_hosts(target)
    if not hosts:
        return ["load generator: this machine (the inventory names none, or HARNESS_LOADGEN=local)"]
    if len(hosts) == 1:
        return [f"load generator: {hosts[0].label}: redis-benchmark and memtier_benchmark run there"]
    return [
        f"load generators ({len(hosts)}): {', '.join(h.label for h in hosts)}",
        f"  memtier_benchmark runs on all {len(hosts)} at once (each its share of the keys, one shared start; "
        f"their histograms merged); redis-benchmark and memtier's control run on {hosts[0].name}",
    ]


def plan_lines(plans, *, profile: str, target: str, base_port: int, results_dir: Path, monitoring: bool) -> list[str]:
    """What `harness run --dry-run` prints: suites, cases, repetitions, parameters, target."""
    needs_cluster = any(p.suite.target == "cluster" for p in plans)
    if not needs_cluster:
        where = "no cluster (none of these suites needs one)"
    elif target == "local":
        where = (
            f"local Redis Cluster on 127.0.0.1:{base_port}-{base_port + 5} "
            f"(a healthy one already there is used, else one is started and stopped)"
        )
    else:
        where = f"the inventory {target}"
    total = sum(p.reps(c.name) for p in plans for c in p.run.cases)
    lines = [f"plan: {len(plans)} suite(s), {total} case repetition(s), profile {profile}", f"target: {where}"]
    if needs_cluster and target != "local":
        lines += loadgen_lines(target)
    lines.append(f"results: a new folder under {results_dir}" + ("; Prometheus monitoring on" if monitoring else ""))
    for p in plans:
        lines.append(f"{p.suite.name}: {p.repetitions} repetition(s) per case")
        for c in p.run.cases:
            params = ", ".join(f"{k}={v}" for k, v in c.params.items())
            own = f" ({c.repetitions} repetition(s))" if c.repetitions else ""
            lines.append(f"  - {c.name} [{c.driver}]{own} {params}")
        for t in p.run.thresholds:
            lines.append(f"    threshold: {t.case} {t.metric} {t.text()}".rstrip())
    lines.append("dry run: nothing was started")
    # --results-dir, --target, --set values are the user's text: one line each, escapes shown
    return [for_terminal(line, LINE) for line in lines]
