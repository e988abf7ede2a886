"""Hostile inventories (issue 25, class 1 and the inventory half of class 5): every value of
an inventory is data. Host names and addresses are a host name or an IP address (nothing
that starts with '-'), every ssh call ends its options before the destination, an ssh
config named by the inventory that would run a command here is refused, and a deeply
nested, alias-repeating, huge or special-file inventory gives one line and exit 2.

Each hostile value names a marker file that a command run by it would create: the marker
must not exist afterwards. A control runs the real ssh with the old argument order and
shows that the same value does run its command there, so the check proves something.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.base.errors import BadInput
from harness.infra import inventory
from harness.infra.process import RemoteHost
from harness.infra.target import Target
from tests.system.test_hostile import assert_one_line, cli

LOCAL_REDIS = "      hosts: {n1: {ansible_host: 127.0.0.1, redis_cluster_port: 6399}}\n"


def _inv(
    tmp: Path, redis: str = LOCAL_REDIS, loadgen: str | None = None, monitoring: str | None = None, top_vars: str = ""
) -> Path:
    text = "all:\n" + (f"  vars: {top_vars}\n" if top_vars else "") + "  children:\n    redis:\n" + redis
    if loadgen is not None:
        text += "    loadgen:\n" + loadgen
    if monitoring is not None:
        text += "    monitoring:\n" + monitoring
    p = tmp / "hosts.yml"
    p.write_text(text)
    return p


def _q(s: str) -> str:
    """A YAML double-quoted scalar."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def hostile_values(marker: Path) -> list[str]:
    m = str(marker)
    return [
        f"-oProxyCommand=touch {m}",
        f"-o ProxyCommand=touch {m}",
        f"-oLocalCommand=touch {m}",
        f"host;touch {m}",
        f"$(touch {m})",
        f"`touch {m}`",
        f"host|touch {m}",
        f"host && touch {m}",
        "-F/etc/passwd",
        "--",
        "-",
        "",
        "host name",
        "a\nb",
        "user@host",
        "../../etc",
        "host:22",
        f"%h;touch {m}",
        "h" * 300,
        "-1",
    ]


@pytest.fixture
def marker(tmp_path):
    m = tmp_path / "pwned-marker"
    yield m
    assert not m.exists(), "a value from the inventory ran a command on this machine"


@pytest.mark.parametrize("i", range(20))
def test_a_hostile_loadgen_address_is_refused_before_ssh_runs(tmp_path, marker, monkeypatch, i):
    monkeypatch.delenv(inventory.LOADGEN_ENV, raising=False)
    value = hostile_values(marker)[i]
    inv = _inv(tmp_path, loadgen=f"      hosts: {{lg1: {{ansible_host: {_q(value)}}}}}\n")
    if value == "":  # an empty ansible_host falls back to the host's name, which is valid
        assert inventory.loadgen_host(inv).address == "lg1"
        return
    with pytest.raises(BadInput, match="ansible_host"):
        inventory.loadgen_host(inv)
    line = assert_one_line(
        cli("run", "redis-cluster", "--target", inv, "--results-dir", tmp_path / "r"), (2,), "is not a host name"
    )
    assert str(inv) in line


