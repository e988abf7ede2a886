"""The README's per-claim table, from the ledger and a results folder (what a fresh run gave).

    .venv/bin/python -m tests.ledger_table results/<run-id>   # markdown on stdout

One row per ledger check: the check, its instrument and mechanism-off controls (their metric
comparisons), and the verdict of that run. tests/test_mutations.py checks that the README
lists every check of the ledger.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness import spec


def _controls(controls) -> str:
    return "; ".join(f"`{c.describe()}`" for c in controls) or "-"


def rows(claims, verdicts: dict | None = None) -> list[list[str]]:
    out = []
    for c in claims:
        if not c.checks:
            out.append([c.id, "-", "-", "-", (verdicts or {}).get((c.id, None), "not measurable here"
                                                                  if c.not_measurable else "not measured")])
        for k in c.checks:
            check = f"{k.suite}/{k.case} `{k.describe()}`"
            out.append([c.id, check, _controls(k.instruments), _controls(k.mechanism_off),
                        (verdicts or {}).get((c.id, k.suite, k.case, k.metric), "-")])
    return out


def verdicts_of(run_dir: Path) -> dict:
    from harness.analysis import analyze
    from harness.results import load_run

    a = analyze(load_run(run_dir))
    out = {}
    for cv in a.claims:
        out[(cv.id, None)] = cv.outcome.value
        for k in cv.checks:
            out[(cv.id, k.check.suite, k.check.case, k.check.metric)] = k.outcome.value
    return out


def markdown(table: list[list[str]]) -> str:
    head = ["claim", "check", "instrument control", "mechanism-off control", "verdict (fresh run)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in table]
    return "\n".join(lines)


if __name__ == "__main__":
    found = verdicts_of(Path(sys.argv[1])) if len(sys.argv) > 1 else None
    print(markdown(rows(spec.load_claims(), found)))
