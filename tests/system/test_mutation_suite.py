"""The mutation suite (tests/mutations): code mutations of mechanisms and instruments, each
run in a temporary copy of the checkout, must get the verdict their kind needs from the ledger.

By default only the fast mutations run (`make test`); MUTATIONS=all runs every one
(`make mutations`). The static tests keep the catalog honest without running anything: names
unique, kinds known, every edit still fits the checkout's file (a stale mutation fails here
at once), every check a real ledger check, and every claim broken at least twice, two ways.

Ports: each mutation's run uses the worker's block of 9600-9899 (tests/mutations/framework.py).
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from dataclasses import replace

import pytest

from tests import REPO, TESTS
from tests.mutations import catalog, framework
from tests.mutations.framework import KINDS, SUCCESS, Mutation, judge, run_mutation, stale_edits, worker_ports

MUTATIONS = catalog.load()
RUN_ALL = os.environ.get("MUTATIONS", "") == "all"


def _ledger_checks() -> set[str]:
    from harness.model.ledger_parse import load_claims

    return {f"{chk.suite}/{chk.case} {chk.metric}" for c in load_claims() for chk in c.checks}


def test_the_catalog_has_mutations_with_unique_names_and_known_kinds():
    assert MUTATIONS, "no tests/mutations/catalog_*.py defines MUTATIONS"
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for m in MUTATIONS:
        assert isinstance(m, Mutation), m
        assert m.kind in KINDS, f"{m.name}: kind {m.kind!r} is none of {KINDS}"
        assert m.name.startswith(m.suite + "/"), f"{m.name}: name it {m.suite}/<short-name> (its run is {m.run})"
        assert m.what.strip() and m.edits and m.checks and m.claim, (
            f"{m.name}: what, edits, checks and claim are needed"
        )
        assert m.run.count("/") == 1 and all(p for p in m.run.split("/")), f"{m.name}: run {m.run!r} is not SUITE/CASE"
        assert isinstance(m.edits, tuple) and isinstance(m.checks, tuple) and isinstance(m.sets, tuple), m.name


@pytest.mark.parametrize("m", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_every_edit_still_fits_the_checkout(m):
    """A stale mutation (its old text changed or gone) fails here without running anything."""
    assert not stale_edits(m), stale_edits(m)
    for e in m.edits:
        assert e.old != e.new, f"{m.name}: an edit of {e.path} changes nothing"


def test_a_mutant_that_would_stop_at_its_import_or_not_compile_is_stale():
    """A mutant that imports a module that has moved (the nine dependent mutations after the
    suites were split, caught only by a full `make mutations`: their copies stopped at the
    import, so the run tested nothing) or that does not compile is stale, found without
    running anything."""
    recount = "harness/experiments/kv_trace/recount.py"
    anchor = "    mx = _rate(requests, bs, [Forever()], total)\n"

    def mutant(new):
        return Mutation(
            "kv-trace/x", "C1", "dependent", "x", (framework.Edit(recount, anchor, new),), "kv-trace/prefix-cache", ()
        )

    gone = mutant("    from harness.experiments.kv_trace import trace as _tr  # mutation\n" + anchor)
    assert any("harness.experiments.kv_trace has no trace" in x for x in stale_edits(gone)), stale_edits(gone)
    no_module = mutant("    from harness.experiments.kv_traces import recount as _r\n" + anchor)
    assert any("module harness.experiments.kv_traces does not exist" in x for x in stale_edits(no_module))
    broken = mutant("    mx = (\n")
    assert any("does not compile" in x for x in stale_edits(broken)), stale_edits(broken)
    moved = mutant("    from harness.mechanisms.kv_blocks import trace as _tr  # mutation\n" + anchor)
    assert stale_edits(moved) == []


def test_every_check_a_mutation_names_is_a_ledger_check_of_its_claim_and_run():
    """... of the seed's ledger, or of the shipped pack the mutation names (its `pack`)."""
    from harness.model import packs

    known = _ledger_checks()
    for m in MUTATIONS:
        for chk in m.checks:
            assert m.pack or chk in known, f"{m.name}: {chk!r} is not a check of harness/experiments/claims.yaml"
            assert chk.split(" ", 1)[0] == m.run, f"{m.name}: {chk!r} is not judged by its run {m.run}"
    from harness.model.ledger_parse import load_claims

    by_claim = {c.id: {f"{k.suite}/{k.case} {k.metric}" for k in c.checks} for c in load_claims()}
    for m in MUTATIONS:
        claims = (
            by_claim
            if not m.pack
            else {c.id: {f"{k.suite}/{k.case} {k.metric}" for k in c.checks} for c in packs.load(m.pack).claims()}
        )
        assert set(m.checks) <= claims.get(m.claim, set()), f"{m.name}: not all of {m.checks} belong to {m.claim}"


def test_every_claim_is_broken_at_least_twice_two_ways():
    kinds = defaultdict(list)
    for m in MUTATIONS:
        kinds[m.claim].append(m.kind)
    thin = {c: k for c, k in kinds.items() if len(k) < 2 or len(set(k)) < 2}
    assert not thin, f"claims with fewer than two mutations of two kinds: {thin}"


