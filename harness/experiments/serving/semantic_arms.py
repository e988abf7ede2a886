"""The semantic cache in front of the engine, swept (the `semantic.*` arms of driver
`serving-sweep`): the semantic-cache suite's stream (its dataset, split and calibrated radius)
sent open loop at each rate, each request through the cache between client and engine
(semantic_case.Front, the same lookup as the end-to-end case).

Arms, on the same rates:
- semantic.on: the semantic cache (embedding + LSH signature, lookup in the Redis Cluster);
- semantic.hash: the prompt-hash cache (C3's baseline);
- semantic.off: no cache, every request to the engine (the mechanism-off control);
- semantic.oracle: the semantic lookup path against a store holding every query of the pool
  (every request a hit: the instrument, which shows the sweep can see a cache at all).

Every point starts from the same cache contents (the inserted origins; what an earlier point's
misses stored is dropped), and draws its own queries from the test split. The lookups (the
embedding and Redis) run on one worker thread, as one cache process would serve them, so a
lookup that cannot keep up queues there and shows in TTFT, never in the client's schedule.
A hit's TTFT is its lookup; a miss's is the lookup plus the engine's first token; a wrong hit
(an answer of another question) is served by the engine and counted.
"""

from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import numpy as np

from harness.mechanisms.semantic import common, keys
from harness.mechanisms.semantic import stream as semantic_stream
from harness.mechanisms.semantic.embed import Embedder
from harness.mechanisms.semantic.store import Entry, Store
from harness.model.driver_contract import Param

from . import client
from .semantic_case import Front

ARMS = ("semantic.on", "semantic.hash", "semantic.off", "semantic.oracle")
MODE_OF = {
    "semantic.on": "semantic_cache",
    "semantic.hash": "hash_cache",
    "semantic.off": "no_cache",
    "semantic.oracle": "oracle_cache",
}

# the stream's parameters, as the semantic-cache suite names them (its queries are the pool a
# point draws from; the engine's answer length is the sweep's output_tokens)
PARAMS = {
    k: v
    for k, v in semantic_stream.STREAM_PARAMS.items()
    if k not in ("device", "queries", "stream", "max_new_tokens", "oracle")
}
PARAMS["semantic_pool"] = Param(int, 400, "semantic arms: the test-split queries a point draws from (at most)", min=2)


