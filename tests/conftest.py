"""Fixtures that start real redis-server processes on loopback.

The session cluster uses ports 7100-7105 (and bus ports 17100-17105) so that it never
collides with a cluster of `make reproduce` or `harness cluster up` on 7000-7005.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from harness.base import signals as harness_signals
from harness.base.paths import STATE_DIR
from harness.infra import ownership

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HARNESS_STRICT_METRICS", "1")  # a metric a case reports undeclared fails it (runner)

# A test run started as a background job (`cmd &` in a script, nohup) inherits SIGINT ignored,
# and every process it starts inherits that too: the Ctrl-C tests' SIGINTs would then reach
# nothing (13 of them failed so in one CI run). Python's own handler is put back here, so
# that the children start with SIGINT at its default and install theirs.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

FIXTURES = Path(__file__).parent / "fixtures"
# `make test` runs the tests on two workers (pytest-xdist, --dist loadfile). Each worker has
# its own range of cluster ports: the session cluster and every file's clusters at an offset
# from it (+10 ... +99) never meet another worker's. gw0 keeps 7100; gw1 7300, gw2 7400, gw3
# 7700: ranges that hold no test file's fixed port (tests/unit/test_parallel_groups.py checks it;
# the bus ports are these + 10000).
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WORKER_INDEX = int(WORKER[2:]) if WORKER.startswith("gw") and WORKER[2:].isdigit() else 0
if WORKER_INDEX > 3:
    raise pytest.UsageError("at most 4 test workers (-n 4): the tests' cluster ports are laid out for 4")
WORKER_PORTS = (7100, 7300, 7400, 7700)
TEST_CLUSTER_PORT = int(os.environ.get("HARNESS_TEST_CLUSTER_PORT", "7100")) + WORKER_PORTS[WORKER_INDEX] - 7100

# Files that share something no port offset separates run on one worker, one after the other:
# the simulated lab (its namespaces, .harness/lab-sim; failover's partition case brings it up
# too), the engine tests' fixed engine ports (8026-8028 in both files), 7590 (interrupts and
# hostile). Every other file is a group of its own, so that a file's module fixtures and its
# fixed ports stay on one worker (pytest-xdist's loadfile, with these files merged). The
# cold-start tests judge an open-loop schedule (late_pct, pool occupancy in the first second):
# run beside the lab's provisioning and its engine they fell behind in two fresh-clone runs
# (99% late) and passed alone, so they follow the lab on its worker.
GROUPS = {
    "test_lab_sim": "lab",
    "test_lab_sim_engine": "lab",
    "test_failover": "lab",
    "test_cold_start": "lab",
    "test_serving_engine": "engine",
    "test_serving_engine_lifecycle": "engine",
    "test_interrupts": "interrupts",
    "test_hostile": "interrupts",
}
# The longest groups are handed out first (60-360 s each in a serial run), so that no worker
# is left alone at the end with one of them.
LONG_FIRST = (
    "lab",
    "engine",
    "interrupts",
    "test_ansible_llm_engine",
    "test_semantic_verdicts",
    "test_monitoring",
    "test_semantic_onnx",
    "test_cli_selection",
)


def group_of(nodeid_or_path: str) -> str:
    """The group of a test: its file's stem, or the shared group GROUPS gives that file. The
    code mutations (tests/system/test_mutation_suite.py) are grouped by suite, so that two workers run
    them side by side (each worker's runs have their own ports, tests/mutations/framework.py)."""
    path, _, rest = nodeid_or_path.partition("::")
    stem = Path(path).stem
    if stem == "test_mutation_suite" and rest.startswith("test_the_ledger_catches_the_mutation["):
        return "mutations-" + rest.partition("[")[2].partition("/")[0]
    return GROUPS.get(stem, stem)


def pytest_collection_modifyitems(config, items):
    """On a pytest-xdist worker the long groups come first (the scheduler hands the groups out
    in this order; a file keeps its own order). A run without workers keeps pytest's order."""
    if WORKER:
        rank = {g: i for i, g in enumerate(LONG_FIRST)}
        items.sort(key=lambda it: rank.get(group_of(it.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` hands out whole groups (group_of), not whole files. (pytest-xdist's
    own loadgroup marks cannot be used: with pytest 9.2 its renamed node ids are ignored.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByGroup(config, log)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _need_redis():
    if not shutil.which("redis-server"):
        pytest.skip("redis-server not installed (apt-get install redis-server redis-tools)")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A real 6-node cluster (3 primaries + 3 replicas); yields its Target."""
    _need_redis()
    from harness.infra.cluster import LocalCluster

    state_dir = tmp_path_factory.mktemp("cluster")
    c = LocalCluster(base_port=TEST_CLUSTER_PORT, state_dir=state_dir)
    _record().add("clusters", state_dir, TEST_CLUSTER_PORT)  # before a node exists: a kill then leaves none unnamed
    target = c.up()
    try:
        yield target
    finally:
        c.down()
        _record().drop("clusters", state_dir)


@pytest.fixture
def redis_server(tmp_path):
    """Factory: start a standalone redis-server with extra config; all are stopped after the test."""
    _need_redis()
    from harness.infra.redis_server import RedisProcess

    started = []

    def start(config: dict | None = None) -> RedisProcess:
        p = RedisProcess("127.0.0.1", free_port(), tmp_path / f"redis-{len(started)}", config=config)
        started.append(p)
        return p.start(on_spawn=lambda q: _record().add("servers", q.folder, q.entry().as_json()))

    yield start
    for p in started:
        p.stop()
        _record().drop("servers", p.folder)


@pytest.fixture
def cluster_client(cluster):
    """A RedisCluster client of the session cluster; flushes every primary afterwards."""
    client = cluster.cluster_client(decode_responses=False)
    yield client
    for n in cluster.primaries:
        cluster.client(n).flushall()
    client.close()


@pytest.fixture(autouse=True)
def _secrets_are_per_test():
    """harness.infra.secret_store remembers secrets for the whole process (a run's passwords); a test's
    one-letter URL password ('HTTP://A:B@H') must not redact 'MiB' in a later test's output."""
    from harness.infra import secret_store

    before = set(secret_store._SECRETS)
    yield
    secret_store._SECRETS.clear()
    secret_store._SECRETS.update(before)


# ---- a test run stops what it starts (issue 63) ---------------------------------------------
# `make test` passes SIGTERM and SIGHUP on to pytest (Makefile). Here, in pytest-xdist's
# controller and in each worker (and in a run without workers), the first SIGTERM or SIGHUP is
# raised like Ctrl-C (harness.base.signals: Terminated, HungUp) so that every fixture's finalizer
# runs and stops its servers; it is passed on first to the process's own children in its process
# group (the controller's: its workers; a worker's: what its tests run there, a `make lab-sim-up`
# say, given up to FORWARD_WAIT_S to clean up). A signal during a test's teardown or the session's
# end is held (raised once the teardown is done, never in the middle of it), and a later one is
# ignored: one interrupt stops the run, none cuts its cleanup short. The controller waits
# (WORKERS_WAIT_S at most) until its workers' sessions have ended before pytest-xdist stops them
# (it kills a worker 10 s after that).
# Where no finalizer can run (a worker killed with -9), the servers the `cluster` and `redis_server`
# fixtures start are recorded, with each process's start time and folder, in a record per test
# process under .harness/test-runs; the controller, after its workers are gone, and a later test
# run, at its start, stop what a record of a process that no longer runs names and is provably
# that process's (harness.infra.ownership: never a pid alone, never a name).
RUNS_DIR = STATE_DIR / "test-runs"
RUN_ENV = "HARNESS_TEST_RUN"  # the test run's controlling pytest process ("pid-start"), for its workers
FORWARD_WAIT_S = 15.0
WORKERS_WAIT_S = 300.0  # a lab or an engine takes a while to stop; the wait ends when the workers are done


class _Stop:
    role = "single"  # "controller" (pytest-xdist's), "worker", or "single" (a run without workers)
    run = ""  # the test run's id: its controlling process, "pid-start"
    signalled: list[int] = []
    quiet = 0  # > 0: a test's teardown or the session's end is running: a signal is held there
    hup_ignored = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # `nohup make test`: stays ignored


def _on_signal(signum, frame):
    if _Stop.signalled:
        return  # the first one stops the run; a later one must not cut its cleanup short
    _Stop.signalled.append(signum)
    _pass_on(signum)
    _raise_held()


def _raise_held() -> None:
    """Raise the signal that came, unless a teardown runs (then its end raises it). Raised again
    after a test that caught it (`pytest.raises(KeyboardInterrupt)` around what it was in)."""
    if _Stop.signalled and not _Stop.quiet:
        raise harness_signals.interrupt_for(_Stop.signalled[0])


def _pass_on(signum: int) -> None:
    """The signal to this process's children in its own process group (not the servers the
    fixtures start in sessions of their own); outside the controller, wait until they are gone."""
    me, group = os.getpid(), os.getpgrp()
    kids = [ownership.Proc(pid, start) for pid, ppid, pgid, start in ownership.scan() if ppid == me and pgid == group]
    same = lambda p: ownership.start_time(p.pid) == p.start  # noqa: E731 - still that process
    sent = [p for p in kids if ownership.send(p, "/", signum, check=same)]
    deadline = time.monotonic() + (0 if _Stop.role == "controller" else FORWARD_WAIT_S)
    while any(same(p) for p in sent) and time.monotonic() < deadline:
        time.sleep(0.05)


def _install_stop_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, _on_signal)
    if not _Stop.hup_ignored:
        signal.signal(signal.SIGHUP, _on_signal)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # a test that settled (harness.cli) leaves it so
        signal.signal(signal.SIGINT, signal.default_int_handler)


class _Record:
    """What this test process started and must stop, in .harness/test-runs/PID-START.json: the
    session clusters (state folder, base port) and standalone servers (folder, pid, start, port)."""

    def __init__(self):
        start = ownership.start_time(os.getpid())
        self.path = RUNS_DIR / f"{os.getpid()}-{start}.json"
        self.doc = {"pid": os.getpid(), "start": start, "boot": ownership.boot_id(), "run": _Stop.run}
        self.doc.update(clusters={}, servers={})
        ownership.own_dir(RUNS_DIR)
        self._write()

    def _write(self) -> None:
        ownership.write_private(self.path, json.dumps(self.doc))

    def add(self, kind: str, folder, entry) -> None:
        self.doc[kind][str(folder)] = entry
        self._write()

    def drop(self, kind: str, folder) -> None:
        if self.doc[kind].pop(str(folder), None) is not None:
            self._write()

    def close(self) -> None:
        """The session is over: stop what is left (provably this process's), remove the record."""
        _stop_recorded(self.doc)
        self.path.unlink(missing_ok=True)


_RECORD: _Record | None = None


def _record() -> _Record:
    global _RECORD
    if _RECORD is None:
        _RECORD = _Record()
    return _RECORD


def _stop_recorded(doc: dict) -> None:
    """Stop what a record names that is provably its (a cluster's state file, each server's start
    time and folder); anything else is left alone."""
    clusters, servers = doc.get("clusters"), doc.get("servers")
    if not (clusters or servers):
        return
    from harness.base.errors import HarnessError
    from harness.infra.cluster import LocalCluster  # redis: only when something is left

    for folder, base in (clusters or {}).items() if isinstance(clusters, dict) else ():
        if isinstance(folder, str) and type(base) is int:
            try:
                LocalCluster(base_port=base, state_dir=Path(folder)).down(log=ownership.note)
            except HarnessError as e:  # a damaged state file, a base port out of range: one line
                ownership.note(str(e))
    for folder, e in (servers or {}).items() if isinstance(servers, dict) else ():
        fields = ownership.Fields(Path(folder), {"procs": [e]})
        try:
            procs = fields.procs("procs")
        except ownership.DamagedState:
            continue
        ownership.terminate(procs, lambda p, where=Path(folder): where)


def _records() -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(RUNS_DIR.glob("*.json")) if RUNS_DIR.is_dir() else ():
        try:
            doc = ownership.read_state_file(path)
        except ownership.DamagedState as e:
            ownership.note(str(e))
            continue
        if doc is not None:
            out.append((path, doc))
    return out


def _owner_runs(doc: dict) -> bool:
    pid, start = doc.get("pid"), doc.get("start")
    if not ownership.is_pid(pid) or type(start) is not int:
        return False
    return ownership.same_boot(doc) and ownership.owner_alive(pid, start)


def _reap_leftovers() -> None:
    """Stop what test processes that no longer run left running, and remove their records."""
    for path, doc in _records():
        if _owner_runs(doc):
            continue
        if ownership.same_boot(doc):
            _stop_recorded(doc)
        path.unlink(missing_ok=True)


def _wait_for_workers() -> None:
    """Until no worker of this run has a record left (each removes its own once its session
    is over), WORKERS_WAIT_S at most; a Ctrl-C ends the wait."""
    deadline = time.monotonic() + WORKERS_WAIT_S
    try:
        while any(d.get("run") == _Stop.run and _owner_runs(d) for _, d in _records()):
            if time.monotonic() > deadline:
                ownership.note(f"test workers still stopping after {WORKERS_WAIT_S:.0f} s; pytest-xdist stops them now")
                return
            time.sleep(0.1)
    except KeyboardInterrupt:
        return


def pytest_configure(config):
    _Stop.role = "worker" if hasattr(config, "workerinput") else "single"
    _install_stop_handlers()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """The controller (or a run without workers) stops what gone test processes left; a test
    process records what it starts from here on. Before pytest-xdist starts the workers."""
    me = f"{os.getpid()}-{ownership.start_time(os.getpid())}"
    if _Stop.role == "worker":
        _Stop.run = os.environ.get(RUN_ENV, me)
        _record()
        return
    _Stop.run = os.environ[RUN_ENV] = me
    if session.config.pluginmanager.getplugin("dsession") is not None:
        _Stop.role = "controller"
    _reap_leftovers()
    if _Stop.role == "single":
        _record()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    _Stop.quiet += 1  # the session's end is cleanup: a signal is held from here on
    if _Stop.role == "controller" and (_Stop.signalled or exitstatus == pytest.ExitCode.INTERRUPTED):
        _wait_for_workers()
    try:
        return (yield)
    finally:
        if _Stop.role == "controller":
            _reap_leftovers()  # the workers are gone: what one killed with -9 left
        elif _RECORD is not None:
            _RECORD.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    _Stop.quiet += 1
    try:
        return (yield)
    finally:
        _Stop.quiet -= 1
        _raise_held()


@pytest.fixture(autouse=True)
def _interrupts_heard():
    """SIGTERM and SIGHUP stop the run (above), and Ctrl-C is Python's, before and after each
    test: a test that settled its handlers (harness.cli sets SIG_IGN as it exits) or replaced
    them gets them back."""
    _install_stop_handlers()
    yield
    _install_stop_handlers()
