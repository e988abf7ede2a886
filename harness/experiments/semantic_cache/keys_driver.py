"""Driver `semantic-keys`: hit rate, correct/wrong hits, precision and recall of the key
schemes over a dataset, sweeps of the cosine threshold and the Hamming radius, and the
lookup latency split (embedding / key / Redis round trip). Entries live in the Redis Cluster."""

from __future__ import annotations

import random
import time

import numpy as np

from harness.drivers import CaseContext, CaseOutcome, Metric, Param, register
from harness.errors import BadInput
from harness.experiments.semantic_cache import common, datasets
from harness.experiments.semantic_cache import keys as K
from harness.experiments.semantic_cache import metrics as M

PARAMS = {
    **common.dataset_params(),
    "lsh_seed": Param(int, 1, "seed of the hyperplanes; repetition n uses lsh_seed + n - 1"),
    "bands": Param(int, 8, "LSH bands of the radius index (must divide 64; exact for radius < bands)",
                   (1, 2, 4, 8, 16, 32, 64)),
    "radius": Param(int, 7, "Hamming radius of the operating point reported as lsh.*"),
    "threshold": Param(float, 0.8, "cosine threshold of the operating point reported as nn.*"),
    "radii": Param(list, list(range(0, 21)), "Hamming radii of the sweep"),
    "thresholds": Param(list, [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.97, 0.99],
                        "cosine thresholds of the sweep"),
    "latency_queries": Param(int, 200, "queries timed one at a time for the latency split"),
    "batch_size": Param(int, 64, "embedding batch size"),
    "ttl_s": Param(int, 300, "TTL of every cache entry (the source's L2 TTL: 5 minutes)"),
}


def _check(where: str, p: dict) -> None:
    common.check_dataset(where, p)
    if not p["radii"] or any(not isinstance(r, int) or not 0 <= r <= 64 for r in p["radii"]):
        raise BadInput(f"{where}.radii: give integers between 0 and 64")
    if not p["thresholds"] or any(not isinstance(t, (int, float)) or not -1 <= t <= 1 for t in p["thresholds"]):
        raise BadInput(f"{where}.thresholds: give numbers between -1 and 1")
    if p["latency_queries"] < 1 or p["batch_size"] < 1 or p["ttl_s"] < 1:
        raise BadInput(f"{where}: latency_queries, batch_size and ttl_s must be at least 1")


def _scheme_metrics(prefix: str, c: M.CacheCounts, note: str = "") -> dict[str, Metric]:
    """Precision is left out when there was no hit (0 of 0 is not a precision)."""
    out = {
        f"{prefix}.hit_rate_pct": Metric(100 * c.hit_rate, "%", "higher", note),
        f"{prefix}.recall_pct": Metric(100 * c.recall, "%", "higher", note),
        f"{prefix}.correct_hits": Metric(c.correct, "queries", "higher"),
        f"{prefix}.wrong_hits": Metric(c.wrong, "queries", "lower"),
    }
    if c.hits:
        out[f"{prefix}.precision_pct"] = Metric(100 * c.precision, "%", "higher", note)
    return out


def precision_cell(c) -> float | str:
    return round(100 * c.precision, 2) if c.hits else "- (no hit)"


def _row(scheme: str, setting, c: M.CacheCounts) -> list:
    return [scheme, setting, c.queries, c.hits, c.correct, c.wrong, c.false_hits_on_new,
            round(100 * c.hit_rate, 2), precision_cell(c), round(100 * c.recall, 2)]


COLUMNS = ["scheme", "setting", "queries", "hits", "correct", "wrong", "hits on must-miss",
           "hit rate %", "precision %", "recall %"]


@register("semantic-cache-keys", params=PARAMS, needs="cluster", check=_check,
          description="semantic cache keys: exact hash, 64-bit LSH, cosine NN; sweeps and latency split")
