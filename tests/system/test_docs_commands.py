"""Every command the docs show is run by a test or by CI.

The commands are read from the shell blocks of README.md, docs/*.md, each suite's README and
each shipped claim pack's README. Each `harness run` one (without a placeholder) is run here with --dry-run, so a
suite, case, profile or parameter the docs name that no longer exists fails this test; the
others must match an entry of RUN_BY, which names the test (or CI) that runs them, and that
test must exist. A new command in the docs needs an entry here, or a test of its own."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from harness.cli import main
from tests import REPO

DOCS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "harness" / "experiments").glob("*/README.md")),
    *sorted((REPO / "harness" / "experiments" / "packs").glob("*/README.md")),
]

# command pattern -> where it is run ("tests/FILE.py::test_name", or ".ci/run")
RUN_BY = {
    r"make reproduce$": ".ci/run",  # CI runs make test; make reproduce is run from a fresh clone before an issue is resolved
    r"make test( .*)?$": ".ci/run",
    r"make reproduce PROFILE=quick$": ".ci/run",  # after make test, timed
    r"CI=true bash \.ci/run$": ".ci/run",
    r"make mutations$": "tests/system/test_mutation_suite.py::test_the_documented_commands_list_the_mutations_and_make_runs_them_all",
    r"\.venv/bin/python -m tests\.mutations\.run .*": "tests/system/test_mutation_suite.py::test_the_documented_commands_list_the_mutations_and_make_runs_them_all",
    r"\.venv/bin/python -m tests\.ledger_table .*": "tests/unit/test_mutations.py::test_the_ledger_page_lists_every_ledger_check",
    r"(\.venv/bin/)?pytest .*": ".ci/run",
    r"\.venv/bin/harness run ttl-expiry.*":  # the worked example's suite, in a copy of the project
    "tests/system/test_docs_commands.py::test_the_worked_example_of_a_new_suite_validates_and_plans",
    r"harness run redis-cluster --target ansible/inventories/local\.yml$": "tests/system/test_ansible_local.py",
    r"harness run --profile lab-a100 --target ansible/inventories/lab\.yml.*": "tests/system/test_ansible_inventory.py",
    r"harness run serving --profile lab-sim --target \.harness/lab-sim/inventory\.yml$": "tests/system/test_lab_sim_engine.py",
    r"harness run kv-trace --set prefix-cache\.trace=/path/to/trace\.jsonl .*":  # a trace of one's own
    "tests/system/test_report_browser.py",
    r"(\.venv/bin/)?harness packs$": "tests/system/test_packs.py::test_the_pack_of_docs_packs_validates_runs_and_shows_its_source",
    r"(\.venv/bin/)?harness validate (path/to/)?my-pack$": "tests/system/test_packs.py::test_the_pack_of_docs_packs_validates_runs_and_shows_its_source",
    r"(\.venv/bin/)?harness run --pack my-pack$": "tests/system/test_packs.py::test_the_pack_of_docs_packs_validates_runs_and_shows_its_source",
    r"(\.venv/bin/)?harness list$": "tests/system/test_docs_commands.py::test_harness_list_and_validate_as_the_docs_show",
    r"(\.venv/bin/)?harness validate$": "tests/system/test_docs_commands.py::test_harness_list_and_validate_as_the_docs_show",
    r"(\.venv/bin/)?harness report .* --baseline .*": "tests/unit/test_verdicts.py::test_a_report_with_a_baseline_shows_what_changed_first",
    r"(\.venv/bin/)?harness compare .*": "tests/unit/test_verdicts.py::test_compare_lists_the_claims_whose_verdict_changed",
    r"(\.venv/bin/)?harness history .*": "tests/unit/test_history.py",
    r"(\.venv/bin/)?harness measurements .*": "tests/unit/test_measurements.py::test_measurements_of_a_run_say_its_verdicts_thresholds_and_time",
    r"(\.venv/bin/)?harness engine install$": ".ci/run",  # make test's setup runs it
    r"(\.venv/bin/)?harness run serving$": "tests/suites/serving/test_serving_engine_lifecycle.py",
    r"(export )?HARNESS_LLM_URL=\S+ HARNESS_LLM_MODEL=\S+( .*harness run serving.*)?$": "tests/suites/serving/test_serving_engine_lifecycle.py",
    r"export REDIS_CLUSTER_PASSWORD=.*": "tests/system/test_lab_sim.py",
    r"make (un)?provision INVENTORY=\.harness/lab-sim/inventory\.yml$": "tests/system/test_lab_sim.py",
    r"make (un)?provision INVENTORY=ansible/inventories/local\.yml$": "tests/system/test_ansible_local.py",
    r"make lab-sim-(up|down)( LAB_SIM_ENGINE=1)?$": "tests/system/test_lab_sim.py",
    r"make reproduce TARGET=\.harness/lab-sim/inventory\.yml .*": "tests/system/test_lab_sim.py",
    # a real lab's inventory: its provisioning and runs are those of the lab in a box above,
    # with the lab's host names (tests/system/test_ansible_inventory.py checks lab.yml itself)
    r"make (un)?provision INVENTORY=ansible/inventories/lab\.yml$": "tests/system/test_ansible_inventory.py",
    r"make reproduce PROFILE=lab-a100 TARGET=ansible/inventories/lab\.yml$": "tests/system/test_ansible_inventory.py",
    r'eval "\$\(_HARNESS_COMPLETE=\w+_source harness\)"$': "tests/system/test_docs_commands.py::test_shell_completion_as_the_docs_show",
    r"_HARNESS_COMPLETE=fish_source harness \| source$": "tests/system/test_docs_commands.py::test_shell_completion_as_the_docs_show",
    r"make gpu-check-prepare$": "tests/suites/engine_hotload/test_gpu_check.py::test_the_carry_resolves_from_the_wheels_and_fits_with_the_tree",
    r"make gpu-check GPU_CHECK_ARGS=--dry-run$": "tests/suites/engine_hotload/test_gpu_check.py::test_the_dry_run_prints_the_plan_within_8_minutes_importing_nothing_else",
    # no GPU here: the test runs it and sees the one line and exit 3 (a GPU host runs the rest)
    r'make gpu-check GPU_CHECK_ARGS="--out \S+"$': "tests/suites/engine_hotload/test_gpu_check.py::test_without_a_gpu_it_stops_with_one_line_and_exit_3",
}
# `harness run` commands that need a lab (their inventory exists only while the lab in a box is up)
NEEDS_LAB = ".harness/lab-sim/inventory.yml"


def _commands() -> list[tuple[str, str]]:
    """(doc, command) for every command line of every shell block; a line ending in a
    backslash continues on the next; synopsis lines ([OPTIONS]) are not commands."""
    out = []
    for f in DOCS:
        for block in re.findall(r"```(?:sh|bash|console|shell)\n(.*?)```", f.read_text(), re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = re.split(r"\s+#\s", line)[0].strip()
                if line and not line.startswith("#") and " [" not in line:
                    out.append((str(f.relative_to(REPO)), line))
    return out


COMMANDS = _commands()
RUNS = [
    (d, c)
    for d, c in COMMANDS
    if re.match(r"(\.venv/bin/)?harness run ", c)
    and "<" not in c
    and "ttl-expiry" not in c
    and "/path/to/" not in c
    and NEEDS_LAB not in c
    and "ansible/inventories/" not in c
    and "my-pack" not in c  # the docs' example pack: tests/system/test_packs.py writes and runs it
]


def test_the_docs_show_commands_and_each_is_run_somewhere():
    assert len(COMMANDS) > 40 and len(RUNS) > 15  # the reader above finds them
    unrun = [f"{d}: {c}" for d, c in COMMANDS if (d, c) not in RUNS and not any(re.fullmatch(p, c) for p in RUN_BY)]
    assert not unrun, "commands in the docs that no test runs (add a test, or an entry to RUN_BY):\n" + "\n".join(unrun)


@pytest.mark.parametrize("where", sorted(set(RUN_BY.values())))
def test_the_test_named_for_a_command_exists(where):
    if where == ".ci/run":
        ci = (REPO / ".ci" / "run").read_text()
        assert "make test" in ci and "make reproduce PROFILE=quick" in ci
        return
    path, _, name = where.partition("::")
    text = (REPO / path).read_text()
    assert not name or re.search(rf"^def {re.escape(name)}\(", text, re.M), where


@pytest.mark.parametrize("doc,command", RUNS, ids=[f"{d}: {c}"[:90] for d, c in RUNS])
def test_each_harness_run_the_docs_show_selects_real_cases(doc, command, capsys):
    argv = shlex.split(command.replace(".venv/bin/", ""))
    assert argv[0] == "harness"
    env = [a for a in argv[1:] if "=" in a and a.split("=")[0].isupper()]  # VAR=value before the command
    argv = [a for a in argv[1:] if a not in env]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--dry-run"])
    said = capsys.readouterr()
    assert e.value.code == 0, f"{doc}: `{command}` --dry-run exits {e.value.code}: {said.err[-600:]}"


def test_harness_list_and_validate_as_the_docs_show(capsys):
    for argv in (["list"], ["validate"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0, capsys.readouterr().err
    assert "kv-trace" in capsys.readouterr().out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_as_the_docs_show(shell, monkeypatch, capsys):
    monkeypatch.setenv("_HARNESS_COMPLETE", f"{shell}_source")
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 0 and "harness" in capsys.readouterr().out


def _worked_example(copy: Path) -> None:
    """docs/development.md's worked example written into `copy`: its code blocks, where the
    doc says they go."""
    text = (REPO / "docs" / "development.md").read_text()
    blocks = re.findall(r"```(python|yaml)\n(.*?)```", text[text.index("## Adding a suite") :], re.S)
    (copy / "harness" / "experiments" / "ttl_expiry").mkdir()
    (copy / "harness" / "experiments" / "ttl_expiry" / "__init__.py").write_text("")
    placed = 0
    for lang, body in blocks:
        first = body.splitlines()[0]
        if lang == "python" and first.startswith("# harness/"):
            (copy / first[2:].strip()).write_text(body)
        elif lang == "yaml" and first.startswith("name: ttl-expiry"):
            (copy / "harness" / "experiments" / "ttl_expiry" / "suite.yaml").write_text(body)
        elif lang == "yaml" and first.lstrip().startswith("- id: C23"):
            claims = copy / "harness" / "experiments" / "claims.yaml"
            claims.write_text(claims.read_text().rstrip("\n") + "\n" + body)
        else:
            continue
        placed += 1
    assert placed == 7, (
        f"the worked example has {placed} of its 7 files (series, metrics, reads, drivers, spec, claim, view)"
    )


def test_the_worked_example_of_a_new_suite_validates_and_plans(tmp_path):
    """`harness validate` and `harness run ttl-expiry --dry-run` (docs/development.md, step 5)
    on a copy of the project with the example's files added as the doc says."""
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "copy"
    shutil.copytree(REPO / "harness", copy / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "data").symlink_to(REPO / "data")  # the specs name their datasets there
    _worked_example(copy)
    for argv in (["validate"], ["run", "ttl-expiry", "--dry-run"]):
        p = subprocess.run(
            [sys.executable, "-m", "harness", *argv],
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=300,
            env={**__import__("os").environ, "PYTHONPATH": str(copy)},
        )
        assert p.returncode == 0, (argv, p.stdout[-1500:], p.stderr[-1500:])
    assert "ttl-expiry" in p.stdout + p.stderr


