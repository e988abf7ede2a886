"""The child side of tests/unit/test_child.py: `python -m tests.child_work JOB.json` through
harness.model.child.serve, doing what the job's "do" says."""

from __future__ import annotations

import hashlib
import os
import sys
import time

from harness.base.errors import BadInput, EnvironmentProblem, HarnessError
from harness.infra.target import Target
from harness.model import child


def work(job: dict, log) -> dict:
    do = job["do"]
    if do == "echo":
        log("first line\nsecond line")
        return {"got": job["value"], "pid": os.getpid()}
    if do == "bad_input":
        raise BadInput("the job's input is wrong")
    if do == "environment":
        raise EnvironmentProblem("the machine cannot")
    if do == "harness_error":
        raise HarnessError("a harness error", exit_code=5)
    if do == "crash":
        return {"x": 1 / 0}
    if do == "vanish":
        print("last words", file=sys.stderr, flush=True)
        os._exit(7)
    if do == "sleep":
        log("sleeping")
        time.sleep(60)
    if do == "target":
        t = Target.from_env(job["target"])
        return {
            "password_sha256": hashlib.sha256(t.password.encode()).hexdigest(),
            "echo": t.password,
            "username": t.username,
            "loadgen": t.loadgen.address if t.loadgen else None,
        }
    raise ValueError(do)


if __name__ == "__main__":
    sys.exit(child.serve(work))
