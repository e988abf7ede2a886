"""Per-codec measurements on real KV chunks: encode/decode time, bytes, the cost of a
plain copy of the same bytes (the store-plus-fetch QPS loop is codecs_case.interleaved_qps).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from harness.base import stats
from harness.experiments.kv_tiers.codecs import CodecError, plain_copy


@dataclass
class CodecTiming:
    codec: str
    bytes: list[int] = field(default_factory=list)
    encode_s: list[float] = field(default_factory=list)
    decode_s: list[float] = field(default_factory=list)
    copy_s: list[float] = field(default_factory=list)
    qps: float | None = None
    qps_ops: int = 0

    def summary(self) -> dict:
        return {
            "codec": self.codec,
            "bytes": stats.median(self.bytes),
            "encode_ms": stats.median(self.encode_s) * 1e3,
            "decode_ms": stats.median(self.decode_s) * 1e3,
            "copy_ms": stats.median(self.copy_s) * 1e3,
            "qps": self.qps,
            "samples": len(self.decode_s),
        }


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def time_codec(codec, arrays: list[np.ndarray], repeats: int) -> CodecTiming:
    """Encode each array once (timed), decode it `repeats` times (timed) and copy its
    encoded bytes `repeats` times (timed); every decode must be bit-exact."""
    out = CodecTiming(codec.name)
    for arr in arrays:
        t0 = time.perf_counter()
        buf = codec.encode(arr)
        out.encode_s.append(time.perf_counter() - t0)
        out.bytes.append(len(buf))
        for _ in range(repeats):
            t0 = time.perf_counter()
            got, _ = codec.decode(buf)
            out.decode_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plain_copy(buf)
            out.copy_s.append(time.perf_counter() - t0)
            if not _same(got, arr):
                raise CodecError(f"{codec.name} round trip is not bit-exact")
    return out
