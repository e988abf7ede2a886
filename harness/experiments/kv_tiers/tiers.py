"""A three-tier KV-chunk cache: L1 in-process, L2 Redis (Cluster), L3 an LMDB file.

- L1 holds decoded tensors in a dict (on the GPU when CUDA is present, host memory
  otherwise), LRU-bounded by bytes, TTL 30 s by default.
- L2 holds encoded chunks in Redis (`SET key value PX ttl`), TTL 300 s by default.
- L3 holds encoded chunks in an LMDB file, TTL 3600 s by default. Each value is
  ``float64 LE expiry (Unix seconds)`` + the encoded chunk; an expired entry reads as a
  miss. LMDB readers see a consistent snapshot (MVCC), so a batch is either wholly
  visible or not at all.
- Write path (`TieredStore.put`): L1, then L2 synchronously; the encoded bytes are queued
  for L3 and written *behind*, off the request path: every `write_behind_every` L2 writes
  (500 by default) the batch goes to a background thread that writes it in one LMDB write
  transaction and commits it (fsync, LMDB's default durability). Only then is the batch
  acknowledged as persisted (`WriteBehind.persisted`, the `on_persisted` callback): what
  was acknowledged survives the writer being killed; what was not may be lost.
- Read path (`TieredStore.get`): L1, then L2, then L3; a hit in a lower tier is promoted
  into every tier above it (an L3 hit is written back to L2 with L2's TTL, and to L1).
  The store counts hits per tier and records each lookup's latency under the tier that
  answered it (a miss under "miss").
"""

from __future__ import annotations

import queue
import struct
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from harness.base.errors import BadInput
from harness.experiments.kv_tiers.codecs import decode_tensor

DEFAULT_TTL_S = {"L1": 30.0, "L2": 300.0, "L3": 3600.0}
DEFAULT_WRITE_BEHIND_EVERY = 500
EXPIRY = struct.Struct("<d")
TIERS = ("L1", "L2", "L3")


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class L1:
    """In-process tensors with a TTL and an LRU bound in bytes (0 = unbounded)."""

    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S["L1"],
        max_bytes: int = 0,
        device: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ttl_s, self.max_bytes, self.clock = ttl_s, max_bytes, clock
        self.device = device or default_device()
        self._items: OrderedDict[str, tuple] = OrderedDict()  # key -> (tensor, expires_at, nbytes)
        self.bytes = 0
        self.evictions = 0

    def get(self, key: str):
        item = self._items.get(key)
        if item is None:
            return None
        if item[1] <= self.clock():
            self.delete(key)
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: str, tensor) -> None:
        if tensor.device.type != self.device.split(":")[0]:
            tensor = tensor.to(self.device, non_blocking=False)
        nbytes = tensor.numel() * tensor.element_size()
        self.delete(key)
        self._items[key] = (tensor, self.clock() + self.ttl_s, nbytes)
        self.bytes += nbytes
        while self.max_bytes and self.bytes > self.max_bytes and len(self._items) > 1:
            old, (_, _, n) = self._items.popitem(last=False)
            self.bytes -= n
            self.evictions += 1

    def delete(self, key: str) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self.bytes -= item[2]

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return len(self._items)


class L2:
    """Encoded chunks in Redis (a RedisCluster or a plain Redis client) with a TTL."""

    def __init__(self, client, ttl_s: float = DEFAULT_TTL_S["L2"], prefix: str = "kv:"):
        self.client, self.ttl_s, self.prefix = client, ttl_s, prefix

    def _k(self, key: str) -> str:
        return self.prefix + key

    def get(self, key: str):
        return self.client.get(self._k(key))

    def put(self, key: str, payload: bytes) -> None:
        self.client.set(self._k(key), payload, px=max(1, int(self.ttl_s * 1000)))

    def delete(self, *keys: str) -> None:
        for k in keys:  # one by one: keys of a cluster live in different slots
            self.client.delete(self._k(k))


