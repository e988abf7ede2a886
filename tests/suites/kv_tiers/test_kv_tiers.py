"""KV tiers against a real Redis Cluster and a real LMDB file: fall-through, promotion,
TTL expiry, write-behind batching, and crash safety of what was acknowledged."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import torch

from harness.experiments.kv_tiers import tiers
from harness.experiments.kv_tiers.codecs import AlignedCodec
from harness.experiments.kv_tiers.tiers import L1, L2, L3, TieredStore

SHAPE = (2, 2, 3, 8, 16)


def _chunk(seed: int) -> torch.Tensor:
    return torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed))


def _store(cluster_client, tmp_path, every=500, ttl=None, prefix=None):
    ttl = ttl or {}
    return TieredStore(
        L1(ttl.get("L1", 30.0), device="cpu"),
        L2(cluster_client, ttl.get("L2", 300.0), prefix or f"kvtest:{uuid.uuid4().hex[:6]}:"),
        L3(tmp_path / "l3", 64 << 20, ttl.get("L3", 3600.0)),
        AlignedCodec(128),
        every,
    )


def test_default_ttls_and_batch_size_are_the_sources():
    assert tiers.DEFAULT_TTL_S == {"L1": 30.0, "L2": 300.0, "L3": 3600.0}
    assert tiers.DEFAULT_WRITE_BEHIND_EVERY == 500


def test_lookup_falls_through_and_promotes(cluster_client, tmp_path):
    s = _store(cluster_client, tmp_path, every=500)
    try:
        t = _chunk(1)
        s.put("a", t)
        got, tier = s.get("a")
        assert tier == "L1" and torch.equal(got, t)
        assert len(s.l3) == 0  # batch of 500 not full: nothing written behind yet
        s.l1.clear()
        got, tier = s.get("a")
        assert tier == "L2" and torch.equal(got, t)
        assert s.get("a")[1] == "L1"  # promoted into L1
        s.flush()
        assert len(s.l3) == 1
        s.l1.clear()
        s.l2.delete("a")
        got, tier = s.get("a")
        assert tier == "L3" and torch.equal(got, t)
        assert s.l2.get("a") is not None and "a" in s.l1  # promoted into L2 and L1
        assert s.get("a")[1] == "L1"
        assert s.get("never-written") == (None, "miss")
        assert s.hits == {"L1": 3, "L2": 1, "L3": 1, "miss": 1}
        assert all(len(s.latency_s[k]) == v for k, v in s.hits.items())
    finally:
        s.close()


def test_ttl_expiry_in_every_tier(cluster_client, tmp_path):
    s = _store(cluster_client, tmp_path, every=1, ttl={"L1": 0.3, "L2": 0.6, "L3": 0.9})
    try:
        t = _chunk(2)
        s.put("x", t)
        s.flush()
        assert s.get("x")[1] == "L1"
        time.sleep(0.4)  # L1 expired, L2 not
        assert s.l1.get("x") is None
        assert s.get("x")[1] == "L2"  # (promotes to L1 with a fresh L1 TTL)
        time.sleep(0.35)  # L1 and L2 expired; L3 has 0.15 s left
        s.l1.clear()
        assert cluster_client.get(s.l2.prefix + "x") is None  # Redis expired it (PX)
        got, tier = s.get("x")
        assert tier == "L3" and torch.equal(got, t)
        time.sleep(0.3)
        s.l1.clear()
        s.l2.delete("x")
        assert s.get("x") == (None, "miss")
        assert s.l3.expired >= 1
    finally:
        s.close()


def test_l1_lru_bound_in_bytes():
    l1 = L1(30.0, max_bytes=2 * _chunk(0).numel() * 4, device="cpu")
    for i in range(3):
        l1.put(str(i), _chunk(i))
    assert "0" not in l1 and "1" in l1 and "2" in l1 and l1.evictions == 1


def test_write_behind_batches_every_n_writes_off_the_request_path(cluster_client, tmp_path):
    persisted: list[list[str]] = []
    s = _store(cluster_client, tmp_path, every=4)
    s.write_behind.on_persisted = lambda keys: persisted.append(keys)
    try:
        for i in range(10):
            s.put(f"k{i}", _chunk(i))
        deadline = time.time() + 10
        while s.write_behind.persisted < 8 and time.time() < deadline:
            time.sleep(0.01)
        assert s.write_behind.persisted == 8 and s.write_behind.pending == 2
        assert [len(b) for b in persisted] == [4, 4]
        assert sorted(s.l3.keys()) == sorted(f"k{i}" for i in range(8))
        s.flush()  # the partial batch
        assert [len(b) for b in persisted] == [4, 4, 2] and len(s.l3) == 10
        for i in range(10):
            s.l1.clear()
            s.l2.delete(f"k{i}")
            got, tier = s.get(f"k{i}")
            assert tier == "L3" and torch.equal(got, _chunk(i))
    finally:
        s.close()


WRITER = r"""
import hashlib, sys, threading, time, torch
from harness.experiments.kv_tiers.codecs import AlignedCodec
from harness.experiments.kv_tiers.tiers import L3, WriteBehind
path, every = sys.argv[1], int(sys.argv[2])
codec = AlignedCodec(128)
lock = threading.Lock()
def say(line):  # one write per line, never interleaved between the two threads
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
def ack(keys):  # called by the write-behind thread after the batch's commit
    for k in keys:
        say("ACK " + k)
wb = WriteBehind(L3(path, 256 << 20), every, on_persisted=ack)
i = 0
while True:  # write until killed
    payload = codec.encode(torch.randn(2, 2, 3, 32, 64, generator=torch.Generator().manual_seed(i)))
    say(f"SENT k{i:06d} " + hashlib.sha256(payload).hexdigest())
    wb.add(f"k{i:06d}", payload)
    i += 1
    time.sleep(0.0005)
"""


def test_acknowledged_entries_survive_a_killed_writer(tmp_path):
    """SIGKILL a process in the middle of writing batches; every entry it acknowledged as
    persisted is intact after reopening, and no batch is half there."""
    every = 25
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "l3"), str(every)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    sent, acked = {}, []
    try:
        deadline = time.time() + 60
        for line in proc.stdout:
            kind, key, *rest = line.split()
            if kind == "SENT":
                sent[key] = rest[0]
            else:
                acked.append(key)
            if len(acked) >= 3 * every and len(sent) % every == every // 2:  # mid-batch
                break
            assert time.time() < deadline, "writer too slow"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        for line in proc.stdout:  # lines already printed before the kill
            kind, key, *rest = line.split()
            if kind == "ACK":
                acked.append(key)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert len(sent) > len(acked)  # it died with writes not yet persisted
    l3 = L3(tmp_path / "l3", 256 << 20)
    try:
        codec = AlignedCodec(128)
        stored = set(l3.keys())
        for key in acked:
            payload = l3.get(key)
            assert payload is not None, f"{key} was acknowledged but is gone"
            assert hashlib.sha256(payload).hexdigest() == sent[key]
            codec.decode(payload)
        assert set(acked) <= stored
        assert len(stored) % every == 0  # whole batches only (one transaction each)
        assert all(k in sent for k in stored)
    finally:
        l3.close()


def test_l3_refuses_a_full_map_with_a_clear_error(tmp_path):
    from harness.base.errors import BadInput

    l3 = L3(tmp_path / "small", 1 << 20)
    try:
        with pytest.raises(BadInput, match="map .* is full"):
            l3.put_batch([(f"k{i}", bytes(200_000)) for i in range(10)])
    finally:
        l3.close()
