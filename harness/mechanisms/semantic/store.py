"""Cache entries in the real Redis Cluster; every lookup is a Redis round trip.

Layout (every key expires after `ttl_s`, the source's L2 TTL of 5 minutes):
- `hash_<sha256>` / `hashn_<sha256>`: exact prompt hash (raw / normalized) -> entry
- `sem_<16 hex>`: 64-bit LSH signature -> entry (the source's key); `ctl_<16 hex>` and
  `ctlb<B>_...`: the same layout for the control whose signatures are exact text hashes
- `semb<B>_<i>_<hex>`: band index, a SET of the signatures whose band i has that value
- `semnn_<n>`: entry n of the exact cosine-NN reference (the vector search itself runs in
  numpy: Redis 7 has no vector index without modules; only the entry fetch is a round trip)
An entry is JSON {"label": ..., "response": ...}. The store remembers every key it wrote
and deletes them in `clear()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.mechanisms.semantic import keys

TTL_S = 300


@dataclass
class Entry:
    label: str
    response: str

    def dumps(self) -> bytes:
        return json.dumps({"label": self.label, "response": self.response}).encode()

    @staticmethod
    def loads(raw: bytes | None) -> "Entry | None":
        if raw is None:
            return None
        d = json.loads(raw)
        return Entry(d["label"], d["response"])


@dataclass
class Store:
    client: Any  # redis.cluster.RedisCluster (or redis.Redis)
    ttl_s: int = TTL_S
    bands: int = 8
    prefix: str = "sem"  # "ctl" for the control whose signatures are exact hashes
    written: set = field(default_factory=set)

    def _pipe(self):
        return self.client.pipeline(transaction=False)

    def put_many(self, items: list[tuple[str, Entry]], nx: bool = True, chunk: int = 500) -> None:
        """SET key entry EX ttl [NX] for many keys (first writer wins with NX)."""
        for s in range(0, len(items), chunk):
            p = self._pipe()
            for key, entry in items[s : s + chunk]:
                p.set(key, entry.dumps(), ex=self.ttl_s, nx=nx)
                self.written.add(key)
            p.execute()

    def put_signatures(self, sigs: np.ndarray, entries: list[Entry], chunk: int = 200) -> None:
        """`sem_<hex>` -> entry, and each signature into its band sets."""
        self.put_many([(keys.sem_key(s, self.prefix), e) for s, e in zip(sigs, entries)])
        for s in range(0, len(sigs), chunk):
            p = self._pipe()
            for sig in sigs[s : s + chunk]:
                for bk in keys.band_keys(int(sig), self.bands, self.prefix):
                    p.sadd(bk, f"{int(sig):016x}")
                    p.expire(bk, self.ttl_s)
                    self.written.add(bk)
            p.execute()

    def get(self, key: str) -> Entry | None:
        return Entry.loads(self.client.get(key))

    def candidates(self, sig: int) -> np.ndarray:
        """Signatures sharing at least one band with `sig` (one pipelined round trip)."""
        p = self._pipe()
        for bk in keys.band_keys(int(sig), self.bands, self.prefix):
            p.smembers(bk)
        found: set = set()
        for members in p.execute():
            found.update(members)
        return np.array([int(m, 16) for m in found], dtype=np.uint64)

    def lsh_nearest(self, sig: int) -> tuple[Entry | None, int, int | None]:
        """(entry, distance, signature) of the nearest banded candidate, or (None, 65, None)."""
        cands = self.candidates(sig)
        if len(cands) == 0:
            return None, keys.BITS + 1, None
        d = keys.hamming(cands, np.uint64(sig))
        i = int(d.argmin())
        best = int(cands[i])
        return self.get(keys.sem_key(best, self.prefix)), int(d[i]), best

    def clear(self, chunk: int = 500) -> int:
        ks = sorted(self.written)
        for s in range(0, len(ks), chunk):
            p = self._pipe()
            for k in ks[s : s + chunk]:
                p.delete(k)
            p.execute()
        self.written.clear()
        return len(ks)

    def get_many(self, names: list[str], chunk: int = 500) -> list[Entry | None]:
        """GET many keys, pipelined (a cluster pipeline groups them by node)."""
        out: list[Entry | None] = []
        for s in range(0, len(names), chunk):
            p = self._pipe()
            for k in names[s : s + chunk]:
                p.get(k)
            out += [Entry.loads(v) for v in p.execute()]
        return out

    def nearest_many(self, sigs: np.ndarray, chunk: int = 100) -> tuple[list[int | None], np.ndarray]:
        """Nearest banded candidate (signature or None, Hamming distance; 65 when none) of
        every query signature, with one pipeline of band SMEMBERS per `chunk` queries."""
        best_sig: list[int | None] = []
        best_d: list[int] = []
        for s in range(0, len(sigs), chunk):
            p = self._pipe()
            part = sigs[s : s + chunk]
            for sig in part:
                for bk in keys.band_keys(int(sig), self.bands, self.prefix):
                    p.smembers(bk)
            res = p.execute()
            for j, sig in enumerate(part):
                found = set().union(*res[j * self.bands : (j + 1) * self.bands])
                if not found:
                    best_sig.append(None)
                    best_d.append(keys.BITS + 1)
                    continue
                c = np.array([int(m, 16) for m in found], dtype=np.uint64)
                d = keys.hamming(c, np.uint64(sig))
                i = int(d.argmin())
                best_sig.append(int(c[i]))
                best_d.append(int(d[i]))
        return best_sig, np.array(best_d)
