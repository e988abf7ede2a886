"""docs/development.md's package map shows the package as it is: every package of harness/ is
named in it at its place in the tree, and every folder it names exists (issue 64)."""

from __future__ import annotations

import re

from tests import REPO

DOC = REPO / "docs" / "development.md"
ROOT = REPO / "harness"


def map_block(text: str) -> str:
    """The fenced block under '## The package map'."""
    section = text.split("## The package map", 1)[1]
    return section.split("```text\n", 1)[1].split("```", 1)[0]


def named_folders(block: str) -> set[str]:
    """The folders the tree names, as paths under harness/ (indentation gives the parent)."""
    out, stack = set(), []
    for line in block.splitlines()[1:]:  # the first line is harness/ itself
        m = re.match(r"( *)([a-z_]+)/ ", line + " ")
        if not m:
            continue
        depth = len(m.group(1)) // 2 - 1
        stack[depth:] = [m.group(2)]
        out.add("/".join(stack))
    return out


def packages(root=ROOT) -> set[str]:
    return {str(p.parent.relative_to(root)) for p in root.rglob("__init__.py") if p.parent != root}


def test_the_map_names_every_package_and_only_those():
    named = named_folders(map_block(DOC.read_text()))
    assert named == packages(), (
        f"in harness/ but not in the map: {sorted(packages() - named)}; "
        f"in the map but not in harness/: {sorted(named - packages())}"
    )


def test_the_map_check_could_fail():
    block = "harness/\n  run/   x\n  experiments/   y\n    serving/   z\n    gone/   w\n"
    assert named_folders(block) == {"run", "experiments", "experiments/serving", "experiments/gone"}
    assert "experiments/gone" not in packages()
