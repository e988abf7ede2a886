"""Host identity measured on each host (harness.infra.host_identity): this machine read directly,
an inventory's hosts over real SSH with the inventory's connection data; a host that cannot
be reached is recorded with its error (and counts as unknown), never guessed."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from harness.infra import host_identity
from harness.infra.host_identity import HERE, identity_from, measure, measure_here, measure_remote
from harness.infra.inventory import redis_ssh_hosts
from harness.infra.process import RemoteHost
from harness.infra.target import Node, Target

BOOT = "0a1b2c3d-0000-4000-8000-00000000abcd"
SSH_PORT = 9187  # from this file's range 9100-9199: an sshd of its own, or nothing listening


def test_an_answer_is_an_identity_only_with_a_boot_id():
    got = identity_from(f"boot_id={BOOT}\nmachine_id={'ab' * 16}\nhostname=redis-1\n", "ssh redis-1")
    assert got == {"boot_id": BOOT, "machine_id": "ab" * 16, "hostname": "redis-1", "via": "ssh redis-1"}
    assert identity_from(f"boot_id={BOOT.upper()}\nmachine_id=\n", "x")["machine_id"] is None
    for text in ("boot_id=\nmachine_id=ab\n", "boot_id=not-a-uuid\n", "", "Welcome!\nboot_id=1234\n"):
        got = identity_from(text, "ssh h")
        assert set(got) == {"error", "via"} and "boot id is not readable" in got["error"], text


def test_this_machine_is_read_directly():
    got = measure_here()
    assert got["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    if Path("/etc/machine-id").exists() and Path("/etc/machine-id").read_text().strip():
        assert got["machine_id"] == Path("/etc/machine-id").read_text().strip()
    assert got["via"] == HERE


def test_a_local_target_is_this_machine_without_ssh(monkeypatch):
    def no_ssh(*a, **k):
        raise AssertionError("a loopback host was asked over SSH")

    monkeypatch.setattr(RemoteHost, "run", no_ssh)
    ids = measure(Target("local", "cluster", [Node("127.0.0.1", 7000 + i) for i in range(6)]), {})
    assert set(ids) == {HERE, "127.0.0.1"} and ids["127.0.0.1"]["boot_id"] == ids[HERE]["boot_id"]


def test_a_host_that_does_not_answer_ssh_is_recorded_with_its_error():
    """Real ssh to a port where nothing listens (the lab's address range, which is reached
    over SSH though it is loopback), and a host the inventory gives no usable connection."""
    nodes = [Node("127.77.0.91", 6379), Node("127.77.0.92", 6379), Node("127.0.0.1", 7000)]
    down = RemoteHost("redis-1", "127.77.0.91", port=SSH_PORT, ssh_config="/dev/null")
    t0 = time.monotonic()
    ids = measure(Target("inv", "cluster", nodes), {"127.77.0.91": down, "127.77.0.92": "no SSH connection to it: x"})
    assert time.monotonic() - t0 < host_identity.TIMEOUT_S + 5
    assert ids["127.77.0.91"]["via"] == "ssh redis-1" and "ssh exit 255" in ids["127.77.0.91"]["error"]
    assert ids["127.77.0.92"] == {"error": "no SSH connection to it: x", "via": "none"}
    assert ids["127.0.0.1"]["boot_id"] == ids[HERE]["boot_id"]


def test_the_redis_hosts_are_reached_like_the_load_generator(tmp_path):
    inv = tmp_path / "inventory.yml"
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host *\n  User root\n")
    bad = tmp_path / "bad_config"
    bad.write_text("Host *\n  ProxyCommand nc %h %p\n")
    inv.write_text(f"""all:
  vars: {{ansible_user: root, harness_ssh_config: {cfg}}}
  children:
    redis:
      hosts:
        redis-1: {{ansible_host: 10.9.0.1, ansible_port: 2222}}
        redis-2: {{ansible_host: 10.9.0.2, ansible_ssh_private_key_file: /k/id}}
        redis-3: {{ansible_host: 10.9.0.3, harness_ssh_config: {bad}}}
        here: {{ansible_connection: local}}
