"""The case of driver `serving-semantic-e2e` (C2, C3 end to end): the semantic-cache suite's TTFT stream
with the model served by the engine over HTTP. The cache sits between the client and the
engine, as a cache library in front of an OpenAI client does (GPTCache's adapter): key
(embedding + LSH signature, or the prompt hash), lookup in the Redis Cluster, and on a miss the
request streamed from the engine, its answer stored. Modes, interleaved per query (rotating
order): no cache (the mechanism-off control), hash cache, semantic cache, and the oracle cache
(the instrument: the semantic lookup path against a store holding every request).

Everything about the stream (dataset, split, radius calibration, the stream itself, metric
names, the P95 floor) is the semantic-cache suite's own (semantic_stream.prepare / outcome_of):
only the model's side moved from an in-process model to the engine. TTFT of a miss = the
lookup + the engine's time to first streamed token; a wrong hit is an error served by the
engine. The engine is the one with prefix caching off where the run has one, so that the
semantic cache is the only cache between the modes."""

from __future__ import annotations

import asyncio
import time
from typing import cast

from harness.infra import serving_engine
from harness.mechanisms.semantic import common, keys
from harness.mechanisms.semantic import stream as semantic_stream
from harness.mechanisms.semantic.embed import Embedder
from harness.mechanisms.semantic.serve import MODES
from harness.mechanisms.semantic.store import Entry, Store
from harness.model.driver_contract import CaseContext, Metric, Param, Record
from harness.model.driver_helpers import torch_threads

from . import client, engines

PARAMS = {
    **{k: v for k, v in semantic_stream.STREAM_PARAMS.items() if k != "device"},
    "timeout_s": Param(float, 60.0, "a request's own time limit", min=1.0),
    "stall_s": Param(float, 20.0, "no byte for this long mid-stream: stalled", min=0.5),
}


class Front:
    """The cache in front of the engine: one request in one mode -> (TTFT ms, outcome)."""

    def __init__(self, sess, ep, p: dict, stores: dict, emb, proj, radius: int):
        self.sess, self.ep, self.p, self.stores = sess, ep, p, stores
        self.emb, self.proj, self.radius = emb, proj, radius
        self.url = client.completions_url(ep.base_url)
        self.timeout = client.limits(p["timeout_s"], p["stall_s"])
        self.errors: list[str] = []

    async def engine(self, text: str, t0: float) -> client.Result:
        req = client.Request(0.0, text, self.p["max_new_tokens"])
        res = await client.send(self.sess, self.url, self.ep.model, 0, req, t0, self.timeout)
        client.refuse_redirects([res])  # a redirect ends the case (exit 3), never a TTFT measured elsewhere
        return res

    def lookup(self, mode: str, text: str):
        # every mode but no_cache (never looked up) has its store: run() and SemanticArms._start make all three
        store = cast(Store, self.stores.get(mode))
        if mode == "hash_cache":
            key = keys.exact_key(text, True)
            return store.get(key), key
        exact = self.p["signature"] == "exact" and mode == "semantic_cache"
        sig = keys.text_signature(text) if exact else int(keys.signatures(self.emb.encode_one(text), self.proj)[0])
        entry, dist, _ = store.lsh_nearest(sig)
        return (entry if entry is not None and dist <= self.radius else None), sig

    async def serve(self, mode: str, text: str, label: str) -> tuple[float | None, str]:
        import numpy as np

        t0 = time.perf_counter()
        entry, key = (None, None) if mode == "no_cache" else self.lookup(mode, text)
        if entry is not None and entry.label == label:
            return 1000 * (time.perf_counter() - t0), "hit"
        res = await self.engine(text, t0)
        if res.status != "ok":
            self.errors.append(f"{mode}: {res.status}: {res.error}")
            return None, "error"
        # the lookup before the dispatch, then the engine's first token (an "ok" result has both times)
        ttft = cast(float, res.late_ms) + cast(float, res.ttft_ms)
        if mode == "no_cache":
            return ttft, "model"
        if entry is not None:
            return ttft, "wrong_hit"
        new = Entry(label, res.text)
        if mode == "hash_cache":
            self.stores[mode].put_many([(key, new)])
        else:
            self.stores[mode].put_signatures(np.array([key], dtype=np.uint64), [new])
        return ttft, "miss"


async def _serve_stream(ctx, ep, p, s, stores, emb, proj) -> tuple[list[list], list[str]]:
    rows = []
    async with client.session() as sess:
        front = Front(sess, ep, p, stores, emb, proj, s.radius)
        await front.engine(s.requests[0][0], time.perf_counter())  # warm-up, not measured
        for n, (text, label) in enumerate(s.requests):
            k = n % len(MODES)
            for pos, mode in enumerate(MODES[k:] + MODES[:k]):
                ttft, outcome = await front.serve(mode, text, label)
                if ttft is not None:
                    rows.append([n, pos, mode, ttft, outcome])
            if (n + 1) % 20 == 0:
                ctx.log(f"{n + 1}/{len(s.requests)} requests x {len(MODES)} modes")
    return rows, front.errors


@engines.fails_when_down
def run(ctx: CaseContext) -> Record:

    p = {**ctx.params, "device": "cpu"}
    ep = engines.pick_off(ctx.target, ctx.raw_dir)
    emb = Embedder.load("cpu")
    s = semantic_stream.prepare(p, emb, ctx.log)
    proj = keys.projection(emb.dim, p["lsh_seed"])
    rc = ctx.target.cluster_client()
    common.clear_patterns(ctx.target)
    stores = {
        "hash_cache": Store(rc, p["ttl_s"], p["bands"]),
        "semantic_cache": Store(rc, p["ttl_s"], p["bands"]),
        "oracle_cache": Store(rc, p["ttl_s"], p["bands"], prefix="orc"),
    }
    try:
        entries = [Entry(lab, f"[cached answer of entry {i}]") for i, (_, lab) in enumerate(s.workload.inserts)]
        stores["hash_cache"].put_many([(keys.exact_key(t, True), e) for (t, _), e in zip(s.workload.inserts, entries)])
        stores["semantic_cache"].put_signatures(s.insert_sigs, entries)
        if p["oracle"] == "hit":
            semantic_stream.fill_oracle(stores["oracle_cache"], s.requests, emb, proj)
        with torch_threads(p["torch_threads"] or 1):  # single queries on 1 thread, as the in-process case
            emb.encode_one(s.requests[0][0])  # the embedding's first call is no measurement
            rows, errors = asyncio.run(_serve_stream(ctx, ep, p, s, stores, emb, proj))
        down = serving_engine.alive(ep)
    finally:
        for st in stores.values():
            st.clear()
        rc.close()
    if down:
        return Record("failed", f"the engine stopped answering during the stream: {down}")
    out = semantic_stream.outcome_of(ctx, p, s, rows, "the engine over HTTP")
    out.metrics["engine.errors"] = Metric(
        len(errors), "requests", "lower", "engine requests that did not complete (left out of the TTFT percentiles)"
    )
    out.details.update({"engine": ep.model, "errors": errors[:20], "engine_prefix_caching": str(ep.prefix_caching)})
    out.facts.update({"model_served_by": "engine over HTTP", "engine_prefix_caching": str(ep.prefix_caching)})
    return out
