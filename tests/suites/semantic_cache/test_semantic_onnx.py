"""The ONNX Runtime query embedding (issue 24) is the same embedding as sentence-transformers':
cosine >= 0.9999 on every text of the data, one query at a time through the engine suite's
export of all-MiniLM-L6-v2 (pooling and normalisation in the graph)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.mechanisms.semantic import datasets


@pytest.fixture(scope="module")
def onnx():
    from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder

    return OnnxEmbedder.load(threads=1)


@pytest.mark.slow  # about 2,000 texts through both models
def test_onnx_embedding_equals_sentence_transformers_on_every_text_of_the_data(onnx):
    from harness.infra.model_wheels import sentence_model

    ds = datasets.load(datasets.DEFAULT_DATASET, "auto")
    texts = sorted({t for row in ds.rows for t in row[:2]})
    assert len(texts) > 1900  # every origin and every paraphrase
    ours = onnx.encode(texts)
    ref = np.asarray(
        sentence_model().encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        ),
        dtype=np.float32,
    )
    cos = (ours * ref).sum(1)
    worst = int(cos.argmin())
    assert float(cos[worst]) >= 0.9999, (texts[worst], float(cos[worst]))
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)


def test_long_texts_are_truncated_as_sentence_transformers_does(onnx):
    """sentence-transformers cuts at max_seq_length (256 tokens); so must the ONNX path,
    else a long text gets another vector."""
    from harness.infra.model_wheels import sentence_model

    long = " ".join(["the cache keeps every answer it was given"] * 60)  # over 256 tokens
    assert len(onnx.tokenizer.encode(long).ids) == 256
    ref = sentence_model().encode([long], normalize_embeddings=True, convert_to_numpy=True)[0]
    assert float(onnx.encode_one(long) @ ref) >= 0.9999


def test_the_instrument_wait_is_added_inside_the_embedding(onnx):
    import time

    slow = onnx.with_delay(20)
    t0 = time.perf_counter()
    v = slow.encode_one("How do I reset my password?")
    assert time.perf_counter() - t0 >= 0.020  # a lower bound only: a sleep never ends early
    assert float(v @ onnx.encode_one("How do I reset my password?")) > 0.99999


def test_the_lookup_graph_has_every_layer_fused_and_an_unfused_graph_is_refused(onnx):
    """The lookup's file is the fused export (one Attention, two SkipLayerNormalization and one
    BiasGelu per layer); the engine suite's unfused export does not pass the same check."""
    from harness.experiments.semantic_cache.onnx_fused import check_fused, fused_counts, minilm_onnx_fused
    from harness.mechanisms.onnx_models.export import minilm_onnx

    fused = minilm_onnx_fused()
    assert fused.name.startswith("minilm-fused-") and fused.parent == minilm_onnx().parent
    assert fused_counts(fused) == {
        "EmbedLayerNormalization": 1,
        "Attention": 6,
        "SkipLayerNormalization": 12,
        "BiasGelu": 6,
    }
    check_fused(fused)
    with pytest.raises(RuntimeError, match="fused"):
        check_fused(minilm_onnx())
    assert [i.name for i in onnx.session.get_inputs()] == ["input_ids", "attention_mask"]


def test_the_fused_file_is_named_by_the_weights_the_recipe_and_the_tool_versions(monkeypatch):
    from harness.experiments.semantic_cache import onnx_fused
    from harness.infra.model_wheels import minilm_path

    before = onnx_fused.fused_key(minilm_path())
    assert onnx_fused.fused_key(minilm_path()) == before
    monkeypatch.setattr(onnx_fused, "FUSED_RECIPE", onnx_fused.FUSED_RECIPE + "-changed")
    assert onnx_fused.fused_key(minilm_path()) != before


def test_the_fused_and_the_engine_graphs_give_the_same_vectors(onnx):
    from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder

    engine = OnnxEmbedder.load(threads=1, graph="engine")
    texts = ["How do I reset my password?", "a", " ".join(["cache"] * 300)]
    assert float((onnx.encode(texts) * engine.encode(texts)).sum(1).min()) >= 0.99999


@pytest.fixture(scope="module")
def int8():
    from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder

    return OnnxEmbedder.load(threads=1, graph="int8")


def test_the_int8_graph_runs_on_integer_kernels_and_an_fp32_graph_is_refused(int8):
    """Issue 45's int8 arm: every matrix product of the fused graph quantized (one QAttention
    per layer, three MatMulInteger, activations quantized at run time, no FP32 MatMul left),
    built once beside the fused file; the FP32 graph does not pass the same check."""
    import os

    from harness.experiments.semantic_cache.onnx_fused import minilm_onnx_fused
    from harness.experiments.semantic_cache.onnx_int8 import check_int8, int8_counts, minilm_onnx_int8

    path = minilm_onnx_int8()
    assert int8.graph_file == path.name and path.name.startswith("minilm-int8-")
    assert path.parent == minilm_onnx_fused().parent
    counts = int8_counts(path)
    assert counts["QAttention"] == 6 and counts["MatMulInteger"] == 18 and counts["MatMul"] == 0
    assert counts["DynamicQuantizeLinear"] >= 1
    check_int8(path)
    with pytest.raises(RuntimeError, match="FP32 matrix products"):
        check_int8(minilm_onnx_fused())
    assert path.stat().st_size < 0.4 * minilm_onnx_fused().stat().st_size  # int8 weights: a quarter of FP32's
    mtime = os.stat(path).st_mtime_ns
    assert minilm_onnx_int8() == path and os.stat(path).st_mtime_ns == mtime  # kept, not rebuilt


def test_int8_vectors_differ_from_fp32_yet_make_the_same_decisions(onnx, int8):
    """The int8 arm is not the FP32 graph under another name (its vectors differ) and not
    another model (nearest-neighbour decisions at the cache's threshold agree on a seeded
    sample of the data, checked against FP32's query by query)."""
    from harness.experiments.semantic_cache.gptcache_accuracy import agreement, answers_of, nn_accuracy
    from harness.mechanisms.semantic import common

    _, wl = common.load(
        {
            "dataset": datasets.DEFAULT_DATASET,
            "dataset_format": "auto",
            "dataset_rows": 80,
            "split_seed": 0,
            "insert_fraction": 0.5,
        }
    )
    ins, qs = [t for t, _ in wl.inserts], [t for t, _ in wl.queries]
    labels = [lab for _, lab in wl.inserts]
    every = list(range(len(qs)))
    fp = nn_accuracy(onnx.encode(qs), onnx.encode(ins), labels, wl, every, every, [0.85])
    q8 = nn_accuracy(int8.encode(qs), int8.encode(ins), labels, wl, every, every, [0.85])
    cos = (onnx.encode(qs) * int8.encode(qs)).sum(1)
    assert float(cos.max()) < 0.99999 and float(cos.min()) > 0.95  # changed by quantization, not replaced
    agree = agreement(answers_of(fp, labels), answers_of(q8, labels), every)
    assert agree["same_decision_pct"] >= 90 and agree["same_answer_pct"] >= 90, agree
