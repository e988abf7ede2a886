"""Mutations of the failover suite: claims C11a (a replica takes over, the cluster keeps
serving) and C11b (nodes.conf keeps the slot metadata: the killed primary rejoins as a replica).

Each run is the primary-killed case cut down to the variant and the control the checks need
(one kill each: about 12 s of traffic, 30-65 s in all here).
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

KILL = "harness/experiments/failover/kill.py"
CLIENT = "harness/experiments/failover/client.py"
MEASURE = "harness/experiments/failover/measure.py"
SERVED = ("failover/primary-killed plain.served_at_end_pct",)
REJOINED = ("failover/primary-killed plain.rejoined_as_replica",)
C11A_SETS = ("primary-killed.variants=[plain]", "primary-killed.controls=[no-replicas]")
C11B_SETS = ("primary-killed.variants=[plain]", "primary-killed.controls=[no-nodes-conf]")

MUTATIONS = [
    Mutation(
        name="failover/harness-promotes-replica",
        claim="C11a",
        kind="stand-in",
        what="a stand-in for the cluster's own failover (found by the red team): automatic failover off "
        "(cluster-replica-no-failover) and the harness itself runs CLUSTER FAILOVER TAKEOVER on the victim's "
        "replica 0.5 s after the kill",
        edits=(
            Edit(
                KILL,
                "from harness.experiments.failover.scenario import FaultRun, ranges",
                "from harness.experiments.failover.scenario import FaultRun, config_all, ranges",
            ),
            Edit(
                KILL,
                "    def inject(self) -> None:\n        self.cl.kill_node(self.victim.addr[1])\n",
                "    def inject(self) -> None:\n"
                "        config_all(self.addrs, {'cluster-replica-no-failover': 'yes'})\n"
                "        self.cl.kill_node(self.victim.addr[1])\n"
                "        time.sleep(0.5)\n"
                "        for host, port in self.addrs:\n"
                "            if (host, port) == tuple(self.victim.addr):\n"
                "                continue\n"
                "            c = client.plain_client(host, port, 2.0)\n"
                "            try:\n"
                "                info = c.info('replication')\n"
                "                if info.get('role') == 'slave' and int(info.get('master_port', 0)) == "
                "int(self.victim.addr[1]):\n"
                "                    c.execute_command('CLUSTER', 'FAILOVER', 'TAKEOVER')\n"
                "            except redis.RedisError:\n"
                "                pass\n"
                "            finally:\n"
                "                c.close()\n",
            ),
        ),
        run="failover/primary-killed",
        checks=SERVED,
        sets=C11A_SETS,
        timeout_s=300,
    ),
    Mutation(
        name="failover/replicas-never-promoted",
        claim="C11a",
        kind="broken",
        what="the kill also sets cluster-replica-no-failover on every node: the replicas never take over",
        edits=(
            Edit(
                KILL,
                "from harness.experiments.failover.scenario import FaultRun, ranges",
                "from harness.experiments.failover.scenario import FaultRun, config_all, ranges",
            ),
            Edit(
                KILL,
                "    def inject(self) -> None:\n        self.cl.kill_node(self.victim.addr[1])",
                "    def inject(self) -> None:\n        config_all(self.addrs, {'cluster-replica-no-failover': 'yes'})\n"
                "        self.cl.kill_node(self.victim.addr[1])",
            ),
        ),
        run="failover/primary-killed",
        checks=SERVED,
        sets=C11A_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="failover/served-counts-sent-writes",
        claim="C11a",
        kind="blinded",
        what="served_at_end_pct counts every write sent in the last second, answered OK or not",
        edits=(
            Edit(MEASURE, "100.0 * sum(w.ok for w in last) / len(last)", "100.0 * sum(1 for w in last) / len(last)"),
        ),
        run="failover/primary-killed",
        checks=SERVED,
        sets=C11A_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="failover/client-swallows-errors",
        claim="C11a",
        kind="blinded",
        what="the writer logs a failed SET as answered OK (its error kind kept): the history never shows the outage",
        edits=(
            Edit(
                CLIENT,
                "w = Write(name, i, key, value, t, time.monotonic(), False, None, error_kind(e), group_of(key))",
                "w = Write(name, i, key, value, t, time.monotonic(), True, None, error_kind(e), group_of(key))",
            ),
        ),
        run="failover/primary-killed",
        checks=SERVED,
        sets=C11A_SETS,
        fast=True,
        timeout_s=240,
    ),
    Mutation(
        name="failover/writer-retries-after-refresh",
        claim="C11a",
        kind="improved",
        what="a better client: a write that fails on a connection error or CLUSTERDOWN is retried once after a "
        "forced slot-map refresh",
        edits=(
            Edit(
                CLIENT,
                '                _, reps = router.execute(key, "SET", key, value, then=then)\n',
                "                try:\n"
                '                    _, reps = router.execute(key, "SET", key, value, then=then)\n'
                "                except (redis.RedisError, OSError):\n"
                "                    time.sleep(0.05)\n"
                "                    router.refresh(force=True)\n"
                '                    _, reps = router.execute(key, "SET", key, value, then=then)\n',
            ),
        ),
        run="failover/primary-killed",
        checks=SERVED,
        sets=C11A_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="failover/rejoin-probe-accepts-any-node",
        claim="C11b",
        kind="blinded",
        what="the rejoin probe calls any node that answers INFO a replica (role and link not read)",
        edits=(
            Edit(
                KILL,
                '        return info.get("role") == "slave" and info.get("master_link_status") == "up"',
                '        return bool(info.get("role"))',
            ),
        ),
        run="failover/primary-killed",
        checks=REJOINED,
        sets=C11B_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="failover/harness-reintroduces-node",
        claim="C11b",
        kind="stand-in",
        what="a stand-in for nodes.conf: after every restart the harness itself makes the node a replica of the "
        "victim's successor (CLUSTER MEET + CLUSTER REPLICATE), whatever the node remembers",
        edits=(
            Edit(
                KILL,
                "    def _restart_without_nodes_conf(self) -> None:",
                "    def _reintroduce(self, port: int) -> None:\n"
                '        """The mutation: meet the restarted node and make it a replica of the slots\' new owner."""\n'
                "        host = self.victim.addr[0]\n"
                "        peer = next(a for a in self.addrs if a[1] != port)\n"
                "        time.sleep(0.5)\n"
                "        me = client.plain_client(host, port, 2.0)\n"
                "        try:\n"
                "            me.execute_command('CLUSTER', 'MEET', peer[0], peer[1])\n"
                "            owner = None\n"
                "            for _ in range(50):\n"
                "                r = client.Router([peer], 1.0)\n"
                "                addr = r.slots[min(self.victim.slots)]\n"
                "                r.close()\n"
                "                p = client.plain_client(addr[0], addr[1], 2.0)\n"
                "                owner = p.execute_command('CLUSTER', 'MYID')\n"
                "                p.close()\n"
                "                try:\n"
                "                    me.execute_command('CLUSTER', 'REPLICATE', owner)\n"
                "                    return\n"
                "                except redis.RedisError:\n"
                "                    time.sleep(0.2)\n"
                "        except redis.RedisError:\n"
                "            pass\n"
                "        finally:\n"
                "            me.close()\n\n"
                "    def _restart_without_nodes_conf(self) -> None:",
            ),
            Edit(
                KILL,
                '        shutil.move(folder / "nodes.conf", saved)\n        self.cl.restart_node(port)\n',
                '        shutil.move(folder / "nodes.conf", saved)\n        self.cl.restart_node(port)\n'
                "        self._reintroduce(port)\n",
            ),
            Edit(
                KILL,
                "            self.t_restart = time.monotonic()\n            self.cl.restart_node(port)\n",
                "            self.t_restart = time.monotonic()\n            self.cl.restart_node(port)\n"
                "            if v != 'no-replicas':\n                self._reintroduce(port)\n",
            ),
        ),
        run="failover/primary-killed",
        checks=REJOINED,
        sets=C11B_SETS,
        timeout_s=240,
    ),
    Mutation(
        name="failover/restart-forgets-identity",
        claim="C11b",
        kind="broken",
        what="the restart after the kill starts the node from an empty folder (no nodes.conf): the plain run's "
        "node comes back as a stranger",
        edits=(
            Edit(
                KILL,
                "            self.t_restart = time.monotonic()\n            self.cl.restart_node(port)\n",
                "            self.t_restart = time.monotonic()\n"
                "            if v == 'plain':\n"
                "                (self.cl._process(port).folder / 'nodes.conf').unlink(missing_ok=True)\n"
                "            self.cl.restart_node(port)\n",
            ),
        ),
        run="failover/primary-killed",
        checks=REJOINED,
        # the plain run alone (the control would kill a node of a cluster the mutant left broken); the second
        # primary is the victim, so that the stranger is not the first seed the read-back asks for the slot map
        sets=(
            "primary-killed.variants=[plain]",
            "primary-killed.controls=[]",
            "primary-killed.victim=1",
            "primary-killed.rejoin_timeout_s=5",
        ),
        timeout_s=300,
    ),
]
