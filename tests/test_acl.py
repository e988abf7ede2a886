"""The source's read-only ACL rule, as written and in working order, on the real cluster."""

import redis

from harness.drivers import CaseContext
from harness.experiments.redis_cluster import acl


def test_source_rule_grants_nothing_and_the_fixed_order_reads_only(cluster, tmp_path):
    params = {k: p.default for k, p in acl.PARAMS.items()}
    out = acl.run(CaseContext("s", "acl", 1, "local", params, tmp_path, cluster, log=lambda m: None))
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["source.reads_allowed"] == 0 and m["source.writes_allowed"] == 0
    assert m["fixed.reads_allowed"] == 2 and m["fixed.writes_allowed"] == 0 and m["fixed.other_keys_allowed"] == 0
    # the user is removed from every node afterwards
    for n in cluster.nodes:
        users = redis.Redis(host=n.host, port=n.port, decode_responses=True).execute_command("ACL", "USERS")
        assert "cache-reader" not in users
