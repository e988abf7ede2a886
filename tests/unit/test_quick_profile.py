"""The `quick` profile (issue 64): `make reproduce PROFILE=quick` runs every suite at its
smallest sizes, for feedback in minutes. Every suite has one, it runs at least one case of
every suite, it never does more than the suite's local profile, what it leaves out it names
with how to run it, and it never runs part of a claim that the local profile runs whole (a
claim's verdict is taken over the checks that ran, so a check left out could turn the
claim's verdict into `reproduced`)."""

from __future__ import annotations

from harness.model import ledger_parse, spec
from harness.run.selection import plan

QUICK, LOCAL = "quick", "local"


def test_every_suite_has_a_quick_profile_no_larger_than_its_local_one():
    for name, s in spec.load_all_suites().items():
        assert QUICK in s.profiles, f"{name}: no quick profile"
        quick, local = s.profiles[QUICK], s.profiles[LOCAL]
        assert 1 <= quick.repetitions <= local.repetitions, name
        assert quick.description.strip(), name
        assert not quick.skipped_fails, f"{name}: the quick profile is a local one, a skip must not fail it"
        assert all(t.reason for t in quick.thresholds), name


def test_the_quick_profile_plans_every_suite_with_fewer_case_repetitions_than_local():
    quick = {p.suite.name: p for p in plan([], profile=QUICK, log=lambda m: None)}
    local = {p.suite.name: p for p in plan([], profile=LOCAL, log=lambda m: None)}
    assert set(quick) == set(spec.load_all_suites()), "a plain quick run must run every suite"
    for name, p in quick.items():
        assert p.run.cases, f"{name}: the quick profile runs no case"
        runs = sum(p.reps(c.name) for c in p.run.cases)
        assert runs <= sum(local[name].reps(c.name) for c in local[name].run.cases), name


def test_what_the_quick_profile_leaves_out_is_named_with_how_to_run_it():
    for name, s in spec.load_all_suites().items():
        quick = s.profiles[QUICK]
        if quick.cases is None:
            continue
        assert quick.cases, name
        left = [c.name for c in s.cases if c.name not in quick.cases]
        for case in left:
            assert case in quick.leaves_out, f"{name}: quick leaves out {case} without naming it in leaves_out"
        if left:
            assert "harness run" in quick.leaves_out, f"{name}: leaves_out must say how to run what it leaves out"


def _checked_cases(plans) -> set[tuple[str, str]]:
    return {(p.suite.name, c.name) for p in plans for c in p.run.cases}


def test_the_quick_profile_runs_each_claim_whole_or_not_at_all():
    """A claim's verdict is the first of its checks' verdicts in precedence over the checks
    that ran: where quick ran only some of the checks the local profile runs, a left-out
    `not comparable here` or `inconclusive` check would leave the claim `reproduced`."""
    quick = _checked_cases(plan([], profile=QUICK, log=lambda m: None))
    local = _checked_cases(plan([], profile=LOCAL, log=lambda m: None))
    for claim in ledger_parse.load_claims():
        cases = {(chk.suite, chk.case) for chk in claim.checks}
        run_here, run_there = cases & quick, cases & local
        assert run_here <= run_there, f"{claim.id}: quick runs {sorted(run_here - run_there)}, which local does not"
        if run_here:
            assert run_here == run_there, (
                f"{claim.id}: quick runs {sorted(run_here)} but leaves out {sorted(run_there - run_here)}, "
                f"which the local profile runs; run them too, or none of the claim's cases"
            )
