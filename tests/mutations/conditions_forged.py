"""Code mutations of the code that matches conditions (issue 52: "conditions forged"), judged
on stored results folders rather than by running a case.

The catalog's mutations (catalog_<suite>.py) each run a case; a slip in
harness.model.conditions changes no case's numbers, only whether a run on the wrong GPU or on
one machine is compared with the claim. Each mutation here is a one-line edit of
harness/model/conditions.py; tests/unit/test_conditions.py loads the edited module and judges
stored manifests of the GPU or hosts the slip would let through (a laptop GPU, a MIG slice,
six aliases of one machine): the second reading (harness.model.gpu_names, the servers' run_ids)
must keep every such check `not comparable here`. Not in catalog.load() (no `run`): the
framework runs cases.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.mutations.framework import ROOT, Edit

CONDITIONS = "harness/model/conditions.py"


@dataclass(frozen=True)
class ConditionsMutation:
    name: str
    what: str
    edits: tuple  # tuple[Edit, ...] of harness/model/conditions.py
    lets_through: str  # what the slip alone would call comparable: "gpu" or "hosts"


MUTATIONS = (
    ConditionsMutation(
        "conditions/gpu-prefix",
        "a claim's word is matched as a prefix of a name's word: 'A100' meets 'A1000'",
        (
            Edit(
                CONDITIONS,
                "all(any(w == h for h in it) for w in need)",
                "all(any(h.startswith(w) for h in it) for w in need)",
            ),
        ),
        "gpu",
    ),
    ConditionsMutation(
        "conditions/gpu-mig-ignored",
        "a MIG slice meets the model's claim ('A100')",
        (Edit(CONDITIONS, ' and ("mig" not in words(n) or "mig" in need_words)', ""),),
        "gpu",
    ),
    ConditionsMutation(
        "conditions/hosts-count-nodes",
        "redis_hosts counts the nodes, not the machines they are on",
        (Edit(CONDITIONS, 'facts["redis_hosts"] = len(groups)', 'facts["redis_hosts"] = len(nodes)'),),
        "hosts",
    ),
    ConditionsMutation(
        "conditions/loadgen-first-skipped",
        "the first load generator is never compared with the Redis machines",
        (
            Edit(
                CONDITIONS,
                "if any(k is not None and k in groups for k in keys):",
                "if any(k is not None and k in groups for k in keys[1:]):",
            ),
        ),
        "hosts",
    ),
)


def mutant_module(m: ConditionsMutation, root: Path = ROOT):
    """harness.model.conditions with the mutation's edits, as a module of its own (the
    checkout's file is only read); an edit whose old text is not there once raises."""
    source = (root / CONDITIONS).read_text(encoding="utf-8")
    for e in m.edits:
        n = source.count(e.old)
        if n != 1:
            raise AssertionError(f"stale mutation {m.name}: the old text occurs {n} times in {e.path}: {e.old!r}")
        source = source.replace(e.old, e.new, 1)
    name = "harness.model._conditions_" + m.name.split("/", 1)[1].replace("-", "_")
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(root / CONDITIONS)
    sys.modules[name] = module  # dataclasses and typing look the module up while it is made
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    finally:
        sys.modules.pop(name, None)
    return module
