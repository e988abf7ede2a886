"""kv-tiers' claim checks can come out the other way: the aligned codec replaced by JSON,
L1 taken away, the page cache kept; the sized-chunk calibration on known answers; and the
lab-a100 profile carrying the source's setting verbatim."""

from __future__ import annotations

import numpy as np
import pytest

from harness.experiments.kv_tiers.codecs_case import CONTROL, interleaved_decode, size_for_time
from harness.verdict.analysis import Outcome
from tests.suites.engine_hotload.test_engine_hotload_controls import verdicts


def test_size_for_time_finds_the_size_of_a_linear_cost():
    assert size_for_time(lambda n: 0.001 * n, 1.82, 64, 10**6) == 1820
    n = size_for_time(lambda n: 0.1 + 0.001 * n, 1.82, 64, 10**6)
    assert abs((0.1 + 0.001 * n) - 1.82) < 0.02
    assert size_for_time(lambda n: 0.001 * n, 1.82, 64, 500) == 500  # clamped to what a chunk holds
    assert size_for_time(lambda n: 100.0, 1.82, 64, 10**6) == 64  # clamped below


def test_interleaved_decode_times_every_codec_on_every_array_and_checks_round_trips():
    from harness.experiments.kv_tiers.codecs import make_codec

    arrays = [np.arange(300, dtype=np.float32) * 0.1 + k for k in range(2)]
    codecs = {name: make_codec(name.split(" ")[0], (300,), "float32") for name in ("json", "aligned128", CONTROL)}
    out = interleaved_decode(codecs, arrays, 3)
    assert set(out) == set(codecs) and all(len(v) == 6 for v in out.values())


CODECS = {
    "sized.decode_speedup.aligned128_vs_json": 8.0,
    "control.decode_speedup.json_vs_json": 1.02,
    "qps_gain_pct.aligned128_vs_json": 30.0,
    "control.qps_gain_pct.json_vs_json": 2.0,
    "chunk.json.decode_ms": 400.0,
    "sized.json.decode_ms": 1.82,
    "sized.json.store_fetch_qps": 110.0,
    "chunk.decode_vs_copy.aligned128": 1.3,
    "sized.decode_speedup.raw_vs_json": 5.0,
    "qps_gain_pct.raw_vs_json": 10.0,
    "chunk.decode_vs_copy.raw": 1.12,
}  # the raw stand-in's own instrument (issue 52), as measured


def test_codec_checks_flip_when_the_aligned_codec_is_replaced_by_json():
    from tests.ledger_helpers import LAB

    here = verdicts("C15", "codecs", CODECS, suite="kv-tiers")  # the QPS gain goes through a loopback Redis
    assert here["qps_gain_pct.aligned128_vs_json"].outcome is Outcome.NOT_COMPARABLE
    assert (
        "loadgen_separate: measured no (load generator on this machine)"
        in here["qps_gain_pct.aligned128_vs_json"].reason
    )
    got = verdicts("C15", "codecs", CODECS, suite="kv-tiers", manifest=LAB)
    assert {cv.outcome for cv in got.values()} == {Outcome.REPRODUCED}
    # the aligned codec replaced by JSON: no speedup and no gain left
    got = verdicts(
        "C15",
        "codecs",
        {**CODECS, "sized.decode_speedup.aligned128_vs_json": 1.0, "qps_gain_pct.aligned128_vs_json": -1.0},
        suite="kv-tiers",
        manifest=LAB,
    )
    assert {cv.outcome for cv in got.values()} == {Outcome.NOT_REPRODUCED}
    # far faster than claimed: past the band on its better side
    got = verdicts("C15", "codecs", {**CODECS, "sized.decode_speedup.aligned128_vs_json": 400.0}, suite="kv-tiers")
    assert got["sized.decode_speedup.aligned128_vs_json"].outcome is Outcome.EXCEEDED
    # faster than claimed, but raw bytes without the alignment as fast: not the alignment's doing
    got = verdicts(
        "C15",
        "codecs",
        {**CODECS, "sized.decode_speedup.aligned128_vs_json": 400.0, "sized.decode_speedup.raw_vs_json": 500.0},
        suite="kv-tiers",
    )
    assert got["sized.decode_speedup.aligned128_vs_json"].outcome is Outcome.NOT_ATTRIBUTABLE
    assert "stand-in control" in got["sized.decode_speedup.aligned128_vs_json"].reason
    # a timer that does not see JSON's decode cost scale with the work: inconclusive
    got = verdicts("C15", "codecs", {**CODECS, "chunk.json.decode_ms": 2.0}, suite="kv-tiers")
    assert got["sized.decode_speedup.aligned128_vs_json"].outcome is Outcome.INCONCLUSIVE
    # an aligned decoder that remembers its result (no work): faster than copying the bytes
    got = verdicts(
        "C15",
        "codecs",
        {**CODECS, "sized.decode_speedup.aligned128_vs_json": 1400.0, "chunk.decode_vs_copy.aligned128": 0.01},
        suite="kv-tiers",
    )
    assert got["sized.decode_speedup.aligned128_vs_json"].outcome is Outcome.INCONCLUSIVE
    # JSON 'faster' than itself: the timing alone makes a speedup, which is then not the codec's
    got = verdicts("C15", "codecs", {**CODECS, "control.decode_speedup.json_vs_json": 3.0}, suite="kv-tiers")
    assert got["sized.decode_speedup.aligned128_vs_json"].outcome is Outcome.NOT_ATTRIBUTABLE


