"""A Ctrl-C (SIGINT) or SIGTERM during prompt-cas: the run is marked interrupted and no
thread of the case outlives it. The case's writer and reader threads are stopped and joined
before the cluster stops, so none of them meets a stopped cluster and prints `Exception in
thread ...` after "interrupted", and no process is left.

A real `harness run` of a tiny prompt-cas spec in a subprocess, on its own 6-node cluster at
HARNESS_TEST_CLUSTER_PORT + 30; the subprocess prints the threads still alive when main()
returns (before the interpreter would wait for them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests import REPO
from tests.conftest import TEST_CLUSTER_PORT, _need_redis

BASE = TEST_CLUSTER_PORT + 30
SPEC = {
    "name": "cas-interrupt",
    "description": "prompt-cas, to be interrupted",
    "claim": {"section": "4.3", "text": "no thread outlives the run"},
    "target": "cluster",
    "cases": [
        {
            "name": "cas",
            "driver": "prompt-cas-rules",
            "params": {"seconds": 6, "writers": 4, "readers": 2, "keys": 4, "modes": ["plain", "incremented"]},
        }
    ],
    "profiles": {"local": {"repetitions": 1}},
}
ENTRY = (
    "import sys, threading\nfrom harness.cli import main\ntry:\n    main()\nfinally:\n"
    "    print('threads left:', sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()"
    " and not t.daemon), file=sys.stderr, flush=True)"
)


def ours() -> list[str]:
    addrs = [f"127.0.0.1:{p}" for p in range(BASE, BASE + 6)]
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if state != "Z" and "redis-server" in cmd and any(a in cmd for a in addrs):
            out.append(f"{d.name} {cmd.strip()}")
    return out


def run_and_signal(spec: Path, results: Path, sig: int, marker: str, delay: float, timeout: float = 120):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "run", str(spec), "--base-port", str(BASE), "--results-dir", str(results)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    seen = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if marker in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(timeout), "never saw the case start:\n" + "\n".join(lines[-20:])
        time.sleep(delay)
        proc.send_signal(sig)
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(5)
    return proc.returncode, "\n".join(lines)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_during_prompt_cas_leaves_no_thread_and_no_traceback(tmp_path, sig):
    _need_redis()
    assert not ours(), f"processes on this test's ports before it ran: {ours()}"
    spec = tmp_path / "cas-interrupt.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    results = tmp_path / "results"
    try:
        # 1.5 s into the first rule: its 4 writers and 2 readers are running (6 s per rule)
        code, out = run_and_signal(spec, results, sig, "cas-interrupt / cas / repetition 1/1", 1.5)
        time.sleep(0.3)
        left = ours()
    finally:
        for line in ours():  # only what this test started, on its own ports
            os.kill(int(line.split()[0]), signal.SIGKILL)
    name = "SIGTERM" if sig == signal.SIGTERM else "SIGINT"
    assert code == (143 if sig == signal.SIGTERM else 130), out[-3000:]
    assert not left, left
    assert "Traceback" not in out and "Exception in thread" not in out, out[-3000:]
    assert out.splitlines()[-1] == "threads left: []", out[-2000:]
    run_dir = next(results.iterdir())
    data = json.loads((run_dir / "results.json").read_text())
    assert data["interrupted"]["signal"] == name
    assert data["interrupted"]["case"] == "cas-interrupt/cas/repetition 1"
