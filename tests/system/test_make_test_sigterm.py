"""Issue 63: what `make test` starts, it stops. A real `make test` (the Makefile's own recipe,
pytest-xdist with a worker; TEST_FIRST= leaves out setup and lint) runs tests/system/sigterm_target.py,
whose test holds the session cluster (six redis-server processes), a standalone redis-server and a
child of the worker. Then make is sent SIGTERM (as a CI timeout or `kill` does: make passes it to
its shell only), or its whole process group SIGHUP (as a closed terminal does). Afterwards no
process of that run is left: none whose environment carries the run's token (every process the
run started inherits it), the servers' ports are free, the child was told to stop and cleaned up,
and the run's records of what it started (.harness/test-runs) are gone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harness.infra import ownership
from harness.infra.redis_server import port_is_free
from tests import REPO, conftest
from tests.conftest import RUNS_DIR

TARGET = "tests/system/sigterm_target.py"
NOT_INHERITED = ("PYTEST_", "MAKE", "MFLAGS", "HARNESS_TEST_")  # this run's own: the inner run makes its own


@pytest.fixture(autouse=True)
def _hang_ups_heard():
    """Under `nohup make test` SIGHUP is ignored from the start and every child inherits that:
    the `make test` started here hears it again, as a terminal's session does."""
    ignored = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _cluster_base() -> int:
    """Six free ports (and their bus ports, +10000) below the kernel's ephemeral range."""
    for base in range(7500, 7566, 6):
        if all(port_is_free("127.0.0.1", p + bus) for p in range(base, base + 6) for bus in (0, 10000)):
            return base
    pytest.skip("no six free ports in 7500-7571 for the inner run's cluster")


def _of_the_run(token: str, folder: str) -> list[str]:
    """Every live process of the run, "pid command": its environment holds the run's token (every
    process the run starts inherits it), or its working folder is in the run's temporary folder
    (a redis-server writes its title over its environment; it runs in its own folder there)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{name}/cwd")
            stat = Path(f"/proc/{name}/stat").read_text()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ours = token.encode() in env or cwd == folder or cwd.startswith(folder + "/")
        if ours and stat.rsplit(") ", 1)[-1][:1] not in ("Z", "X"):
            found.append(f"{name} {cmd[:120]}")
    return found


def _wait_until(what, timeout: float, why: str, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while not (got := what()):
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.stdout.read() if proc.poll() is not None and proc.stdout else ""
            pytest.fail(f"{why} (make exit {proc.poll()}): {out[-3000:]}")
        time.sleep(0.1)
    return got


def _listening(port: int) -> bool:
    return not port_is_free("127.0.0.1", port)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM-to-make", "SIGHUP-to-its-group"])
def test_make_test_stopped_by_a_signal_leaves_no_process_it_started(tmp_path, sig):
    if not (shutil.which("redis-server") and shutil.which("make")):
        pytest.skip("needs redis-server and make (apt-get install redis-server make)")
    base = _cluster_base()
    token = f"HARNESS_SIGTERM_TOKEN={uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED)}
    env.update(HARNESS_SIGTERM_TARGET=str(tmp_path), HARNESS_TEST_CLUSTER_PORT=str(base))
    env[token.partition("=")[0]] = token.partition("=")[2]
    make = subprocess.Popen(
        [
            "make",
            "--no-print-directory",
            "test",
            "TEST_FIRST=",
            "TEST_WORKERS=1",
            f"PYTEST_ARGS=-p no:cacheprovider {TARGET}",
        ],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the "terminal" a hang-up reaches
    )
    try:
        info_file = tmp_path / "info.json"
        _wait_until(info_file.exists, 90, "the inner test never started", make)
        info = json.loads(info_file.read_text())
        ports = info["cluster_ports"] + [info["server_port"]]
        _wait_until(lambda: all(_listening(p) for p in ports), 10, "the servers are not listening", make)
        running = _of_the_run(token, info["basetemp"])
        assert sum("redis-server" in p for p in running) == 7, running  # the scan sees the run's servers
        assert any(p.startswith(f"{info['worker']} ") for p in running), running
        if sig == signal.SIGTERM:
            os.kill(make.pid, signal.SIGTERM)  # make alone, as `kill` or a CI timeout sends it
        else:
            os.killpg(make.pid, signal.SIGHUP)  # the whole foreground group, as a closed terminal does
        out, _ = make.communicate(timeout=60)
    finally:
        if make.poll() is None:  # the test failed before make ended: stop the run as a user would
            os.killpg(make.pid, signal.SIGTERM)
            try:
                make.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(make.pid, signal.SIGKILL)
                make.wait()
    assert make.returncode == -sig, out[-3000:]  # make ends by the signal, after its recipe did
    deadline = time.monotonic() + 10  # a process signalled last may take a moment to be gone
    while (left := _of_the_run(token, info["basetemp"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], (left, out[-3000:])
    assert not any(_listening(p) for p in ports), out[-3000:]
    assert (tmp_path / "child-cleaned-up").exists(), out[-3000:]  # the worker's child was told, and cleaned up
    run = f"{info['controller']}-"
    records = [json.loads(f.read_text()) for f in RUNS_DIR.glob("*.json")] if RUNS_DIR.is_dir() else []
    assert not [r for r in records if r.get("pid") == info["worker"] or str(r.get("run", "")).startswith(run)]
    assert ("Terminated" if sig == signal.SIGTERM else "HungUp") in out, out[-3000:]  # pytest said why it stopped


def test_a_later_run_stops_only_what_a_gone_test_process_provably_left(redis_server):
    """Where no finalizer ran (a worker killed with -9), the next run's start stops what the
    gone process's record names and is provably its (the start time and folder of each
    server), leaves a process the record names wrongly alone, and removes the record."""
    left, decoy = redis_server(), redis_server()
    gone = subprocess.Popen(["sleep", "0.3"])
    start = ownership.start_time(gone.pid)
    gone.wait()
    doc = {"pid": gone.pid, "start": start, "boot": ownership.boot_id(), "run": f"{gone.pid}-{start}"}
    wrong = {**decoy.entry().as_json(), "start": decoy.start_ticks + 1}  # another start time: not provably it
    doc.update(clusters={}, servers={str(left.folder): left.entry().as_json(), str(decoy.folder): wrong})
    ownership.own_dir(RUNS_DIR)
    record = ownership.write_private(RUNS_DIR / f"{gone.pid}-{start}.json", json.dumps(doc))
    assert _listening(left.port) and _listening(decoy.port)
    conftest._reap_leftovers()
    assert not record.exists()
    assert ownership.start_time(left.pid) is None and not _listening(left.port)
    assert decoy.client().ping() and ownership.start_time(decoy.pid) == decoy.start_ticks
