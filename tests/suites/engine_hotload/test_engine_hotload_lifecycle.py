"""Engine lifecycle, prewarm, hot swap and the compatibility check, on the real
all-MiniLM-L6-v2 ONNX export (ONNX Runtime, CPU) and small ONNX models built here."""

from __future__ import annotations

import time

import numpy as np
import pytest

from harness.experiments.engine_hotload.lifecycle import (
    Bucket,
    Profile,
    TensorSpec,
    implicit_profile,
    input_shape,
    open_engine,
    parse_buckets,
    prewarm_plan,
)
from harness.experiments.engine_hotload.swap import EngineSlot, IncompatibleEngine, check_compatible, io_problems

BUCKETS = [Bucket(1, 16), Bucket(1, 64), Bucket(8, 16), Bucket(8, 64)]
MINILM_IO = [
    TensorSpec("input_ids", "input", "int64", (-1, -1)),
    TensorSpec("attention_mask", "input", "int64", (-1, -1)),
    TensorSpec("sentence_embedding", "output", "float32", (-1, 384)),
]


def _two_profiles() -> list[Profile]:
    short = ((1, 1), (4, 16), (8, 32))
    long = ((1, 1), (4, 64), (8, 128))
    return [
        Profile(0, {"input_ids": short, "attention_mask": short}),
        Profile(1, {"input_ids": long, "attention_mask": long}),
    ]


# ---- pure functions ---------------------------------------------------------------------------


def test_input_shape_fills_dynamic_dims_in_order_and_keeps_fixed_ones():
    assert input_shape(TensorSpec("x", "input", "int64", (-1, -1)), Bucket(8, 64)) == (8, 64)
    assert input_shape(TensorSpec("x", "input", "int64", (-1, 16)), Bucket(8, 64)) == (8, 16)
    with pytest.raises(ValueError, match="more than two dynamic"):
        input_shape(TensorSpec("x", "input", "int64", (-1, -1, -1)), Bucket(1, 1))


def test_parse_buckets_rejects_bad_items():
    assert parse_buckets([[1, 16], [8, 64]]) == [Bucket(1, 16), Bucket(8, 64)]
    for bad in ([[1]], [[0, 16]], [["1", 16]], [], [[1, 2], [1, 2]]):
        with pytest.raises(ValueError):
            parse_buckets(bad)


def test_prewarm_plan_covers_every_profile_and_every_bucket_it_serves():
    plan = prewarm_plan(_two_profiles(), MINILM_IO, BUCKETS)
    assert plan == [
        (0, Bucket(1, 16)),
        (0, Bucket(8, 16)),
        (1, Bucket(1, 16)),
        (1, Bucket(1, 64)),
        (1, Bucket(8, 16)),
        (1, Bucket(8, 64)),
    ]
    assert {b for _, b in plan} == set(BUCKETS)
    assert {p for p, _ in plan} == {0, 1}


def test_prewarm_plan_refuses_a_bucket_no_profile_covers():
    with pytest.raises(ValueError, match="b16x16"):
        prewarm_plan(_two_profiles(), MINILM_IO, [Bucket(16, 16)])


def test_implicit_profile_is_unbounded_on_dynamic_dims():
    p = implicit_profile(MINILM_IO)
    lo, _, hi = p.ranges["input_ids"]
    assert lo == (1, 1) and min(hi) > 10**9
    assert set(p.ranges) == {"input_ids", "attention_mask"}


def test_io_problems_names_the_tensor_that_differs():
    prof = [implicit_profile(MINILM_IO)]
    assert io_problems(MINILM_IO, MINILM_IO, prof, BUCKETS) == []
    other = [MINILM_IO[0], TensorSpec("token_type_ids", "input", "int64", (-1, -1)), MINILM_IO[2]]
    probs = io_problems(MINILM_IO, other, [implicit_profile(other)], BUCKETS)
    assert any("'attention_mask'" in p and "missing" in p for p in probs)
    assert any("'token_type_ids'" in p for p in probs)
    int32 = [MINILM_IO[0], TensorSpec("attention_mask", "input", "int32", (-1, -1)), MINILM_IO[2]]
    assert io_problems(MINILM_IO, int32, [implicit_profile(int32)], BUCKETS) == [
        "tensor 'attention_mask': dtype int32 in the new engine, int64 in the served one"
    ]
    out256 = MINILM_IO[:2] + [TensorSpec("sentence_embedding", "output", "float32", (-1, 256))]
    assert "'sentence_embedding'" in io_problems(MINILM_IO, out256, prof, BUCKETS)[0]


