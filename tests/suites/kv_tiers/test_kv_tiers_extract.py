"""Real SmolLM2 KV chunks: prefix-keyed chunking, cache reassembly, and a TTFT point
restored through the real tiers giving the same first token as a full prefill."""

from __future__ import annotations

import uuid

import pytest

from harness.base.errors import BadInput
from harness.experiments.kv_tiers import extract, ttft


def test_chunk_keys_are_shared_by_shared_prefixes_only():
    a = list(range(100))
    b = list(range(64)) + [999] + list(range(65, 100))
    ka, kb = extract.chunk_keys(a, 32), extract.chunk_keys(b, 32)
    assert len(ka) == 3  # the 4-token tail is not a chunk
    assert ka[:2] == kb[:2] and ka[2] != kb[2]
    assert extract.chunk_keys(a[:64], 32) == ka[:2]
    assert extract.chunk_keys([5] + a[1:], 32)[1] != ka[1]  # a key covers the whole prefix, not its span
    assert len(set(ka)) == 3 and all(len(k) == 64 for k in ka)


def test_prefix_tokens_leave_the_suffix():
    assert ttft.prefix_tokens(128, 32, 16) == 96
    assert ttft.prefix_tokens(2048, 32, 16) == 2016
    assert ttft.prefix_tokens(40, 32, 16) == 0


def test_breakeven_needs_every_longer_length_to_win():
    pts = []
    for n, full, l2 in [(128, 100, 120), (256, 200, 150), (512, 400, 420), (1024, 800, 300), (2048, 1600, 500)]:
        p = ttft.TtftPoint(n, n - 32, 1, full_s=[full / 1e3], tier_s={"L2": [l2 / 1e3]})
        pts.append(p)
    assert ttft.breakeven(pts, "L2") == 1024
    assert ttft.breakeven(pts[:1], "L2") is None


def test_ttft_params_are_checked():
    from harness.model import driver_contract

    drv = driver_contract.get("kv-tiers-ttft")
    with pytest.raises(BadInput, match="8192"):
        drv.resolve_params("t", {"lengths": [128, 10000]})
    with pytest.raises(BadInput, match="no whole"):
        drv.resolve_params("t", {"lengths": [40]})
    with pytest.raises(BadInput, match="aligned128"):
        driver_contract.get("kv-tiers-codecs").resolve_params(
            "t", {"codecs": ["json", "raw"], "json_decode_target_ms": 1.0}
        )


@pytest.fixture(scope="module")
def smol():
    pytest.importorskip("transformers")
    import torch

    from harness.infra.model_wheels import smollm2

    try:
        model = smollm2()
    except Exception as e:  # the model wheel is part of `make setup`
        pytest.skip(f"SmolLM2 not available: {e}")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # far faster than 2 spinning threads on a shared 2-core host
    yield model
    torch.set_num_threads(before)


def test_real_prompt_chunks_reassemble_exactly(smol):
    import torch

    tok, model = smol
    ids = extract.prompt_ids(tok, 80)
    assert len(ids) == 80
    _, cache = extract.prefill(model, ids)
    chunks = extract.split_chunks(cache, ids, 32)
    cfg = model.config
    assert len(chunks) == 2
    assert tuple(chunks[0].tensor.shape) == (cfg.num_hidden_layers, 2, cfg.num_key_value_heads, 32, 64)
    rebuilt = extract.cache_layers(extract.assemble_cache([c.tensor for c in chunks], cfg))
    for (k, v), (k2, v2) in zip(extract.cache_layers(cache), rebuilt):
        assert torch.equal(k[:, :, :64], k2) and torch.equal(v[:, :, :64], v2)


def test_ttft_point_restores_the_same_first_token_from_every_tier(smol, cluster_client, tmp_path):
    from harness.experiments.kv_tiers.codecs import AlignedCodec
    from harness.experiments.kv_tiers.tiers import L1, L2, L3, TieredStore

    tok, model = smol
    ids = extract.prompt_ids(tok, 90)
    store = TieredStore(
        L1(device="cpu"),
        L2(cluster_client, prefix=f"kvt:{uuid.uuid4().hex[:6]}:"),
        L3(tmp_path / "l3", 256 << 20),
        AlignedCodec(64),
        write_behind_every=500,
    )
    try:
        pt = ttft.measure_point(model, store, ids, 32, 16, repeats=1, log=lambda m: None)
    finally:
        store.close()
    assert pt.prefix_tokens == 64 and pt.chunks == 2
    assert pt.mismatches == 0 and pt.wrong_tier == 0
    assert set(pt.tier_s) == {"L1", "L2", "L3"} and all(len(v) == 1 for v in pt.tier_s.values())
    assert store.hits["L3"] == 2 and store.hits["L2"] == 2


@pytest.mark.parametrize(
    "driver,params",
    [
        (
            "kv-tiers-codecs",
            {
                "prompt_tokens": 32,
                "decode_repeats": 1,
                "json_repeats": 0,
                "qps_seconds": 0.05,
                "qps_slices": 1,
                "codecs": ["json", "aligned128"],
                "json_decode_target_ms": 0.2,
            },
        ),
        ("kv-tiers-latency", {"prompt_tokens": 64, "rounds": 1, "write_behind_every": 1, "small_gets": 5}),
        ("kv-tiers-ttft", {"lengths": [64, 80], "repeats": 1}),
    ],
)
def test_drivers_run_end_to_end(smol, cluster, tmp_path, driver, params):
    """Each driver on tiny inputs: ok, finite metrics, its series (never tables or charts),
    and nothing of its keys left in the cluster."""
    from harness.model import driver_contract
    from harness.model.driver_contract import CaseContext

    drv = driver_contract.get(driver)
    ctx = CaseContext(
        "kv-tiers",
        "t",
        1,
        "local",
        drv.resolve_params("t", {**params, "torch_threads": 1}),
        tmp_path / "raw",
        cluster,
        log=lambda m: None,
    )
    out = drv.run(ctx)
    assert out.status == "ok", out.reason
    assert out.metrics and all(m.value is not None for m in out.metrics.values())
    assert out.series and all(len(s) for s in out.series.values())
    assert "tables" not in out.details and "charts" not in out.details
    if driver == "kv-tiers-codecs":
        m = out.metrics
        assert m["sized.elements"].value >= 64 and m["sized.decode_speedup.aligned128_vs_json"].value > 0
        assert {"control.decode_speedup.json_vs_json", "control.qps_gain_pct.json_vs_json"} <= set(m)
        assert set(out.series["codecs"].column("codec")) == {"json", "aligned128", "json (control)"}
    if driver == "kv-tiers-latency":
        m = out.metrics
        assert m["mismatches"].value == 0 and m["write_behind.batches"].value == 2
        assert m["lookups_compared"].value > 0  # the denominator of mismatches (issue 52)
        assert m["hits.L3"].value == 2
        assert {
            "L1.fetch_copy.p50_us",
            "L2.fetch_decode.p50_us",
            "L2.small_get.p50_us",
            "L3.cold.p50_us",
            "L3.warm.p50_us",
        } <= set(m)
    if driver == "kv-tiers-ttft":
        assert out.metrics["first_token_mismatches"].value == 0
        assert out.metrics["first_token_compared"].value > 0  # its denominator (issue 52)
        assert out.series["ttft"].column("tokens") == [64, 80]
    assert not [k for n in cluster.primaries for k in cluster.client(n).keys("kv*")]
