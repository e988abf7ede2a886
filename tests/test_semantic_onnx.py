"""The ONNX Runtime query embedding (issue 24) is the same embedding as sentence-transformers':
cosine >= 0.9999 on every text of the data, one query at a time through the engine suite's
export of all-MiniLM-L6-v2 (pooling and normalisation in the graph)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.experiments.semantic_cache import datasets


@pytest.fixture(scope="module")
def onnx():
    from harness.experiments.semantic_cache.onnx_embed import OnnxEmbedder

    return OnnxEmbedder.load(threads=1)


@pytest.mark.slow  # about 2,000 texts through both models
def test_onnx_embedding_equals_sentence_transformers_on_every_text_of_the_data(onnx):
    from harness.model_wheels import sentence_model

    ds = datasets.load(datasets.DEFAULT_DATASET, "auto")
    texts = sorted({t for row in ds.rows for t in row[:2]})
    assert len(texts) > 1900  # every origin and every paraphrase
    ours = onnx.encode(texts)
    ref = np.asarray(sentence_model().encode(texts, batch_size=64, normalize_embeddings=True,
                                             convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)
    cos = (ours * ref).sum(1)
    worst = int(cos.argmin())
    assert float(cos[worst]) >= 0.9999, (texts[worst], float(cos[worst]))
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)


def test_long_texts_are_truncated_as_sentence_transformers_does(onnx):
    """sentence-transformers cuts at max_seq_length (256 tokens); so must the ONNX path,
    else a long text gets another vector."""
    from harness.model_wheels import sentence_model

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