def run(ctx: CaseContext) -> CaseOutcome:
    p = ctx.params
    ds = datasets.load(p["dataset"], p["dataset_format"])
    wl = datasets.workload(ds, p["insert_fraction"], p["split_seed"])
    seed = p["lsh_seed"] + ctx.repetition - 1
    ctx.log(f"{wl.name}; {len(wl.queries)} queries; LSH seed {seed}")
    from harness.experiments.semantic_cache.embed import Embedder, cached_encode

    with common.torch_threads(p["torch_threads"]):
        emb = Embedder.load()
        t0 = time.perf_counter()
        ins_vec = cached_encode(emb, [t for t, _ in wl.inserts], p["batch_size"], ctx.log)
        q_vec = cached_encode(emb, [t for t, _ in wl.queries], p["batch_size"], ctx.log)
        ctx.log(f"embeddings ready ({time.perf_counter() - t0:.1f} s)")
    proj = K.projection(emb.dim, seed)
    np.save(ctx.raw_path("lsh_projection.npy"), proj)
    common.write_json(ctx.raw_path("lsh_projection.json"),
                      {"seed": seed, "rng": "numpy.random.default_rng(seed).standard_normal((dim, 64))",
                       "dim": emb.dim, "bits": K.BITS, "bands": p["bands"],
                       "file": "lsh_projection.npy", "sha256_of_float32": _sha(proj)})
    ins_sig, q_sig = K.signatures(ins_vec, proj), K.signatures(q_vec, proj)

    from harness.experiments.semantic_cache.store import Entry, Store

    client = ctx.target.cluster_client()
    store = Store(client, p["ttl_s"], p["bands"])
    removed = common.clear_patterns(ctx.target)
    if removed:
        ctx.log(f"removed {removed} keys left by an earlier run")
    try:
        entries = [Entry(lab, str(i)) for i, (_, lab) in enumerate(wl.inserts)]
        store.put_many([(K.exact_key(t), e) for (t, _), e in zip(wl.inserts, entries)])
        store.put_many([(K.exact_key(t, True), e) for (t, _), e in zip(wl.inserts, entries)])
        store.put_signatures(ins_sig, entries)
        store.put_many([(f"semnn_{i}", e) for i, e in enumerate(entries)], nx=False)
        ctx.log(f"inserted {len(entries)} entries under 4 key schemes ({len(store.written)} keys)")
        out = _evaluate(ctx, p, wl, store, ins_vec, q_vec, ins_sig, q_sig)
        with common.torch_threads(p["torch_threads"] or 1):
            lat = _latency(ctx, p, wl, store, emb, proj)
        out.metrics.update(lat)
    finally:
        store.clear()
        client.close()
    out.metrics.update(_dataset_extras(ctx, p, ds, wl, emb, proj, out.details))
    return out


def _sha(a: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float32).tobytes()).hexdigest()