def evidence_without_mutations(claims, mutations) -> list[str]:
    """Issue 52: every check of an absence has an `unexercised` mutation, every reference that
    names a module a `dependent` one, and every stand-in a `weakened` one (each naming the check)."""
    by_kind: dict[str, set[str]] = defaultdict(set)
    for m in mutations:
        by_kind[m.kind].update(m.checks)
    out = []
    for c in claims:
        for k in c.checks:
            name = f"{k.suite}/{k.case} {k.metric}"
            if k.judges_an_absence and name not in by_kind["unexercised"]:
                out.append(f"{c.id} {name}: a check of an absence with no `unexercised` mutation")
            if k.reference is not None and k.reference.module and name not in by_kind["dependent"]:
                out.append(f"{c.id} {name}: a reference ({k.reference.module}) with no `dependent` mutation")
            if k.stand_ins and name not in by_kind["weakened"]:
                out.append(f"{c.id} {name}: a stand-in with no `weakened` mutation")
    return out


def test_every_absence_reference_and_stand_in_has_its_mutation():
    from harness.model.ledger_parse import load_claims

    missing = evidence_without_mutations(load_claims(), MUTATIONS)
    assert not missing, "\n".join(missing)


def test_the_evidence_mutation_rule_could_fail():
    """The check above could fail: a check of an absence, a reference and a stand-in with no
    mutation are each named; with theirs they are not."""
    from harness.model import ledger

    absence = ledger.ClaimCheck("s", "c", "lost", "<=", 0.0)
    ref = ledger.ClaimCheck(
        "s", "c", "rate", ">", 1.0, reference=ledger.Reference("r", 0.1, "t", "harness.a", ("harness.b",))
    )
    stand = ledger.ClaimCheck(
        "s", "c", "gain", ">", 1.0, controls=[ledger.Control("x", "<", "t", 1.0, kind=ledger.STAND_IN)]
    )
    claims = [ledger.Claim("C0", "", "t", [absence, ref, stand])]
    assert len(evidence_without_mutations(claims, [])) == 3
    mine = [
        Mutation("s/a", "C0", "unexercised", "w", (), "s/c", ("s/c lost",)),
        Mutation("s/b", "C0", "dependent", "w", (), "s/c", ("s/c rate",)),
        Mutation("s/d", "C0", "weakened", "w", (), "s/c", ("s/c gain",)),
    ]
    assert evidence_without_mutations(claims, mine) == []
    assert len(evidence_without_mutations(claims, [replace(mine[0], kind="broken")] + mine[1:])) == 1


def test_the_kind_rule_is_what_the_api_says():
    """judge() on made-up verdicts: each kind refuses what it must refuse, and says why."""

    def mut(kind):
        return Mutation("s/x", "C0", kind, "w", (), "s/c", ("s/c m",))

    for kind in ("broken", "stand-in", "weakened"):
        for v in SUCCESS:
            (msg,) = judge(mut(kind), {"s/c m": (v, "because")})
            assert "s/x" in msg and "s/c m" in msg and v in msg and "because" in msg
        assert judge(mut(kind), {"s/c m": ("not attributable", "")}) == []
    for kind in ("blinded", "unexercised", "dependent"):
        assert judge(mut(kind), {"s/c m": ("inconclusive", "")}) == []
        assert judge(mut(kind), {"s/c m": ("not attributable", "")})
        assert judge(mut(kind), {"s/c m": ("reproduced", "")})
    assert judge(mut("improved"), {"s/c m": ("exceeded", "")}) == []
    assert judge(mut("improved"), {"s/c m": ("not reproduced", "")})
    assert judge(mut("broken"), {}), "a check without a verdict must fail"


def test_the_worker_port_blocks_stay_in_the_suite_range():
    blocks = [worker_ports(w) for w in ("", "gw0", "gw1", "gw2")]
    first = framework.PORT_FIRST  # 9600 unless MUTATIONS_PORT_FIRST moves the range
    assert blocks[0] == blocks[1] == (first, first + 50, first + 60)
    assert [b[0] for b in blocks[1:]] == [first, first + 100, first + 200]
    assert all(first <= p <= first + 299 for b in blocks for p in b)
    with pytest.raises(RuntimeError):
        worker_ports("gw3")


def _selected(m: Mutation):
    marks = []
    if not (m.fast or RUN_ALL):
        marks.append(pytest.mark.skip(reason="not a fast mutation: `make mutations` (MUTATIONS=all) runs it"))
    if m.xfail_reason:
        marks.append(pytest.mark.xfail(reason=m.xfail_reason, strict=m.xfail_strict))
    return pytest.param(m, id=m.name, marks=marks)


