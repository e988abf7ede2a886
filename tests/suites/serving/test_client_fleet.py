"""The streaming client on several load generators (harness.experiments.serving.client_fleet):
the requests are dealt round-robin, each host's rows come back at their requests' places, and
a host that fails leaves its requests as errors naming it. The SSH path itself runs in the lab
in a box (tests/system/test_lab_sim_engine.py: the prefix-cache case with client_on=loadgens)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import asdict

import pytest

from harness.experiments.serving import client_fleet, client_worker
from harness.experiments.serving.client import Request, Result
from harness.infra.process import CLOCK_COMMAND, RemoteHost


def test_shares_deal_every_request_once():
    parts = client_fleet.shares(10, 3)
    assert parts == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(i for p in client_fleet.shares(101, 7) for i in p) == list(range(101))


def _host_answers(monkeypatch, answers: dict[str, tuple[int, bytes, bytes]], seen: dict, skew_s: float = 0.0):
    """Each host answers its job with `answers[name]`; its clock is `skew_s` x its number ahead."""

    def fake_run(self, command, timeout=30, stdin=None, processes=None):
        if command == CLOCK_COMMAND:
            return subprocess.CompletedProcess(
                command, 0, repr(time.time() + skew_s * int(self.name[-1])).encode(), b""
            )
        seen[self.name] = (command, json.loads(stdin))
        rc, out, err = answers[self.name]
        return subprocess.CompletedProcess(command, rc, out, err)

    monkeypatch.setattr(RemoteHost, "run", fake_run)


def _rows(job: dict, ttft: float) -> bytes:
    """What client_worker writes: one Result per request of the job, in its order."""
    reqs = client_worker.requests_of(job)
    return json.dumps(
        {"host": "x", "results": [asdict(Result(i, r.tag, r.at_s, "ok", ttft_ms=ttft + i)) for i, r in enumerate(reqs)]}
    ).encode()


def test_rows_come_back_at_their_requests_places_and_a_failed_host_says_so(monkeypatch):
    reqs = [Request(0.1 * i, [1, 2, 3], 4, "arm") for i in range(7)]
    hosts = [RemoteHost(f"lg-{k}", f"127.77.0.{17 + k}") for k in range(3)]
    seen: dict = {}
    jobs = [{"requests": [asdict(reqs[i]) for i in part]} for part in client_fleet.shares(7, 3)]
    answers = {
        "lg-0": (0, _rows(jobs[0], 100.0), b""),
        "lg-1": (0, _rows(jobs[1], 200.0), b""),
        "lg-2": (1, b"", b"Traceback ...\nModuleNotFoundError: No module named 'aiohttp'\n"),
    }
    _host_answers(monkeypatch, answers, seen, skew_s=30.0)
    out = client_fleet.run(
        hosts, "/opt/h/.venv/bin/python", "http://u:pw@127.77.0.18:8051", "m", reqs, timeout_s=5, stall_s=2
    )
    assert [r.index for r in out.results] == list(range(7))
    assert out.hosts == ["lg-0", "lg-1", "lg-2", "lg-0", "lg-1", "lg-2", "lg-0"]
    assert [r.ttft_ms for r in out.results if r.status == "ok"] == [100.0, 200.0, 101.0, 201.0, 102.0]
    failed = [r for r in out.results if r.status != "ok"]
    assert [r.index for r in failed] == [2, 5] and all("lg-2" in r.error and "aiohttp" in r.error for r in failed)
    # the URL (a credential in it) went over stdin, never on the command line; one shared start
    assert all(
        "pw" not in cmd and cmd.endswith("-m harness.experiments.serving.client_worker") for cmd, _ in seen.values()
    )
    # one shared start, given to each host in its own clock (lg-1's is 30 s ahead, lg-2's 60 s)
    starts = [seen[f"lg-{k}"][1]["start_epoch"] for k in range(3)]
    assert abs(starts[1] - starts[0] - 30) < 0.5 and abs(starts[2] - starts[0] - 60) < 0.5
    assert all(job["base_url"] == "http://u:pw@127.77.0.18:8051" for _, job in seen.values())


@pytest.mark.parametrize("answer", [b"not json", b'{"results": []}', b'{"results": [{"index": "x", "oops": 1}]}'])
def test_an_answer_that_is_not_the_rows_fails_that_hosts_requests(monkeypatch, answer):
    reqs = [Request(0.0, "p", 1)]
    _host_answers(monkeypatch, {"lg-0": (0, answer, b"")}, {})
    out = client_fleet.run([RemoteHost("lg-0", "127.77.0.17")], "/p", "http://h:1", "m", reqs, timeout_s=1, stall_s=1)
    assert out.results[0].status == "error" and "lg-0" in out.results[0].error and out.failures[0]