def _evaluate(ctx, p, wl, store, ins_vec, q_vec, ins_sig, q_sig) -> CaseOutcome:
    qlab = [lab for _, lab in wl.queries]
    should = wl.should_hit()
    rows, metrics, raw = [], {}, {}

    def counts(hit, matched):
        return M.cache_counts(hit, matched, qlab, should)

    for scheme, norm in (("hash", False), ("hash_norm", True)):
        got = store.get_many([K.exact_key(t, norm) for t, _ in wl.queries])
        c = counts([g is not None for g in got], [g.label if g else None for g in got])
        rows.append(_row(scheme, "exact", c))
        metrics.update(_scheme_metrics(scheme, c))
        raw[scheme] = c.as_dict()
    # LSH through Redis: banded candidates, nearest by Hamming distance
    t0 = time.perf_counter()
    bsig, bdist = store.nearest_many(q_sig)
    got = store.get_many([K.sem_key(s) if s is not None else "sem_none" for s in bsig])
    lab = [g.label if g else None for g in got]
    ctx.log(f"LSH lookups through Redis for {len(q_sig)} queries ({time.perf_counter() - t0:.1f} s)")
    # exhaustive Hamming reference (no banding), to show what banding loses for r >= bands
    ref_idx, ref_d = K.nearest_hamming(q_sig, ins_sig)
    ref_lab = [wl.inserts[i][1] for i in ref_idx]
    lsh_pts, lsh_ref_pts, sweep_lsh = [], [], []
    for r in sorted(set(p["radii"]) | {0, p["radius"]}):
        c = counts(list(bdist <= r), lab)
        cref = counts(list(ref_d <= r), ref_lab)
        rows.append(_row("lsh (Redis, banded)", f"radius {r}", c))
        sweep_lsh.append({"radius": r, "redis": c.as_dict(), "exhaustive": cref.as_dict()})
        if r in p["radii"]:
            lsh_pts.append([round(100 * c.hit_rate, 3), round(100 * c.precision, 3)])
            lsh_ref_pts.append([round(100 * cref.hit_rate, 3), round(100 * cref.precision, 3)])
        if r == 0:
            metrics.update(_scheme_metrics("lsh_r0", c, "exact sem_<hex> key, the source's scheme"))
        if r == p["radius"]:
            metrics.update(_scheme_metrics("lsh", c, f"Hamming radius {r}, {p['bands']} bands"))
            if r >= p["bands"]:
                rows[-1][1] += " (banding may miss)"
    raw["lsh"] = sweep_lsh
    # exact cosine nearest neighbour (numpy), entry fetched from Redis
    nn_idx, nn_sim = K.nearest_cosine(q_vec, ins_vec)
    got = store.get_many([f"semnn_{int(i)}" for i in nn_idx])
    nlab = [g.label if g else None for g in got]
    nn_pts, sweep_nn = [], []
    for t in sorted(set(float(x) for x in p["thresholds"]) | {p["threshold"]}):
        c = counts(list(nn_sim >= t), nlab)
        rows.append(_row("cosine NN (exact)", f"cos >= {t:g}", c))
        sweep_nn.append({"threshold": t, **c.as_dict()})
        if t in [float(x) for x in p["thresholds"]]:
            nn_pts.append([round(100 * c.hit_rate, 3), round(100 * c.precision, 3)])
        if t == p["threshold"]:
            metrics.update(_scheme_metrics("nn", c, f"cosine >= {t:g}"))
    raw["nn"] = sweep_nn
    common.write_json(ctx.raw_path("sweeps.json"), {"workload": wl.name, **raw})
    _write_per_query(ctx, wl, bdist, lab, nn_sim, nlab)
    def hr(k):
        return [round(100 * raw[k]["hit_rate"], 3), round(100 * raw[k]["precision"], 3)]

    charts = [{
        "title": "Precision against hit rate (each point one threshold / radius)",
        "x_label": "hit rate %", "y_label": "precision %", "kind": "line",
        "series": [{"name": "cosine NN", "points": sorted(nn_pts)},
                   {"name": "LSH (Redis)", "points": sorted(lsh_pts)},
                   {"name": "LSH exhaustive", "points": sorted(lsh_ref_pts)},
                   {"name": "exact hash", "points": [hr("hash")]},
                   {"name": "hash normalized", "points": [hr("hash_norm")]}]},
        {"title": "LSH: hits and wrong hits against Hamming radius", "x_label": "radius (bits)",
         "y_label": "queries", "kind": "line",
         "series": [{"name": "correct hits", "points": [[s["radius"], s["redis"]["correct"]] for s in sweep_lsh]},
                    {"name": "wrong hits", "points": [[s["radius"], s["redis"]["wrong"]] for s in sweep_lsh]},
                    {"name": "must-miss hits",
                     "points": [[s["radius"], s["redis"]["false_hits_on_new"]] for s in sweep_lsh]}]}]
    n_should = sum(should)
    tables = [{"title": f"Key schemes on {wl.name}", "columns": COLUMNS, "rows": rows,
               "note": f"{len(wl.queries)} queries, {n_should} of them have their answer in the cache, "
                       f"{len(wl.queries) - n_should} must miss. A hit is correct when the matched entry "
                       f"has the query's label (for GPTCache data: the same origin text, so duplicate "
                       f"origins count as correct). LSH radius lookups use {p['bands']} bands of "
                       f"{64 // p['bands']} bits: exact for radius < {p['bands']}."}]
    return CaseOutcome("ok", metrics=metrics, details={"tables": tables, "charts": charts,
                                                       "workload": wl.name})


def _write_per_query(ctx, wl, bdist, lab, nn_sim, nlab) -> None:
    import csv

    with ctx.raw_path("per_query.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["query_index", "should_hit", "lsh_distance", "lsh_label_matches", "nn_cosine",
                    "nn_label_matches"])
        should = wl.should_hit()
        for i, (_, ql) in enumerate(wl.queries):
            w.writerow([i, int(should[i]), int(bdist[i]), int(lab[i] == ql), f"{float(nn_sim[i]):.5f}",
                        int(nlab[i] == ql)])