TIERS = {
    "L1.fetch_copy.p50_us": 8.0,
    "L2.fetch_decode.p50_us": 160.0,
    "L2.small_get.p50_us": 40.0,
    "L3.cold.p50_us": 7000.0,
    "L3.warm.p50_us": 900.0,
}


def test_tier_checks_need_their_controls():
    from tests.ledger_helpers import LAB

    here = verdicts("C17", "tiers", TIERS, suite="kv-tiers")
    assert here["L1.fetch_copy.p50_us"].outcome is Outcome.NOT_COMPARABLE  # L1 is GPU memory in the claim
    assert "gpu: measured none, claim A100" in here["L1.fetch_copy.p50_us"].reason
    assert "storage: measured virtual (vda), claim nvme" in here["L3.cold.p50_us"].reason
    assert here["L2.fetch_decode.p50_us"].outcome is Outcome.NOT_COMPARABLE  # loopback Redis, no network
    got = verdicts("C17", "tiers", TIERS, suite="kv-tiers", manifest=LAB)
    assert got["L2.fetch_decode.p50_us"].outcome is Outcome.REPRODUCED
    assert got["L3.cold.p50_us"].outcome is Outcome.REPRODUCED
    on_gpu = {"l1_device": "NVIDIA A100-SXM4-80GB"}  # the case's fact: where L1's tensors lived
    lab = verdicts("C17", "tiers", TIERS, profile="lab-a100", suite="kv-tiers", facts=on_gpu)
    assert lab["L1.fetch_copy.p50_us"].outcome is Outcome.REPRODUCED
    # the lab's A100, but L1 in host memory (the red team's case): not comparable
    host = verdicts("C17", "tiers", TIERS, profile="lab-a100", suite="kv-tiers", facts={"l1_device": "cpu"})
    assert host["L1.fetch_copy.p50_us"].outcome is Outcome.NOT_COMPARABLE
    assert "l1_device: measured cpu, claim A100" in host["L1.fetch_copy.p50_us"].reason
    # page cache kept (no drop): cold reads are warm ones, the L3 check cannot count
    got = verdicts("C17", "tiers", {**TIERS, "L3.cold.p50_us": 950.0}, suite="kv-tiers", manifest=LAB)
    assert got["L3.cold.p50_us"].outcome is Outcome.INCONCLUSIVE
    # L1 taken away (served from L2): not faster than L2, so the L1 check cannot count
    lab = verdicts(
        "C17", "tiers", {**TIERS, "L1.fetch_copy.p50_us": 170.0}, profile="lab-a100", suite="kv-tiers", facts=on_gpu
    )
    assert lab["L1.fetch_copy.p50_us"].outcome is Outcome.INCONCLUSIVE
    # the 64-byte GET as the measure (the old check): the control sees it is no chunk fetch
    got = verdicts("C17", "tiers", {**TIERS, "L2.fetch_decode.p50_us": 45.0}, suite="kv-tiers", manifest=LAB)
    assert got["L2.fetch_decode.p50_us"].outcome is Outcome.INCONCLUSIVE


