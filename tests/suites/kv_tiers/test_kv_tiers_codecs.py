"""Codecs of KV chunks: bit-exact round trips and clear rejections (pure, no servers)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from harness.experiments.kv_tiers import codecs
from harness.experiments.kv_tiers.codecs import AlignedCodec, CodecError, JsonCodec, RawCodec

SHAPE = (2, 2, 3, 4, 8)


def _tensor(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(SHAPE, generator=g) * 3
    t.view(-1)[:4] = torch.tensor([0.0, -0.0, 1e-30, 3.4e38])  # edge values survive too
    return t.to(dtype)


def _all_codecs(dtype="float32"):
    return [JsonCodec(), AlignedCodec(64), AlignedCodec(128), RawCodec(SHAPE, dtype)]


@pytest.mark.parametrize("codec", _all_codecs(), ids=lambda c: c.name)
def test_float32_round_trip_is_bit_exact(codec):
    t = _tensor()
    got = codecs.decode_tensor(codec, codec.encode(t))
    assert got.dtype == torch.float32 and tuple(got.shape) == SHAPE
    assert got.numpy().tobytes() == t.numpy().tobytes()  # bit-exact, -0.0 included


@pytest.mark.parametrize("dtype,name", [(torch.float16, "float16"), (torch.bfloat16, "bfloat16")])
@pytest.mark.parametrize("kind", ["json", "aligned64", "aligned128", "raw"])
def test_half_precision_round_trips(dtype, name, kind):
    t = _tensor(dtype, seed=1)
    codec = codecs.make_codec(kind, SHAPE, name)
    got = codecs.decode_tensor(codec, codec.encode(t))
    assert got.dtype == dtype
    assert torch.equal(got.view(torch.int16), t.view(torch.int16))


@pytest.mark.parametrize("a", [64, 128])
def test_aligned_layout_header_and_padding(a):
    t = _tensor()
    buf = AlignedCodec(a).encode(t)
    length, align = struct.unpack_from("<II", buf, 0)
    assert (length, align) == (t.numel() * 4, a)
    assert len(buf) % a == 0 and len(buf) == a + -(-length // a) * a
    code, ndim, _ = struct.unpack_from("<BBH", buf, 8)
    assert (code, ndim) == (1, 5)
    assert struct.unpack_from("<5I", buf, 12) == SHAPE
    assert buf[12 + 20 : a] == bytes(a - 32)  # zero padding up to the data
    assert buf[a : a + length] == t.numpy().astype("<f4").tobytes()  # data starts at offset A


def test_aligned_decode_copies_into_writable_memory():
    buf = AlignedCodec(128).encode(_tensor())
    arr, _ = AlignedCodec(128).decode(buf)
    assert arr.flags.writeable and arr.flags.c_contiguous
    view, _ = AlignedCodec(128).decode(buf, copy=False)
    assert not view.flags.writeable  # zero-copy view over the immutable bytes


@pytest.mark.parametrize("cut", [0, 4, 7, 100, -1, -128])
def test_truncated_aligned_chunk_is_rejected(cut):
    buf = AlignedCodec(128).encode(_tensor())
    bad = buf[:cut]
    with pytest.raises(CodecError, match="truncated|misaligned"):
        AlignedCodec(128).decode(bad)


def test_misaligned_chunks_are_rejected():
    buf = AlignedCodec(128).encode(_tensor())
    with pytest.raises(CodecError, match="misaligned"):
        AlignedCodec(128).decode(buf + b"\0" * 8)  # size no longer a multiple of 128
    shifted = bytes(3) + buf[:-3]  # read at the wrong offset
    with pytest.raises(CodecError):
        AlignedCodec(128).decode(shifted)
    bad_align = bytearray(buf)
    struct.pack_into("<I", bad_align, 4, 96)  # not a power of two
    with pytest.raises(CodecError, match="alignment"):
        AlignedCodec(128).decode(bytes(bad_align))
    with pytest.raises(CodecError, match="trailing"):
        AlignedCodec(128).decode(buf + bytes(128))


def test_corrupt_metadata_is_rejected():
    buf = bytearray(AlignedCodec(64).encode(_tensor()))
    struct.pack_into("<I", buf, 12, 3)  # first dimension no longer matches the length
    with pytest.raises(CodecError, match="does not match"):
        AlignedCodec(64).decode(bytes(buf))
    buf2 = bytearray(AlignedCodec(64).encode(_tensor()))
    buf2[8] = 9
    with pytest.raises(CodecError, match="dtype"):
        AlignedCodec(64).decode(bytes(buf2))


def test_truncated_json_and_raw_chunks_are_rejected():
    t = _tensor()
    with pytest.raises(CodecError, match="truncated or corrupt"):
        JsonCodec().decode(JsonCodec().encode(t)[:-10])
    raw = RawCodec(SHAPE)
    with pytest.raises(CodecError, match="truncated"):
        raw.decode(raw.encode(t)[:-4])


def test_json_is_compact_and_names_its_layout():
    buf = JsonCodec().encode(_tensor())
    assert b" " not in buf
    assert buf.startswith(b'{"dtype":"float32","shape":[2,2,3,4,8],"data":[')


def test_bad_alignment_and_unknown_codec_are_refused():
    with pytest.raises(ValueError):
        AlignedCodec(48)
    with pytest.raises(ValueError, match="unknown codec"):
        codecs.make_codec("msgpack")
    with pytest.raises(ValueError, match="shape"):
        codecs.make_codec("raw")


def test_codec_bench_checks_round_trips_on_arrays():
    from harness.experiments.kv_tiers.codec_bench import time_codec

    arrays = [codecs.to_numpy(_tensor(seed=s))[0] for s in range(2)]
    t = time_codec(AlignedCodec(64), arrays, repeats=2)
    s = t.summary()
    assert s["samples"] == 4 and s["bytes"] == 64 + -(-arrays[0].nbytes // 64) * 64
    assert np.isfinite(s["decode_ms"]) and s["copy_ms"] >= 0