""")
    got = redis_ssh_hosts(inv)
    assert got["10.9.0.1"] == RemoteHost("redis-1", "10.9.0.1", "root", 2222, str(cfg), None)
    assert got["10.9.0.2"].identity == "/k/id"
    assert isinstance(got["10.9.0.3"], str) and "ProxyCommand" in got["10.9.0.3"]
    assert got["here"] is None


@contextlib.contextmanager
def private_sshd(tmp_path: Path):
    """A real sshd on 127.0.0.1:SSH_PORT in a mount namespace of its own (its /run is a
    private tmpfs holding /run/sshd), accepting one key; stopped afterwards."""
    key = tmp_path / "id_ed25519"
    hostkey = tmp_path / "host_ed25519"
    for k in (key, hostkey):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(k)], check=True, timeout=30)
    (tmp_path / "authorized_keys").write_text((tmp_path / "id_ed25519.pub").read_text())
    conf = tmp_path / "sshd_config"
    conf.write_text(
        f"ListenAddress 127.0.0.1:{SSH_PORT}\nHostKey {hostkey}\nPidFile /run/sshd.pid\n"
        f"AuthorizedKeysFile {tmp_path}/authorized_keys\nStrictModes no\nUsePAM no\n"
        f"PasswordAuthentication no\nPermitRootLogin prohibit-password\n"
    )
    client = tmp_path / "ssh_config"
    client.write_text("Host *\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n")
    p = subprocess.Popen(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs tmpfs /run && mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e -f {conf}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", SSH_PORT), timeout=0.5):
                break
            time.sleep(0.1)
        if p.poll() is not None:
            pytest.skip(f"sshd did not start here: {p.stderr.read().decode(errors='replace')[-300:]}")
        yield RemoteHost("sim-1", "127.0.0.1", "root", SSH_PORT, str(client), str(key))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists() or not shutil.which("unshare"),
    reason="needs root, openssh-server and unshare (an sshd in a mount namespace of its own)",
)
def test_a_host_over_real_ssh_answers_with_this_kernels_boot_id(tmp_path):
    with private_sshd(tmp_path) as host:
        got = measure_remote(host, timeout=20)
    here = measure_here()
    assert got.get("boot_id") == here["boot_id"], got  # another address of this machine: one host
    assert got["machine_id"] == here["machine_id"] and got["via"] == "ssh sim-1"


REDIS_PORT = 9188  # this file's range: a redis-server of its own
PW = "Host-id-pw-5e1f"


@contextlib.contextmanager
def redis_here(password: str | None = None):
    """A redis-server on 127.0.0.1:REDIS_PORT (no persistence), stopped afterwards."""
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        pytest.skip("needs redis-server and redis-cli")
    argv = ["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    p = subprocess.Popen(
        argv + (["--requirepass", password] if password else []), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", REDIS_PORT), timeout=0.5):
                break
            time.sleep(0.05)
        yield
    finally:
        p.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)


def test_a_local_server_is_read_by_both_paths_and_they_agree():
    """Loopback: the run_id through the harness's Redis client and from redis-cli run here
    are one server's; conditions counts one host, the two readings agreeing."""
    from harness.model import conditions

    with redis_here(PW):
        ids = measure(Target("local", "cluster", [Node("127.0.0.1", REDIS_PORT)], password=PW), {})
    server = ids["127.0.0.1"]["servers"][str(REDIS_PORT)]
    assert set(server) == {"run_id", "on_host"} and server["run_id"] == server["on_host"], server
    assert "servers" not in ids[HERE]  # this machine's own entry is not the Redis host's
    man = {"target_nodes": {"nodes": [{"host": "127.0.0.1", "port": REDIS_PORT}]}, "host_identity": ids}
    facts = conditions.run_facts(man)
    assert (facts["redis_hosts"], facts["loadgen_separate"]) == (1, False)
    assert not any(k.endswith(conditions.DISAGREE_NOTE) for k in facts), facts


def test_a_server_not_there_or_refusing_is_recorded_with_why():
    with redis_here(PW):
        ids = measure(
            Target(
                "local",
                "cluster",
                [Node("127.0.0.1", REDIS_PORT), Node("127.0.0.1", REDIS_PORT + 1)],
                password="wrong-pw",
            ),
            {},
        )
    servers = ids["127.0.0.1"]["servers"]
    assert "WRONGPASS" in servers[str(REDIS_PORT)]["on_host_error"] and "run_id_error" in servers[str(REDIS_PORT)]
    assert servers[str(REDIS_PORT + 1)]["on_host_error"] == f"nothing listens on port {REDIS_PORT + 1} on this host"
    assert "wrong-pw" not in repr(ids)


def test_a_redis_host_over_ssh_is_asked_for_its_servers_in_the_same_session(monkeypatch):
    """The SSH path (RemoteHost.run, here answered by this machine's shell as an SSH session
    to it would): the boot id and every server's run_id come from one command; the password
    travels on stdin, never in the command."""
    seen = []

    def local_shell(self, command, timeout=30, stdin=None, processes=None):
        seen.append((command, stdin))
        return subprocess.run(["sh", "-c", command], input=stdin or b"", capture_output=True, timeout=timeout)

    monkeypatch.setattr(RemoteHost, "run", local_shell)
    host = RemoteHost("redis-1", "10.9.0.1")
    with redis_here(PW):
        ids = measure(Target("inv", "cluster", [Node("127.77.0.31", REDIS_PORT)], password=PW), {"127.77.0.31": host})
    ((command, stdin),) = seen
    assert PW not in command and stdin == f"{PW}\n\n".encode()
    entry = ids["127.77.0.31"]
    assert entry["via"] == "ssh redis-1" and entry["boot_id"] == measure_here()["boot_id"]
    # redis-cli asked the node's own address (127.77.0.31, where nothing answers here): an error,
    # never the server that listens on this machine's 127.0.0.1
    assert "on_host" not in entry["servers"][str(REDIS_PORT)], entry
    assert "run_id_error" in entry["servers"][str(REDIS_PORT)]


def test_run_ids_are_read_from_the_answer_only_when_they_are_run_ids():
    text = f"boot_id={BOOT}\nredis.6379={'ab' * 20}\nredis.6380=ERR NOAUTH Authentication required.\nredis.6381=xyz\n"
    assert host_identity.run_ids_from(text, [6379, 6380, 6381, 6382]) == {
        "6379": {"on_host": "ab" * 20},
        "6380": {"on_host_error": "NOAUTH Authentication required."},
        "6381": {"on_host_error": "xyz"},
        "6382": {"on_host_error": "no answer"},
    }