def test_dropping_l3_pages_keeps_the_data_readable(tmp_path):
    from harness.experiments.kv_tiers.tiers import L3

    l3 = L3(tmp_path / "l3", 64 << 20)
    try:
        payload = bytes(range(256)) * 4096  # 1 MiB
        l3.put_batch([("k", payload)])
        assert l3.get("k") == payload
        l3.drop_page_cache()
        assert l3.get("k") == payload and len(l3) == 1
    finally:
        l3.close()


def test_lab_a100_profile_carries_the_source_setting_and_fails_on_skips():
    from harness.model.spec import load_all_suites

    suite = load_all_suites()["kv-tiers"]
    lab, local = suite.profile("lab-a100"), suite.profile("local")
    assert lab.skipped_fails and not local.skipped_fails
    assert lab.conditions["gpu"] == "A100" and local.conditions["gpu"] == "none"
    tiers = suite.case_params(suite.case("tiers"), "lab-a100")
    assert tiers["write_behind_every"] == 500 and tiers["l3_map_mb"] == 500 * 1024  # 500 GB map
    assert (tiers["l1_ttl_s"], tiers["l2_ttl_s"], tiers["l3_ttl_s"]) == (30, 300, 3600)
    assert suite.case_params(suite.case("ttft"), "lab-a100")["write_behind_every"] == 500
    codecs = suite.case_params(suite.case("codecs"), "lab-a100")
    assert codecs["json_decode_target_ms"] == 1.82
    text = " ".join(suite.claim.text.split())
    for figure in ("1.82 ms", "0.23 ms", "+29% QPS", "< 10 us", "~150 us", "~8 ms", "every 500 L2 writes"):
        assert figure in text
    with pytest.raises(Exception, match="json_decode_target_ms"):
        from harness.model.driver_contract import get

        get("kv-tiers-codecs").resolve_params("t", {})


def test_codec_metrics_carry_the_raw_stand_in_beside_the_aligned_codec():
    """The stand-in of the aligned layout (raw bytes: no header, no alignment) is measured in the
    same interleaved decodes and QPS slices, as its own speedup and gain over JSON, so the ledger
    can ask whether the aligned layout does better than any binary layout (issue 39, point 5)."""
    from harness.experiments.kv_tiers.codecs_case import STAND_IN, _codec_metrics

    p = {"codecs": ["json", "aligned128", STAND_IN]}
    ms = {"json": 2.0, "aligned128": 0.25, STAND_IN: 0.2, CONTROL: 2.0}
    qps = {"json": 100.0, "aligned128": 130.0, STAND_IN: 140.0, CONTROL: 101.0}
    m = _codec_metrics(p, 1000, ms, {"aligned128": 0.1, "json": 1.0, STAND_IN: 0.1}, qps, {k: 1 for k in ms}, [0.0001])
    assert m["sized.decode_speedup.raw_vs_json"].value == pytest.approx(10.0)
    assert m["sized.decode_speedup.aligned128_vs_json"].value == pytest.approx(8.0)
    assert m["qps_gain_pct.raw_vs_json"].value == pytest.approx(40.0)
    assert m["control.qps_gain_pct.json_vs_json"].value == pytest.approx(1.0)
    # without the raw codec the stand-in is not measured (the ledger then says inconclusive)
    m = _codec_metrics(
        {"codecs": ["json", "aligned128"]},
        1000,
        {k: v for k, v in ms.items() if k != STAND_IN},
        {"aligned128": 0.1},
        {k: v for k, v in qps.items() if k != STAND_IN},
        {k: 1 for k in ms},
        [0.0001],
    )
    assert "sized.decode_speedup.raw_vs_json" not in m and "qps_gain_pct.raw_vs_json" not in m
