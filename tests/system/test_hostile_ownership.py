"""Ownership that cannot be forged; state files are the harness's own (issue 40, classes 1
and 8, the state-file parts of 3 and 5).

Real processes that the harness did not start (a real redis-server with its own config on
an ephemeral port, a `sleep` renamed `VLLM::EngineCore`, a process group whose leader is
named like vLLM's API server) are named in forged state files, with their true start times
too: `cluster down`, `engine down`, the monitoring stack's stop and the cleanup of a killed
run's leftovers leave every one running. State files that are FIFOs, links to /dev/zero,
folders, or hold values of the wrong type or range are one line naming the file (exit 3),
promptly, never a traceback or a hang. Links at state.json, redis.conf, engine.log and at
the state folders themselves are never written through.

The command lines run as subprocesses (with a timeout) against a state folder in the
test's tmp_path: ENTRY points harness.base.paths.STATE_DIR there before anything reads it.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from tests import REPO
from tests.conftest import TEST_CLUSTER_PORT, _need_redis, free_port
from tests.system.test_hostile import cli

ENTRY = (
    "import sys, pathlib, harness.base.paths as p; p.STATE_DIR = pathlib.Path(sys.argv.pop(1)); "
    "from harness.cli import main; main()"
)
BASE = TEST_CLUSTER_PORT + 60  # no cluster is started on it: `down` and `status` bind nothing
LINKED = TEST_CLUSTER_PORT + 90  # the cluster `up` with links in its folders (3 primaries, no replicas)


def harness(state: Path, *args, timeout: float = 30, limit_mem: bool = False) -> tuple[int, str, str]:
    """`harness ARGS` with its state folder at `state`: (exit code, stdout, stderr). A run
    past `timeout` is killed (this test's own child) and fails the test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}

    def cap():  # a harness that reads /dev/zero whole stops at 2 GB, never the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    p = subprocess.Popen(
        [sys.executable, "-c", ENTRY, str(state), *map(str, args)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=cap if limit_mem else None,
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"harness {' '.join(map(str, args))} did not return within {timeout} s")
    return p.returncode, out, err


def one_error_line(result, needle: str, codes=(3,)) -> str:
    code, out, err = result
    assert "Traceback" not in err + out, err[-2000:]
    assert code in codes, (code, out, err[-1000:])
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], err
    return lines[0]