@pytest.mark.parametrize("i", range(12))
def test_a_hostile_host_name_is_refused_as_an_address(tmp_path, marker, monkeypatch, i):
    """With no ansible_host the inventory's host name is the address: the same rule."""
    monkeypatch.delenv(inventory.LOADGEN_ENV, raising=False)
    value = hostile_values(marker)[i]
    inv = _inv(tmp_path, loadgen=f"      hosts: {{{_q(value)}: {{ansible_user: ops}}}}\n")
    with pytest.raises(BadInput, match="is not a host name"):
        inventory.loadgen_host(inv)
    redis = f"      hosts: {{{_q(value)}: {{redis_cluster_port: 6399}}}}\n"
    assert_one_line(
        cli("run", "redis-cluster", "--target", _inv(tmp_path, redis=redis), "--results-dir", tmp_path / "r"),
        (2,),
        "is not a host name",
    )


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("ansible_user", "-oProxyCommand=touch {m}", "not a user name"),
        ("ansible_user", "root;touch {m}", "not a user name"),
        ("ansible_user", "", "not a user name"),
        ("ansible_user", "a b", "not a user name"),
        ("ansible_port", "22; touch {m}", "ansible_port must be a number"),
        ("ansible_port", 70000, "1-65535"),
        ("ansible_port", -1, "1-65535"),
        ("ansible_port", 0, "1-65535"),
        ("ansible_ssh_private_key_file", "-oProxyCommand=touch {m}", "not a file path"),
        ("harness_ssh_config", "-oProxyCommand=touch {m}", "not a file path"),
        ("harness_ssh_config", "a\nb", "not a file path"),
    ],
)
def test_every_loadgen_field_is_checked(tmp_path, marker, monkeypatch, field, value, needle):
    monkeypatch.delenv(inventory.LOADGEN_ENV, raising=False)
    v = value.format(m=marker) if isinstance(value, str) else value
    shown = _q(v) if isinstance(v, str) else str(v)
    inv = _inv(tmp_path, loadgen=f"      hosts: {{lg1: {{ansible_host: 127.0.0.1, {field}: {shown}}}}}\n")
    with pytest.raises(BadInput, match=needle):
        inventory.loadgen_host(inv)


@pytest.mark.parametrize(
    "line",
    [
        "ProxyCommand touch {m}",
        "proxycommand=touch {m}",
        "  LocalCommand touch {m}\n  PermitLocalCommand yes",
        "KnownHostsCommand /bin/sh -c 'touch {m}'",
        'Match exec "touch {m}"',
        "Include /tmp/other.conf",
        "ProxyJump -oProxyCommand=touch{m}",
        "Host *\n  ProxyCommand=touch {m}",
    ],
)
def test_an_ssh_config_that_runs_a_command_is_refused(tmp_path, marker, monkeypatch, line):
    monkeypatch.delenv(inventory.LOADGEN_ENV, raising=False)
    conf = tmp_path / "ssh_config"
    conf.write_text("# written by someone else\nHost lg1\n  HostName 127.0.0.1\n" + line.format(m=marker) + "\n")
    for how in (f"harness_ssh_config: {_q(str(conf))}", f"ansible_ssh_common_args: {_q('-F ' + str(conf))}"):
        inv = _inv(tmp_path, loadgen=f"      hosts: {{lg1: {{ansible_host: 127.0.0.1, {how}}}}}\n")
        with pytest.raises(BadInput, match="ssh config|ProxyJump"):
            inventory.loadgen_host(inv)


def test_a_plain_ssh_config_is_used(tmp_path, monkeypatch):
    """The lab-sim shape of ssh_config (Host blocks, IdentityFile, ControlPath) is accepted."""
    monkeypatch.delenv(inventory.LOADGEN_ENV, raising=False)
    conf = tmp_path / "ssh_config"
    conf.write_text(
        "Host lg1 127.77.0.17\n  HostName 127.77.0.17\nHost *\n  User root\n  IdentityFile /x/id\n"
        "  ControlMaster auto\n  ControlPath /x/cp/%C\n  ProxyJump ops@jump-1:2222\n"
    )
    inv = _inv(tmp_path, loadgen=f"      hosts: {{lg1: {{ansible_host: 127.77.0.17, harness_ssh_config: {conf}}}}}\n")
    host = inventory.loadgen_host(inv)
    assert host.ssh_config == str(conf) and host.ssh_argv("true")[-3:] == ["--", "127.77.0.17", "true"]


