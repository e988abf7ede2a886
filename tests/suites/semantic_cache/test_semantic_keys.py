"""Key schemes of the semantic-cache experiment: exact hash, LSH signatures, banding."""

import numpy as np
import pytest

from harness.mechanisms.semantic import keys


def test_normalize_and_exact_keys():
    assert keys.normalize("  How do I   RESET my password?! ") == "how do i reset my password"
    a, b = "How do I reset my password?", "how do i reset my password"
    assert keys.exact_key(a) != keys.exact_key(b)
    assert keys.exact_key(a, normalized=True) == keys.exact_key(b, normalized=True)
    assert keys.exact_key(a).startswith("hash_") and keys.exact_key(a, True).startswith("hashn_")


def test_projection_and_signature_stable_for_a_seed():
    v = np.random.default_rng(42).standard_normal((5, 384)).astype(np.float32)
    s1 = keys.signatures(v, keys.projection(384, seed=7))
    s2 = keys.signatures(v, keys.projection(384, seed=7))
    s3 = keys.signatures(v, keys.projection(384, seed=8))
    assert s1.dtype == np.uint64 and s1.shape == (5,)
    assert np.array_equal(s1, s2)
    assert not np.array_equal(s1, s3)
    key = keys.sem_key(s1[0])
    assert key.startswith("sem_") and len(key) == 4 + 16
    int(key[4:], 16)


def test_signature_bits_are_hyperplane_signs_msb_first():
    proj = keys.projection(8, seed=1)
    v = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    sig = int(keys.signatures(v, proj)[0])
    want = "".join("1" if x > 0 else "0" for x in v @ proj)
    assert format(sig, "064b") == want


def test_near_vectors_share_more_bits_than_far_ones():
    rng = np.random.default_rng(0)
    proj = keys.projection(384, seed=3)
    base = rng.standard_normal((200, 384)).astype(np.float32)
    near = base + 0.2 * rng.standard_normal(base.shape).astype(np.float32)
    far = rng.standard_normal(base.shape).astype(np.float32)
    d_near = keys.hamming(keys.signatures(base, proj), keys.signatures(near, proj))
    d_far = keys.hamming(keys.signatures(base, proj), keys.signatures(far, proj))
    assert d_near.mean() < 10 < 25 < d_far.mean()  # angle ~11 deg -> ~4 bits; random -> ~32 bits
    assert (d_near < d_far).mean() > 0.95


def test_hamming_counts_differing_bits():
    assert int(keys.hamming(np.uint64(0), np.uint64(0b1011))) == 3
    assert int(keys.hamming(np.uint64(2**64 - 1), np.uint64(0))) == 64


def test_band_values_cover_the_signature():
    sig = 0x0123456789ABCDEF
    assert keys.band_values(sig, 8) == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF]
    assert keys.band_keys(sig, 4)[0] == "semb4_0_0123"
    with pytest.raises(ValueError):
        keys.band_values(sig, 7)


def test_banding_finds_every_signature_within_radius_below_band_count():
    rng = np.random.default_rng(5)
    stored = rng.integers(0, 2**63, 300, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    bands = 8
    index: dict[str, set] = {}
    for s in stored:
        for k in keys.band_keys(int(s), bands):
            index.setdefault(k, set()).add(int(s))
    for s in stored[:50]:
        flip = rng.choice(64, size=bands - 1, replace=False)  # radius 7 < 8 bands
        q = int(s)
        for b in flip:
            q ^= 1 << int(b)
        cands = set().union(*(index.get(k, set()) for k in keys.band_keys(q, bands)))
        assert int(s) in cands


def test_nearest_references():
    q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    stored = np.array([[0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    idx, sim = keys.nearest_cosine(q, stored)
    assert list(idx) == [1, 0] and sim[0] == pytest.approx(0.6)
    idx, d = keys.nearest_hamming(np.array([0b0111], dtype=np.uint64), np.array([0, 0b0110], dtype=np.uint64))
    assert list(idx) == [1] and list(d) == [1]
