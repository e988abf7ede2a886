"""The failover history checker on made-up histories with known answers (pure, no servers)."""

import random

import pytest

from harness.experiments.failover import lost_writes
from harness.experiments.failover.lost_writes import LOST, OVERWRITTEN, PRESENT, Write
from harness.experiments.failover.scenario import order


def w(client, seq, key, sent, done=None, ok=True, replicas=None, error="", group="a"):
    return Write(
        client, seq, key, f"{client}:{seq}", sent, sent + 0.001 if done is None else done, ok, replicas, error, group
    )


def test_nothing_lost_when_every_acknowledged_write_is_there():
    ws = [w("c1", i, f"k{i}", i * 0.01) for i in range(100)]
    v = lost_writes.classify(ws, {x.key: x.value for x in ws})
    assert v.counts == {PRESENT: 100, LOST: 0, OVERWRITTEN: 0} and v.lost == [] and v.acknowledged == 100
    assert v.lost_pct == 0.0


def test_finds_every_lost_write_and_no_other():
    rng = random.Random(7)
    ws = [w(f"c{i % 3}", i, f"k{i}", i * 0.01) for i in range(500)]
    gone = set(rng.sample(range(500), 37))
    final = {x.key: x.value for i, x in enumerate(ws) if i not in gone}
    v = lost_writes.classify(ws, final)
    assert {x.seq for x in v.lost} == gone
    assert v.counts[LOST] == 37 and v.counts[PRESENT] == 463


def test_a_key_holding_an_earlier_value_is_a_lost_later_write():
    first, second = w("c1", 1, "k", 0.0), w("c1", 2, "k", 1.0)
    v = lost_writes.classify([first, second], {"k": first.value})
    assert [x.seq for x in v.lost] == [2]
    assert v.counts == {PRESENT: 1, LOST: 1, OVERWRITTEN: 0}


def test_overwritten_by_a_later_or_concurrent_write_is_not_lost():
    a = w("c1", 1, "k", 0.0, done=0.5)
    later_same_client = w("c1", 2, "k", 0.6)
    concurrent = w("c2", 1, "k2", 0.1, done=0.2)
    other_concurrent = w("c3", 1, "k2", 0.15, done=0.3)  # overlaps: either order is correct
    v = lost_writes.classify(
        [a, later_same_client, concurrent, other_concurrent], {"k": later_same_client.value, "k2": concurrent.value}
    )
    assert v.counts == {PRESENT: 2, LOST: 0, OVERWRITTEN: 2}


def test_replaced_by_a_write_that_ended_before_it_was_sent_is_lost():
    old = w("c2", 1, "k", 0.0, done=0.1)
    new = w("c1", 1, "k", 0.5, done=0.6)
    v = lost_writes.classify([old, new], {"k": old.value})
    assert [x.client for x in v.lost] == ["c1"]


def test_unacknowledged_writes_are_not_counted_but_noticed_when_they_landed():
    failed_landed = w("c1", 1, "k1", 0.0, ok=False, error="timeout")
    failed_gone = w("c1", 2, "k2", 0.1, ok=False, error="refused")
    v = lost_writes.classify([failed_landed, failed_gone], {"k1": failed_landed.value})
    assert v.acknowledged == 0 and v.lost == [] and v.unacknowledged_present == 1 and v.lost_pct is None


def test_wait_counts_only_writes_a_replica_confirmed():
    confirmed = w("c1", 1, "k1", 0.0, replicas=1)
    unconfirmed = w("c1", 2, "k2", 0.1, replicas=0)
    v = lost_writes.classify([confirmed, unconfirmed], {}, need_replicas=1)
    assert v.acknowledged == 1 and [x.seq for x in v.lost] == [1]
    assert lost_writes.classify([confirmed, unconfirmed], {}, need_replicas=0).acknowledged == 2


def test_a_value_nobody_wrote_is_lost_and_reported():
    x = w("c1", 1, "k", 0.0)
    v = lost_writes.classify([x], {"k": "intruder"})
    assert v.counts[LOST] == 1 and v.foreign_values == 1


def test_bins_count_acknowledged_and_failed_writes_per_group_and_interval():
    ws = [
        w("c", 0, "a0", 10.00),
        w("c", 1, "a1", 10.05, ok=False, error="timeout"),
        w("c", 2, "b0", 10.15, group="b", ok=False, error="clusterdown"),
        w("c", 3, "b1", 10.25, group="b"),
        w("c", 4, "late", 11.5),
    ]
    b = lost_writes.bins(ws, t0=10.0, start=0.0, end=0.3, groups=["a", "b"])
    assert b["t"] == [0.0, 0.1, 0.2]
    assert b["acked"] == [1, 0, 1] and b["errors"] == [1, 1, 0] and b["timeouts"] == [1, 0, 0]
    assert b["errors.a"] == [1, 0, 0] and b["errors.b"] == [0, 1, 0] and b["sent.b"] == [0, 1, 1]


def test_outage_window_and_recovery_of_one_group():
    ws = [
        w("c", i, f"k{i}", 100 + i * 0.1, ok=not (5 <= i <= 14), error="" if not 5 <= i <= 14 else "refused")
        for i in range(30)
    ]
    o = lost_writes.outage(ws, t0=100.0, group="a")
    assert o.first_error == pytest.approx(0.5) and o.last_error == pytest.approx(1.401)
    assert o.recovered == pytest.approx(1.501) and o.errors == 10 and o.sent == 30
    assert o.window == pytest.approx(0.901)
    clean = lost_writes.outage([w("c", 0, "k", 100.5)], t0=100.0)
    assert clean.window == 0.0 and clean.recovered == 0.0 and clean.error_pct == 0.0


def test_error_rate_says_what_it_is_out_of():
    """error_pct's denominator is a metric of its own (issue 52: 0% of 0 writes is no evidence)."""
    from harness.experiments.failover import measure

    ws = [
        w("c", i, f"k{i}", 100 + i * 0.1, ok=i != 3, error="refused" if i == 3 else "", group="a" if i % 2 else "b")
        for i in range(10)
    ]
    m = measure.outage_metrics("no-kill", ws, 100.25, 101.0, {"a": "killed_range", "b": "other_ranges"})
    assert m["no-kill.killed_range.sent"].value == 4 and m["no-kill.killed_range.error_pct"].value == 25.0
    assert m["no-kill.other_ranges.sent"].value == 3 and m["no-kill.other_ranges.error_pct"].value == 0.0
    empty = measure.outage_metrics("no-kill", [], 100.0, 101.0, {"a": "killed_range"})
    assert empty["no-kill.killed_range.sent"].value == 0 and empty["no-kill.killed_range.error_pct"].value is None


def test_outage_never_recovered():
    ws = [w("c", i, f"k{i}", 100 + i * 0.1, ok=i < 3, error="" if i < 3 else "refused") for i in range(10)]
    assert lost_writes.outage(ws, t0=100.0).recovered is None


def test_controls_are_interleaved_in_a_rotating_order():
    v, c = ["plain", "wait", "min-replicas"], ["no-kill", "no-replicas"]
    assert order(v, c, 1) == ["plain", "no-kill", "wait", "no-replicas", "min-replicas"]
    assert order(v, c, 2) == ["no-kill", "wait", "no-replicas", "min-replicas", "plain"]
    assert order(v, c, 6) == order(v, c, 1) and order([], [], 3) == [] and order([], ["no-cut"], 2) == ["no-cut"]
