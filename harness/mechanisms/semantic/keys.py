"""Cache key schemes: exact prompt hash, 64-bit random-hyperplane LSH, cosine NN reference.

LSH (Charikar's SimHash): bit j of a signature is sign(v . p_j) for 64 Gaussian
hyperplanes p_j drawn from numpy's PCG64 with a seed; the projection is saved with the run
so that a signature can be reproduced. The Redis key is `sem_<16 hex digits>`.

Radius lookup uses banding (multi-index hashing without probing): the 64 bits are cut
into `bands` equal bands, each band value indexes the signatures that carry it. A stored
signature within Hamming distance r < bands of the query shares at least one band exactly
(pigeonhole), so for r < bands the candidate set contains every signature within r and the
lookup is exact; for r >= bands it may miss some. Candidates are then ranked by their
exact Hamming distance.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import numpy as np

BITS = 64
_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Case-folded, NFKC, punctuation removed, white space collapsed."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = _PUNCT.sub(" ", t)
    return _SPACE.sub(" ", t).strip()


def exact_key(text: str, normalized: bool = False) -> str:
    """`hash_<sha256>` of the raw prompt, or `hashn_<sha256>` of the normalized prompt."""
    if normalized:
        return "hashn_" + hashlib.sha256(normalize(text).encode()).hexdigest()
    return "hash_" + hashlib.sha256(text.encode()).hexdigest()


def projection(dim: int, seed: int, bits: int = BITS) -> np.ndarray:
    """The (dim, bits) float32 matrix of random hyperplane normals for a seed."""
    return np.random.default_rng(seed).standard_normal((dim, bits)).astype(np.float32)


def signatures(vectors: np.ndarray, proj: np.ndarray) -> np.ndarray:
    """64-bit signatures (uint64, most significant bit = hyperplane 0) of row vectors."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    bits = (v @ proj) > 0
    packed = np.packbits(bits, axis=1, bitorder="big")  # (n, 8) uint8
    return packed.view(">u8").reshape(-1).astype(np.uint64)


def char_ngram_vectors(texts: list[str], n: int = 4, dim: int = 4096) -> np.ndarray:
    """The stand-in for the embedding: unit vectors of hashed character n-gram counts of each
    normalized text (feature hashing, a signed bucket per n-gram, BLAKE2b so that it does not
    depend on PYTHONHASHSEED). Through the same random hyperplanes they give Charikar's SimHash
    of the text's character n-grams: a similarity hash that knows spelling, not meaning. A cache
    keyed by it is what an SBERT-keyed cache must beat for its hits to be the embedding's."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        t = f" {normalize(text)} "
        for i in range(max(1, len(t) - n + 1)):
            h = int.from_bytes(hashlib.blake2b(t[i : i + n].encode(), digest_size=8).digest(), "big")
            out[row, h % dim] += 1.0 if h >> 63 else -1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def sem_key(sig: int, prefix: str = "sem") -> str:
    return f"{prefix}_{int(sig):016x}"


def text_signature(text: str) -> int:
    """A 64-bit exact hash of the normalized text: what the LSH signature becomes when the
    semantic key is replaced by an exact hash (the control of the semantic cache)."""
    return int(hashlib.sha256(normalize(text).encode()).hexdigest()[:16], 16)


def hamming(a: np.ndarray | np.integer | int, b: np.ndarray | np.integer | int) -> np.ndarray:
    """Bitwise Hamming distance between uint64 signatures (broadcasting)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))
    return np.bitwise_count(x).astype(np.int64)


def band_values(sig: int, bands: int) -> list[int]:
    """The `bands` band values of a signature, most significant band first."""
    if BITS % bands:
        raise ValueError(f"bands must divide {BITS}, got {bands}")
    width = BITS // bands
    mask = (1 << width) - 1
    s = int(sig)
    return [(s >> (BITS - width * (i + 1))) & mask for i in range(bands)]


def band_keys(sig: int, bands: int, prefix: str = "sem") -> list[str]:
    """Redis keys of the band index sets: `<prefix>b<bands>_<i>_<hex>`."""
    width = BITS // bands
    digits = max(1, (width + 3) // 4)
    return [f"{prefix}b{bands}_{i}_{v:0{digits}x}" for i, v in enumerate(band_values(sig, bands))]


def nearest_hamming(query_sigs: np.ndarray, stored_sigs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exhaustive reference: index and distance of the nearest stored signature per query."""
    d = hamming(np.asarray(query_sigs)[:, None], np.asarray(stored_sigs)[None, :])
    idx = d.argmin(axis=1)
    return idx, d[np.arange(len(idx)), idx]


def nearest_cosine(queries: np.ndarray, stored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest neighbour by cosine of unit vectors: index and similarity per query."""
    sims = np.asarray(queries, dtype=np.float32) @ np.asarray(stored, dtype=np.float32).T
    idx = sims.argmax(axis=1)
    return idx, sims[np.arange(len(idx)), idx]
