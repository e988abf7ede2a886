"""Fixtures that start real redis-server processes on loopback.

The session cluster uses ports 7100-7105 (and bus ports 17100-17105) so that it never
collides with a cluster of `make reproduce` or `harness cluster up` on 7000-7005.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
from pathlib import Path

import pytest

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

    c = LocalCluster(base_port=TEST_CLUSTER_PORT, state_dir=tmp_path_factory.mktemp("cluster"))
    target = c.up()
    try:
        yield target
    finally:
        c.down()


@pytest.fixture
def redis_server(tmp_path):
    """Factory: start a standalone redis-server with extra config; all are stopped after the test."""
    _need_redis()
    from harness.infra.redis_server import RedisProcess

    started = []

    def start(config: dict | None = None) -> RedisProcess:
        p = RedisProcess("127.0.0.1", free_port(), tmp_path / f"redis-{len(started)}", config=config)
        started.append(p)
        return p.start()

    yield start
    for p in started:
        p.stop()


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
    """harness.infra.process remembers secrets for the whole process (a run's passwords); a test's
    one-letter URL password ('HTTP://A:B@H') must not redact 'MiB' in a later test's output."""
    from harness.infra import process

    before = set(process._SECRETS)
    yield
    process._SECRETS.clear()
    process._SECRETS.update(before)
