"""The case of driver `semantic-cache-ttft` (claim C3): time to first token of SmolLM2-135M-Instruct over
one query stream drawn from the test split, without a cache (the control), with an
exact-hash cache and with the LSH semantic cache (entries in the Redis Cluster). The three
modes are interleaved per query (rotating order); the Hamming radius is chosen on the
calibration split. Wrong hits are errors, served by the model, never fast TTFTs. The stream,
its parameters and the outcome are shared with the serving suite
(harness.mechanisms.semantic.stream)."""

from __future__ import annotations

import time

from harness.mechanisms.semantic import common, keys
from harness.mechanisms.semantic.embed import Embedder
from harness.mechanisms.semantic.serve import MODES, generate, serve
from harness.mechanisms.semantic.store import Entry, Store
from harness.mechanisms.semantic.stream import (  # noqa: F401 (the suite's drivers and cases use them here)
    STREAM_PARAMS,
    STREAMS,
    Stream,
    check,
    device_of,
    fill_oracle,
    outcome_of,
    prepare,
)
from harness.model.driver_contract import CaseContext, Record
from harness.model.driver_helpers import torch_threads


def run(ctx: CaseContext) -> Record:
    p = ctx.params

    dev = device_of(p)
    ctx.log(f"loading SmolLM2-135M-Instruct and all-MiniLM-L6-v2 on {dev}")
    # lazy: the GPU check's host (tools/gpu_check) loads this module with no model wheels to find
    from harness.infra.model_wheels import smollm2

    tok, model = smollm2(dev)

    def loaded():  # loaded up front: a first miss must not time the load
        return tok, model

    emb = Embedder.load(dev)
    s = prepare(p, emb, ctx.log)
    proj = keys.projection(emb.dim, p["lsh_seed"])
    entries = [Entry(lab, f"[cached answer of entry {i}]") for i, (_, lab) in enumerate(s.workload.inserts)]
    client = ctx.target.cluster_client()
    common.clear_patterns(ctx.target)
    stores = {
        "hash_cache": Store(client, p["ttl_s"], p["bands"]),
        "semantic_cache": Store(client, p["ttl_s"], p["bands"]),
        "oracle_cache": Store(client, p["ttl_s"], p["bands"], prefix="orc"),
    }
    rows = []
    t_start = time.perf_counter()
    try:
        with torch_threads(p["torch_threads"] or 1):
            generate(tok, model, s.requests[0][0], 2)  # warm-up
            emb.encode_one(s.requests[0][0])
            stores["hash_cache"].put_many(
                [(keys.exact_key(t, True), e) for (t, _), e in zip(s.workload.inserts, entries)]
            )
            stores["semantic_cache"].put_signatures(s.insert_sigs, entries)
            if p["oracle"] == "hit":
                fill_oracle(stores["oracle_cache"], s.requests, emb, proj)
            for n, (text, label) in enumerate(s.requests):
                k = n % len(MODES)
                order = MODES[k:] + MODES[:k]  # rotate which mode goes first
                for pos, mode in enumerate(order):
                    ttft, outcome = serve(
                        mode,
                        text,
                        label,
                        loaded,
                        stores.get(mode),
                        p["max_new_tokens"],
                        emb=emb,
                        proj=proj,
                        radius=s.radius,
                        signature=p["signature"],
                    )
                    rows.append([n, pos, mode, 1000 * ttft, outcome])
                if (n + 1) % 25 == 0:
                    ctx.log(
                        f"{n + 1}/{len(s.requests)} requests x {len(MODES)} modes "
                        f"({time.perf_counter() - t_start:.0f} s)"
                    )
    finally:
        for st in stores.values():
            st.clear()
        client.close()
    return outcome_of(ctx, p, s, rows, dev)
