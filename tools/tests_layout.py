"""Move the flat `tests/test_*.py` into the tree that mirrors the package (issue 41).

    tests/unit/            one module or layer of harness/ (spec, analysis, cluster, report ...)
    tests/suites/<suite>/  one suite: its drivers, controls, ledger checks and view
    tests/system/          the whole tool from outside: CLI, lab in a box, hostile input,
                           interrupts, the docs' commands, the report in a browser
    tests/                 what they share (conftest, fixtures/, stored_runs, serving_fakes ...),
                           mutations/ and benchmarks/

`place()` says where a test file goes, by its name. `python tools/tests_layout.py apply`
moves every `tests/test_*.py` still at the top (git mv), writes the folders' `__init__.py`,
and rewrites what names the old paths: `tests/test_x.py` and `tests.test_x` in any tracked text file, the
`test_x.py::...` rows of tests/test_mutations.py (relative to tests/), and a moved file's
`Path(__file__)` arithmetic, which becomes the shared `tests.TESTS` / `tests.REPO`. Run it
again after merging a branch that added a test at the top: it is idempotent.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# A suite's tests start with its package name (test_kv_trace_compiled.py) or are listed here.
SUITES = ("cold_start", "engine_hotload", "eviction", "failover", "kv_tiers", "kv_trace", "prompt_cas",
          "redis_cluster", "semantic_cache", "serving")
SUITE_FILES = {
    "test_acl": "redis_cluster", "test_redis_benchmark": "redis_cluster", "test_memtier": "redis_cluster",
    "test_memtier_pooled": "redis_cluster", "test_loadgen_merge": "redis_cluster",
    "test_client_fleet": "serving", "test_gpu_check": "engine_hotload",
}
SUITE_PREFIXES = {"test_semantic_": "semantic_cache", "test_serving_": "serving"}
# The whole tool from outside.
SYSTEM = {"test_cli", "test_cli_selection", "test_docs_commands", "test_fuzz_inputs", "test_interrupts",
          "test_interrupt_shield", "test_lab_sim", "test_lab_sim_engine", "test_make_setup", "test_report_browser",
          "test_ansible_checks", "test_ansible_inventory", "test_ansible_llm_engine", "test_ansible_local",
          "test_mutation_suite"}
SYSTEM_PREFIXES = ("test_hostile",)

INIT = {
    "unit": "Tests of one module or layer of harness/.",
    "suites": "Tests of one suite each: tests/suites/<suite>/ mirrors harness/experiments/<suite>/.",
    "system": "The whole tool from outside: the CLI, the lab in a box, hostile input, interrupts, the docs' commands.",
}


def place(stem: str) -> str:
    """The folder under tests/ where test file `stem` belongs."""
    if stem in SUITE_FILES:
        return f"suites/{SUITE_FILES[stem]}"
    for prefix, suite in SUITE_PREFIXES.items():
        if stem.startswith(prefix):
            return f"suites/{suite}"
    for suite in SUITES:
        if stem == f"test_{suite}" or stem.startswith(f"test_{suite}_"):
            return f"suites/{suite}"
    if stem in SYSTEM or stem.startswith(SYSTEM_PREFIXES):
        return "system"
    return "unit"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _init(folder: Path, doc: str) -> None:
    init = folder / "__init__.py"
    if not init.exists():
        folder.mkdir(parents=True, exist_ok=True)
        init.write_text(f'"""{doc}"""\n')
        _git("add", str(init.relative_to(ROOT)))


def move() -> dict[str, str]:
    """Move the top-level test files; old name -> new path relative to tests/, for every test file."""
    where: dict[str, str] = {}
    for path in sorted(TESTS.glob("test_*.py")):
        folder = place(path.stem)
        for part, doc in INIT.items():
            if folder.split("/")[0] == part:
                _init(TESTS / part, doc)
        if folder.startswith("suites/"):
            _init(TESTS / folder, f"Tests of the {folder.split('/')[1].replace('_', '-')} suite.")
        new = TESTS / folder / path.name
        _git("mv", str(path.relative_to(ROOT)), str(new.relative_to(ROOT)))
    for path in TESTS.glob("*/**/test_*.py"):
        if "benchmarks" not in path.parts:
            where[path.name] = path.relative_to(TESTS).as_posix()
    return where


_FILE_ARITH = [  # a moved file's own location arithmetic -> the shared names in tests/__init__.py
    (re.compile(r"Path\(__file__\)\.resolve\(\)\.parent\.parent|Path\(__file__\)\.resolve\(\)\.parents\[1\]"
                r"|Path\(__file__\)\.parents\[1\]"), "REPO"),
    (re.compile(r"Path\(__file__\)\.resolve\(\)\.parent(?![.\w])|Path\(__file__\)\.parent(?![.\w])"), "TESTS"),
]


def _own_paths(text: str) -> str:
    used = []
    for pattern, name in _FILE_ARITH:
        text, n = pattern.subn(name, text)
        if n:
            used.append(name)
    text = re.sub(r"^(REPO|TESTS) = \1\n", "", text, flags=re.M)  # REPO = Path(__file__)... was its own name
    imported = {a.name for n in ast.parse(text).body if isinstance(n, ast.ImportFrom) and n.module == "tests"
                for a in n.names}
    missing = sorted(set(used) - imported)
    if missing:  # before the first import after the docstring and `from __future__`
        first = next(n for n in ast.parse(text).body if isinstance(n, (ast.Import, ast.ImportFrom))
                     and getattr(n, "module", "") != "__future__")
        lines = text.splitlines(keepends=True)
        lines.insert(first.lineno - 1, f"from tests import {', '.join(missing)}\n")
        text = "".join(lines)
    return text


def rewrite_text(text: str, where: dict[str, str]) -> str:
    for name, new in where.items():
        text = re.sub(r"(?<![\w/])tests/" + re.escape(name) + r"\b", f"tests/{new}", text)
        text = re.sub(r'(?<=")' + re.escape(name) + r"(?=::)", new, text)  # ROWS: "test_x.py::test_y"
        text = re.sub(r"(?<![\w.])tests\." + re.escape(name[:-3]) + r"\b", "tests." + new[:-3].replace("/", "."), text)
    return text


def main(argv: list[str]) -> int:
    if argv != ["apply"]:
        print(__doc__)
        return 2
    where = move()
    moved = {TESTS / p for p in where.values()}
    changed = 0
    for rel in _git("ls-files", "--cached", "--others", "--exclude-standard").splitlines():
        path = ROOT / rel
        if rel.startswith(("results/", "reports/")) or path.suffix not in (".py", ".md", ".yaml", ".yml", "", ".cfg",
                                                                            ".toml", ".txt", ".sh"):
            continue
        if not path.is_file() or path.resolve() == Path(__file__).resolve():
            continue
        text = path.read_text()
        new = rewrite_text(text, where)
        if path in moved:
            new = _own_paths(new)
        if new != text:
            path.write_text(new)
            changed += 1
    print(f"{len(where)} test files in the tree, {changed} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