def _latency(ctx, p, wl, store, emb, proj) -> dict[str, Metric]:
    """One query at a time, end to end through the operating LSH scheme."""
    rng = random.Random(p["split_seed"] + 7)
    texts = [wl.queries[i][0] for i in rng.sample(range(len(wl.queries)), min(p["latency_queries"], len(wl.queries)))]
    emb.encode_one(texts[0])  # warm-up
    t_emb, t_key, t_redis, t_total, t_hash = [], [], [], [], []
    for n, text in enumerate(texts):
        t0 = time.perf_counter()
        v = emb.encode_one(text)
        t1 = time.perf_counter()
        sig = int(K.signatures(v, proj)[0])
        _ = K.sem_key(sig), K.band_keys(sig, store.bands)
        t2 = time.perf_counter()
        entry, dist, _best = store.lsh_nearest(sig)
        _ = entry is not None and dist <= p["radius"]  # the hit decision, timed with the lookup
        t3 = time.perf_counter()
        store.get(K.exact_key(text, True))
        t4 = time.perf_counter()
        t_emb.append(1000 * (t1 - t0))
        t_key.append(1000 * (t2 - t1))
        t_redis.append(1000 * (t3 - t2))
        t_total.append(1000 * (t3 - t0))
        t_hash.append(1000 * (t4 - t3))
        if (n + 1) % 100 == 0:
            ctx.log(f"latency: {n + 1}/{len(texts)} single-query lookups")
    with ctx.raw_path("lookup_latency_ms.csv").open("w") as f:
        f.write("embed_ms,key_ms,redis_ms,total_ms,hash_lookup_ms\n")
        for row in zip(t_emb, t_key, t_redis, t_total, t_hash):
            f.write(",".join(f"{x:.4f}" for x in row) + "\n")
    out = {}
    out.update(common.pct_metrics("embed", t_emb, "all-MiniLM-L6-v2, one query, 1 torch thread unless set"))
    out.update(common.pct_metrics("key", t_key, "64-bit signature + sem_<hex> + band keys"))
    out.update(common.pct_metrics("redis", t_redis, "band SMEMBERS pipeline + GET sem_<hex>"))
    out.update(common.pct_metrics("lookup", t_total, "embedding + key + Redis, one query"))
    out.update(common.pct_metrics("hash_lookup", t_hash, "normalize + SHA-256 + GET"))
    return out


