"""Issue 63: the ACL case's probes go only on a connection that is the restricted user's, and
destructive probes only to a cluster the harness started.

A login "as the restricted user" that fails without an error is made real here: a TCP proxy in
front of a real redis-server answers AUTH itself (+OK, as some proxies do) and forwards every
other command on its own connection, which runs as `default`, the admin. Before the fix every
probe then ran as the admin and FLUSHALL (ACL DRYRUN said the user may not) erased the node.
What reached the server is read from the server itself (INFO commandstats on a direct
connection), and the data written before the case is checked afterwards.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from harness.base.errors import BadInput, EnvironmentProblem
from harness.experiments.redis_cluster import acl
from harness.infra.target import Node, Target
from harness.model.driver_contract import CaseContext
from tests.conftest import free_port

USER = "trt-infer"
# what only the probes send (the case's own admin commands are SET, HSET, DEL, INFO, ACL ...)
PROBE_ONLY = {"get", "hgetall", "mget", "keys", "scan", "expire", "eval", "flushall", "lastsave", "config|get"} | {
    "acl|list",
    "cluster|reset",
    "cluster|myid",
}


def _read_command(reader) -> tuple[bytes | None, list[bytes]]:
    """One RESP command (an array of bulk strings, as redis-py sends them): its bytes and its words."""
    line = reader.readline()
    if not line:
        return None, []
    raw, words = [line], []
    for _ in range(int(line[1:])):
        header = reader.readline()
        data = reader.read(int(header[1:]) + 2)
        raw += [header, data]
        words.append(data[:-2])
    return b"".join(raw), words


def _encode(words: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


class AuthAnsweringProxy:
    """A proxy in front of a real redis-server that answers AUTH with +OK itself (and takes the
    AUTH part out of a HELLO) and forwards every other command: a login through it "succeeds"
    and leaves the connection as it was."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]  # known (and held) before the server behind it starts
        self.upstream_port = 0
        self.answered: list[list[bytes]] = []  # the AUTH commands it answered itself

    def start(self, upstream_port: int) -> "AuthAnsweringProxy":
        self.upstream_port = upstream_port
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        up = socket.create_connection(("127.0.0.1", self.upstream_port))
        threading.Thread(target=self._relay, args=(up, client), daemon=True).start()
        reader = client.makefile("rb")
        try:
            while True:
                raw, words = _read_command(reader)
                if raw is None:
                    break
                upper = [w.upper() for w in words]
                if upper[:1] == [b"AUTH"]:
                    self.answered.append(words)
                    client.sendall(b"+OK\r\n")
                elif upper[:1] == [b"HELLO"] and b"AUTH" in upper:  # RESP3's login: HELLO 3 AUTH user pass
                    at = upper.index(b"AUTH")
                    self.answered.append(words[at : at + 3])
                    up.sendall(_encode(words[:at] + words[at + 3 :]))  # the server answers HELLO, unauthenticated
                else:
                    up.sendall(raw)
        except OSError:
            pass
        finally:
            for s in (client, up):
                s.close()

    @staticmethod
    def _relay(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


def _calls(server) -> dict[str, int]:
    """The server's own count of each command that reached it (calls + rejected + failed)."""
    stats = server.client().info("commandstats")
    return {
        k[len("cmdstat_") :]: int(v.get("calls", 0)) + int(v.get("rejected_calls", 0)) + int(v.get("failed_calls", 0))
        for k, v in stats.items()
        if k.startswith("cmdstat_")
    }


def _one_node_cluster(redis_server, announce_port: int | None = None):
    """A real one-node Redis Cluster (all 16384 slots) started outside any cluster state of the
    harness; `announce_port`: the port it tells clients (a proxy's), as a node behind NAT does."""
    config = {"cluster-enabled": "yes", "cluster-config-file": "nodes.conf", "cluster-port": free_port()}
    if announce_port:
        config.update({"cluster-announce-ip": "127.0.0.1", "cluster-announce-port": announce_port})
    server = redis_server(config)
    c = server.client(decode_responses=True)
    c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    deadline = time.monotonic() + 20
    while "cluster_state:ok" not in c.execute_command("CLUSTER", "INFO"):
        assert time.monotonic() < deadline, "the one-node cluster did not reach cluster_state:ok"
        time.sleep(0.1)
    c.set("user:data", "precious")
    c.hset("user:hash", mapping={"a": "1"})
    return server


def _case(target: Target, tmp_path, **params):
    p = {k: v.default for k, v in acl.PARAMS.items()} | params
    lines: list[str] = []
    ctx = CaseContext("redis-cluster", "acl", 1, "local", p, tmp_path, target, log=lines.append)
    return acl.run(ctx), lines


def _data_intact(server) -> None:
    c = server.client(decode_responses=True)
    assert c.get("user:data") == "precious" and c.hgetall("user:hash") == {"a": "1"}
    assert c.dbsize() == 2  # the case's own keys are gone again, the user's are there


@pytest.fixture
def proxies():
    made: list[AuthAnsweringProxy] = []

    def make() -> AuthAnsweringProxy:
        made.append(AuthAnsweringProxy())
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_a_login_that_did_not_take_effect_sends_no_probe(redis_server, proxies, tmp_path):
    """The real probe path (`_try`) through a proxy that answers AUTH itself: ACL WHOAMI on the
    probe's connection says `default`, so FLUSHALL is never sent; the same probe on the node
    itself (a login that works) reaches it and is refused, so the first count could have grown."""
    server = redis_server()
    admin = server.client(decode_responses=True)
    admin.set("user:data", "precious")
    admin.execute_command("ACL", "SETUSER", USER, "reset", "on", ">pw", *acl.WORKING_RULE.split(), acl.WHOAMI_GRANT)
    proxy = proxies().start(server.port)
    via_proxy = Node("127.0.0.1", proxy.port)
    with pytest.raises(EnvironmentProblem) as e:
        acl._try(via_proxy, USER, "pw", ("FLUSHALL",))
    msg = str(e.value)
    assert "\n" not in msg and "runs as 'default' (ACL WHOAMI)" in msg and "no probe was sent" in msg, msg
    assert proxy.answered and proxy.answered[0][1:] == [USER.encode(), b"pw"]  # the login went through the proxy
    assert "flushall" not in _calls(server) and admin.get("user:data") == "precious"
    # the control: on the node itself the login takes effect and the probe reaches it, refused
    assert acl._try(Node("127.0.0.1", server.port), USER, "pw", ("FLUSHALL",)) == "NOPERM"
    assert _calls(server)["flushall"] == 1 and admin.get("user:data") == "precious"


def test_the_case_fails_in_one_line_and_sends_no_probe_when_the_login_does_not_take_effect(
    redis_server, proxies, tmp_path
):
    """The whole case on a real cluster whose node is reached through that proxy (the node
    announces the proxy's port): it fails with one line, no probe command reaches the node, the
    user's data is all there and the ACL user is removed again."""
    proxy = proxies()
    server = _one_node_cluster(redis_server, announce_port=proxy.port)
    proxy.start(server.port)
    target = Target("lab", "cluster", [Node("127.0.0.1", proxy.port, "primary")])
    before = _calls(server)
    with pytest.raises(EnvironmentProblem) as e:
        _case(target, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and "runs as 'default'" in msg and "no probe was sent" in msg, msg
    assert any(w[1:2] == [USER.encode()] for w in proxy.answered)  # the case did try to log in as the user
    grew = {k for k, v in _calls(server).items() if v > before.get(k, 0)}
    assert grew and not grew & PROBE_ONLY, grew
    _data_intact(server)
    assert USER not in server.client(decode_responses=True).execute_command("ACL", "USERS")


def test_destructive_probes_never_reach_a_cluster_the_harness_did_not_start(redis_server, cluster, tmp_path):
    """A real cluster started outside any cluster state of the harness: FLUSHALL and CLUSTER
    RESET are asked with ACL DRYRUN only and harmless commands the rules refuse are sent in
    their place (the record says so); the refusal counts are whole and the data is all there.
    The harness's own cluster is recognised as such (there the probes are sent as they are)."""
    server = _one_node_cluster(redis_server)
    target = Target("lab", "cluster", [Node("127.0.0.1", server.port, "primary")])
    assert not acl.started_by_harness(target) and acl.started_by_harness(cluster)
    out, lines = _case(target, tmp_path)
    assert out.status == "ok", out.reason
    calls = _calls(server)
    assert "flushall" not in calls and "cluster|reset" not in calls, calls
    assert calls["lastsave"] == calls["cluster|myid"] == 3  # one per rule, each refused
    assert calls["acl|dryrun"] >= 6  # FLUSHALL and CLUSTER RESET asked as they are, under each rule
    m = {k: v.value for k, v in out.metrics.items()}
    n = acl.N_FORBIDDEN
    assert m["fixed.forbidden_noperm"] == n and m["fixed.forbidden_reached"] == n and m["fixed.reads_allowed"] == 2
    assert out.details["destructive_probes"].startswith(
        "destructive probes are not sent; LASTSAVE is sent for FLUSHALL"
    )
    assert any("the harness did not start this cluster" in line for line in lines)
    _data_intact(server)


def test_a_stand_in_the_rule_grants_is_not_sent_in_place_of_a_refused_probe(redis_server, tmp_path):
    """A user's rule may refuse FLUSHALL and CLUSTER RESET and grant their stand-ins (LASTSAVE,
    CLUSTER MYID): the stand-in's `ok` would then be read as FLUSHALL executed. On a cluster the
    harness did not start such a probe is sent in no form; its row says why, and the node never
    saw it (the refusal checks read it as not reached, never as a refusal or a run)."""
    server = _one_node_cluster(redis_server)
    target = Target("lab", "cluster", [Node("127.0.0.1", server.port, "primary")])
    rule = "on +@all ~* -flushall -cluster|reset"
    out, _ = _case(target, tmp_path, rules={"grants-stand-ins": rule})
    calls = _calls(server)
    for never in ("flushall", "cluster|reset", "lastsave", "cluster|myid"):
        assert never not in calls, calls
    m = {k.removeprefix("grants-stand-ins."): v.value for k, v in out.metrics.items()}
    # the two not sent: never counted as seen by the node, nor as run (a stand-in's ok was)
    assert m["forbidden_reached"] == m["forbidden_executed"] == m["forbidden_sent"] - 2, m
    assert m["forbidden_noperm"] == 0, m
    _data_intact(server)


def test_the_restricted_user_cannot_be_the_admins_identity(redis_server, tmp_path):
    """`default` (the identity of the harness's own connections) is refused as the user when the
    suite is read and again when the case starts, before any ACL is set: the node's default user
    is left as it was."""
    p = {k: v.default for k, v in acl.PARAMS.items()}
    for name in ("default", "DEFAULT", "", "a b", "x" * 70):
        with pytest.raises(BadInput, match="cannot be the restricted user"):
            acl._check("cases[0].params", dict(p, username=name))
    acl._check("cases[0].params", p)  # trt-infer is fine
    server = _one_node_cluster(redis_server)
    target = Target("lab", "cluster", [Node("127.0.0.1", server.port, "primary")])
    default_before = server.client(decode_responses=True).execute_command("ACL", "GETUSER", "default")
    with pytest.raises(
        BadInput, match="cannot be the restricted user: the harness administers this cluster as 'default'"
    ):
        _case(target, tmp_path, username="default")
    admin = server.client(decode_responses=True)
    assert admin.execute_command("ACL", "GETUSER", "default") == default_before
    assert "acl|setuser" not in _calls(server)
    _data_intact(server)


def test_every_destructive_probe_has_a_harmless_stand_in():
    probes = [args for _, args, _ in acl.PROBES if acl.destructive(args)]
    assert probes == [("FLUSHALL",), ("CLUSTER", "RESET", "SOFT")]
    assert set(acl.STAND_INS) == set(probes)
    assert not any(acl.destructive(s) for s in acl.STAND_INS.values())
    for args in [("FLUSHDB",), ("SHUTDOWN", "NOSAVE"), ("CONFIG", "SET", "maxmemory", "1"), ("DEBUG", "SLEEP", "0")]:
        assert acl.destructive(args), args
    for args in [("CONFIG", "GET", "maxmemory"), ("GET", "k"), ("CLUSTER", "MYID"), ("ACL", "LIST")]:
        assert not acl.destructive(args), args