@pytest.mark.parametrize("m", [_selected(m) for m in MUTATIONS])
def test_the_ledger_catches_the_mutation(m):
    """Run the mutated copy's case; every check it names gets a verdict its kind allows."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed (apt-get install redis-server redis-tools)")
    assert not stale_edits(m), stale_edits(m)
    out = run_mutation(m)
    if out.skipped:
        pytest.skip(f"{m.run} is skipped here: {out.skipped}")
    assert not out.error, f"{m.name}: {out.error}"
    failures = out.failures()
    assert not failures, "\n".join(failures)


def test_harness_report_writes_the_verdicts_the_analysis_gives(tmp_path, capsys):
    """verdicts.json (what the mutation suite reads) is written by every publish - `harness run`
    and `harness report` - and says what the analysis of the folder says."""
    import json

    from harness.cli import main
    from harness.model.stored_run import load_run
    from harness.verdict.analysis import analyze

    run_dir = tmp_path / "stored"
    shutil.copytree(TESTS / "fixtures" / "results-v2" / "run", run_dir)
    assert not (run_dir / "verdicts.json").exists()
    with pytest.raises(SystemExit) as e:
        main(["report", str(run_dir)])
    assert e.value.code == 0, capsys.readouterr().err
    doc = json.loads((run_dir / "verdicts.json").read_text())
    a = analyze(load_run(run_dir))
    assert doc["run_id"] == "20261202-004610-629c8a" and doc["exit_code"] == a.exit_code
    assert [(c["id"], c["verdict"]) for c in doc["claims"]] == [(c.id, str(c.outcome)) for c in a.claims]
    checks = [
        (k["suite"], k["case"], k["metric"], k["verdict"], k["reason"]) for c in doc["claims"] for k in c["checks"]
    ]
    assert checks == [
        (k.check.suite, k.check.case, k.check.metric, str(k.outcome), k.reason) for c in a.claims for k in c.checks
    ]
    assert any(k[3] for k in checks), "the fixture's ledger has checks with verdicts"


def test_processes_a_run_left_in_its_copy_are_stopped_and_no_others(tmp_path):
    """A run cut short leaves servers running in its copy's folders: those are stopped; a
    process in another folder (even one whose command line names the copy) is left alone."""
    import subprocess
    import sys

    from tests.mutations.framework import stop_leftovers

    copy, other = tmp_path / "copy", tmp_path / "other"
    copy.mkdir()
    other.mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(30)"]
    mine = subprocess.Popen(sleep + [str(other / "redis.conf")], cwd=copy)  # a server started in the copy
    theirs = subprocess.Popen(sleep + [str(copy / "redis.conf")], cwd=other)  # names the copy, runs elsewhere
    try:
        assert stop_leftovers(copy) == [mine.pid]
        mine.wait(timeout=10)  # ended well before its 30 s (its status was reaped by the stop: ours is its parent)
        assert theirs.poll() is None
    finally:
        for p in (mine, theirs):
            p.kill()
            p.wait(timeout=10)


def test_a_copy_builds_into_its_own_cache_never_the_checkouts(tmp_path):
    """The copy's .harness/cache is a folder of links to the checkout's files: a file a mutant
    builds anew (written and renamed into place, as the cache does) stays in the copy."""
    from tests.mutations.framework import link_tree

    src = tmp_path / "checkout-cache"
    (src / "models").mkdir(parents=True)
    (src / "models" / "a.onnx").write_bytes(b"built by the checkout")
    dest = tmp_path / "copy" / "cache"
    link_tree(src, dest)
    assert (dest / "models").is_dir() and not (dest / "models").is_symlink()
    assert (dest / "models" / "a.onnx").read_bytes() == b"built by the checkout"
    tmp = dest / "models" / "a.onnx.tmp"
    tmp.write_bytes(b"built by a mutant")
    os.replace(tmp, dest / "models" / "a.onnx")
    (dest / "models" / "b.onnx").write_bytes(b"new")
    assert (src / "models" / "a.onnx").read_bytes() == b"built by the checkout"
    assert sorted(p.name for p in (src / "models").iterdir()) == ["a.onnx"]


def test_the_documented_commands_list_the_mutations_and_make_runs_them_all(tmp_path):
    """README: `make mutations` runs every mutation (MUTATIONS=all, on the test workers) and
    `python -m tests.mutations.run --list` lists them; `python -m tests.ledger_table RUN --write
    docs/ledger.md` writes the ledger's table (here without a run: no verdicts)."""
    import subprocess
    import sys

    from tests.mutations.catalog import load

    root = REPO
    dry = subprocess.run(["make", "-n", "-C", str(root), "mutations"], capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert (
        "MUTATIONS=all" in dry.stdout and "tests/system/test_mutation_suite.py" in dry.stdout and " -n " in dry.stdout
    )
    listed = subprocess.run(
        [sys.executable, "-m", "tests.mutations.run", "--list"], capture_output=True, text=True, timeout=60, cwd=root
    )
    assert listed.returncode == 0, listed.stderr
    assert all(m.name in listed.stdout for m in load())
    page = tmp_path / "ledger.md"
    out = subprocess.run(
        [sys.executable, "-m", "tests.ledger_table", "--write", str(page)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
    )
    assert out.returncode == 0, out.stderr
    text = page.read_text()
    assert (
        "| claim | check | observed | exercised (a check of an absence) | reference |" in text
        and "no run (verdicts not filled in)" in text
    )
    assert "prompt-cas/cas-applies-every-write (broken)" in text
