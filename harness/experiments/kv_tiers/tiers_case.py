"""kv-tiers-latency: access latency of real KV chunks per tier, each timed as a fetch that
delivers usable data (source section 4.1, C17):

- L1: the lookup plus a copy of the tensor's bytes (a dict lookup alone touches no data);
- L2: the whole chunk's GET from the Redis Cluster plus its decode (the 64-byte GET is
  kept beside it as the round trip alone);
- L3: an LMDB read plus decode, cold (the data file's pages dropped from the page cache
  first with posix_fadvise DONTNEED) and warm (the same read again).

Every round takes every key through all of these in turn (interleaved), then through the
tiered store's own lookup (fall-through and promotion), so each measure has its neighbour
as a control: L2 beside L1, the chunk GET beside the 64-byte GET, cold beside warm.
"""

from __future__ import annotations

import time

from harness.base import stats
from harness.experiments.kv_tiers.codecs import decode_tensor
from harness.experiments.kv_tiers.common import (
    COMMON,
    TIER_STORE_PARAMS,
    Store,
    check_prompt,
    env_note,
    in_torch_threads,
    prompt_chunks,
)
from harness.experiments.kv_tiers.series import TIER_SERIES
from harness.experiments.kv_tiers.ttft import prepare_tier
from harness.model.driver_contract import CaseContext, Metric, Param, Record, Series
from harness.model.driver_helpers import latency_metrics

TIER_PARAMS = {
    **COMMON,
    **TIER_STORE_PARAMS,
    "prompt_tokens": Param(int, 512, "tokens of the real prompt whose chunks are cached", min=1),
    "rounds": Param(int, 10, "rounds over every chunk: each fetch kind, then the store's lookups", min=1),
    "small_gets": Param(int, 200, "64-byte GETs (the Redis round trip alone)", min=1),
}
MEASURES = {  # measure -> (tier, what is timed)
    "L1.fetch_copy": ("L1", "lookup + copy of the tensor's bytes"),
    "L2.fetch_decode": ("L2", "GET of the whole encoded chunk + decode"),
    "L2.small_get": ("L2", "GET of a 64-byte value (the round trip alone)"),
    "L3.cold": ("L3", "LMDB read + decode after dropping the file's cached pages"),
    "L3.warm": ("L3", "LMDB read + decode, pages cached"),
    "L1": ("L1", "store lookup answered by L1 (dict lookup, no copy)"),
    "L2": ("L2", "store lookup answered by L2: L1 miss, GET, decode, promotion to L1"),
    "L3": ("L3", "store lookup answered by L3: L1 and L2 miss, read, decode, promotion to L2 and L1"),
    "miss": ("-", "store lookup of a key no tier holds"),
}


def check_tiers(where: str, p: dict) -> None:
    check_prompt(where, p)


@in_torch_threads
def run_tiers(ctx: CaseContext) -> Record:

    p = ctx.params
    chunks, device = prompt_chunks(ctx)
    originals = {c.key: c.tensor for c in chunks}
    keys = list(originals)
    s = Store(ctx, chunks[0].tensor.shape, device)
    store = s.store
    s.keys.update(keys)
    samples: dict[str, list[float]] = {k: [] for k in MEASURES}
    mismatches, compared = 0, {"lookups": 0}
    try:
        for c in chunks:
            store.put(c.key, c.tensor)
        pending_after_puts = store.write_behind.pending
        store.flush()
        payloads = {k: store.codec.encode(t) for k, t in originals.items()}
        put_s = list(store.put_seconds)
        store.reset_stats()
        ctx.log(
            f"{len(keys)} chunks of {chunks[0].tensor.numel() * 4} bytes written; L3 holds {len(store.l3)} after "
            f"flush; {p['rounds']} rounds"
        )
        for _ in range(p["rounds"]):
            mismatches += _fetch_round(store, keys, originals, samples, compared)
            mismatches += _store_lookups(store, keys, originals, payloads, compared)
        for i in range(len(keys)):  # misses: keys that were never written
            store.get(f"absent-{i}")
        samples["L2.small_get"] = _small_get_latency(s.client, store.l2.prefix, p["small_gets"])
    finally:
        s.close()
    for tier in ("L1", "L2", "L3", "miss"):
        samples[tier] = list(store.latency_s[tier])
    nbytes = chunks[0].tensor.numel() * 4
    note = (
        f"One chunk = {p['chunk_tokens']} tokens of all layers' K and V ({nbytes} B as float32, "
        f"{len(payloads[keys[0]])} B encoded as {p['codec']}). L2 is the Redis Cluster over loopback; L3 an LMDB "
        f"file on this host's disk, cold reads after posix_fadvise(DONTNEED) on its data file. Write-behind every "
        f"{p['write_behind_every']} L2 writes; {pending_after_puts} writes were pending when flushed. "
        f"{env_note(device)}."
    )
    return Record(
        "ok",
        metrics=_tier_metrics(samples, store, put_s, mismatches, compared["lookups"]),
        series={TIER_SERIES.name: _tier_series(samples, note)},
        details={"ttl_s": {t: p[t.lower() + "_ttl_s"] for t in ("L1", "L2", "L3")}},
        facts={"l1_device": l1_device_name(device)},
    )


