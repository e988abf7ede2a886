"""One repetition of one case in a fresh process (drivers registered with isolate=True).

`python -m harness.run.worker JOB.json`, started by the runner through harness.model.child: the job
names the driver, its module and the case's context; the target's credentials come in the
environment (harness.infra.target.Target.to_env()), never on the command line.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from harness.infra.target import Target
from harness.model import child, driver_contract

MODULE = "harness.run.worker"


def job_for(drv: driver_contract.Driver, ctx: driver_contract.CaseContext) -> dict:
    """The job of one repetition (no secrets: those travel in Target.to_env())."""
    return {
        "driver": drv.name,
        "module": drv.module,
        "suite": ctx.suite,
        "case": ctx.case,
        "repetition": ctx.repetition,
        "profile": ctx.profile,
        "params": ctx.params,
        "raw_dir": str(ctx.raw_dir),
        "target": ctx.target.to_json(),
    }


def run_case(job: dict, log) -> dict:
    """The child's work: the driver's outcome, as JSON (the record of this repetition; the
    runner adds the rest of what it stores)."""
    if job.get("module"):  # the driver's own module registers it (also one outside harness.experiments)
        importlib.import_module(job["module"])
    ctx = driver_contract.CaseContext(
        job["suite"],
        job["case"],
        job["repetition"],
        job["profile"],
        job["params"],
        Path(job["raw_dir"]),
        Target.from_env(job["target"]),
        log,
    )
    outcome = driver_contract.get(job["driver"]).run(ctx)
    return outcome.stored(suite=ctx.suite, case=ctx.case, repetition=ctx.repetition).to_json()


if __name__ == "__main__":
    sys.exit(child.serve(run_case))