def _dataset_extras(ctx, p, ds, wl, emb, proj, details) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    from harness.experiments.semantic_cache.embed import cached_encode

    if ds.fmt == "pairs":
        with common.torch_threads(p["torch_threads"]):
            a = cached_encode(emb, [r[0] for r in ds.rows], p["batch_size"])
            b = cached_encode(emb, [r[1] for r in ds.rows], p["batch_size"])
        labels = [r[2] for r in ds.rows]
        cos = (a * b).sum(1)
        ham = K.hamming(K.signatures(a, proj), K.signatures(b, proj))
        rows = []
        for scheme, norm in (("hash", False), ("hash_norm", True)):
            pc = M.pair_counts([K.exact_key(r[0], norm) == K.exact_key(r[1], norm) for r in ds.rows], labels)
            rows.append([scheme, "exact", *_pair_cells(pc)])
            out.update(_pair_metrics(f"pairs.{scheme}", pc))
        for t in sorted(set(float(x) for x in p["thresholds"]) | {p["threshold"]}):
            pc = M.pair_counts(list(cos >= t), labels)
            rows.append(["cosine", f">= {t:g}", *_pair_cells(pc)])
            if t == p["threshold"]:
                out.update(_pair_metrics("pairs.nn", pc))
        for r in sorted(set(p["radii"]) | {p["radius"]}):
            pc = M.pair_counts(list(ham <= r), labels)
            rows.append(["LSH Hamming", f"<= {r}", *_pair_cells(pc)])
            if r == p["radius"]:
                out.update(_pair_metrics("pairs.lsh", pc))
            if r == 0:
                out.update(_pair_metrics("pairs.lsh_r0", pc))
        out["pairs.roc_auc_cosine"] = Metric(M.roc_auc(list(map(float, cos)), labels), "", "higher")
        out["pairs.roc_auc_hamming"] = Metric(M.roc_auc([-float(h) for h in ham], labels), "", "higher")
        details["tables"].append({
            "title": f"Pair-level decisions on {ds.path.name} ({len(labels)} pairs, {sum(labels)} labelled 1)",
            "columns": ["scheme", "setting", "pairs", "TP", "FP", "FN", "TN", "hit rate %", "precision %",
                        "recall %", "F1"], "rows": rows,
            "note": "A pair is predicted 'same' when the scheme matches its two sentences."})
    if ds.fmt == "gptcache":
        # GPTCache's own protocol: every origin inserted, every similar asked
        origins = sorted({o for o, _ in ds.rows})
        ov = cached_encode(emb, origins, p["batch_size"])
        qv = cached_encode(emb, [s for _, s in ds.rows], p["batch_size"])
        idx, sim = K.nearest_cosine(qv, ov)
        rows = []
        published = {0.9: (425, 25, 549, "0.95"), 0.6: (904, 92, 3, "0.8"), 0.8: (804, 77, 118, "0.9")}
        for cos_t in (0.9, 0.8, 0.6):
            hit = sim >= cos_t
            correct = int(sum(1 for h, i, (o, _) in zip(hit, idx, ds.rows) if h and origins[i] == o))
            wrong = int(hit.sum()) - correct
            pub = published[cos_t]
            rows.append([f"cos >= {cos_t:g}", pub[3], correct, wrong, len(ds.rows) - int(hit.sum()),
                         f"{pub[0]} / {pub[1]} / {pub[2]}"])
            if cos_t == 0.9:
                out["gptcache_protocol.cos0.9.correct"] = Metric(correct, "queries", "higher")
                out["gptcache_protocol.cos0.9.wrong"] = Metric(wrong, "queries", "lower")
        details["tables"].append({
            "title": "GPTCache's protocol (every origin inserted, every paraphrase asked): all-MiniLM-L6-v2 vs GPTCache's published counts",
            "columns": ["our cosine threshold", "GPTCache threshold", "correct", "wrong", "miss",
                        "GPTCache published correct / wrong / miss"],
            "rows": rows,
            "note": "GPTCache's score 4 - d (squared L2 on unnormalized ALBERT vectors) >= 4*t is about "
                    "cosine >= 2t - 1, so its 0.95 / 0.9 / 0.8 map to our 0.9 / 0.8 / 0.6. GPTCache "
                    "counts wrong hits by record id (duplicate origins give unavoidable wrong hits); "
                    "we compare origin text. This protocol has no query that must miss."})
        # C7: the source's dynamic threshold on the real query stream and on uniform tokens
        tok = emb.model[0].tokenizer
        ids = [i for t, _ in wl.queries for i in tok(t, add_special_tokens=False, verbose=False)["input_ids"]]
        rng = np.random.default_rng(p["split_seed"])
        uni = list(rng.integers(0, tok.vocab_size, len(ids)))
        for name, seq in (("query_stream", ids), ("uniform_tokens", uni)):
            h, r = M.shannon_entropy_bits(seq), M.lag1_pearson([float(x) for x in seq])
            out[f"c7.{name}.threshold"] = Metric(M.dynamic_threshold(h, r), "", None,
                                                 f"H = {h:.2f} bits over token ids, lag-1 r = {r:.3f}")
            out[f"c7.{name}.entropy_bits"] = Metric(h, "bits", None)
    return out


def _pair_cells(pc: M.PairCounts) -> list:
    prec = round(100 * pc.precision, 2) if pc.tp + pc.fp else "- (no match)"
    return [pc.pairs, pc.tp, pc.fp, pc.fn, pc.tn, round(100 * pc.hit_rate, 2), prec,
            round(100 * pc.recall, 2), round(pc.f1, 3)]


def _pair_metrics(prefix: str, pc: M.PairCounts) -> dict[str, Metric]:
    out = {f"{prefix}.hit_rate_pct": Metric(100 * pc.hit_rate, "%", "higher"),
           f"{prefix}.recall_pct": Metric(100 * pc.recall, "%", "higher")}
    if pc.tp + pc.fp:
        out[f"{prefix}.precision_pct"] = Metric(100 * pc.precision, "%", "higher")
    return out
