"""C15's stand-in (the raw tensor bytes) and its own instrument (issue 52): the raw decode costs
about one copy of its bytes and its chunk is exactly the tensor's bytes; a raw codec that does
more work per decode, or pads, reads more."""

from __future__ import annotations

import time

import numpy as np

from harness.base import stats
from harness.experiments.kv_tiers import codecs, codecs_case

N = 1 << 19  # float32 values: 2 MiB, about a whole chunk


def _decode_vs_copy(codec, arr, repeats: int = 15) -> float:
    buf = codec.encode(arr)
    dec, cp = [], []
    for _ in range(repeats):
        fresh = bytes(bytearray(buf))
        t0 = time.perf_counter()
        codec.decode(fresh)
        dec.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        codecs.plain_copy(fresh)
        cp.append(time.perf_counter() - t0)
    return stats.median(dec) / stats.median(cp)


class _TripleCopyRaw(codecs.RawCodec):
    """A weaker stand-in: the same bytes decoded through two extra copies."""

    def decode(self, buf, copy: bool = True):
        arr, dtype = super().decode(bytes(bytearray(bytes(buf))))
        return arr.copy(), dtype


def test_raw_decode_costs_about_one_copy_and_a_slower_one_reads_more():
    arr = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    real = min(_decode_vs_copy(codecs.RawCodec((N,)), arr) for _ in range(3))
    slow = min(_decode_vs_copy(_TripleCopyRaw((N,)), arr) for _ in range(3))
    assert real <= 2.0  # the ledger's bound (chunk.decode_vs_copy.raw <= 2)
    assert slow > real * 1.5


def test_codec_metrics_carry_the_stand_ins_instrument():
    ms = {"json": 1.8, "aligned128": 0.02, "raw": 0.02, codecs_case.CONTROL: 1.8}
    wms = {"json": 300.0, "aligned128": 0.3, "raw": 0.25}
    qps = {"json": 400.0, "aligned128": 600.0, "raw": 590.0, codecs_case.CONTROL: 401.0}
    bytes_of = {"json": 9000, "aligned128": 4096 + 128, "raw": 4096, codecs_case.CONTROL: 9000}
    p = {"codecs": ["json", "aligned128", "raw"]}
    m = codecs_case._codec_metrics(p, 1024, ms, wms, qps, bytes_of, [0.0002] * 5)
    assert m["chunk.decode_vs_copy.raw"].value == 0.25 / 0.2
    assert m["sized.raw.bytes_per_value"].value == 4.0
