"""The serving suite's streaming client's own CPU per request, side by side with two bare
aiohttp SSE readers on the same server in the same session (issue 45): the client must spend
at most 10% more CPU per request than the cheaper of the two.

The server is tests/serving_fakes.py in its own process (so that its CPU is not counted):
each request streams TOKENS chunks in vLLM's recorded shape, GAP_MS apart (each token its own
read, as from an engine decoding), then the usage chunk and [DONE]. Each arm sends the same
seeded Poisson schedule; the process's CPU time (time.process_time) over a round, divided by
its requests, is that arm's CPU per request. The arms alternate in short rounds (the order
rotating) so that a busy shared machine weighs on all of them alike; the ratio is the median
of the per-round ratios. The bare readers measure what the client measures (TTFT, the gaps
between tokens, the server's token count) and no more: `bare_lines` iterates the body's lines
(`async for line in resp.content`), `bare_chunks` reads whatever arrived and splits the
lines itself (as vLLM's benchmark client does).

Runs only with `make bench` (or pytest --benchmark-enable); the normal test run skips it.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

import pytest

from harness.base.paths import REPO_ROOT
from harness.experiments.serving import client
from tests.serving_fakes import free_port

aiohttp = pytest.importorskip("aiohttp")

TOKENS = 128
GAP_MS = 10.0
REQUESTS = 40  # per round and arm
RATE = 40.0  # requests/s
ROUNDS = 8
RATIO_TARGET = 1.10
MODEL = "smollm2"


@pytest.fixture(scope="module")
def server(request):
    """The fake engine in its own process; nothing starts when the benchmarks are disabled."""
    opt = request.config.getoption
    if opt("benchmark_disable") and not opt("benchmark_enable"):  # pytest-benchmark's own rule
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.serving_fakes",
            "--port",
            str(port),
            "--tokens",
            str(TOKENS),
            "--gap-ms",
            str(GAP_MS),
        ],
        cwd=REPO_ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the fake SSE server did not come up on {url}") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


async def _bare_lines(sess, url: str, body: dict) -> tuple:
    st = time.perf_counter()
    first, last, itl, n = None, st, [], None
    async with sess.post(url, json=body) as resp:
        async for line in resp.content:
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                continue
            d, now = json.loads(data), time.perf_counter()
            if d.get("choices"):
                if first is None:
                    first = now - st
                else:
                    itl.append(now - last)
                last = now
            elif d.get("usage"):
                n = d["usage"]["completion_tokens"]
    return first, itl, n


async def _bare_chunks(sess, url: str, body: dict) -> tuple:
    st = time.perf_counter()
    first, last, itl, n, rest = None, st, [], None, b""
    async with sess.post(url, json=body) as resp:
        async for data in resp.content.iter_any():
            now = time.perf_counter()
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if not line.startswith(b"data: ") or line[6:].strip() == b"[DONE]":
                    continue
                d = json.loads(line[6:])
                if d.get("choices"):
                    if first is None:
                        first = now - st
                    else:
                        itl.append(now - last)
                    last = now
                elif d.get("usage"):
                    n = d["usage"]["completion_tokens"]
    return first, itl, n


async def _bare_run(one, url: str, body: dict, times: list[float]) -> list[tuple]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as sess:
        t0, tasks = time.perf_counter(), []
        for at in times:
            delay = t0 + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(sess, url, body)))
        return await asyncio.gather(*tasks)


def _arms(url: str) -> dict:
    times = client.poisson_schedule(REQUESTS, RATE, 1)
    reqs = [client.Request(t, "hello", TOKENS) for t in times]
    body = client.payload(MODEL, reqs[0])
    completions = client.completions_url(url)

    def harness_client():
        res = client.run(url, MODEL, reqs)
        assert [(r.status, r.output_tokens, r.chunks, len(r.itl_ms)) for r in res] == [
            ("ok", TOKENS, TOKENS, TOKENS - 1)
        ] * REQUESTS, res[0].error
        assert all(r.ttft_ms > 0 and r.tpot_ms > 0 for r in res)

    def bare(one):
        def run():
            res = asyncio.run(_bare_run(one, completions, body, times))
            assert [(n, len(itl)) for _, itl, n in res] == [(TOKENS, TOKENS - 1)] * REQUESTS

        return run

    return {"client": harness_client, "bare_lines": bare(_bare_lines), "bare_chunks": bare(_bare_chunks)}


def _cpu_ms_per_request(fn) -> float:
    t = time.process_time()
    fn()
    return 1000 * (time.process_time() - t) / REQUESTS


def interleaved(url: str) -> dict[str, list[float]]:
    """CPU ms per request of each arm, ROUNDS rounds, the arms' order rotating each round."""
    arms = _arms(url)
    for fn in arms.values():  # warm-up: imports, first connections
        fn()
    out: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for k in range(ROUNDS):
        for name in names[k % 3 :] + names[: k % 3]:
            out[name].append(_cpu_ms_per_request(arms[name]))
    return out


def test_client_cpu_per_request_within_10pct_of_a_bare_reader(benchmark, server):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")
    load_before = os.getloadavg()[0]
    cpu = benchmark.pedantic(interleaved, args=(server,), rounds=1, iterations=1)
    ratios = {
        ref: statistics.median(c / b for c, b in zip(cpu["client"], cpu[ref])) for ref in ("bare_lines", "bare_chunks")
    }
    info = {f"{name}_cpu_ms_per_request_median": round(statistics.median(v), 3) for name, v in cpu.items()}
    info.update({f"{name}_cpu_ms_per_request": [round(x, 3) for x in v] for name, v in cpu.items()})
    info.update({f"ratio_vs_{ref}": round(r, 3) for ref, r in ratios.items()})
    info["load_average_1min_before_after"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    info["setup"] = {"tokens": TOKENS, "gap_ms": GAP_MS, "requests_per_round": REQUESTS, "rate": RATE, "rounds": ROUNDS}
    benchmark.extra_info.update(info)
    ratio = max(ratios.values())  # against the cheaper bare reader
    assert ratio <= RATIO_TARGET, f"the client spends {ratio:.2f}x a bare reader's CPU per request: {info}"