def test_validate_refuses_a_metric_the_worked_example_does_not_declare(tmp_path):
    """The worked example with one threshold's metric misspelt (ttl.stale_pc), then one ledger
    check's: `harness validate` exits 2 with one line naming the spec, the metric, its driver
    and the declared name it is closest to; the run refuses it before anything starts."""
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "copy"
    shutil.copytree(REPO / "harness", copy / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "data").symlink_to(REPO / "data")
    _worked_example(copy)
    spec_file = copy / "harness" / "experiments" / "ttl_expiry" / "suite.yaml"
    claims = copy / "harness" / "experiments" / "claims.yaml"
    good_spec, good_claims = spec_file.read_text(), claims.read_text()

    def harness(*argv):
        return subprocess.run(
            [sys.executable, "-m", "harness", *argv],
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=300,
            env={**__import__("os").environ, "PYTHONPATH": str(copy)},
        )

    spec_file.write_text(good_spec.replace("metric: ttl.stale_pct", "metric: ttl.stale_pc", 1))
    for argv in (["validate"], ["run", "ttl-expiry", "--dry-run"]):
        p = harness(*argv)
        err = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(err) == 1, (argv, p.stdout[-800:], p.stderr[-800:])
        assert "suite.yaml" in err[0] and "'ttl.stale_pc'" in err[0] and "ttl-expiry-reads" in err[0], err
        assert "did you mean 'ttl.stale_pct'" in err[0], err
    spec_file.write_text(good_spec)
    assert harness("validate").returncode == 0
    tail = good_claims[good_claims.index("- id: C23") :]
    claims.write_text(good_claims.replace(tail, tail.replace("metric: no-ttl.stale_pct", "metric: no-ttl.stale", 1)))
    p = harness("validate")
    assert p.returncode == 2 and "C23" in p.stderr and "'no-ttl.stale'" in p.stderr, p.stderr[-800:]


def _anchors(md: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped,
    spaces to hyphens; a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for h in re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", md.read_text(), flags=re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_relative_link_of_the_docs_lands():
    broken = []
    for f in DOCS:
        text = re.sub(r"```.*?```", "", f.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            if not dest.exists():
                broken.append(f"{f.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{f.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
