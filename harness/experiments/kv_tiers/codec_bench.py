"""Per-codec measurements on real KV chunks: encode/decode time, bytes, the cost of a
plain copy of the same bytes, and store-plus-fetch QPS through Redis.

One store-plus-fetch operation = encode a chunk, SET it, GET it back, decode it (one
client, one connection, closed loop), so the codec's cost shows in the QPS the way it
does for a serving process that writes and reads its own chunks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from statistics import median

import numpy as np

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
        return {"codec": self.codec, "bytes": median(self.bytes), "encode_ms": median(self.encode_s) * 1e3,
                "decode_ms": median(self.decode_s) * 1e3, "copy_ms": median(self.copy_s) * 1e3,
                "qps": self.qps, "samples": len(self.decode_s)}


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


def store_fetch_qps(codec, arrays: list[np.ndarray], client, prefix: str, seconds: float,
                    min_ops: int = 3, ttl_ms: int = 300_000) -> tuple[float, int, list[str]]:
    """(ops/s, ops, keys written) of encode + SET + GET + decode, closed loop."""
    keys, ops = [], 0
    t0 = time.perf_counter()
    while ops < min_ops or time.perf_counter() - t0 < seconds:
        arr = arrays[ops % len(arrays)]
        key = f"{prefix}{codec.name}:{ops % len(arrays)}"
        client.set(key, codec.encode(arr), px=ttl_ms)
        got = client.get(key)
        if got is None:
            raise RuntimeError(f"{key} vanished between SET and GET")
        codec.decode(got)
        ops += 1
        if ops <= len(arrays):
            keys.append(key)
    elapsed = time.perf_counter() - t0
    return ops / elapsed, ops, keys
