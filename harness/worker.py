"""One repetition of one case in a fresh process (drivers registered with isolate=True).

`python -m harness.worker JOB.json`: JOB names the driver, the context and where to write
the outcome. Log lines go to stderr prefixed with 'LOG '; the target's password comes in
the environment (harness.runner.PASSWORD_ENV), never on the command line.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path


def main(job_path: str) -> int:
    from harness import drivers
    from harness.errors import BadInput, HarnessError
    from harness.runner import PASSWORD_ENV
    from harness.target import Target

    job = json.loads(Path(job_path).read_text())
    if job.get("module"):  # the driver's own module registers it (also one outside harness.experiments)
        importlib.import_module(job["module"])
    out = Path(job["outcome"])
    target = Target.from_json(job["target"])
    target.password = os.environ.get(PASSWORD_ENV) or None
    target.username = job.get("username")

    def log(msg: str) -> None:
        for line in str(msg).splitlines() or [""]:
            print("LOG " + line, file=sys.stderr, flush=True)

    ctx = drivers.CaseContext(job["suite"], job["case"], job["repetition"], job["profile"], job["params"],
                              Path(job["raw_dir"]), target, log)
    try:
        outcome = drivers.get(job["driver"]).run(ctx)
        result = {"outcome": outcome.to_json()}
    except BadInput as e:
        result = {"error": {"kind": "BadInput", "message": str(e)}}
    except HarnessError as e:
        result = {"error": {"kind": "HarnessError", "message": str(e)}}
    except Exception as e:  # noqa: BLE001 - reported to the runner with its traceback
        result = {"error": {"kind": type(e).__name__, "message": f"{type(e).__name__}: {e} (traceback in raw/)",
                            "traceback": traceback.format_exc()}}
    from harness.results import atomic_write_json

    atomic_write_json(out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
