"""Issue 40, class 4 and part of class 9: a hang-up, a reader that goes away, a refused run.

- SIGHUP (the terminal or the ssh session closed) during `harness run` stops what the run
  started, marks the folder `interrupted` (SIGHUP), writes its report and exits 129. One run
  has a real terminal (a pty, made the run's controlling terminal) that is closed mid-case:
  the kernel sends the hang-up, and every later write to the terminal fails with EIO.
- A pipe whose reader went away (`harness run ... | head -1`): the run measures and writes
  its folder, report and JUnit file anyway; its exit code is its own, with no traceback.
- A run refused before it measured anything (a busy port, bad input found by its first
  case) leaves no folder under --results-dir.

Each run is a real `harness run` in a subprocess in a session of its own. The cluster run
uses a real 6-node cluster on HARNESS_TEST_CLUSTER_PORT + 80 (+80 ... +85, bus ports +10000).
"""

from __future__ import annotations

import errno
import io
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base import signals
from harness.base.errors import BadInput
from harness.base.metrics_model import MetricDecl
from harness.base.paths import STATE_DIR
from harness.model import driver_contract
from harness.model.driver_contract import Metric, Param, Record
from tests import REPO
from tests.conftest import TEST_CLUSTER_PORT

BASE = TEST_CLUSTER_PORT + 80
ENTRY = "import tests.system.test_hostile_signals; from harness.cli import main; main()"
# The run takes its stderr (a pty) as its controlling terminal, as a login shell's job has one.
TTY_ENTRY = "import fcntl, termios; fcntl.ioctl(2, termios.TIOCSCTTY, 0); " + ENTRY


@pytest.fixture(autouse=True)
def _hang_ups_heard():
    """These tests send SIGHUP and expect the harness to hear it. Under `nohup make test` the
    hang-up is ignored from the start, every child inherits that, and the harness rightly keeps
    it ignored: hear it again for each test (and its children), as a terminal's session does."""
    old = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, old)


@driver_contract.register(
    "test-signals-wait",
    metrics=(MetricDecl("waited_s", "s"),),
    params={"seconds": Param(float, 1.0, "how long the case takes", min=0, max=60)},
)
def _wait(ctx):
    """Waits `seconds`."""
    time.sleep(ctx.params["seconds"])
    return Record(metrics={"waited_s": Metric(ctx.params["seconds"], "s")})


@driver_contract.register(
    "test-signals-own-process",
    metrics=(MetricDecl("waited_s", "s"),),
    isolate=True,
    params={"seconds": Param(float, 1.0, "how long the case takes", min=0, max=60)},
)
def _wait_in_own_process(ctx):
    """Waits `seconds` in its own process (harness.run.worker), whose pid it writes first."""
    ctx.raw_path("pid.txt").write_text(str(os.getpid()))
    time.sleep(ctx.params["seconds"])
    return Record(metrics={"waited_s": Metric(ctx.params["seconds"], "s")})


@driver_contract.register(
    "test-signals-traffic",
    metrics=(MetricDecl("ops_per_s", "ops/s", "higher"),),
    needs="cluster",
    params={"seconds": Param(float, 1.0, "how long to send SET/GET", min=0.1, max=60)},
)
def _traffic(ctx):
    """SET/GET on the cluster for `seconds` (the case a hang-up lands in)."""
    c = ctx.target.cluster_client()
    n, t0 = 0, time.monotonic()
    try:
        while time.monotonic() - t0 < ctx.params["seconds"]:
            c.set(f"k{n % 50}", "v")
            n += 1
    finally:
        c.close()
    return Record(metrics={"ops_per_s": Metric(n / (time.monotonic() - t0), "ops/s", "higher")})


@driver_contract.register("test-signals-refuse", params={})
def _refuse(ctx):
    """Finds the user's input wrong once it runs (as a dataset or a model file would be)."""
    raise BadInput("the case's input file is not there; give one that is")


