"""Driver `semantic-cache-entity-keys` (claim C16, source section 3.3): template id +
normalized entity keys against the token-level key and the LSH key (correct hits through
Redis, with the raw prompt hash as the control), and the latency batching adds, measured
on a real dispatcher (dispatcher.py): seeded Poisson arrivals on a thread, equal-key
dynamic batching (max wait 5 ms) against static batching with token keys and against no
batching (the control), the model run once per batch, arms interleaved round by round."""

from __future__ import annotations

import hashlib
import random

import numpy as np

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, Series, register
from harness.experiments.semantic_cache import common, dispatcher, entity_keys, keys, metrics
from harness.toolkit import latency_metrics, torch_threads, write_csv

PARAMS = {
    **common.dataset_params(),
    "lsh_seed": Param(int, 1, "seed of the hyperplanes"),
    "max_wait_ms": Param(float, 5.0, "dynamic batching: longest wait of a request for equal keys", min=0),
    "max_batch": Param(int, 64, "dynamic batching: a batch is sent at once when this full", min=1),
    "static_batch_size": Param(int, 8, "static batching baseline: batch size, keys ignored", min=1),
    "static_max_wait_ms": Param(float, 50.0, "static batching baseline: longest wait for a full batch", min=0),
    "rate_rps": Param(float, 200.0, "mean arrival rate of the Poisson process", min=0.1),
    "arrival_seed": Param(int, 5, "seed of the arrivals and of the request order"),
    "rounds": Param(int, 3, "rounds; each round sends the same segment through every arm, in rotating order", min=1),
    "segment_requests": Param(int, 100, "requests per arm and round", min=2),
    "ttl_s": Param(int, 300, "TTL of every cache entry", min=1),
}
ARMS = {  # name: (rule, key)
    "static_batch_token_key": ("static", "token"),
    "dynamic_batch_token_key": ("dynamic", "token"),
    "dynamic_batch_entity_key": ("dynamic", "entity"),
    "control.no_batching": ("none", "entity"),
}


def token_key(tok, text: str) -> str:
    ids = tok(text, add_special_tokens=False, verbose=False)["input_ids"]
    return "hash_tok_" + hashlib.sha256(np.asarray(ids, dtype=np.int32).tobytes()).hexdigest()


def entity_lsh_key(sig: int, text: str) -> str:
    ents = "\x1f".join(f"{t}:{v}" for t, v in entity_keys.extract(text).entities)
    return f"tplsem_{int(sig):016x}_{hashlib.sha256(ents.encode()).hexdigest()[:16]}"


@register("semantic-cache-entity-keys", params=PARAMS, needs="cluster", check=lambda w, p: common.check_dataset(w, p),
          description="section 3.3: template + entity keys; a real dispatcher: equal-key dynamic batching vs "
                      "static token-key batching vs no batching")
def run(ctx: CaseContext) -> CaseOutcome:
    p = ctx.params
    _, wl = common.load(p)
    from harness.experiments.semantic_cache.embed import Embedder, cached_encode

    with torch_threads(p["torch_threads"]):
        emb = Embedder.load()
        ins_vec = cached_encode(emb, [t for t, _ in wl.inserts], 64, ctx.log)
        q_vec = cached_encode(emb, [t for t, _ in wl.queries], 64, ctx.log)
    tok = emb.model[0].tokenizer
    proj = keys.projection(emb.dim, p["lsh_seed"])
    ins_sig, q_sig = keys.signatures(ins_vec, proj), keys.signatures(q_vec, proj)
    schemes = {
        "token": (lambda i, t: token_key(tok, t), lambda i, t: token_key(tok, t)),
        "entity": (lambda i, t: entity_keys.entity_key(t), lambda i, t: entity_keys.entity_key(t)),
        "lsh": (lambda i, t: keys.sem_key(ins_sig[i]), lambda i, t: keys.sem_key(q_sig[i])),
        "entity_lsh": (lambda i, t: entity_lsh_key(ins_sig[i], t), lambda i, t: entity_lsh_key(q_sig[i], t)),
        "control.exact_key": (lambda i, t: keys.exact_key(t), lambda i, t: keys.exact_key(t)),
    }
    m, rows = _hit_rates(ctx, p, wl, schemes)
    series: dict[str, Series] = {}
    with torch_threads(p["torch_threads"] or 1):
        _batching(ctx, p, wl, emb, tok, m, series)
    series["schemes"] = Series({c: [r[i] for r in rows] for i, c in enumerate(
        ["key", "queries", "hits", "correct", "wrong", "correct_hit_rate_pct", "precision_pct", "recall_pct"])},
        {"correct_hit_rate_pct": "%", "precision_pct": "%", "recall_pct": "%"},
        f"{wl.name}. token = SHA-256 of the MiniLM token ids; entity = template id + sorted normalized entities, "
        f"extractor {entity_keys.EXTRACTOR}; lsh = sem_<hex> (radius 0); entity_lsh = sem_<hex> + entity set; "
        f"control.exact_key = SHA-256 of the raw prompt")
    return CaseOutcome("ok", metrics=m, series=series, details={"extractor": entity_keys.EXTRACTOR})


