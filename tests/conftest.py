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

# A test run started as a background job (`cmd &` in a script, nohup) inherits SIGINT ignored,
# and every process it starts inherits that too: the Ctrl-C tests' SIGINTs would then reach
# nothing (13 of them failed so in one CI run). Python's own handler is put back here, so
# that the children start with SIGINT at its default and install theirs.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

FIXTURES = Path(__file__).parent / "fixtures"
TEST_CLUSTER_PORT = int(os.environ.get("HARNESS_TEST_CLUSTER_PORT", "7100"))


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
    from harness.cluster import LocalCluster

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
    from harness.redis_server import RedisProcess

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
    """harness.process remembers secrets for the whole process (a run's passwords); a test's
    one-letter URL password ('HTTP://A:B@H') must not redact 'MiB' in a later test's output."""
    from harness import process

    before = set(process._SECRETS)
    yield
    process._SECRETS.clear()
    process._SECRETS.update(before)
