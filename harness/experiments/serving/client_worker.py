"""The streaming client on a load generator: `python -m harness.experiments.serving.client_worker`.

It reads one job as JSON on stdin (the engine's base URL, which may hold a credential and so
never travels on a command line; the model; its share of the requests with their scheduled
times; the shared start time, by this host's clock; the client's limits), waits for the start,
sends its requests at their times with the harness's streaming client
(harness.experiments.serving.client) and writes one JSON object to stdout: this host's name
and one row per request (every field of a Result). harness.experiments.serving.client_fleet
starts it on every load generator over SSH and merges the rows.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from dataclasses import asdict, fields

from harness.experiments.serving import client

MAX_JOB_BYTES = 64 << 20
MAX_WAIT_S = 60.0  # a start further ahead than this (clocks far apart) is not waited for


def requests_of(job: dict) -> list[client.Request]:
    names = {f.name for f in fields(client.Request)}
    return [client.Request(**{k: v for k, v in r.items() if k in names}) for r in job["requests"]]


def main() -> int:
    job = json.loads(sys.stdin.buffer.read(MAX_JOB_BYTES))
    reqs = requests_of(job)
    wait = float(job["start_epoch"]) - time.time()
    if 0 < wait < MAX_WAIT_S:
        time.sleep(wait)
    started = time.time()
    results = client.run(
        job["base_url"],
        job["model"],
        reqs,
        timeout_s=float(job["timeout_s"]),
        stall_s=float(job["stall_s"]),
        redirects_allowed=True,
    )  # the fleet refuses them
    json.dump(
        {"host": socket.gethostname(), "started_epoch": started, "results": [asdict(r) for r in results]}, sys.stdout
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