@pytest.mark.parametrize("value", ["-oProxyCommand=touch x", "a;b", "$(id)", "h" * 300])
def test_redis_and_monitoring_hosts_are_checked(tmp_path, value):
    redis = f"      hosts: {{n1: {{ansible_host: {_q(value)}, redis_cluster_port: 6399}}}}\n"
    assert_one_line(
        cli("run", "redis-cluster", "--target", _inv(tmp_path, redis=redis), "--results-dir", tmp_path / "r"),
        (2,),
        "is not a host name",
    )
    inv = _inv(tmp_path, monitoring=f"      hosts: {{m1: {{ansible_host: {_q(value)}}}}}\n")
    with pytest.raises(BadInput, match="monitoring host"):
        inventory.prometheus_url(inv)
    inv = _inv(
        tmp_path, monitoring="      hosts: {m1: {ansible_host: 10.0.0.5, monitoring_prometheus_port: '9090/x'}}\n"
    )
    with pytest.raises(BadInput, match="monitoring_prometheus_port"):
        inventory.prometheus_url(inv)
    inv = _inv(tmp_path, monitoring="      hosts: {m1: {ansible_host: 'fd00::5'}}\n")
    assert inventory.prometheus_url(inv) == "http://[fd00::5]:9090"


def test_a_remote_host_checks_itself_whoever_makes_it():
    """RemoteHost is also made from a Target's JSON (the job of a case in its own process)."""
    for bad in (
        {"address": "-oProxyCommand=x"},
        {"user": "-lroot"},
        {"port": "22"},
        {"port": True},
        {"ssh_config": "-F"},
        {"identity": "a\0b"},
        {"name": "$(x)"},
    ):
        with pytest.raises(BadInput):
            RemoteHost(**{"name": "lg", "address": "10.0.0.1", **bad})
    assert RemoteHost("lg-1", "fe80::1", "ops", 22).address == "fe80::1"
    with pytest.raises(BadInput):
        Target.from_json(
            {
                "name": "inv",
                "kind": "cluster",
                "nodes": [{"host": "10.0.0.9", "port": 6379}],
                "loadgen": {"name": "lg", "address": "-oProxyCommand=x"},
            }
        )


def _unchecked_host(address: str) -> RemoteHost:
    """A RemoteHost whose address skipped the checks (as one made before this fix could)."""
    h = object.__new__(RemoteHost)
    for k, v in {
        "name": "lg",
        "address": address,
        "user": None,
        "port": None,
        "ssh_config": None,
        "identity": None,
    }.items():
        object.__setattr__(h, k, v)
    return h


