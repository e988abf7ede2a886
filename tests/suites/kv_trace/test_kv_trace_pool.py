"""One shared KV pool against per-instance caches at equal total capacity (kv_trace/pool.py):
exact answers on traces small enough to count by hand, the routes, the controls, and the
simulator's numbers on a slice of the Mooncake trace against the independent recount."""

from __future__ import annotations

import numpy as np
import pytest

from harness.base.paths import REPO_ROOT
from harness.experiments.kv_trace import pool, recount
from harness.mechanisms.kv_blocks import trace as T

TRACE = REPO_ROOT / "data/mooncake/conversation_trace.jsonl"


def req(t, ids, bs=16):
    return {"timestamp": t, "input_length": bs * len(ids), "output_length": 1, "hash_ids": ids}


def test_two_instances_round_robin_lose_what_the_pool_keeps():
    """Request 2 repeats request 1's blocks: the pool hits all of them; round robin sends it
    to the other instance, which has never seen them; affinity keeps the conversation (same
    second block) on one instance, which hits them as the pool does."""
    t = T.records_trace([req(0, [1, 2, 3]), req(1, [1, 2, 3])], 16)
    r = pool.rates(t, 2, "lru", 10)
    assert r == {"shared": 0.5, "round_robin": 0.0, "affine": 0.5}
    m = pool.pool(t, 2, "lru", 10)
    assert m["pool.shared_gain_over_round_robin_pp"].value == 50.0
    assert m["pool.shared_gain_over_affine_pp"].value == 0.0
    assert m["pool.one_instance.gap_pp"].value == 0.0 and m["pool.capacity_tokens"].value == 2 * 10 * 16


def test_per_instance_capacity_is_the_pools_divided():
    """Two conversations that fit the pool (6 blocks) but not an instance's third of it (2
    blocks) when they alternate on one instance: equal total capacity, not equal per cache."""
    reqs = [req(i, [10, 11, 12] if i % 2 == 0 else [20, 21, 22]) for i in range(6)]
    t = T.records_trace(reqs, 16)
    r = pool.rates(t, 3, "lru", 2)
    assert r["shared"] == pytest.approx(4 * 3 / 18)  # the pool holds both: every request after the first two hits
    assert r["round_robin"] < r["shared"]


def test_routes_deal_conversations_out_in_order_and_keep_each_on_one_instance():
    recs = [
        {"chat_id": i, "parent_chat_id": par, "timestamp": i, "input_length": 16, "output_length": 1, "hash_ids": [i]}
        for i, par in enumerate([-1, -1, 0, -1, 1, 2, 3])
    ]
    t = T.records_trace(recs, 16)  # Bailian: conversations 0 (0, 2, 5), 1 (1, 4), 3 (3, 6)
    assert pool.route(t, 2, "round_robin").tolist() == [0, 1, 0, 1, 0, 1, 0]
    assert pool.route(t, 2, "affine").tolist() == [0, 1, 0, 0, 1, 0, 0]


@pytest.fixture(scope="module")
def head():
    return T.load_trace(TRACE, 512, max_requests=1500)


def test_the_simulator_and_the_recount_agree_on_the_pool_and_round_robin(head, tmp_path_factory):
    path = tmp_path_factory.mktemp("pool") / "head.jsonl"
    with open(TRACE, encoding="utf-8") as f:
        path.write_text("".join(next(f) for _ in range(1500)))
    per = 120  # blocks per instance: small enough to evict on this slice
    m = pool.pool(head, 4, "leaf-lru", per)
    reqs = recount.read_requests(path)
    ref = recount.pool_rates(
        reqs, {"pool_instances": 4, "gpu_policy": "leaf-lru", "block_size": 512}, per, sum(n for _, n, _ in reqs)
    )
    assert ref is not None
    assert m["pool.shared.token_hit_pct"].value == pytest.approx(ref["shared"], abs=1e-9)
    assert m["pool.instances.round_robin.token_hit_pct"].value == pytest.approx(ref["round_robin"], abs=1e-9)
    assert m["pool.shared_gain_over_round_robin_pp"].value > 0
    assert m["pool.one_instance.gap_pp"].value == 0.0
    # the instrument: copies routed to the next instance miss there and hit in the pool
    assert m["pool.dup.shared_gain_over_round_robin_pp"].value > 25, m["pool.dup.shared_gain_over_round_robin_pp"]


def test_every_request_is_served_once_whatever_the_route(head):
    for how in pool.ROUTES:
        where = pool.route(head, 4, how)
        assert len(where) == head.n_requests and set(np.unique(where).tolist()) == {0, 1, 2, 3}


def test_hit_rates_per_session_on_a_trace_counted_by_hand():
    """Chat 0 asks the same 3 blocks twice (its second request hits all of them: 50% of the
    chat's tokens), chat 1 asks once (0%): the sessions' median is 25%, 50% have a hit."""
    from harness.experiments.kv_trace import per_session

    def bailian(chat, parent, t, ids):
        return {
            "chat_id": chat,
            "parent_chat_id": parent,
            "timestamp": t,
            "input_length": 16 * len(ids),
            "output_length": 1,
            "hash_ids": ids,
        }

    t = T.records_trace([bailian(0, -1, 0, [1, 2, 3]), bailian(1, -1, 1, [7, 8]), bailian(2, 0, 2, [1, 2, 3])], 16)
    assert per_session.per_session_pct(t, np.array([0, 0, 48])).tolist() == [50.0, 0.0]
    m = per_session.session_metrics(t, 10, "lru")
    assert m["sessions.count"].value == 2
    assert m["sessions.max.token_hit_p50_pct"].value == 25.0 and m["sessions.gpu.with_hits_pct"].value == 50.0
    tiny = per_session.session_metrics(t, 1, "lru")  # one block of cache: block 1 is evicted before it is asked again
    assert tiny["sessions.gpu.with_hits_pct"].value == 0.0 and tiny["sessions.max.with_hits_pct"].value == 50.0
