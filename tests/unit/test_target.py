"""harness.infra.target.Target says where and how: the nodes, the load generator, the engines,
and the credentials handed over in the environment only. A broken load-generator entry in
an inventory is bad input (exit 2, one line), never a silent local run."""

from __future__ import annotations

import json

import pytest

from harness.base.errors import BadInput
from harness.cli import main
from harness.infra import inventory
from harness.infra.load_tools import memtier, redis_benchmark
from harness.infra.process import RemoteHost
from harness.infra.target import PASSWORD_ENV, USERNAME_ENV, LlmEndpoint, Node, Target


def _target() -> Target:
    return Target(
        "inv.yml",
        "cluster",
        [Node("127.77.0.11", 6379, "primary")],
        password="S3cret-pw",
        username="cache-reader",
        engines={"cached": LlmEndpoint("http://127.77.0.18:8011", "m")},
        loadgen=RemoteHost("loadgen-1", "127.77.0.17", "ops", 2222),
    )


def test_to_json_says_where_and_never_the_credentials():
    tgt = _target()
    text = json.dumps(tgt.to_json())
    assert "S3cret-pw" not in text and "cache-reader" not in text
    again = Target.from_json(json.loads(text))
    assert again.loadgen == tgt.loadgen and again.nodes == tgt.nodes and again.engines == tgt.engines
    assert again.password is None and again.username is None


def test_the_credentials_travel_in_the_environment():
    tgt = _target()
    env = tgt.to_env()
    assert env == {PASSWORD_ENV: "S3cret-pw", USERNAME_ENV: "cache-reader"}
    again = Target.from_env(tgt.to_json(), env)
    assert (again.password, again.username, again.loadgen) == ("S3cret-pw", "cache-reader", tgt.loadgen)
    assert Target("local").to_env() == {} and Target.from_env(Target("local").to_json(), {}).password is None


def test_the_load_tools_run_where_the_target_says():
    tgt = _target()
    assert redis_benchmark.ran_on(tgt) == memtier.ran_on(tgt) == "loadgen-1 (127.77.0.17) over SSH"
    assert inventory.loadgen_summary(tgt)["address"] == "127.77.0.17"
    tgt.loadgen = None
    assert "the harness's own machine" in memtier.ran_on(tgt)


def _inventory(tmp_path, loadgen: str):
    p = tmp_path / "hosts.yml"
    p.write_text(
        "all:\n  children:\n    redis:\n      hosts:\n        r1: {ansible_host: 127.77.0.11}\n"
        "    loadgen:\n      hosts:\n" + loadgen
    )
    return p


@pytest.mark.parametrize(
    "entry, needle",
    [
        ("        lg-1: {ansible_host: '-oProxyCommand=x'}\n", "ansible_host"),
        ("        lg-1: {ansible_host: 127.77.0.17, ansible_port: '22'}\n", "ansible_port"),
        ("        lg-1: {ansible_host: 127.77.0.17, ansible_user: '-lroot'}\n", "ansible_user"),
    ],
)
def test_a_broken_loadgen_entry_is_bad_input(tmp_path, capsys, entry, needle):
    inv = _inventory(tmp_path, entry)
    with pytest.raises(BadInput, match=needle):
        inventory.load_target(inv)
    with pytest.raises(SystemExit) as e:
        main(["run", "redis-cluster/acl", "--target", str(inv), "--results-dir", str(tmp_path / "r")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert e.value.code == 2 and len(err) == 1 and needle in err[0], err


def test_several_load_generators_travel_with_the_target():
    tgt = _target()
    tgt.other_loadgens = [RemoteHost("loadgen-2", "127.77.0.19"), RemoteHost("loadgen-3", "127.77.0.20")]
    again = Target.from_json(json.loads(json.dumps(tgt.to_json())))
    assert again.load_generators == tgt.load_generators and len(again.load_generators) == 3
    summary = inventory.loadgen_summary(tgt)
    assert summary["address"] == "127.77.0.17" and [o["address"] for o in summary["others"]] == [
        "127.77.0.19",
        "127.77.0.20",
    ]
    assert Target("local").load_generators == [None]


def test_every_host_of_the_loadgen_group_is_a_load_generator(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HARNESS_LOADGEN", raising=False)
    inv = _inventory(tmp_path, "".join(f"        lg-{i}: {{ansible_host: 127.77.0.{16 + i}}}\n" for i in (1, 2, 3)))
    assert [h.address for h in inventory.loadgen_hosts(inv)] == ["127.77.0.17", "127.77.0.18", "127.77.0.19"]
    assert inventory.loadgen_host(inv).name == "lg-1"
    # the plan names every load generator and what runs where, contacting none of them
    with pytest.raises(SystemExit) as e:
        main(["run", "redis-cluster", "--dry-run", "--target", str(inv)])
    out = capsys.readouterr().out
    assert e.value.code == 0, out
    assert "load generators (3): lg-1 (127.77.0.17) over SSH, lg-2 (127.77.0.18) over SSH, lg-3 (127.77.0.19)" in out
    assert "memtier_benchmark runs on all 3 at once" in out and "memtier's control run on lg-1" in out
    monkeypatch.setenv("HARNESS_LOADGEN", "local")
    assert inventory.loadgen_hosts(inv) == []


def test_a_local_host_among_several_load_generators_is_refused(tmp_path):
    inv = _inventory(tmp_path, "        lg-1: {ansible_host: 127.77.0.17}\n        lg-2: {ansible_connection: local}\n")
    with pytest.raises(BadInput, match="'lg-2' is ansible_connection: local"):
        inventory.loadgen_hosts(inv)
    one = _inventory(tmp_path, "        lg-1: {ansible_connection: local}\n")
    assert inventory.loadgen_hosts(one) == []