def test_io_problems_checks_profile_ranges_against_served_shapes():
    probs = io_problems(MINILM_IO, MINILM_IO, _two_profiles()[:1], BUCKETS)  # only the short profile
    assert len(probs) == 2 and all("outside every optimization profile" in p for p in probs)
    assert "b1x64" in probs[0] and "b8x64" in probs[1]
    assert io_problems(MINILM_IO, MINILM_IO, _two_profiles(), BUCKETS) == []
    fixed = [
        TensorSpec("input_ids", "input", "int64", (-1, 16)),
        TensorSpec("attention_mask", "input", "int64", (-1, 16)),
        MINILM_IO[2],
    ]
    probs = io_problems(MINILM_IO, fixed, [implicit_profile(fixed)], BUCKETS)
    assert probs and "'input_ids'" in probs[0] and "[1, 64]" in probs[0]


def test_location_and_format_are_compared_where_the_backend_has_them():
    a = [TensorSpec("x", "input", "float32", (-1, 3), location="DEVICE", format="LINEAR")]
    b = [TensorSpec("x", "input", "float32", (-1, 3), location="HOST", format="LINEAR")]
    prof = [Profile(0, {"x": ((1, 3), (1, 3), (8, 3))})]
    assert io_problems(a, b, prof, [Bucket(1, 3)]) == [
        "tensor 'x': location HOST in the new engine, DEVICE in the served one"
    ]


# ---- real engines -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    from harness.mechanisms.onnx_models.export import minilm_onnx

    return minilm_onnx()


@pytest.fixture(scope="module")
def feeds():
    from harness.base.paths import DATA_DIR
    from harness.experiments.engine_hotload.workload import TextFeeds, load_texts

    return TextFeeds(load_texts(DATA_DIR / "gptcache_mock_data.json"))


def test_exported_model_matches_sentence_transformers(minilm, feeds):
    from harness.infra.model_wheels import sentence_model

    eng = open_engine("ort", minilm)
    try:
        b = Bucket(2, 32)
        f = feeds.feeds(eng.io(), b)
        out = eng.infer(f)["sentence_embedding"]
        texts = feeds.texts[:2]
        ref = sentence_model().encode(texts)
        # the feeds hold these texts truncated to 32 tokens; compare with the same truncation
        enc = sentence_model().tokenizer(texts, truncation=True, max_length=32)
        if all(len(ids) < 32 for ids in enc["input_ids"]):
            assert np.abs(out - ref).max() < 1e-4
        assert out.shape == (2, 384)
        assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    finally:
        eng.close()


def test_prewarm_runs_every_bucket_once_and_times_the_split(minilm, feeds):
    eng = open_engine("ort", minilm)
    try:
        assert set(eng.timings) >= {"read_ms", "verify_ms", "deserialize_ms", "context_ms"}
        recs = eng.prewarm(BUCKETS, feeds.feeds_for(eng.io()))
        assert [(r.profile, r.bucket) for r in recs] == [(0, b.name) for b in BUCKETS]
        assert all(r.ms > 0 for r in recs)
        assert eng.calls == 0  # prewarm is not counted as served requests
    finally:
        eng.close()
    with pytest.raises(Exception, match="closed"):
        eng.infer(feeds.feeds(eng.io(), BUCKETS[0]))