@driver_contract.register("test-signals-on-engines", params={}, engines=("cached",))
def _on_engines(ctx):
    """A case measured on the harness-started serving engine (never reached here)."""
    raise AssertionError("the run should have been refused before this case")


def _spec(tmp: Path, driver: str, target: str = "none", **params) -> Path:
    d = {
        "name": "hostile-signals",
        "description": "d",
        "claim": {"section": "0", "text": "t"},
        "target": target,
        "cases": [{"name": "case", "driver": driver, "params": params}],
        "profiles": {"local": {"repetitions": 1}},
    }
    p = tmp / "hostile-signals.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def _start(spec: Path, results: Path, *extra, entry: str = ENTRY, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("HARNESS_PROMETHEUS_URL", None)
    return subprocess.Popen(
        [sys.executable, "-c", entry, "run", str(spec), "--results-dir", str(results), *extra],
        cwd=REPO,
        env=env,
        start_new_session=True,
        **kw,
    )


def _stop(proc: subprocess.Popen) -> None:
    """The run, if it still runs, and whatever of its session is left: killed."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _ended(proc: subprocess.Popen, timeout: float = 90) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        _stop(proc)


def _running(pid: int, name: str) -> bool:
    """`pid` runs (not a zombie) and its command line names `name`."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, IndexError):
        return False
    return state != "Z" and name in cmd


def _recorded_pids(state_file: Path) -> list[int]:
    """The pids a cluster's state file records: a `pids` list (of ids, or of entries that
    hold one) or entries with a `pid` anywhere in it, the run's own `owner_pid` left out."""
    found: list[int] = []

    def walk(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, int) and not isinstance(value, bool) and key in ("pid", "pids"):
            found.append(value)

    walk(json.loads(state_file.read_text()))
    return sorted(set(found))


