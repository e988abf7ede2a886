"""all-MiniLM-L6-v2 query embeddings from ONNX Runtime, one query at a time as a cache sees them.

The graph is the lookup's own fused export (`onnx_fused.minilm_onnx_fused`: the transformer
with its mean pooling and L2 normalisation in the graph, its attention, LayerNorm and GELU
steps fused by ONNX Runtime's transformer optimizer, FP32; built once and kept under the cache
folder beside the engine suite's export). `graph="int8"` loads its dynamic per-channel int8
quantization (`onnx_int8.minilm_onnx_int8`, the lookup's int8 arm); `graph="engine"` loads the
engine suite's own export (`engine_hotload.export.minilm_onnx`, unfused) instead, to compare
the two. Tokens come from the model's own `tokenizer.json` through the `tokenizers` library
(no padding for one query; truncated at the model's `max_seq_length`, 256, as
sentence-transformers does). The session runs on one intra-op thread by default, like the
single-query torch path it is compared with. Vectors equal sentence-transformers' to cosine
>= 0.9999 (tests/suites/semantic_cache/test_semantic_onnx.py checks every text of the data).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.experiments.semantic_cache.onnx_fused import minilm_onnx_fused
from harness.experiments.semantic_cache.onnx_int8 import minilm_onnx_int8
from harness.infra.model_wheels import minilm_path
from harness.mechanisms.onnx_models.export import HIDDEN, minilm_onnx
from harness.mechanisms.onnx_models.runtime import onnxruntime, session_options

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SEQ_LENGTH_FILE = "sentence_bert_config.json"
GRAPHS = {"fused": minilm_onnx_fused, "engine": minilm_onnx, "int8": minilm_onnx_int8}


@dataclass
class OnnxEmbedder:
    session: Any  # onnxruntime.InferenceSession (onnxruntime ships no type hints)
    tokenizer: Tokenizer
    dim: int = 384
    delay_s: float = 0.0  # the instrument: a known wait added inside the embedding step
    graph_file: str = ""  # the name of the ONNX file the session runs

    @classmethod
    def load(cls, threads: int = 1, log=lambda m: None, graph: str = "fused") -> "OnnxEmbedder":
        from tokenizers import Tokenizer

        ort = onnxruntime()
        model_dir = minilm_path()
        path = GRAPHS[graph](log=log)
        session = ort.InferenceSession(str(path), session_options(threads, "all"), providers=["CPUExecutionProvider"])
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        max_len = int(json.loads((model_dir / SEQ_LENGTH_FILE).read_text()).get("max_seq_length", 256))
        tok.enable_truncation(max_len)
        tok.no_padding()
        return cls(session, tok, HIDDEN, graph_file=path.name)

    def with_delay(self, delay_ms: float) -> "OnnxEmbedder":
        """The same session and tokenizer with a known wait of `delay_ms` in every embedding."""
        return OnnxEmbedder(self.session, self.tokenizer, self.dim, delay_ms / 1000.0, self.graph_file)

    def encode_one(self, text: str) -> np.ndarray:
        """The unit vector (384,) float32 of one text."""
        enc = self.tokenizer.encode(text)
        ids = np.asarray([enc.ids], dtype=np.int64)
        mask = np.asarray([enc.attention_mask], dtype=np.int64)
        out = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0][0]
        if self.delay_s:
            time.sleep(self.delay_s)
        return np.asarray(out, dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors (n, 384), each text on its own (no padding)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.encode_one(t) for t in texts])