def test_hot_swap_under_load_from_several_threads_fails_no_request(minilm, feeds):
    from harness.experiments.engine_hotload.workload import RequestStream

    buckets = [Bucket(1, 16), Bucket(2, 16)]
    first = open_engine("ort", minilm, label="v0")
    first.prewarm(buckets, feeds.feeds_for(first.io()))
    slot = EngineSlot(first)
    engines = [first]

    def load():
        e = open_engine("ort", minilm, label=f"v{len(engines)}")
        engines.append(e)
        return e

    def call(bucket, i):
        out, version = slot.infer(feeds.feeds(slot.engine.io(), bucket, i))
        assert out["sentence_embedding"].shape == (bucket.batch, 384)
        return version

    t0 = time.perf_counter()
    stream = RequestStream(call, buckets, threads=4, interval_ms=5, t0=t0).start()
    reports = []
    try:
        time.sleep(0.3)
        for _ in range(2):
            reports.append(slot.swap(load, buckets, feeds.feeds_for(first.io())))
            time.sleep(0.3)
    finally:
        records = stream.stop()
        slot.engine.close()
    assert [r.error for r in records if not r.ok] == []
    assert {r.version for r in records} == {0, 1, 2}
    assert len({r.thread for r in records}) == 4
    assert engines[0].closed and engines[1].closed
    for rep in reports:
        d = rep.durations_ms()
        assert rep.started <= rep.loaded <= rep.checked <= rep.warmed <= rep.switched <= rep.drained <= rep.released
        assert d["switch_ms"] < d["to_serving_ms"]
        assert len(rep.prewarm) == len(buckets)
    # every request that started after a switch finished was served by the new engine
    for k, rep in enumerate(reports):
        after = [
            r
            for r in records
            if r.t > rep.switched - t0 + 1e-3 and (k + 1 == len(reports) or r.t < reports[k + 1].started - t0)
        ]
        assert after and all(r.version == k + 1 for r in after)


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    from harness.experiments.engine_hotload.incompatible_swap_case import incompatible_variants

    return incompatible_variants(tmp_path_factory.mktemp("variants"))


def test_compatibility_check_refuses_a_model_with_a_different_input(minilm, feeds, variants):
    served = open_engine("ort", minilm, label="minilm")
    slot = EngineSlot(served)
    try:
        for _what, path, should_refuse in variants:
            new = open_engine("ort", path)
            try:
                if should_refuse:
                    with pytest.raises(IncompatibleEngine, match="swap refused: tensor '"):
                        check_compatible(served, new, BUCKETS)
                else:
                    check_compatible(served, new, BUCKETS)
            finally:
                new.close()
        other_input = next(p for w, p, _ in variants if "token_type_ids" in w)
        with pytest.raises(IncompatibleEngine) as err:
            slot.swap(lambda: open_engine("ort", other_input), BUCKETS, feeds.feeds_for(served.io()))
        assert "'attention_mask'" in str(err.value) and "'token_type_ids'" in str(err.value)
        assert slot.engine is served and slot.version == 0 and not served.closed
        out, version = slot.infer(feeds.feeds(served.io(), BUCKETS[0]))
        assert version == 0 and out["sentence_embedding"].shape == (1, 384)
    finally:
        served.close()


def test_suite_spec_validates_and_bad_params_are_bad_input():
    from harness.base.errors import BadInput
    from harness.base.paths import suite_spec
    from harness.model import spec
    from harness.model.driver_contract import get

    suite = spec.load_suite_file(suite_spec("engine-hotload"))
    assert {c.driver for c in suite.cases} == {
        "engine-hotload-cold-start",
        "engine-hotload-prewarm",
        "engine-hotload-hot-swap",
        "engine-hotload-incompatible-swap",
        "engine-hotload-signed-load",
    }
    drv = get("engine-hotload-prewarm")
    with pytest.raises(BadInput, match="buckets"):
        drv.resolve_params("t", {"buckets": [[0, 16]]})
    with pytest.raises(BadInput, match="min <= opt <= max"):
        drv.resolve_params("t", {"trt_profiles": [[[1, 64], [1, 16], [8, 32]]]})
    with pytest.raises(BadInput, match="is not one of"):
        drv.resolve_params("t", {"backend": "cuda"})
