"""A writer in its own process, meant to run inside a simulated host's network namespace
(`ip netns exec ls-hN python -m harness.experiments.failover.minority_writer JOB.json`),
so that it stays on the cut-off primary's side of a partition. It writes the job's keys at
a fixed rate through the slot router seeded with that primary and leaves its history, one
JSON object per write, in the job's output file."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict


def main(job_path: str) -> int:
    from harness.experiments.failover import client

    job = json.loads(open(job_path).read())
    seeds = [(h, int(p)) for h, p in job["seeds"]]
    hist = client.History()

    def router():
        return client.Router(seeds, job["timeout"])

    client.writer(router, job["name"], job["prefix"], job["rate"], job["start"], job["end"], hist,
                  lambda key: job["group"], keys=job["keys"])
    with open(job["out"], "w") as f:
        for w in hist.writes:
            f.write(json.dumps(asdict(w)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
