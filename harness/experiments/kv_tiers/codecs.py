"""Three ways to turn a KV chunk (a tensor) into bytes and back, all bit-exact.

- ``json``: compact JSON, the source's baseline:
  ``{"dtype":"float32","shape":[...],"data":[...]}`` with no spaces; every element is
  written as the shortest decimal that reads back to the same double, so float32 and
  float16 values round-trip exactly.
- ``aligned`` (alignment 64 or 128, any power of two from 32 up): the source's aligned
  binary layout with an 8-byte header. All integers are little-endian::

      offset 0   uint32  length     bytes of tensor data
      offset 4   uint32  alignment  A (a power of two, >= 32)
      offset 8   uint8   dtype code (1 float32, 2 float16, 3 bfloat16)
      offset 9   uint8   ndim (1..5)
      offset 10  uint16  reserved, 0
      offset 12  uint32 x ndim  the shape, outermost first
      ...        zero padding up to offset A
      offset A   the tensor data: `length` bytes, C order, little-endian elements
      ...        zero padding to the next multiple of A

  The tensor metadata lives in the first aligned block, right after the header; the
  data starts at offset A, and the whole chunk is a multiple of A bytes, so a reader that
  places the chunk at an A-aligned address gets A-aligned tensor data. Decoding checks the
  header and sizes and copies the data once into a fresh, writable array.
- ``raw``: the tensor bytes only (C order, little-endian); dtype and shape travel out of
  band (the codec is built with them). Decoding checks the length and copies once.

Every decoder raises CodecError, naming what is wrong, for a truncated, misaligned or
corrupt chunk.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

HEADER = struct.Struct("<II")  # length, alignment
META = struct.Struct("<BBH")  # dtype code, ndim, reserved
MAX_NDIM = 5
DTYPE_CODES = {"float32": 1, "float16": 2, "bfloat16": 3}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


class CodecError(ValueError):
    """A chunk that cannot be decoded: truncated, misaligned or corrupt."""


# ---- tensors <-> numpy -------------------------------------------------------------------


def to_numpy(tensor) -> tuple[np.ndarray, str]:
    """(C-contiguous little-endian numpy array, dtype name) of a torch tensor or array.
    bfloat16, which numpy lacks, travels as its uint16 bit pattern."""
    if isinstance(tensor, np.ndarray):
        arr = np.ascontiguousarray(tensor)
        name = str(arr.dtype)
    else:
        import torch

        t = tensor.detach().contiguous()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16), "bfloat16"
        arr = t.numpy()
        name = str(arr.dtype)
    if name not in DTYPE_CODES:
        raise ValueError(f"unsupported dtype {name}; use one of {', '.join(DTYPE_CODES)}")
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False), name


def np_dtype(name: str) -> np.dtype:
    return np.dtype("<u2") if name == "bfloat16" else np.dtype(name).newbyteorder("<")


def to_torch(arr: np.ndarray, dtype_name: str):
    import torch

    t = torch.from_numpy(arr)
    return t.view(torch.bfloat16) if dtype_name == "bfloat16" else t


# ---- codecs --------------------------------------------------------------------------------


class JsonCodec:
    name = "json"

    def encode(self, tensor) -> bytes:
        arr, dtype = to_numpy(tensor)
        if dtype == "bfloat16":  # bit pattern -> the float32 of the same value (exact)
            arr32 = (arr.astype("<u4") << 16).view("<f4")
            values = arr32.ravel().tolist()
        else:
            values = arr.ravel().tolist()
        doc = {"dtype": dtype, "shape": list(arr.shape), "data": values}
        return json.dumps(doc, separators=(",", ":"), allow_nan=True).encode()

    def decode(self, buf) -> tuple[np.ndarray, str]:
        try:
            doc = json.loads(bytes(buf))
            dtype, shape, data = doc["dtype"], [int(d) for d in doc["shape"]], doc["data"]
        except (ValueError, TypeError, KeyError) as e:
            raise CodecError(f"json chunk of {len(buf)} bytes is truncated or corrupt: {e}") from None
        if dtype not in DTYPE_CODES:
            raise CodecError(f"json chunk names unknown dtype {dtype!r}")
        if len(data) != math.prod(shape):
            raise CodecError(f"json chunk holds {len(data)} values, its shape {shape} needs {math.prod(shape)}")
        if dtype == "bfloat16":  # every value is a bfloat16 written as float32: keep the top half
            arr = (np.asarray(data, dtype="<f4").view("<u4") >> 16).astype("<u2")
        else:
            arr = np.asarray(data, dtype=np_dtype(dtype))
        return arr.reshape(shape), dtype


class AlignedCodec:
    """The 8-byte-header aligned binary layout (see the module docstring)."""

    def __init__(self, alignment: int = 128):
        check_alignment(alignment)
        self.alignment = alignment
        self.name = f"aligned{alignment}"

    def encode(self, tensor) -> bytes:
        arr, dtype = to_numpy(tensor)
        if not 1 <= arr.ndim <= MAX_NDIM:
            raise ValueError(f"aligned layout holds 1 to {MAX_NDIM} dimensions, not {arr.ndim}")
        a = self.alignment
        meta = META.pack(DTYPE_CODES[dtype], arr.ndim, 0) + struct.pack(f"<{arr.ndim}I", *arr.shape)
        length = arr.nbytes
        if length >= 2**32:
            raise ValueError("a chunk's data must be under 4 GiB (the length field is 32 bits)")
        out = bytearray(a + _round_up(length, a))
        HEADER.pack_into(out, 0, length, a)
        out[8 : 8 + len(meta)] = meta
        out[a : a + length] = arr.tobytes()
        return bytes(out)

    def decode(self, buf, copy: bool = True) -> tuple[np.ndarray, str]:
        length, a, dtype, shape = parse_aligned_header(buf)
        arr = np.frombuffer(buf, dtype=np_dtype(dtype), count=length // ITEMSIZE[dtype], offset=a).reshape(shape)
        return (arr.copy() if copy else arr), dtype


def check_alignment(a) -> None:
    if not isinstance(a, int) or a < 32 or a & (a - 1):
        raise ValueError(f"alignment must be a power of two of at least 32 (64 or 128), not {a!r}")


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def parse_aligned_header(buf) -> tuple[int, int, str, tuple]:
    """(length, alignment, dtype, shape) of an aligned chunk; CodecError when it is bad."""
    size = len(buf)
    if size < HEADER.size:
        raise CodecError(f"aligned chunk is truncated: {size} bytes, shorter than the 8-byte header")
    length, a = HEADER.unpack_from(buf, 0)
    if a < 32 or a & (a - 1):
        raise CodecError(f"aligned chunk has a bad alignment field {a} (must be a power of two >= 32)")
    if size % a:
        raise CodecError(
            f"aligned chunk is misaligned or truncated: {size} bytes is not a multiple of its alignment {a}"
        )
    need = a + _round_up(length, a)
    if size < need:
        raise CodecError(
            f"aligned chunk is truncated: {size} bytes, its header needs {need} "
            f"({a} header block + {length} data bytes padded to {a})"
        )
    if size > need:
        raise CodecError(f"aligned chunk has {size - need} trailing bytes after its padded data")
    code, ndim, _ = META.unpack_from(buf, 8)
    if code not in CODE_DTYPES:
        raise CodecError(f"aligned chunk names unknown dtype code {code}")
    if not 1 <= ndim <= MAX_NDIM or 12 + 4 * ndim > a:
        raise CodecError(f"aligned chunk has a bad ndim {ndim}")
    shape = struct.unpack_from(f"<{ndim}I", buf, 12)
    dtype = CODE_DTYPES[code]
    if math.prod(shape) * ITEMSIZE[dtype] != length:
        raise CodecError(f"aligned chunk's shape {list(shape)} of {dtype} does not match its length {length}")
    return length, a, dtype, shape


class RawCodec:
    """Tensor bytes only; dtype and shape are fixed when the codec is built."""

    name = "raw"

    def __init__(self, shape, dtype: str = "float32"):
        if dtype not in DTYPE_CODES:
            raise ValueError(f"unsupported dtype {dtype}")
        self.shape, self.dtype = tuple(int(d) for d in shape), dtype
        self.nbytes = math.prod(self.shape) * ITEMSIZE[dtype]

    def encode(self, tensor) -> bytes:
        arr, dtype = to_numpy(tensor)
        if dtype != self.dtype or arr.shape != self.shape:
            raise ValueError(f"raw codec is for {self.dtype} {list(self.shape)}, got {dtype} {list(arr.shape)}")
        return arr.tobytes()

    def decode(self, buf, copy: bool = True) -> tuple[np.ndarray, str]:
        if len(buf) != self.nbytes:
            raise CodecError(
                f"raw chunk is {len(buf)} bytes, a {self.dtype} {list(self.shape)} chunk is "
                f"{self.nbytes} (truncated or the wrong shape)"
            )
        arr = np.frombuffer(buf, dtype=np_dtype(self.dtype)).reshape(self.shape)
        return (arr.copy() if copy else arr), self.dtype


def make_codec(name: str, shape=None, dtype: str = "float32"):
    """A codec by name: json, aligned64, aligned128 (alignedN) or raw (needs shape)."""
    if name == "json":
        return JsonCodec()
    if name.startswith("aligned"):
        try:
            return AlignedCodec(int(name[len("aligned") :] or 128))
        except ValueError as e:
            raise ValueError(f"codec {name!r}: {e}") from None
    if name == "raw":
        if shape is None:
            raise ValueError("the raw codec needs the chunk shape")
        return RawCodec(shape, dtype)
    raise ValueError(f"unknown codec {name!r}; use json, aligned64, aligned128 or raw")


def decode_tensor(codec, buf):
    """Decode to a torch tensor (CPU)."""
    arr, dtype = codec.decode(buf)
    return to_torch(arr, dtype)


def plain_copy(buf) -> np.ndarray:
    """The baseline a decoder is compared with: one copy of the same bytes."""
    return np.frombuffer(buf, dtype=np.uint8).copy()