class SemanticArms:
    """The stream, the stores and the lookup worker of one repetition's semantic arms."""

    def __init__(self, ctx, p: dict):
        self.p = {**p, "queries": p["semantic_pool"], "stream": "test", "max_new_tokens": p["output_tokens"]}
        self.emb = Embedder.load("cpu")
        self.s = semantic_stream.prepare(self.p, self.emb, ctx.log)
        self.proj = keys.projection(self.emb.dim, self.p["lsh_seed"])
        self.rc = ctx.target.cluster_client(socket_timeout=10)  # a hung node fails a lookup, never the case
        self.worker: ThreadPoolExecutor | None = None
        try:
            self._start(ctx)
        except BaseException:
            self.close()
            raise

    def _start(self, ctx) -> None:
        common.clear_patterns(ctx.target)
        p_ = self.p
        self.stores = {
            "hash_cache": Store(self.rc, p_["ttl_s"], p_["bands"]),
            "semantic_cache": Store(self.rc, p_["ttl_s"], p_["bands"]),
            "oracle_cache": Store(self.rc, p_["ttl_s"], p_["bands"], prefix="orc"),
        }
        import torch  # loaded by the embedding already

        self._threads = torch.get_num_threads()
        # single queries on one thread, as in the semantic-cache suite's TTFT case; set in the
        # worker itself (OpenMP's thread count is per thread) and restored by close()
        self.worker = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="cache-lookup", initializer=torch.set_num_threads, initargs=(1,)
        )
        self.labels: list[str] = []
        self.outcomes: dict[int, str] = {}
        self._oracle_filled = False
        self.worker.submit(self.emb.encode_one, self.s.requests[0][0]).result()  # the first call is no measurement

    def close(self) -> None:
        """The worker drained first (no write lands after), then the stores cleared; the
        torch thread count the worker set is restored."""
        try:
            if self.worker is not None:
                self.worker.shutdown(wait=True)
            for st in getattr(self, "stores", {}).values():
                st.clear()
        finally:
            self.rc.close()
            if self.worker is not None:
                import torch

                torch.set_num_threads(self._threads)

    def reset(self, arm: str) -> None:
        """The stores as a point starts: the inserted origins (and, for the oracle, every query)."""
        worker = cast(ThreadPoolExecutor, self.worker)  # made by _start: __init__ fails without it
        worker.submit(lambda: None).result()  # the last point's writes are done before the reset
        entries = [Entry(lab, f"[cached answer of entry {i}]") for i, (_, lab) in enumerate(self.s.workload.inserts)]
        mode = MODE_OF[arm]
        if mode == "hash_cache":
            self.stores[mode].clear()
            self.stores[mode].put_many(
                [(keys.exact_key(t, True), e) for (t, _), e in zip(self.s.workload.inserts, entries)]
            )
        elif mode == "semantic_cache":
            self.stores[mode].clear()
            self.stores[mode].put_signatures(self.s.insert_sigs, entries)
        elif mode == "oracle_cache" and not self._oracle_filled:
            worker.submit(semantic_stream.fill_oracle, self.stores[mode], self.s.requests, self.emb, self.proj).result()
            self._oracle_filled = True

    def requests(self, arm: str, rate: float, span_s: float, salt: int, block: int = 0) -> list[client.Request]:
        """Poisson arrivals at `rate` inside `span_s` (at least two), each a query of the pool
        (a seeded draw, without repeats while the pool lasts)."""
        rng = random.Random(salt)
        times = [t for t in client.poisson_schedule(max(2, round(3 * rate * span_s) + 10), rate, salt) if t < span_s]
        times = times if len(times) >= 2 else [0.0, span_s / 2]
        n = len(times)
        order: list[int] = []
        while len(order) < n:
            order += rng.sample(range(len(self.s.requests)), len(self.s.requests))
        self.labels = [self.s.requests[i][1] for i in order[:n]]
        self.outcomes = {}
        return [
            client.Request(t, self.s.requests[i][0], self.p["output_tokens"], arm) for t, i in zip(times, order[:n])
        ]

    def serving(self, arm: str):
        """serve(i, request, t0) for sweep_run's loops, bound to an HTTP session and an engine."""
        mode = MODE_OF[arm]

        def make(sess, ep, lim):
            front = Front(sess, ep, self.p, self.stores, self.emb, self.proj, self.s.radius)
            front.timeout = lim
            loop_worker = self.worker

            async def serve(i: int, r: client.Request, t0: float) -> client.Result:
                st = time.perf_counter()
                late_ms = 1000 * (st - (t0 + r.at_s))
                try:
                    return await through(i, r, t0, st, late_ms)
                except Exception as e:  # the cache failed (Redis): the request's error, sent on time
                    self.outcomes[i] = "error"
                    return client.Result(
                        i, r.tag, r.at_s, "error", f"the cache: {type(e).__name__}: {e}"[:200], late_ms=late_ms
                    )

            async def through(i: int, r: client.Request, t0: float, st: float, late_ms: float) -> client.Result:
                loop = asyncio.get_running_loop()
                entry, key = (
                    (None, None)
                    if mode == "no_cache"
                    else await loop.run_in_executor(loop_worker, front.lookup, mode, r.prompt)
                )
                looked_ms = 1000 * (time.perf_counter() - st)
                if entry is not None and entry.label == self.labels[i]:
                    self.outcomes[i] = "hit"
                    return client.Result(i, r.tag, r.at_s, "ok", ttft_ms=looked_ms, e2e_ms=looked_ms, late_ms=late_ms)
                res = await client.send(sess, front.url, ep.model, i, r, t0 + looked_ms / 1000, lim)
                self.outcomes[i] = "wrong_hit" if entry is not None else ("model" if mode == "no_cache" else "miss")
                res.late_ms = late_ms
                res.ttft_ms = None if res.ttft_ms is None else res.ttft_ms + looked_ms
                res.e2e_ms = None if res.e2e_ms is None else res.e2e_ms + looked_ms
                if res.status == "ok" and entry is None and mode != "no_cache":
                    await loop.run_in_executor(
                        loop_worker, _store, self.stores[mode], mode, key, self.labels[i], res.text
                    )
                return res

            return serve

        return make

    def engine_served(self, results: list[client.Result]) -> list[client.Result]:
        """The requests the engine served (misses, wrong hits, no cache): a queue shows in
        their TTFT, while a mix of hits and misses would swing a third's median."""
        return [r for r in results if self.outcomes.get(r.index) != "hit"]

    def figures(self, results: list[client.Result], warmup_s: float) -> dict:
        """The cache's own figures over the point's measured requests: correct hits (% of
        them) and wrong hits."""
        mine = [r.index for r in results if r.scheduled_s >= warmup_s]
        seen = [self.outcomes.get(i) for i in mine]
        return {
            "cache_hit_pct": 100.0 * seen.count("hit") / len(mine) if mine else None,
            "wrong_hits": seen.count("wrong_hit"),
            "cache_hits": seen.count("hit"),
        }


def _store(store: Store, mode: str, key, label: str, text: str) -> None:
    new = Entry(label, text)
    if mode == "hash_cache":
        store.put_many([(key, new)])
    else:
        store.put_signatures(np.array([key], dtype=np.uint64), [new])
