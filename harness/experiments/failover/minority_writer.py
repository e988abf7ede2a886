"""A writer in its own process, meant to run inside a simulated host's network namespace
(`harness.model.child.start(MODULE, job, prefix=["ip", "netns", "exec", "ls-hN"])`), so that it
stays on the cut-off primary's side of a partition. It writes the job's keys at a fixed
rate through the slot router seeded with that primary, from the job's `start` to its `end`
(monotonic seconds, the clock the parent uses too), and returns its history: one dict per
write (`lost_writes.Write`'s fields)."""

from __future__ import annotations

import sys
from dataclasses import asdict

from harness.experiments.failover import client
from harness.model import child

MODULE = "harness.experiments.failover.minority_writer"


def work(job: dict, log) -> dict:
    seeds = [(h, int(p)) for h, p in job["seeds"]]
    hist = client.History()

    def router():
        return client.Router(seeds, job["timeout"])

    client.writer(
        router,
        job["name"],
        job["prefix"],
        job["rate"],
        job["start"],
        job["end"],
        hist,
        lambda key: job["group"],
        keys=job["keys"],
    )
    return {"writes": [asdict(w) for w in hist.writes]}


if __name__ == "__main__":
    sys.exit(child.serve(work))
