"""Every mutation of the suite: the MUTATIONS of each tests/mutations/catalog_*.py, in file order.

Each suite's engineers keep their own catalog file; this module only collects them.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from tests.mutations.framework import Mutation

HERE = Path(__file__).parent


def catalog_modules() -> list[str]:
    """The module names of the catalog files (catalog_<suite>.py), sorted."""
    return [f"tests.mutations.{p.stem}" for p in sorted(HERE.glob("catalog_*.py"))]


def load() -> list[Mutation]:
    """All mutations, each catalog file's in its own order."""
    out: list[Mutation] = []
    for name in catalog_modules():
        out.extend(importlib.import_module(name).MUTATIONS)
    return out


def by_name(name: str) -> Mutation:
    """The mutation called `name`; KeyError naming the known ones when there is none."""
    found = [m for m in load() if m.name == name]
    if not found:
        raise KeyError(f"no mutation {name!r}; known: {', '.join(m.name for m in load())}")
    return found[0]
