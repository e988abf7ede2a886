"""Run mutations by hand: `python -m tests.mutations.run [NAME ...|--all|--fast|--list] [--keep DIR] [--baseline]`.

Each mutation runs in its own temporary copy of the checkout (tests/mutations/framework.py);
one line per mutation: its time, the verdict of each check it names, and whether the ledger
caught it. Exit 1 when one was not caught as its kind needs (or could not be judged).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from tests.mutations import catalog
from tests.mutations.framework import Mutation, run_mutation, stale_edits


def _select(args) -> list[Mutation]:
    everything = catalog.load()
    if args.all or args.list:
        return everything
    if args.fast:
        return [m for m in everything if m.fast]
    return [catalog.by_name(n) for n in args.names]


def _baseline(m: Mutation, keep: Path | None) -> bool:
    """Run the mutation's case and sets with no edit: the verdicts the mutation is compared with."""
    print(f"== baseline of {m.name}: {m.run} {' '.join(m.sets)}", flush=True)
    out = run_mutation(dataclasses.replace(m, edits=()), keep)
    if out.skipped or out.error:
        print(f"   {'SKIPPED' if out.skipped else 'ERROR'} ({out.seconds:.0f} s): {out.skipped or out.error}")
        return bool(out.skipped)
    for chk in m.checks:
        verdict, reason = out.verdicts.get(chk, ("(no verdict)", ""))
        print(f"   {chk}: {verdict} - {reason[:300]}")
    print(f"   ({out.seconds:.0f} s)")
    return True


def _report(m: Mutation, keep: Path | None) -> bool:
    """Run one mutation and print what the ledger said; True when it behaved as its kind needs
    (caught, skipped here, or a known miss still missed)."""
    print(f"== {m.name} [{m.claim}, {m.kind}] {m.what}", flush=True)
    stale = stale_edits(m)
    if stale:
        print("   STALE: " + "; ".join(stale))
        return False
    out = run_mutation(m, keep)
    if out.skipped:
        print(f"   SKIPPED ({out.seconds:.0f} s): {out.skipped}")
        return True
    if out.error:
        print(f"   ERROR ({out.seconds:.0f} s): {out.error}")
        return False
    for chk in m.checks:
        verdict, reason = out.verdicts.get(chk, ("(no verdict)", ""))
        print(f"   {chk}: {verdict} - {reason[:300]}")
    failures = out.failures()
    if m.xfail_reason:
        state = "KNOWN MISS (still not caught)" if failures else "KNOWN MISS NOW CAUGHT: drop its xfail_reason"
        ok = bool(failures)
    else:
        state, ok = ("caught" if not failures else "NOT CAUGHT"), not failures
    print(f"   {state} ({out.seconds:.0f} s){' - results in ' + str(out.run_dir) if keep else ''}")
    for f in failures:
        print(f"   {f}")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.mutations.run", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="mutation names (suite/short-name)")
    ap.add_argument("--all", action="store_true", help="every mutation of the catalog")
    ap.add_argument("--fast", action="store_true", help="the fast ones (those `make test` runs)")
    ap.add_argument("--list", action="store_true", help="list the catalog and exit")
    ap.add_argument("--keep", type=Path, help="keep each copy, its log and results under this folder")
    ap.add_argument(
        "--baseline",
        action="store_true",
        help="run the chosen mutations' cases unmutated (same --set): the verdicts they are compared with",
    )
    args = ap.parse_args(argv)
    if not (args.names or args.all or args.fast or args.list):
        ap.error("name a mutation, or give --all, --fast or --list")
    try:
        chosen = _select(args)
    except KeyError as e:
        print(e.args[0], file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            flags = ("fast " if m.fast else "") + ("known-miss " if m.xfail_reason else "")
            print(f"{m.name:45} {m.claim:5} {m.kind:9} {flags}{m.run}: {m.what}")
        return 0
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    results = [(_baseline if args.baseline else _report)(m, args.keep) for m in chosen]
    print(f"{sum(results)} of {len(results)} as their kind needs")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