def _hit_rates(ctx, p, wl, schemes) -> tuple[dict, list]:
    from harness.experiments.semantic_cache.store import Entry, Store

    labels = [lab for _, lab in wl.queries]
    should = wl.should_hit()
    client = ctx.target.cluster_client()
    common.clear_patterns(ctx.target)
    store = Store(client, p["ttl_s"])
    m, rows = {}, []
    try:
        for name, (fi, fq) in schemes.items():
            store.put_many([(fi(i, t), Entry(lab, str(i))) for i, (t, lab) in enumerate(wl.inserts)])
            got = store.get_many([fq(i, t) for i, (t, _) in enumerate(wl.queries)])
            c = metrics.cache_counts([g is not None for g in got], [g.label if g else None for g in got], labels, should)
            store.clear()
            m[f"{name}.correct_hit_rate_pct"] = Metric(100 * c.correct_hit_rate, "%", "higher",
                                                       "correct hits through Redis / queries")
            m[f"{name}.wrong_hit_rate_pct"] = Metric(100 * c.wrong_hit_rate, "%", "lower", "errors")
            rows.append([name, c.queries, c.hits, c.correct, c.wrong, 100 * c.correct_hit_rate,
                         100 * c.precision if c.hits else None, 100 * c.recall])
    finally:
        client.close()
    common.write_json(ctx.raw_path("entity_examples.json"), {
        "extractor": entity_keys.EXTRACTOR,
        "examples": [{"query": t, "template": entity_keys.extract(t).template,
                      "entities": entity_keys.extract(t).entities} for t, _ in wl.queries[:20]]})
    return m, rows


def _batching(ctx, p, wl, emb, tok, m: dict, series: dict) -> None:
    key_of = {"token": lambda t: token_key(tok, t), "entity": entity_keys.entity_key}

    def run_batch(batch: list[dispatcher.Request]) -> None:
        distinct = list({r.key: r.text for r in batch}.values())  # equal keys share one model run
        emb.encode(distinct, batch_size=len(distinct))

    emb.encode([wl.queries[0][0]])  # warm-up
    rng = random.Random(p["arrival_seed"])
    order = list(range(len(wl.queries)))
    rng.shuffle(order)
    per_arm: dict[str, list[dispatcher.Request]] = {a: [] for a in ARMS}
    rows, raw = [], []
    arms = list(ARMS)
    n = p["segment_requests"]
    for rnd in range(p["rounds"]):
        texts = [wl.queries[order[(rnd * n + j) % len(order)]][0] for j in range(n)]
        offsets = dispatcher.poisson_offsets(n, p["rate_rps"], p["arrival_seed"] + rnd)
        shift = rnd % len(arms)
        for arm in arms[shift:] + arms[:shift]:
            rule, key = ARMS[arm]
            wait = p["static_max_wait_ms"] if rule == "static" else p["max_wait_ms"]
            size = p["static_batch_size"] if rule == "static" else p["max_batch"]
            reqs = dispatcher.replay(rule, texts, offsets, key_of[key], run_batch, wait / 1000, size)
            per_arm[arm] += reqs
            added = [r.added_ms for r in reqs]
            batches = len({r.batch for r in reqs})
            rows.append([arm, rnd + 1, len(reqs), batches, len(reqs) / batches, float(np.mean(added)),
                         float(np.percentile(added, 95)), float(np.mean([r.queue_ms for r in reqs])),
                         float(np.mean([r.end_to_end_ms for r in reqs]))])
            raw += [[arm, rnd + 1, r.index, f"{r.added_ms:.4f}", f"{r.queue_ms:.4f}", f"{r.end_to_end_ms:.4f}",
                     r.batch_size] for r in reqs]
        ctx.log(f"batching round {rnd + 1}/{p['rounds']}: {n} requests through each of {len(arms)} arms")
    write_csv(ctx.raw_path("batching_requests.csv"), ["arm", "round", "request", "added_ms", "worker_wait_ms",
                                                      "end_to_end_ms", "batch_size"], raw)
    for arm, reqs in per_arm.items():
        added = [r.added_ms for r in reqs]
        m[f"{arm}.added_ms_mean"] = Metric(float(np.mean(added)), "ms", "lower",
                                           "arrival to dispatch: key computation + the batching rule's wait")
        m.update(latency_metrics(f"{arm}.added", added))
        m[f"{arm}.worker_wait_ms_mean"] = Metric(float(np.mean([r.queue_ms for r in reqs])), "ms", "lower",
                                                 "dispatch to the start of its batch (a busy model)")
        m[f"{arm}.end_to_end_ms_mean"] = Metric(float(np.mean([r.end_to_end_ms for r in reqs])), "ms", "lower")
        mine = [r for r in rows if r[0] == arm]
        m[f"{arm}.requests_per_batch"] = Metric(sum(r[2] for r in mine) / sum(r[3] for r in mine), "requests", None)
    series["batching"] = Series({c: [r[i] for r in rows] for i, c in enumerate(
        ["arm", "round", "requests", "batches", "requests_per_batch", "added_mean_ms", "added_p95_ms",
         "worker_wait_mean_ms", "end_to_end_mean_ms"])},
        {"added_mean_ms": "ms", "added_p95_ms": "ms", "worker_wait_mean_ms": "ms", "end_to_end_mean_ms": "ms"},
        f"{p['rounds']} rounds of {n} requests at {p['rate_rps']:g}/s (seeded Poisson, the same arrivals and texts for "
        f"every arm of a round, arms in rotating order); dynamic: equal keys, max wait {p['max_wait_ms']:g} ms, at "
        f"most {p['max_batch']}; static: {p['static_batch_size']} per batch whatever the key, at most "
        f"{p['static_max_wait_ms']:g} ms; no batching: dispatched on arrival. The model (all-MiniLM-L6-v2, 1 thread) "
        f"runs once per batch over its distinct keys. Added = arrival to dispatch (key + the rule's wait); the "
        f"wait for a busy model and the end-to-end time are shown beside it.")
