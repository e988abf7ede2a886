"""A cold node's backing-store load (C8): the pure per-second counting and growth factor,
bad parameters, and a short real run on the cluster where the flushed node must go cold."""

from __future__ import annotations

import pytest

from harness.drivers import CaseContext
from harness.errors import BadInput
from harness.experiments.cold_start import drivers as cs


def test_per_second_buckets_around_the_flush():
    times = [98.2, 99.0, 99.99, 100.0, 100.5, 101.2, 102.9, 103.0]
    assert cs.per_second(times, t_flush=100.0, before=2, after=3) == [1, 2, 2, 1, 1]


def test_growth_of_the_sources_own_series_is_1_8():
    assert cs.growth_per_second(list(cs.CLAIMED)) == pytest.approx(1.8, abs=0.001)
    assert cs.growth_per_second([100, 50, 25]) == pytest.approx(0.5)
    assert cs.growth_per_second([0, 10]) is None
    assert cs.growth_per_second([10, 0]) == 0.0
    assert cs.growth_per_second([10]) is None


def test_bad_params_are_refused():
    good = {k: p.default for k, p in cs.PARAMS.items()}
    with pytest.raises(BadInput, match="cold_seconds: must be at least 1 s"):
        cs._check("cases[0].params", dict(good, cold_seconds=0.5))
    with pytest.raises(BadInput, match="rate: must be at least 1"):
        cs._check("cases[0].params", dict(good, rate=0))


def test_unknown_primary_is_refused(cluster, tmp_path):
    params = dict({k: p.default for k, p in cs.PARAMS.items()}, cold_primary=3)
    with pytest.raises(BadInput, match="cold_primary: 3 but the target has 3 primaries"):
        cs.run(CaseContext("cold-start", "c", 1, "local", params, tmp_path, cluster, log=lambda m: None))


def test_flushed_primary_goes_cold(cluster, cluster_client, tmp_path):
    params = {k: p.default for k, p in cs.PARAMS.items()}
    params.update(rate=400, threads=2, warm_seconds=3.0, cold_seconds=2.0)
    out = cs.run(CaseContext("cold-start", "c", 1, "local", params, tmp_path, cluster, log=lambda m: None))
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["errors"] == 0
    rows = out.details["tables"][0]["rows"]
    assert [r[0] for r in rows] == [-3, -2, -1, 0, 1]
    # open loop: every scheduled request was sent (late ones too), and the per-second counts
    # cover them (a few may fall outside the window when the flush itself ran late)
    assert m["offered_rps"] * 5 == pytest.approx(400 * 5)
    assert sum(r[1] for r in rows) == pytest.approx(400 * 5, rel=0.05)
    # the cold node's store reads are part of the cluster's, and the flush raised them
    assert all(r[3] <= r[2] for r in rows)
    assert m["cold_node.store_qps.first_s"] > m["cold_node.store_qps.before"]
    assert m["cold_node.amplification"] > 1
    assert rows[3][5] == 100 and rows[4][5] == 180  # the source's series beside the measured one
    assert not any(tmp_path.glob("*.sqlite"))  # the store is rebuilt from the trace, not kept
