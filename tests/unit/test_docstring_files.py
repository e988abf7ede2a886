"""Module docstrings name only files that exist (issue 64).

Every harness/**/*.py and tools/**/*.py (node_modules aside) is parsed (ast, nothing
imported) and its module docstring read. A file it names is a word ending in `.py`
(`drivers.py`, `kv_blocks/trace.py`, `../views.py`), or a path with a folder ending in
`.md`, `.yaml` or `.yml` (`docs/cli.md`); a bare `claims.yaml`, `suite.yaml` or
`results.json` names a kind of file, not one file, and is not read. A name with a
placeholder or a wildcard (`<suite>/view.py`, `lruk*.py`, `prometheus.yml.j2`) is a pattern
and is not read either. Each named file must exist relative to one of the module's own
folder (`../` included), the repository root, harness/, harness/experiments/ or
harness/mechanisms/. Another project's files, named when a docstring describes a peer,
are listed in ELSEWHERE, each with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests import REPO

# A file name: not inside a longer word, path, glob or dotted name, and not followed by one.
NAMED = re.compile(r"(?<![\w./*-])((?:\.\./)*(?:[\w-]+/)*[\w-]+\.(?:py|ya?ml|md))(?![\w*-]|\.\w)")

# The folders a name may be written from, besides the module's own (relative to REPO).
BASES = ("", "harness", "harness/experiments", "harness/mechanisms")

# Other projects' files a docstring names; none is in this repository.
ELSEWHERE = {
    "asv/step_detect.py": "asv's (airspeed velocity) step detector, which harness/verdict/stepdetect.py follows",
    "samples/python/common_runtime.py": "TensorRT's Python sample, which the TensorRT backend is written against",
}


def modules() -> list[Path]:
    """Every module of harness/ and tools/ (the browser's node_modules aside)."""
    found = [p for top in ("harness", "tools") for p in (REPO / top).rglob("*.py")]
    return sorted(p for p in found if "node_modules" not in p.parts)


def named_files(doc: str) -> list[str]:
    """The file names in a docstring: every `.py` name, and `.md` / `.yaml` / `.yml` names with a folder."""
    names = (m.group(1) for m in NAMED.finditer(doc))
    return [n for n in names if n.endswith(".py") or "/" in n]


def problems(module: Path, doc: str) -> list[str]:
    """One line per file the docstring names that resolves from none of the folders."""
    out = []
    where = module.relative_to(REPO)
    for name in named_files(doc):
        folders = [module.parent, *(REPO / b for b in BASES)]
        if name in ELSEWHERE or any((f / name).is_file() for f in folders):
            continue
        same = sorted(str(p.relative_to(REPO)) for p in modules() if p.name == Path(name).name)
        fix = f"the files of that name: {', '.join(same)}" if same else "no file of that name is in harness/ or tools/"
        out.append(
            f"{where}: its docstring names {name!r}, which is in none of its own folder, the repository root, "
            f"harness/, harness/experiments/, harness/mechanisms/ ({fix}); name the file by a path from one "
            f"of those folders, or, for another project's file, add it to ELSEWHERE with the reason"
        )
    return out


def test_module_docstrings_name_only_files_that_exist():
    bad, checked = [], 0
    for module in modules():
        doc = ast.get_docstring(ast.parse(module.read_text(), str(module)))
        if doc:
            checked += len(named_files(doc))
            bad += problems(module, doc)
    assert checked > 100  # the docstrings were read and their names found
    assert not bad, "\n".join(bad)


def test_each_file_elsewhere_is_still_named():
    """ELSEWHERE does not outlive the docstrings that name its files."""
    named = set()
    for module in modules():
        named.update(named_files(ast.get_docstring(ast.parse(module.read_text())) or ""))
    gone = sorted(set(ELSEWHERE) - named)
    assert not gone, f"no module docstring names these any more (drop them from ELSEWHERE): {gone}"


def test_the_names_in_prose_are_found():
    doc = (
        "The cases (drivers.py's `register`, kv_blocks/trace.py, ../views.py); see docs/cli.md "
        "and harness/experiments/claims.yaml. Not files: claims.yaml, results.json, `python -m "
        "harness.run.worker JOB.json`, <suite>/view.py, lruk*.py, harness/**/*.py, prometheus.yml.j2."
    )
    assert named_files(doc) == [
        "drivers.py",
        "kv_blocks/trace.py",
        "../views.py",
        "docs/cli.md",
        "harness/experiments/claims.yaml",
    ]


def test_the_check_finds_a_made_up_missing_file():
    """The check could fail: a made-up kv-trace module naming trace.py (moved to
    harness/mechanisms/kv_blocks/) is caught and told where the file is; the names that do
    resolve, from each folder, are not."""
    module = REPO / "harness/experiments/kv_trace/made_up.py"
    found = problems(module, "The trace (trace.py) and no_such_module.py.")
    assert len(found) == 2
    assert "'trace.py'" in found[0] and "harness/mechanisms/kv_blocks/trace.py" in found[0]
    assert "harness/experiments/kv_trace/made_up.py" in found[0]
    assert "'no_such_module.py'" in found[1] and "no file of that name" in found[1]
    fine = "recount.py, ../views.py, kv_blocks/trace.py, kv_trace/recount.py, harness/cli.py, docs/cli.md"
    assert problems(module, fine) == []