def ticks(pid: int) -> int:
    """The process's start time as /proc/PID/stat says (what a forger can read too)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])


def boot() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def alive(p: subprocess.Popen) -> bool:
    return p.poll() is None


def wait_for(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cond()


@contextlib.contextmanager
def started(cmd: list[str], **kw):
    """A process of this test (in a session of its own), killed afterwards."""
    p = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        **kw,
    )
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(10)


@pytest.fixture
def foreign_redis(tmp_path):
    """The user's own redis-server: its own config and folder, an ephemeral port outside
    any cluster of the harness."""
    _need_redis()
    import redis

    port = free_port()
    home = tmp_path / "users-redis"
    home.mkdir()
    (home / "redis.conf").write_text(f'port {port}\nbind 127.0.0.1\ndir {home}\nsave ""\nappendonly no\n')
    with started([shutil.which("redis-server"), str(home / "redis.conf")], cwd=home) as p:
        wait_for(lambda: _pings(redis, port))
        p.port = port
        yield p


def _pings(redis, port: int) -> bool:
    try:
        return bool(redis.Redis(host="127.0.0.1", port=port, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def write_json(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def cluster_state(state: Path, base: int = BASE) -> Path:
    return state / f"cluster-127.0.0.1-{base}" / "state.json"


def entries(p: subprocess.Popen, form: str, port: int) -> dict:
    """The forged entry: an older harness's bare pid, or a new one with the true start time
    (or another) and a port of the cluster."""
    if form == "bare":
        return {"pids": [p.pid]}
    return {
        "pids": [p.pid],
        "procs": [{"pid": p.pid, "start": ticks(p.pid) + (0 if form == "exact" else 7), "port": port}],
    }


# ---- class 1: processes it did not start ---------------------------------------------------
@pytest.mark.parametrize("form", ["bare", "exact", "other-start"])
def test_cluster_down_leaves_the_users_redis_named_in_the_state(tmp_path, foreign_redis, form):
    state = tmp_path / "state"
    write_json(
        cluster_state(state),
        {
            "host": "127.0.0.1",
            "base_port": BASE,
            "boot": boot(),
            **entries(foreign_redis, form, BASE),
            "owner_pid": None,
        },
    )
    code, out, err = harness(state, "cluster", "down", "--base-port", BASE)
    assert code == 0 and "Traceback" not in err, err
    assert "stopped 0 processes" in out
    assert "nothing was signalled" in err and str(foreign_redis.pid) in err
    time.sleep(0.3)
    assert alive(foreign_redis), "cluster down stopped a redis-server the harness did not start"
    write_json(cluster_state(state), {"boot": boot(), **entries(foreign_redis, form, BASE)})
    from harness.infra.cluster import LocalCluster

    st = LocalCluster(base_port=BASE, state_dir=cluster_state(state).parent).status()
    assert st["running"] is False and st["pids_alive"] == []


@pytest.mark.parametrize("form", ["bare", "exact"])
def test_the_run_start_cleanup_of_a_leftover_leaves_the_users_redis(tmp_path, foreign_redis, form, monkeypatch):
    """A `harness run` that replaces the cluster a killed run left (run_target.target_for):
    the state names a dead owner and the user's redis-server; the server keeps running."""
    from harness.base.errors import EnvironmentProblem
    from harness.infra import cluster as cluster_mod
    from harness.run import target_lifecycle as run_target

    monkeypatch.setattr(cluster_mod, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(cluster_mod, "LOCK_DIR", tmp_path / "state" / "locks")
    dead = subprocess.Popen(["true"])
    dead.wait()
    write_json(
        cluster_state(tmp_path / "state"),
        {
            "boot": boot(),
            **entries(foreign_redis, form, BASE),
            "owner_pid": dead.pid,
            "owner_start": 1 if form == "exact" else None,
        },
    )

    def no_start(self, *a, **kw):
        raise EnvironmentProblem("(the test stops before a cluster is started)")

    monkeypatch.setattr(cluster_mod.LocalCluster, "up", no_start)
    lines: list[str] = []
    with pytest.raises(EnvironmentProblem, match="the test stops"):
        with run_target.target_for(True, "local", BASE, lines.append):
            pass
    time.sleep(0.3)
    assert alive(foreign_redis), "the leftover cleanup stopped a redis-server the harness did not start"
    assert not any("it holds that run's data, so it is stopped" in ln for ln in lines), lines


def engine_state(state: Path, port: int) -> Path:
    return state / "engine" / f"port-{port}" / "state.json"


@pytest.mark.parametrize("form", ["bare", "exact"])
def test_engine_down_leaves_a_process_named_vllm_enginecore(tmp_path, form):
    state, port = tmp_path / "state", free_port()
    with started(["bash", "-c", "exec -a VLLM::EngineCore sleep 60"], cwd=tmp_path) as p:
        wait_for(lambda: Path(f"/proc/{p.pid}/cmdline").read_bytes().startswith(b"VLLM::"))
        procs = {} if form == "bare" else {"procs": [{"pid": p.pid, "start": ticks(p.pid)}]}
        write_json(
            engine_state(state, port),
            {
                "host": "127.0.0.1",
                "port": port,
                "pgid": p.pid,
                "pids": [p.pid],
                **procs,
                "boot": boot(),
                "config": {"port": port},
            },
        )
        code, out, err = harness(state, "engine", "down", "--port", port)
        assert code == 0 and "Traceback" not in err, err
        assert out.strip() == "stopped 0 processes" and "nothing was signalled" in err
        time.sleep(0.3)
        assert alive(p), "engine down stopped a process only named like vLLM's"
        code, out, err = harness(state, "engine", "down")  # every port: the same
        assert code == 0 and alive(p)


def test_a_foreign_process_group_named_in_the_engine_state_is_never_signalled(tmp_path):
    """A group whose leader is named like vLLM's API server and whose other member is a plain
    `sleep`: the state names the leader as pgid and pid; nothing of the group is signalled."""
    state, port = tmp_path / "state", free_port()
    with started(["bash", "-c", "sleep 60 & exec -a VLLM::APIServer sleep 60"], cwd=tmp_path) as leader:
        wait_for(lambda: Path(f"/proc/{leader.pid}/cmdline").read_bytes().startswith(b"VLLM::"))
        members = [
            int(d.name)
            for d in Path("/proc").iterdir()
            if d.name.isdigit() and int(d.name) != leader.pid and _pgid(int(d.name)) == leader.pid
        ]
        assert len(members) == 1
        write_json(
            engine_state(state, port),
            {
                "port": port,
                "pgid": leader.pid,
                "boot": boot(),
                "pids": [leader.pid],
                "procs": [{"pid": leader.pid, "start": ticks(leader.pid)}],
            },
        )
        code, out, err = harness(state, "engine", "down", "--port", port)
        assert code == 0 and "Traceback" not in err, err
        time.sleep(0.3)
        assert alive(leader), "the group's leader was signalled"
        assert _pgid(members[0]) == leader.pid, "a member of the user's process group was signalled"
        os.kill(members[0], signal.SIGKILL)  # this test's own grandchild


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


@pytest.mark.parametrize("exe", ["", "own"])
def test_a_monitoring_state_naming_its_own_executable_signals_nothing(tmp_path, monkeypatch, exe):
    """The executable a monitoring state names used to be the check (an empty one matched
    every process); the process's start time and folder are now."""
    from harness.infra.monitoring import stack

    monkeypatch.setattr(stack, "STATE_DIR", tmp_path / "state")
    port = free_port()
    sleep = shutil.which("sleep")
    with started([sleep, "60"], cwd=tmp_path) as p:
        procs = [{"name": "node_exporter", "pid": p.pid, "start": ticks(p.pid), "exe": sleep if exe else ""}]
        write_json(
            stack.stack_dir(port) / "state.json",
            {"port": port, "owner": "cluster 127.0.0.1:7590", "processes": procs, "boot": boot()},
        )
        assert not stack.stack_running(port)
        assert stack.stop_stack(port) == 0
        time.sleep(0.3)
        assert alive(p), "the monitoring stop signalled a process the harness did not start"


# ---- what the harness started stays stoppable from its state ----------------------------------
def fake_engine(monkeypatch, tmp_path) -> Path:
    """An engine whose 'python' is a script that sleeps: LocalEngine.spawn's real path (the
    log, the state, the process in the engine's folder) without starting vLLM."""
    from harness.infra.serving_engine import install

    script = tmp_path / "fake-python"
    script.write_text("#!/bin/bash\nexec -a VLLM::APIServer sleep 60\n")
    script.chmod(0o755)
    monkeypatch.setattr(install, "require_installed", lambda venv=None: script)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


def test_an_engine_the_harness_started_is_stopped_from_its_state_and_no_link_is_written_through(tmp_path, monkeypatch):
    """The engine's log is a link to a file of the user's: `spawn` replaces the link (the
    file keeps its content), and `down` from another instance (only the state file to go on)
    stops the process it started. A link at its state file is refused in one line."""
    from harness.base.errors import EnvironmentProblem
    from harness.infra.serving_engine.local import EngineConfig, LocalEngine

    model = fake_engine(monkeypatch, tmp_path)
    folder = tmp_path / "engine"
    folder.mkdir()
    victim = tmp_path / "users-file"
    victim.write_text("precious\n")
    cfg = EngineConfig(port=free_port())
    (folder / "state.json").symlink_to(victim)
    with pytest.raises(EnvironmentProblem, match="state.json.*link.*remove it"):
        LocalEngine(cfg, state_dir=folder, model_dir=model).spawn()
    (folder / "state.json").unlink()
    (folder / "engine.log").symlink_to(victim)
    eng = LocalEngine(cfg, state_dir=folder, model_dir=model)
    eng.spawn()
    try:
        assert victim.read_text() == "precious\n", "a write went through a link"
        assert not (folder / "engine.log").is_symlink() and not (folder / "state.json").is_symlink()
        pid = eng.proc.pid
        other = LocalEngine(cfg, state_dir=folder)
        assert other.running_pids() == [pid]
        assert other.down() == 1
        assert eng.proc.wait(10) is not None
        assert not (folder / "state.json").exists()
    finally:
        if eng.proc is not None and eng.proc.poll() is None:
            eng.proc.kill()
            eng.proc.wait()


# ---- class 3 and 5: damaged state files ------------------------------------------------------
def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize("args", [("cluster", "status", "--base-port", BASE), ("cluster", "down", "--base-port", BASE)])
def test_a_fifo_cluster_state_is_one_line_at_once(tmp_path, args):
    state = tmp_path / "state"
    _fifo(cluster_state(state))
    t0 = time.monotonic()
    one_error_line(harness(state, *args, timeout=30), "state.json")
    assert time.monotonic() - t0 < 25


@pytest.mark.parametrize(
    "args",
    [
        ("engine", "status", "--port", "{port}"),
        ("engine", "down", "--port", "{port}"),
        ("engine", "down"),
        ("engine", "status"),
    ],
)
def test_a_fifo_engine_state_is_one_line_at_once(tmp_path, args):
    state, port = tmp_path / "state", free_port()
    _fifo(engine_state(state, port))
    one_error_line(harness(state, *[a.format(port=port) for a in args], timeout=30), "state.json")


def test_a_fifo_monitoring_state_does_not_hang_cluster_down(tmp_path):
    state = tmp_path / "state"
    _fifo(state / "monitoring-9555" / "state.json")
    code, out, err = harness(state, "cluster", "down", "--base-port", BASE, timeout=30)
    assert code == 0 and "Traceback" not in err and "stopped 0 processes" in out, err


DAMAGED = {
    "pids-5": {"pids": 5},
    "pids-string": {"pids": "123"},
    "owner-string": {"pids": [], "owner_pid": "abc"},
    "owner-huge": {"pids": [], "owner_pid": 10**30},
    "owner-2**63": {"pids": [], "owner_pid": 2**63},
    "pid-huge": {"pids": [2**40]},
    "entry-start-string": {"procs": [{"pid": 4242, "start": "x"}]},
    "entry-port-0": {"procs": [{"pid": 4242, "start": 1, "port": 0}]},
    "procs-dict": {"procs": {"pid": 4242}},
    "pgid-negative": {"pids": [], "pgid": -1},
    "config-list": {"pids": [], "config": [1, 2]},
    "a-list": [1, 2, 3],
}


ENGINE_ONLY = {"pgid-negative", "config-list"}  # fields a cluster's state does not have


@pytest.mark.parametrize("name", sorted(DAMAGED))
@pytest.mark.parametrize("what", ["cluster", "engine"])
def test_damaged_state_values_are_one_line(tmp_path, name, what, monkeypatch):

    if what == "cluster" and name in ENGINE_ONLY:
        pytest.skip("not a field of a cluster's state")
    state, port = tmp_path / "state", free_port()
    _point_state_at(monkeypatch, state)
    path = cluster_state(state) if what == "cluster" else engine_state(state, port)
    write_json(path, DAMAGED[name])
    flag = ("--base-port", BASE) if what == "cluster" else ("--port", port)
    for cmd in ("status", "down"):
        line = one_error_line(cli(what, cmd, *flag), str(path))
        assert "remove it" in line


def _point_state_at(monkeypatch, state: Path) -> None:
    from harness.infra import cluster as cluster_mod
    from harness.infra.monitoring import stack
    from harness.infra.serving_engine import install

    monkeypatch.setattr(cluster_mod, "STATE_DIR", state)
    monkeypatch.setattr(cluster_mod, "LOCK_DIR", state / "locks")
    monkeypatch.setattr(install, "ENGINE_DIR", state / "engine")
    monkeypatch.setattr(stack, "STATE_DIR", state)


@pytest.mark.parametrize("target", ["/dev/zero", "folder", "deep"])
def test_a_state_linked_to_dev_zero_a_folder_or_deep_json_is_one_line(tmp_path, target):
    state = tmp_path / "state"
    path = cluster_state(state)
    path.parent.mkdir(parents=True)
    if target == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif target == "folder":
        path.mkdir()
    else:
        path.write_text("[" * 200_000)
    for cmd in ("status", "down"):
        one_error_line(harness(state, "cluster", cmd, "--base-port", BASE, timeout=30, limit_mem=True), "state.json")


JSON = hs.recursive(
    hs.none()
    | hs.booleans()
    | hs.integers(min_value=-(2**70), max_value=2**70)
    | hs.floats(allow_nan=False)
    | hs.text(max_size=8),
    lambda inner: hs.lists(inner, max_size=4) | hs.dictionaries(hs.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
FIELDS = (
    "pids",
    "procs",
    "owner_pid",
    "owner_start",
    "pgid",
    "boot",
    "config",
    "processes",
    "owner",
    "url",
    "nodes",
    "started",
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=hs.dictionaries(hs.sampled_from(FIELDS), JSON, max_size=5))
def test_any_json_in_a_state_file_is_a_status_or_one_line(tmp_path_factory, monkeypatch, doc):
    """Random JSON values in every field of the three state files: `engine status`, the
    cluster's and the monitoring stack's checks answer, or say in one line what is wrong with
    which file; never a traceback. (Status only: nothing here sends a signal.)"""
    from harness.base.errors import HarnessError
    from harness.infra.cluster import LocalCluster
    from harness.infra.monitoring import stack

    state = tmp_path_factory.mktemp("state")
    _point_state_at(monkeypatch, state)
    port = free_port()
    write_json(cluster_state(state), doc)
    write_json(engine_state(state, port), doc)
    write_json(stack.stack_dir(port) / "state.json", doc)
    code, out, err = cli("engine", "status", "--port", port)
    assert "Traceback" not in err and code in (0, 3), (code, err)
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) <= 1 and all("state.json" in ln for ln in errors), err
    cluster = LocalCluster(base_port=BASE)  # its checks without the CLI's probe of the ports (seconds)
    for check in (
        cluster.status,
        cluster.leftover,
        cluster.is_running,
        lambda: stack.stack_running(port),
        lambda: stack.leftover(port),
        lambda: stack.stacks_owned_by("cluster 127.0.0.1:7000"),
    ):
        try:
            check()
        except HarnessError as e:
            assert "state.json" in str(e) and "\n" not in str(e) and "remove it" in str(e)


# ---- class 8: links in the harness's own state folders --------------------------------------
def test_cluster_up_writes_through_no_link_in_its_folders(tmp_path):
    """Links at a node's redis.conf and at cluster-create.log (to files of the user's): `up`
    replaces them, the files keep their content. A link at its state.json is refused in one
    line, the file it points to unchanged."""
    _need_redis()
    from harness.base.errors import EnvironmentProblem
    from harness.infra.cluster import LocalCluster

    folder = tmp_path / "cluster"
    (folder / f"node-{LINKED}").mkdir(parents=True)
    victims = []
    for name in ("state.json", f"node-{LINKED}/redis.conf", "cluster-create.log"):
        v = tmp_path / f"users-{len(victims)}"
        v.write_text("precious\n")
        (folder / name).symlink_to(v)
        victims.append(v)
    c = LocalCluster(base_port=LINKED, replicas=0, state_dir=folder)
    try:
        with pytest.raises(EnvironmentProblem, match="state.json.*link.*remove it"):
            c.up(timeout=60)
        (folder / "state.json").unlink()
        c.up(timeout=60)
        assert [v.read_text() for v in victims] == ["precious\n"] * 3, "cluster up wrote through a link"
        assert not (folder / "state.json").is_symlink() and json.loads((folder / "state.json").read_text())["pids"]
        assert not (folder / f"node-{LINKED}" / "redis.conf").is_symlink()
    finally:
        c.down()


@pytest.mark.parametrize("where", ["cluster", "node"])
def test_a_state_folder_that_is_a_link_is_refused(tmp_path, where):
    """The cluster's folder, or a node's, is a link to a folder of the user's: one line,
    nothing written there, nothing left running."""
    _need_redis()
    from harness.base.errors import EnvironmentProblem
    from harness.infra.cluster import LocalCluster

    elsewhere = tmp_path / "users-folder"
    elsewhere.mkdir()
    folder = tmp_path / "cluster"
    if where == "cluster":
        folder.symlink_to(elsewhere)
    else:
        folder.mkdir()
        (folder / f"node-{LINKED}").symlink_to(elsewhere)
    c = LocalCluster(base_port=LINKED, replicas=0, state_dir=folder)
    try:
        with pytest.raises(EnvironmentProblem, match="link"):
            c.up(timeout=30)
        assert list(elsewhere.iterdir()) == [], "the harness wrote into a folder it reached through a link"
        assert c.processes == []
    finally:
        c.stop_started()


@pytest.mark.parametrize("there", ["link", "fifo", "file"])
def test_private_writes_and_logs_replace_what_is_there(tmp_path, there):
    """write_private (state.json, redis.conf, prometheus.yml) and open_log (engine.log, the
    monitoring logs): a link, a FIFO or an old file at the name is replaced, never written
    through or blocked on."""
    from harness.infra.ownership import open_log, write_private

    victim = tmp_path / "users-file"
    victim.write_text("precious\n")
    for i, write in enumerate((lambda p: write_private(p, "new\n"), lambda p: open_log(p).close())):
        path = tmp_path / f"target-{i}"
        if there == "link":
            path.symlink_to(victim)
        elif there == "fifo":
            os.mkfifo(path)
        else:
            path.write_text("old\n")
        write(path)
        assert path.is_file() and not path.is_symlink()
        assert path.read_text() in ("new\n", "")
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("there", ["fifo", "link"])
def test_a_port_lock_that_is_a_fifo_or_a_link_is_one_line(tmp_path, there):
    """The port locks under the state folder: a FIFO or a link at a lock file's name is
    refused in one line (it was an OSError traceback, or a lock taken through a link)."""
    from harness.base.errors import EnvironmentProblem
    from harness.infra.cluster import PortLock

    port = free_port()
    lock = PortLock("127.0.0.1", [port], lock_dir=tmp_path)
    victim = tmp_path / "users-file"
    victim.write_text("precious\n")
    if there == "fifo":
        os.mkfifo(lock._path(port))
    else:
        lock._path(port).symlink_to(victim)
    with pytest.raises(EnvironmentProblem, match="remove it"):
        lock.acquire()
    assert not lock.held and victim.read_text() == "precious\n"


def test_the_lab_clusters_leftover_cleanup_stops_only_its_own_servers(tmp_path):
    """failover's lab cluster trusted a state file's pid when the command line merely held
    the lab's address: a process the state names is stopped only when it has the recorded
    start time and runs in the host's own folder."""
    from harness.experiments.failover.partition import LabCluster
    from harness.infra import ownership

    lab = LabCluster(7999, 1000, tmp_path / "lab")
    (lab.folder / "h1").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cmd = ["sleep", "60"]
    ours = subprocess.Popen(cmd, cwd=lab.folder / "h1", start_new_session=True)
    foreign = subprocess.Popen(cmd, cwd=elsewhere, start_new_session=True)
    try:
        entries = [
            ownership.spawned(ours.pid, name="h1").as_json(),
            ownership.spawned(foreign.pid, name="h1").as_json(),
        ]
        lab.state_file.write_text(json.dumps({"boot": ownership.boot_id(), "procs": entries}))
        lab._stop_leftovers()
        assert ours.wait(timeout=10) is not None, "the lab's own leftover is stopped"
        assert foreign.poll() is None, "a process outside the host's folder is never signalled"
        lab.state_file.write_text(json.dumps({"pids": [foreign.pid]}))  # an older harness's state: no start time
        lab._stop_leftovers()
        assert foreign.poll() is None
    finally:
        for p in (ours, foreign):
            p.kill()
            p.wait(timeout=10)


def test_the_postgres_leftover_cleanup_stops_only_its_own_server(tmp_path):
    """cold-start's PostgreSQL: a postmaster.pid naming a process is acted on only when
    owner.json proves it is the server this harness started (start time, running in the data
    folder); a pid elsewhere is a stale file, and an unproven process in the folder is one
    line, never signalled."""
    from harness.base.errors import EnvironmentProblem
    from harness.experiments.cold_start.postgres import OWNER_FILE, PostgresServer
    from harness.infra import ownership

    pg = PostgresServer(free_port(), tmp_path / "pg")
    pg.data_dir.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    procs = []

    def sleeper(cwd):
        procs.append(subprocess.Popen(["sleep", "60"], cwd=cwd, start_new_session=True))
        return procs[-1]

    def leave(server, owner_pid=999_999):
        (pg.data_dir / "postmaster.pid").write_text(f"{server.pid}\n")
        (pg.folder / OWNER_FILE).write_text(
            json.dumps(
                {
                    "boot": ownership.boot_id(),
                    "owner": {"pid": owner_pid, "start": 1},
                    "server": ownership.spawned(server.pid).as_json(),
                }
            )
        )

    try:
        foreign = sleeper(elsewhere)
        leave(foreign)
        assert pg.stop_leftover(timeout=2) is False and foreign.poll() is None  # a pid elsewhere: stale file
        assert not (pg.data_dir / "postmaster.pid").exists()
        ours = sleeper(pg.data_dir)
        leave(ours)
        pg.stop_leftover(timeout=5)
        assert ours.wait(timeout=10) is not None, "the server this harness left is stopped"
        unproven = sleeper(pg.data_dir)
        (pg.data_dir / "postmaster.pid").write_text(f"{unproven.pid}\n")
        (pg.folder / OWNER_FILE).unlink()  # an older harness's folder: no record of who started it
        with pytest.raises(EnvironmentProblem, match="not provably a postgres this harness started"):
            pg.stop_leftover(timeout=2)
        assert unproven.poll() is None
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