def l1_device_name(device) -> str:
    """Where L1's tensors live, as the device itself names it: the CUDA device's model name
    (compared with a claim's GPU model), or 'cpu' (host memory)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return dev.type


def _fetch_round(store, keys: list, originals: dict, samples: dict[str, list[float]], compared: dict) -> int:
    """Every key through each fetch kind in turn (L1 copy, L2 GET + decode, L3 cold, L3 warm);
    returns the fetches whose tensor was not bit-exact (compared["lookups"] counts the fetches
    compared)."""
    import torch

    mismatches = 0
    for k in keys:
        got = {}
        t0 = time.perf_counter()
        got["L1"] = store.l1.get(k).clone()
        t1 = time.perf_counter()
        got["L2"] = decode_tensor(store.codec, store.l2.get(k))
        t2 = time.perf_counter()
        store.l3.drop_page_cache()
        t3 = time.perf_counter()
        got["L3"] = decode_tensor(store.codec, store.l3.get(k))
        t4 = time.perf_counter()
        got["L3 warm"] = decode_tensor(store.codec, store.l3.get(k))
        t5 = time.perf_counter()
        for name, dt in (
            ("L1.fetch_copy", t1 - t0),
            ("L2.fetch_decode", t2 - t1),
            ("L3.cold", t4 - t3),
            ("L3.warm", t5 - t4),
        ):
            samples[name].append(dt)
        ref = originals[k].cpu()
        mismatches += sum(not torch.equal(t.cpu(), ref) for t in got.values())
        compared["lookups"] += len(got)
    return mismatches


def _store_lookups(store, keys: list, originals: dict, payloads: dict, compared: dict) -> int:
    """The store's own lookups with fall-through and promotion, each tier prepared to be the
    one that answers; returns the lookups answered by another tier or not bit-exact."""
    import torch

    mismatches = 0
    for tier in ("L1", "L2", "L3"):
        prepare_tier(store, keys, tier, originals, payloads)
        for k in keys:
            t, hit = store.get(k)
            if hit != tier or not torch.equal(t.cpu(), originals[k].cpu()):
                mismatches += 1
            compared["lookups"] += 1
    return mismatches


def _tier_metrics(
    samples: dict[str, list[float]], store, put_s: list[float], mismatches: int, compared: int
) -> dict[str, Metric]:
    metrics: dict[str, Metric] = {}
    for name, secs in samples.items():
        metrics.update(latency_metrics(name, [v * 1e6 for v in secs], (50, 99), MEASURES[name][1], "us"))
    for tier in ("L1", "L2", "L3", "miss"):
        metrics[f"hits.{tier}"] = Metric(store.hits[tier], "lookups")
    metrics.update(latency_metrics("put", [v * 1e6 for v in put_s], (50, 99), "L1 + encode + L2 SET + queue", "us"))
    metrics["mismatches"] = Metric(mismatches, "lookups", "lower", "wrong tier, or tensor not bit-exact")
    metrics["lookups_compared"] = Metric(
        compared,
        "lookups",
        None,
        "fetches and store lookups whose tier and tensor were compared (the denominator of mismatches)",
    )
    wb = store.write_behind
    metrics["write_behind.batches"] = Metric(wb.batches, "batches")
    metrics["write_behind.persisted"] = Metric(wb.persisted, "entries")
    if wb.batch_seconds:
        metrics["write_behind.batch_ms"] = Metric(
            stats.median(wb.batch_seconds) * 1e3, "ms", "lower", "median time to write and commit one batch to LMDB"
        )
    return metrics


def _tier_series(samples: dict[str, list[float]], note: str) -> Series:
    names = [n for n in MEASURES if samples[n]]
    return TIER_SERIES.make(
        {
            "measure": names,
            "tier": [MEASURES[n][0] for n in names],
            "what": [MEASURES[n][1] for n in names],
            "n": [len(samples[n]) for n in names],
            "p50_us": [stats.percentile(samples[n], 50) * 1e6 for n in names],
            "p99_us": [stats.percentile(samples[n], 99) * 1e6 for n in names],
        },
        note,
    )


def _small_get_latency(client, prefix: str, n: int) -> list[float]:
    key = prefix + "small"
    client.set(key, b"x" * 64, px=60_000)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            client.get(key)
            out.append(time.perf_counter() - t0)
    finally:
        client.delete(key)
    return out