class L3:
    """Encoded chunks in an LMDB file; each value carries its expiry time."""

    def __init__(
        self,
        path: Path,
        map_size: int = 1 << 30,
        ttl_s: float = DEFAULT_TTL_S["L3"],
        clock: Callable[[], float] = time.time,
        readonly: bool = False,
    ):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.ttl_s, self.clock, self.map_size, self.readonly = ttl_s, clock, map_size, readonly
        self.env = self._open()
        self.expired = 0

    def _open(self):
        import lmdb

        # sync/metasync on (LMDB's defaults): a committed transaction is on disk.
        return lmdb.open(
            str(self.path),
            map_size=self.map_size,
            subdir=True,
            readonly=self.readonly,
            sync=True,
            metasync=True,
            lock=True,
            max_readers=64,
        )

    def drop_page_cache(self) -> None:
        """Make the next read come from the disk: close the map (pages mapped by this process
        cannot be dropped), ask the kernel to drop the data file's cached pages
        (posix_fadvise POSIX_FADV_DONTNEED; committed pages are clean, so they go), reopen."""
        import os

        self.env.close()
        fd = os.open(self.path / "data.mdb", os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        self.env = self._open()

    def get(self, key: str):
        with self.env.begin(buffers=False) as txn:
            raw = txn.get(key.encode())
        if raw is None:
            return None
        (expires_at,) = EXPIRY.unpack_from(raw, 0)
        if expires_at <= self.clock():
            self.expired += 1
            return None
        return raw[EXPIRY.size :]

    def put_batch(self, items: list[tuple[str, bytes]]) -> None:
        """Write every item in one transaction; returns once it is committed (durable)."""
        import lmdb

        expires = EXPIRY.pack(self.clock() + self.ttl_s)
        try:
            with self.env.begin(write=True) as txn:
                for key, payload in items:
                    txn.put(key.encode(), expires + payload)
        except lmdb.MapFullError:
            raise BadInput(f"LMDB map at {self.path} is full ({self.map_size} bytes); raise l3_map_mb") from None

    def keys(self) -> list[str]:
        with self.env.begin() as txn:
            return [k.decode() for k in txn.cursor().iternext(keys=True, values=False)]

    def delete(self, *keys: str) -> None:
        with self.env.begin(write=True) as txn:
            for k in keys:
                txn.delete(k.encode())

    def __len__(self) -> int:
        return self.env.stat()["entries"]

    def close(self) -> None:
        self.env.close()


class WriteBehind:
    """Batches (key, payload) pairs and writes each full batch to L3 in a background thread."""

    def __init__(
        self, l3: L3, every: int = DEFAULT_WRITE_BEHIND_EVERY, on_persisted: Callable[[list[str]], None] | None = None
    ):
        if every < 1:
            raise ValueError("write-behind batch size must be at least 1")
        self.l3, self.every, self.on_persisted = l3, every, on_persisted
        self._pending: list[tuple[str, bytes]] = []
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self.persisted = 0  # entries acknowledged as committed to L3
        self.batches = 0
        self.batch_seconds: list[float] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="kv-write-behind", daemon=True)
        self._thread.start()

    def add(self, key: str, payload: bytes) -> None:
        with self._lock:
            self._pending.append((key, payload))
            if len(self._pending) >= self.every:
                self._queue.put(self._pending)
                self._pending = []

    def flush(self) -> None:
        """Hand over the partial batch too and wait until everything queued is committed."""
        with self._lock:
            if self._pending:
                self._queue.put(self._pending)
                self._pending = []
        self._queue.join()
        if self.error is not None:
            raise self.error

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _loop(self) -> None:
        while True:
            batch = self._queue.get()
            try:
                if batch is None:
                    return
                t0 = time.perf_counter()
                self.l3.put_batch(batch)
                self.batch_seconds.append(time.perf_counter() - t0)
                self.batches += 1
                self.persisted += len(batch)
                if self.on_persisted is not None:
                    self.on_persisted([k for k, _ in batch])
            except BaseException as e:  # kept and raised by flush()
                self.error = e
            finally:
                self._queue.task_done()

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
        self._thread.join(timeout=30)


class TieredStore:
    """L1 -> L2 -> L3 lookups with promotion; writes through L1 and L2, behind to L3."""

    def __init__(
        self,
        l1: L1,
        l2: L2,
        l3: L3,
        codec,
        write_behind_every: int = DEFAULT_WRITE_BEHIND_EVERY,
        on_persisted: Callable[[list[str]], None] | None = None,
    ):
        self.l1, self.l2, self.l3, self.codec = l1, l2, l3, codec
        self.write_behind = WriteBehind(l3, write_behind_every, on_persisted)
        self.hits = {t: 0 for t in TIERS} | {"miss": 0}
        self.latency_s: dict[str, list[float]] = {t: [] for t in (*TIERS, "miss")}
        self.put_seconds: list[float] = []

    def put(self, key: str, tensor) -> None:
        t0 = time.perf_counter()
        self.l1.put(key, tensor)
        payload = self.codec.encode(tensor)
        self.l2.put(key, payload)
        self.write_behind.add(key, payload)
        self.put_seconds.append(time.perf_counter() - t0)

    def get(self, key: str):
        """(tensor on L1's device, tier name) or (None, "miss")."""
        t0 = time.perf_counter()
        tensor = self.l1.get(key)
        tier = "L1"
        if tensor is None:
            payload = self.l2.get(key)
            tier = "L2"
            if payload is None:
                payload = self.l3.get(key)
                tier = "L3"
                if payload is not None:
                    self.l2.put(key, payload)  # promote to L2
            if payload is not None:
                tensor = decode_tensor(self.codec, payload)
                self.l1.put(key, tensor)  # promote to L1
                tensor = self.l1.get(key)
        if tensor is None:
            tier = "miss"
        self.latency_s[tier].append(time.perf_counter() - t0)
        self.hits[tier] += 1
        return tensor, tier

    def reset_stats(self) -> None:
        for k in self.hits:
            self.hits[k] = 0
            self.latency_s[k] = []
        self.put_seconds = []

    def flush(self) -> None:
        self.write_behind.flush()

    def close(self) -> None:
        self.write_behind.close()
        self.l3.close()
