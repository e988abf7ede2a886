"""The streaming client on every load generator at once, its per-request rows merged.

The requests are dealt round-robin to the inventory's load generators (request i to host
i mod n), each keeping its scheduled time, so that together they send the schedule one client
would. Each host runs harness.experiments.serving.client_worker over SSH (the harness's own
checkout on the host: the loadgen role installs it) from one shared start time, given to
each host in its own clock (its offset from this machine's measured first); the job,
with the engine's URL, goes over SSH's stdin. Every host's rows come back whole, and the
merge puts each row at its request's place: the percentiles the serving cases compute over
the merged list are exact, every request counted once. A host that fails leaves its
requests as errors that say which host, never as missing rows.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass, fields
from functools import partial
from typing import cast

from harness.experiments.serving import client
from harness.experiments.serving.client import Request, Result
from harness.infra.process import RemoteHost, clock_offset_ms, run_each
from harness.infra.redaction import redact

WORKER = "harness.experiments.serving.client_worker"
START_LEAD_S = 5.0  # the shared start lies this far ahead: every host's Python is up by then
MARGIN_S = 30.0


@dataclass
class FleetResults:
    results: list[Result]  # one per request, in request order
    hosts: list[str]  # the load generator that sent each request
    failures: list[str]  # '' per host that answered; else why not


def shares(n_requests: int, n_hosts: int) -> list[list[int]]:
    """Request indices per host: request i goes to host i mod n_hosts."""
    return [list(range(k, n_requests, n_hosts)) for k in range(n_hosts)]


def _job(base_url: str, model: str, reqs: list[Request], start: float, timeout_s: float, stall_s: float) -> bytes:
    return json.dumps(
        {
            "base_url": base_url,
            "model": model,
            "requests": [asdict(r) for r in reqs],
            "start_epoch": start,
            "timeout_s": timeout_s,
            "stall_s": stall_s,
        }
    ).encode()


def _rows(stdout: bytes, expected: int) -> list[Result]:
    """The worker's rows as Results; ValueError when its answer is not what it writes."""
    names = {f.name for f in fields(Result)}
    data = json.loads(stdout)
    rows = data.get("results") if isinstance(data, dict) else None
    if not isinstance(rows, list) or len(rows) != expected or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"expected {expected} rows")
    return [Result(**{k: v for k, v in r.items() if k in names}) for r in rows]


def _one(
    host: RemoteHost, python: str, job: bytes, n: int, limit_s: float, procs: list
) -> tuple[list[Result] | None, str]:
    p = host.run(shlex.join([python, "-m", WORKER]), timeout=limit_s, stdin=job, processes=procs)
    if p.returncode != 0:
        tail = " | ".join(redact(p.stderr.decode(errors="replace")).strip().splitlines()[-2:])
        return None, f"the client on {host.name} exited with code {p.returncode}: {tail or '(no output)'}"
    try:
        return _rows(p.stdout, n), ""
    except (ValueError, TypeError) as e:
        return None, f"the client on {host.name} answered something else than its rows ({str(e)[:120]})"


def run(
    hosts: list[RemoteHost],
    python: str,
    base_url: str,
    model: str,
    requests: list[Request],
    *,
    timeout_s: float,
    stall_s: float,
) -> FleetResults:
    """Send `requests` from every host at once; rows merged in request order."""
    parts = shares(len(requests), len(hosts))
    offsets = [clock_offset_ms(h)[0] / 1000 for h in hosts]  # the start is given in each host's own clock
    start = time.time() + START_LEAD_S
    last = max((r.at_s for r in requests), default=0.0)
    limit = START_LEAD_S + last + timeout_s + client.DEADLINE_MARGIN_S + MARGIN_S
    jobs = [
        _job(base_url, model, [requests[i] for i in part], start + off, timeout_s, stall_s)
        for part, off in zip(parts, offsets)
    ]
    # an interrupt kills every SSH session at once instead of waiting for them
    done = run_each([partial(_one, hosts[k], python, jobs[k], len(parts[k]), limit) for k in range(len(hosts))])
    results: list[Result | None] = [None] * len(requests)
    owner = [""] * len(requests)
    for host, part, (rows, why) in zip(hosts, parts, done):
        for j, i in enumerate(part):
            r = requests[i]
            row = (
                rows[j] if rows is not None else Result(i, r.tag, r.at_s, "error", f"load generator {host.name}: {why}")
            )
            row.index = i
            results[i], owner[i] = row, host.name
    rows_all = cast("list[Result]", results)  # every index filled: shares() deals each request to one host
    client.refuse_redirects(rows_all)  # a redirect ends the case as it does from here
    return FleetResults(rows_all, owner, [why for _, why in done])
