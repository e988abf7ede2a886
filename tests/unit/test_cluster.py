"""The local cluster: topology, health, and that everything it started stops."""

import redis

from harness.infra.cluster import LocalCluster, parse_cluster_nodes
from harness.infra.redis_server import pid_alive
from tests.conftest import free_port


def test_three_primaries_three_replicas_each_linked(cluster):
    prim = [n for n in cluster.nodes if n.role == "primary"]
    reps = [n for n in cluster.nodes if n.role == "replica"]
    assert len(prim) == 3 and len(reps) == 3
    masters_of_replicas = set()
    for n in reps:
        info = redis.Redis(host=n.host, port=n.port).info("replication")
        assert info["master_link_status"] == "up"
        masters_of_replicas.add(info["master_port"])
    assert masters_of_replicas == {n.port for n in prim}  # one replica per primary
    info = redis.Redis(host=prim[0].host, port=prim[0].port, decode_responses=True).cluster("info")
    assert info["cluster_state"] == "ok" and int(info["cluster_slots_assigned"]) == 16384


def test_cluster_client_round_trip_across_slots(cluster_client):
    for i in range(50):
        cluster_client.set(f"k{i}", str(i))
    assert [cluster_client.get(f"k{i}") for i in range(50)] == [str(i).encode() for i in range(50)]


def test_parse_cluster_nodes_text():
    text = (
        "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n"
        "b2 127.0.0.1:7003@17003 slave a1 0 1 1 connected\n"
        "c3 127.0.0.1:7009@17009 master,fail - 0 1 9 disconnected\n"
    )
    nodes = parse_cluster_nodes(text)
    assert [(n.port, n.role) for n in nodes] == [(7000, "primary"), (7003, "replica")]


def test_up_and_down_leave_no_process(tmp_path):
    base = 7800
    c = LocalCluster(base_port=base, state_dir=tmp_path)
    target = c.up(timeout=60)
    pids = [p.pid for p in c.processes]
    assert len(target.nodes) == 6 and all(pid_alive(p) for p in pids)
    assert LocalCluster(base_port=base, state_dir=tmp_path).status()["health"] == "ok"
    stopped = LocalCluster(base_port=base, state_dir=tmp_path).down()  # from another instance, via the state file
    assert stopped == 6
    assert not any(pid_alive(p) for p in pids)


def test_a_server_in_a_relative_folder_starts(tmp_path, monkeypatch):
    """redis-server changes into `dir` before it opens the log file: paths must be absolute."""
    from harness.infra.redis_server import RedisProcess

    monkeypatch.chdir(tmp_path)
    with RedisProcess("127.0.0.1", free_port(), "relative/node") as p:
        assert p.client().ping()
        assert (tmp_path / "relative" / "node" / "redis.log").exists()


def test_meet_all_makes_every_node_know_every_other(tmp_path):
    """What `_create` adds to redis-cli's join: each node is told to meet all the others, so
    the join does not wait for gossip (a 10 + 10 cluster's create went from 8 s to 2.5 s)."""
    import time

    from harness.infra.redis_server import RedisProcess

    c = LocalCluster(base_port=7830, primaries=3, replicas=0, state_dir=tmp_path)
    procs = [RedisProcess("127.0.0.1", p, tmp_path / f"node-{p}", cluster=True).start() for p in c.ports]
    try:

        def ours(line: str) -> int | None:  # a node's own line may not know its address yet (":7830@17830")
            fields = line.split()
            host, port = fields[1].split("@")[0].rsplit(":", 1)
            if "handshake" in fields[2].split(","):  # a meeting not finished: a node with a temporary id
                return None
            return int(port) if host in ("", "127.0.0.1") and int(port) in c.ports else None

        def known(p: RedisProcess) -> int:
            """How many of this test's nodes `p` knows: distinct addresses, handshakes aside (a
            node of another test on this machine may gossip its way in, and a port another
            test's node held before may still be known under that node's id: CI saw a fourth)."""
            lines = p.client().execute_command("CLUSTER", "NODES").decode().splitlines()
            return len({ours(line) for line in lines} - {None})

        assert [known(p) for p in procs] == [1, 1, 1]  # nobody has met anybody
        c._meet_all()
        deadline = time.monotonic() + 20
        while [known(p) for p in procs] != [3, 3, 3] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [known(p) for p in procs] == [3, 3, 3]
    finally:
        for p in procs:
            p.stop()
