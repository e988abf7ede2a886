"""The local inventory really provisions a Redis Cluster with ansible-playbook (the one
`make provision` runs: ansible-playbook on PATH), a second run changes nothing, the
harness benchmarks it through the same inventory, and teardown.yml removes it.

The committed inventory (ansible/inventories/local.yml) uses ports 7000-7005; the tests
generate a copy on 7600-7605 with its data under tmp_path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from harness.base.paths import REPO_ROOT

ANSIBLE_DIR = REPO_ROOT / "ansible"
BASE_PORT = 7600
PORTS = list(range(BASE_PORT, BASE_PORT + 6))
READER_PASSWORD = "reader-secret-from-env"
# The ansible-playbook that `make provision` runs (the one on PATH); ANSIBLE_PLAYBOOK picks another.
ANSIBLE_PLAYBOOK = os.environ.get("ANSIBLE_PLAYBOOK") or shutil.which("ansible-playbook")
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

pytestmark = pytest.mark.skipif(
    not (ANSIBLE_PLAYBOOK and shutil.which("redis-server") and shutil.which("redis-cli")),
    reason="needs ansible-playbook, redis-server and redis-cli (apt-get install ansible redis-server redis-tools)",
)


def make_inventory(tmp_path, ports, data_root) -> str:
    """A copy of the committed local inventory with other ports and data folder."""
    tree = yaml.safe_load((ANSIBLE_DIR / "inventories" / "local.yml").read_text())
    redis = tree["all"]["children"]["redis"]
    redis["vars"]["redis_cluster_data_root"] = str(data_root)
    hosts = dict(list(redis["hosts"].items())[: len(ports)])
    for hv, port in zip(hosts.values(), ports):
        hv["redis_cluster_port"] = port
    redis["hosts"] = hosts
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return str(path)


def playbook(inventory: str, play: str, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        **(env or {}),
    }
    return subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", inventory, str(ANSIBLE_DIR / play), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def recap(out: str) -> dict[str, dict]:
    return {
        h: {"ok": int(o), "changed": int(c), "unreachable": int(u), "failed": int(f)}
        for h, o, c, u, f in RECAP.findall(out)
    }


def cli(port: int, *args: str, user: tuple[str, str] | None = None) -> str:
    cmd = ["redis-cli", "-h", "127.0.0.1", "-p", str(port)]
    env = dict(os.environ)
    if user:
        cmd += ["--user", user[0]]
        env["REDISCLI_AUTH"] = user[1]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, timeout=10).stdout


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ansible")
    inv = make_inventory(tmp, PORTS, tmp / "redis")
    acl = tmp / "acl.yml"
    acl.write_text(
        yaml.safe_dump(
            {
                "redis_cluster_acl_users": [
                    {
                        "name": "cache_reader",
                        "password": "{{ lookup('ansible.builtin.env', 'REDIS_CACHE_READER_PASSWORD') }}",
                        "rules": "resetkeys ~cache:* resetchannels -@all +get +hgetall",
                    }
                ]
            }
        )
    )
    args = ("-e", f"@{acl}")
    env = {"REDIS_CACHE_READER_PASSWORD": READER_PASSWORD}
    first = playbook(inv, "site.yml", *args, env=env)
    try:
        yield {"inventory": inv, "first": first, "args": args, "env": env, "tmp": tmp}
    finally:
        playbook(inv, "teardown.yml")


def test_first_run_creates_a_healthy_cluster(provisioned):
    first = provisioned["first"]
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    hosts = recap(first.stdout)
    assert len(hosts) == 6 and all(h["failed"] == 0 and h["changed"] > 0 for h in hosts.values())
    for port in PORTS:
        assert "cluster_state:ok" in cli(port, "cluster", "info")
    lines = cli(PORTS[0], "cluster", "nodes").strip().splitlines()
    assert sorted(int(line.split()[1].split("@")[0].rsplit(":", 1)[1]) for line in lines) == PORTS
    flags = [line.split()[2].replace("myself,", "") for line in lines]
    assert flags.count("master") == 3 and flags.count("slave") == 3


def test_acl_user_from_variables_can_only_read_the_cache(provisioned):
    assert provisioned["first"].returncode == 0
    reader = ("cache_reader", READER_PASSWORD)
    # reading is allowed (the reply is a value, nil or a MOVED redirect, never NOPERM)
    assert "NOPERM" not in cli(PORTS[0], "get", "cache:x", user=reader)
    assert "NOPERM" in cli(PORTS[0], "set", "cache:x", "1", user=reader)
    assert "NOPERM" in cli(PORTS[0], "get", "other:x", user=reader)
    conf = (provisioned["tmp"] / "redis" / str(PORTS[0]) / "redis.conf").read_text()
    assert READER_PASSWORD not in conf  # only its SHA-256 is stored


def test_second_run_changes_nothing(provisioned):
    assert provisioned["first"].returncode == 0
    second = playbook(provisioned["inventory"], "site.yml", *provisioned["args"], env=provisioned["env"])
    assert second.returncode == 0, second.stdout[-3000:]
    hosts = recap(second.stdout)
    assert len(hosts) == 6
    assert {h: v["changed"] for h, v in hosts.items()} == {h: 0 for h in hosts}


def test_harness_benchmarks_the_provisioned_cluster(provisioned, tmp_path):
    assert provisioned["first"].returncode == 0
    from harness.run.runner import run_suites
    from tests.unit.test_monitoring import redis_suite

    out = run_suites(
        [redis_suite(tmp_path)],
        target=provisioned["inventory"],
        repeat=1,
        overrides=["redis-benchmark.requests=5000"],
        results_dir=tmp_path / "results",
        log=lambda m: None,
    )
    man = json.loads((out.run_dir / "manifest.json").read_text())
    nodes = man["target_nodes"]["nodes"]
    assert sorted(n["port"] for n in nodes) == PORTS
    assert sorted(n["role"] for n in nodes) == ["primary"] * 3 + ["replica"] * 3
    recs = json.loads((out.run_dir / "results.json").read_text())["records"]
    bench = [r for r in recs if r["case"] == "redis-benchmark"]
    assert bench[0]["status"] == "ok", bench[0]["reason"]
    assert bench[0]["metrics"]["GET.rps"]["value"] > 0


def test_teardown_stops_every_instance(provisioned):
    assert provisioned["first"].returncode == 0
    down = playbook(provisioned["inventory"], "teardown.yml")
    assert down.returncode == 0, down.stdout[-3000:]
    for port in PORTS:
        assert "PONG" not in cli(port, "ping")
    assert not (provisioned["tmp"] / "redis" / str(PORTS[0])).exists()