def _the_run(results: Path) -> Path:
    runs = list(results.iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def _assert_marked(run_dir: Path, name: str, case: str = "hostile-signals/case/repetition 1") -> None:
    data = json.loads((run_dir / "results.json").read_text())
    man = json.loads((run_dir / "manifest.json").read_text())
    assert data["interrupted"]["signal"] == name and man["interrupted"]["signal"] == name
    assert data["interrupted"]["case"] == case
    assert "INTERRUPTED" in (run_dir / "report.html").read_text()
    assert (run_dir / "junit.xml").is_file()
    assert not (run_dir / ".harness-space-reserve").exists()


# ---- class 4: a hang-up -----------------------------------------------------------------
def test_a_hang_up_stops_the_worker_marks_the_folder_and_exits_129(tmp_path):
    """SIGHUP to the run's process group (as the terminal's hang-up sends it) mid-case."""
    results = tmp_path / "results"
    proc = _start(
        _spec(tmp_path, "test-signals-own-process", seconds=30),
        results,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker = 0
    lines: list[str] = []
    seen = threading.Event()

    def read():
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if "hostile-signals / case / repetition 1/1" in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(60), "\n".join(lines[-20:])
        pid_file = next(iter(results.glob("*/raw/hostile-signals/case/rep1/pid.txt")), None)
        deadline = time.monotonic() + 30
        while (pid_file is None or not pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
            pid_file = next(iter(results.glob("*/raw/hostile-signals/case/rep1/pid.txt")), None)
        worker = int(pid_file.read_text())
        assert _running(worker, "harness.run.worker")
        os.killpg(proc.pid, signal.SIGHUP)
        code = _ended(proc)
    finally:
        _stop(proc)
        reader.join(5)
        survived = worker and _running(worker, "harness.run.worker")
        if survived:  # the case's process the run started and left
            os.kill(worker, signal.SIGKILL)
    err = "\n".join(lines)
    assert code == 129, (code, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    assert lines[-1] == "interrupted (SIGHUP)", err[-2000:]
    assert not survived, "the case's own process outlived the hang-up"
    run_dir = _the_run(results)
    _assert_marked(run_dir, "SIGHUP")
    assert str(run_dir) in err


def _read_until(fd: int, marker: str, timeout: float) -> str:
    out, deadline = b"", time.monotonic() + timeout
    while marker.encode() not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every slave end is closed (the run ended)
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


def test_closing_the_terminal_stops_the_cluster_marks_the_folder_and_exits_129(tmp_path):
    """A real hang-up: the run's controlling terminal (a pty) is closed while its case sends
    traffic to the cluster it started. The kernel sends SIGHUP; every later write to the
    terminal fails (EIO). Every node the run recorded is stopped, the folder is marked and
    reported, exit 129."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed (apt-get install redis-server redis-tools)")
    results = tmp_path / "results"
    state_file = STATE_DIR / f"cluster-127.0.0.1-{BASE}" / "state.json"
    master, slave = os.openpty()
    try:
        proc = _start(
            _spec(tmp_path, "test-signals-traffic", target="cluster", seconds=30),
            results,
            "--base-port",
            str(BASE),
            entry=TTY_ENTRY,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
        )
    finally:
        os.close(slave)
    pids: list[int] = []
    try:
        out = _read_until(master, "hostile-signals / case / repetition 1/1", 90)
        assert "hostile-signals / case / repetition 1/1" in out, out[-2000:]
        pids = _recorded_pids(state_file)
        assert len(pids) == 6 and all(_running(p, "redis-server") for p in pids), pids
        time.sleep(0.3)
        os.close(master)  # the terminal is gone
        master = -1
        code = _ended(proc)
    finally:
        if master >= 0:
            os.close(master)
        _stop(proc)
        left = [p for p in pids if _running(p, "redis-server")]
        for p in left:  # nodes the run started and left: never the user's (checked by name above)
            os.kill(p, signal.SIGKILL)
    assert code == 129, code
    assert not left, f"redis-server nodes outlived the hang-up: {left}"
    assert not state_file.exists()
    _assert_marked(_the_run(results), "SIGHUP")


def _nodes_on(ports: range) -> list[int]:
    """redis-server processes serving one of `ports` (this test's own ports)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and _running(int(d.name), "redis-server"):
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
            if any(f"127.0.0.1:{p}" in cmd for p in ports):
                out.append(int(d.name))
    return out


def test_a_hang_up_during_cluster_up_stops_the_nodes_it_started():
    """`harness cluster up` hung up while its nodes start: the nodes it started (those in its
    state file and the one starting) are stopped, the state file goes, exit 129."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed (apt-get install redis-server redis-tools)")
    ports = range(BASE, BASE + 6)
    assert not _nodes_on(ports), "nodes on this test's ports were running before it"
    state_file = STATE_DIR / f"cluster-127.0.0.1-{BASE}" / "state.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "cluster", "up", "--base-port", str(BASE)],
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: list[int] = []
    try:
        for line in proc.stderr:
            if f"starting redis-server 127.0.0.1:{BASE + 3}" in line:
                break
        pids = _recorded_pids(state_file)
        assert len(pids) >= 3 and all(_running(p, "redis-server") for p in pids), pids
        os.killpg(proc.pid, signal.SIGHUP)
        err = proc.stderr.read()
        code = _ended(proc, 60)
    finally:
        _stop(proc)
        left = sorted(set(_nodes_on(ports)) | {p for p in pids if _running(p, "redis-server")})
        for p in left:  # nodes the command started and left
            os.kill(p, signal.SIGKILL)
    assert code == 129, (code, err[-2000:])
    assert not left, f"nodes outlived the hang-up: {left}"
    assert not state_file.exists()
    assert "Traceback" not in err and err.splitlines()[-1] == "interrupted (SIGHUP)", err[-2000:]


def test_a_hang_up_ignored_from_the_start_stays_ignored(tmp_path):
    """`nohup harness run ...` (SIGHUP ignored) or a background job (SIGINT ignored): the
    signal is ignored when the harness starts, so the run goes on through it; install()
    keeps it ignored, and a held-back block does not turn it into an interrupt."""
    before = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGINT)}
    for s in before:
        signal.signal(s, signal.SIG_IGN)
    try:
        old = signals.install()
        try:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            try:
                with signals.deferred_interrupts():
                    os.kill(os.getpid(), signal.SIGHUP)
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.05)
            except KeyboardInterrupt:
                pytest.fail("an ignored signal was raised as an interrupt after a held-back block")
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        finally:
            signals.restore(old)
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_a_hang_up_during_a_held_back_block_is_raised_after_it():
    """A SIGHUP while what the harness started is being stopped waits until the block ends,
    then goes on as HungUp (a KeyboardInterrupt that names SIGHUP, exit 129)."""
    old = signals.install()
    done = []
    try:
        with pytest.raises(signals.HungUp) as e:
            with signals.deferred_interrupts():
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(0.05)
                done.append(True)
    finally:
        signals.restore(old)
    assert done and isinstance(e.value, KeyboardInterrupt)
    assert signals.signal_name(e.value) == "SIGHUP" and signals.exit_code(e.value) == 129


# ---- class 9: a reader that goes away --------------------------------------------------
def _assert_measured(results: Path) -> None:
    run_dir = _the_run(results)
    data = json.loads((run_dir / "results.json").read_text())
    assert [(r["status"], sorted(r["metrics"])) for r in data["records"]] == [("ok", ["waited_s"])]
    assert "interrupted" not in data
    assert (run_dir / "report.html").is_file() and (run_dir / "junit.xml").is_file()


def test_stdout_whose_reader_left_before_the_summary(tmp_path):
    """`harness run ... | head -0`: the reader is gone before anything is printed. The run
    measures, writes its folder and exits 0 (its own code); stderr has no traceback."""
    results = tmp_path / "results"
    proc = _start(
        _spec(tmp_path, "test-signals-wait", seconds=0.2),
        results,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader went away
    try:
        err = proc.stderr.read()
    finally:
        code = _ended(proc)
    assert code == 0, (code, err[-2000:])
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err, err[-2000:]
    _assert_measured(results)


def test_stderr_whose_reader_left_after_one_line(tmp_path):
    """`harness run ... 2>&1 | head -1`: the progress lines' reader reads one line and goes.
    The run goes on: it measures, writes its folder, prints its summary and exits 0."""
    results = tmp_path / "results"
    proc = _start(
        _spec(tmp_path, "test-signals-wait", seconds=1.0),
        results,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stderr.readline()
        proc.stderr.close()
        out = proc.stdout.read()
    finally:
        code = _ended(proc)
    assert first.startswith("run "), first
    assert code == 0, (code, out[-2000:])
    assert "results: " in out and "junit:" in out, out[-2000:]
    _assert_measured(results)


class _Failing(io.StringIO):
    """A stream whose writes fail with `fail` (an errno) once it is set."""

    fail = 0

    def write(self, s):
        if self.fail:
            raise OSError(self.fail, os.strerror(self.fail))
        return super().write(s)


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.text(max_size=20), max_size=8),
    gone_at=st.integers(0, 8),
    err=st.sampled_from([errno.EPIPE, errno.EIO]),
)
def test_a_guarded_stream_drops_output_once_its_reader_is_gone(texts, gone_at, err):
    """Whatever is written, the first write that fails because the reader or the terminal
    left (EPIPE, EIO...) turns the stream off: no error, nothing written after it."""
    inner = _Failing()
    g = signals.GuardedStream(inner)
    for i, text in enumerate(texts):
        if i == gone_at:
            inner.fail = err
        assert g.write(text) == len(text)
        g.flush()
    inner.fail = 0
    g.write("after\n")
    assert inner.getvalue() == "".join(texts[:gone_at]) + ("" if g.gone else "after\n")
    assert g.gone == (gone_at < len(texts))


def test_a_guarded_stream_lets_other_errors_through():
    """An error that is neither a reader gone nor a full disk (a bad descriptor, say) goes on
    as it is (a full disk is dropped: tests/system/test_hostile_variants.py)."""
    inner = _Failing()
    inner.fail = errno.EBADF
    with pytest.raises(OSError):
        signals.GuardedStream(inner).write("x")


def test_a_guarded_stream_on_a_pipe_whose_reader_left_points_it_at_devnull():
    r, w = os.pipe()
    os.close(r)
    stream = os.fdopen(w, "w")
    try:
        g = signals.GuardedStream(stream)
        g.write("x" * 10)
        g.flush()  # EPIPE: the reader is gone
        assert g.gone and os.readlink(f"/proc/self/fd/{w}") == os.devnull
        stream.write("more")
        stream.flush()  # what was left in the buffer goes to /dev/null, no error
    finally:
        stream.close()


# ---- class 9: a refused run leaves no folder -------------------------------------------
def test_a_busy_port_leaves_no_run_folder(tmp_path):
    """Another program holds one of the cluster's ports: the run is refused (exit 3, one
    line naming the port) and leaves nothing under --results-dir."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed (apt-get install redis-server redis-tools)")
    results = tmp_path / "results"
    with socket.socket() as held:
        held.bind(("127.0.0.1", BASE + 3))
        proc = _start(
            _spec(tmp_path, "test-signals-traffic", target="cluster"),
            results,
            "--base-port",
            str(BASE),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = proc.communicate(timeout=90)
        finally:
            _stop(proc)
    assert proc.returncode == 3, err[-2000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"port {BASE + 3}" in errors[0], err[-2000:]
    assert "Traceback" not in err
    assert not results.is_dir() or not any(results.iterdir()), list(results.iterdir())


def test_input_found_bad_by_the_first_case_leaves_no_run_folder(tmp_path):
    """The first case finds the user's input wrong before anything was measured: exit 2 with
    its line, and no folder (compare and history would pool an empty one)."""
    from harness.cli import main

    results = tmp_path / "results"
    with pytest.raises(SystemExit) as e:
        main(["run", str(_spec(tmp_path, "test-signals-refuse")), "--results-dir", str(results)])
    assert e.value.code == 2
    assert not results.is_dir() or not any(results.iterdir()), list(results.iterdir())


def test_a_bad_engine_setting_found_once_the_folder_is_made_leaves_no_run_folder(tmp_path, monkeypatch):
    """HARNESS_ENGINE_PORT out of range is found when the run's engines are planned, after
    the folder is made: exit 2 naming the variable, and no folder."""
    from harness.cli import main

    monkeypatch.setenv("HARNESS_ENGINE_PORT", "99999")
    monkeypatch.delenv("HARNESS_LLM_URL", raising=False)
    results = tmp_path / "results"
    with pytest.raises(SystemExit) as e:
        main(["run", str(_spec(tmp_path, "test-signals-on-engines")), "--results-dir", str(results)])
    assert e.value.code == 2
    assert not results.is_dir() or not any(results.iterdir()), list(results.iterdir())


# ---- issue 53, point 7: Ctrl-C while the command line is still importing ------------------
def _importing(pid: int) -> bool:
    """Whether the process has begun importing the harness's dependencies: a C extension of
    site-packages is mapped (the interpreter's own start, which no program can guard, is over)."""
    try:
        return "site-packages" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.25, 0.5])
def test_ctrl_c_while_the_cli_imports_is_one_line_and_exit_130(delay):
    """`python -m harness` takes about a second to import here: a Ctrl-C at any moment of it
    is `interrupted (SIGINT)` and exit 130, never Python's traceback (nor exit -2)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "harness", "list"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    deadline = time.monotonic() + 30
    while not _importing(p.pid) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay)
    if p.poll() is not None:
        pytest.skip("the command finished before the signal")
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert p.returncode == 130, (p.returncode, err)
    assert err.strip().splitlines()[-1] == "interrupted (SIGINT)"


def test_the_console_script_starts_where_a_ctrl_c_is_held():
    """pyproject's `harness` script enters through harness.__main__ (light, holds a Ctrl-C
    during the import), not harness.cli (whose import is the second a Ctrl-C hit)."""
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["harness"] == "harness.__main__:main"
