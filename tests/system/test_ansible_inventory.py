"""Inventory targets without a lab: which host runs the load tools, and the one redaction
function every kept command line and tool output goes through (no root, no SSH needed)."""

from __future__ import annotations

import json
import sys

import pytest

from harness.base.paths import REPO_ROOT
from harness.infra import process, redaction
from harness.infra.inventory import LOADGEN_ENV, loadgen_host

LAB = REPO_ROOT / "ansible" / "inventories" / "lab.yml"
LOCAL = REPO_ROOT / "ansible" / "inventories" / "local.yml"


def test_the_lab_inventory_names_its_load_generator(monkeypatch):
    monkeypatch.delenv(LOADGEN_ENV, raising=False)
    host = loadgen_host(LAB)
    assert (host.name, host.address, host.user) == ("loadgen-1", "10.20.0.21", "ops")
    argv = host.ssh_argv("true")
    assert argv[0] == "ssh" and "ops" in argv and argv[-3:] == ["--", "10.20.0.21", "true"]
    assert loadgen_host(LOCAL) is None  # no loadgen host: the tools run here
    monkeypatch.setenv(LOADGEN_ENV, "local")
    assert loadgen_host(LAB) is None


def test_an_ssh_config_from_the_inventory_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv(LOADGEN_ENV, raising=False)
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "all:\n  vars: {ansible_ssh_common_args: '-F /x/ssh_config', ansible_user: root}\n"
        "  children:\n    loadgen:\n      hosts:\n        lg: {ansible_host: 127.77.0.17, ansible_port: 2222}\n"
    )
    host = loadgen_host(inv)
    assert host.ssh_config == "/x/ssh_config" and host.port == 2222
    assert host.ssh_argv("true")[:3] == ["ssh", "-F", "/x/ssh_config"]
    inv.write_text("all:\n  children:\n    loadgen:\n      hosts: [a, b]\n")
    from harness.base.errors import BadInput

    with pytest.raises(BadInput, match="expected a mapping"):
        loadgen_host(inv)


def test_load_tools_of_a_target_run_on_its_load_generator():
    from harness.infra.load_tools import memtier, redis_benchmark
    from harness.infra.target import Node, Target

    lg = process.RemoteHost("loadgen-1", "127.77.0.17", ssh_config="/x")
    tgt = Target("inv.yml", "cluster", [Node("127.77.0.11", 6379)], loadgen=lg)
    again = Target.from_json(json.loads(json.dumps(tgt.to_json())))  # travels to isolated cases
    assert again.loadgen == lg
    assert redis_benchmark.ran_on(again) == memtier.ran_on(again) == lg.label
    local = Target("local", "cluster", [Node("127.0.0.1", 7100)])
    assert local.loadgen is None and Target.from_json(local.to_json()).loadgen is None
    assert "over SSH" not in memtier.ran_on(local)


def test_secrets_are_redacted_from_kept_commands_and_output(tmp_path, monkeypatch):
    secret = "s3cr3t-Pw-value"
    monkeypatch.setenv("REDIS_CLUSTER_PASSWORD", secret)
    assert redaction.redact_command(["redis-benchmark", "-a", "anything", f"--authenticate={secret}"]) == [
        "redis-benchmark",
        "-a",
        "***",
        "--authenticate=***",
    ]
    code = f"import sys; print('pw={secret}'); print('{secret}', file=sys.stderr)"
    res = process.run_tool([sys.executable, "-c", code], tmp_path, "tool", 30)
    assert res.ok
    kept = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert set(kept) == {"tool.cmd", "tool.stdout", "tool.stderr"}
    assert all(secret not in t for t in kept.values()) and "pw=***" in kept["tool.stdout"]
    assert secret not in res.command + res.stdout + res.stderr


def test_remote_scripts_read_secrets_from_stdin_not_argv():
    import subprocess

    secret = "it's a 'quoted' pw"
    script = process._remote_script(["printf", "%s|", "-a", secret, f"--authenticate={secret}"], [secret], 10)
    assert secret not in script
    out = subprocess.run(["sh", "-c", script], input=(secret + "\n").encode(), capture_output=True)
    assert out.stdout.decode() == f"-a|{secret}|--authenticate={secret}|"