def test_ssh_ends_its_options_before_the_destination(tmp_path):
    """Real ssh: even an address that skipped the checks is a host name to it, never an
    option. The control (the old order, address first) shows the same value runs there."""
    if not shutil.which("ssh"):
        pytest.skip("ssh not installed (apt-get install openssh-client)")
    marker = tmp_path / "pwned-by-ssh"
    evil = f"-oProxyCommand=touch {marker}"
    argv = _unchecked_host(evil).ssh_argv("true", connect_timeout=2)
    assert argv.index("--") == len(argv) - 3 and argv[-2] == evil
    p = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 255 and not marker.exists(), p.stderr
    control = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", evil, "--", "true"]
    subprocess.run(control, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert marker.exists(), "the control must show the option running, else the check above proves nothing"


def test_nothing_in_the_harness_runs_a_shell():
    """Every external command gets its arguments as a list: no shell=True, no os.system or
    os.popen anywhere in the package."""
    root = Path(inventory.__file__).parent
    hits = []
    for f in root.rglob("*.py"):
        text = f.read_text()
        for needle in ("shell=True", "os.system(", "os.popen(", "subprocess.getoutput(", "getstatusoutput("):
            if needle in text:
                hits.append(f"{f.relative_to(root)}: {needle}")
    assert hits == []


# ---- inventories that are not a page of YAML ------------------------------------------
def _nested_yaml(depth: int) -> str:
    return "all: " + "[" * depth + "]" * depth + "\n"


def _nested_groups(depth: int) -> str:
    text, indent = "all:\n  children:\n    redis:\n      hosts: {n1: {ansible_host: 127.0.0.1}}\n", "    "
    for i in range(depth):
        text += f"{indent}g{i}:\n{indent}  children:\n"
        indent += "    "
    return text + f"{indent}last: {{}}\n"


def _alias_bomb(levels: int) -> str:
    lines = [
        "all:",
        "  children:",
        "    redis:",
        "      hosts: {n1: {ansible_host: 127.0.0.1}}",
        "    g0: &g0 {hosts: {h: {}}}",
    ]
    for i in range(1, levels):
        kids = ", ".join(f"k{j}: *g{i - 1}" for j in range(10))
        lines.append(f"    g{i}: &g{i} {{children: {{{kids}}}}}")
    lines.append(f"    top: {{children: {{a: *g{levels - 1}}}}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "name,make,needle",
    [
        ("deeply nested YAML", lambda t: _w(t, _nested_yaml(100_000)), "cannot be read"),
        (
            "deeply nested mapping",
            lambda t: _w(t, "all:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 1500))),
            "cannot be read",
        ),
        ("groups nested 100 deep", lambda t: _w(t, _nested_groups(100)), "nested more than"),
        ("aliases repeating a group 10^7 times", lambda t: _w(t, _alias_bomb(7)), "more than"),
        ("binary file", lambda t: _wb(t, b"\x00\x01all:\n"), "binary"),
        ("not UTF-8", lambda t: _wb(t, "all: caf\xe9\n".encode("latin-1")), "UTF-8"),
        ("too large", lambda t: _sparse(t, inventory.MAX_INVENTORY_BYTES + 1), "too large"),
        ("a FIFO", lambda t: _fifo(t / "hosts.yml"), "FIFO"),
        ("a link to /dev/zero", lambda t: _link(t / "hosts.yml", "/dev/zero"), "character device"),
        ("a folder", lambda t: _mkdir(t / "hosts.yml"), "folder"),
        ("a list", lambda t: _w(t, "- a\n- b\n"), "expected an Ansible YAML inventory"),
    ],
)
def test_inventories_that_are_not_a_page_of_yaml_give_one_line(tmp_path, name, make, needle):
    inv = make(tmp_path)
    line = assert_one_line(cli("run", "redis-cluster", "--target", inv, "--results-dir", tmp_path / "r"), (2,), needle)
    assert len(line) < 600, line


@pytest.mark.parametrize("kind", ["fifo", "huge", "nested", "devzero"])
def test_group_vars_that_are_not_a_page_of_yaml_give_one_line(tmp_path, kind):
    inv = _inv(tmp_path)
    gv = tmp_path / "group_vars"
    gv.mkdir()
    target = gv / "all.yml"
    {
        "fifo": lambda: os.mkfifo(target),
        "huge": lambda: _sparse_at(target, inventory.MAX_INVENTORY_BYTES + 1),
        "nested": lambda: target.write_text(_nested_yaml(100_000)),
        "devzero": lambda: target.symlink_to("/dev/zero"),
    }[kind]()
    assert_one_line(cli("run", "redis-cluster", "--target", inv, "--results-dir", tmp_path / "r"), (2,), "group_vars")


def _w(t: Path, text: str) -> Path:
    (t / "hosts.yml").write_text(text)
    return t / "hosts.yml"


def _wb(t: Path, data: bytes) -> Path:
    (t / "hosts.yml").write_bytes(data)
    return t / "hosts.yml"


def _sparse_at(p: Path, size: int) -> Path:
    with open(p, "wb") as f:
        f.truncate(size)
    return p


def _sparse(t: Path, size: int) -> Path:
    return _sparse_at(t / "hosts.yml", size)


def _fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


def _link(p: Path, to: str) -> Path:
    p.symlink_to(to)
    return p


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p
