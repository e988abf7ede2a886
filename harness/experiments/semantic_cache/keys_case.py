"""The case of driver `semantic-cache-keys` (claims C2, C7): correct and wrong hits, precision and
recall of the key schemes over a dataset, with the Hamming radius and the cosine threshold
chosen on a calibration split and reported on a disjoint test split; the control whose
semantic key is replaced by an exact hash, and the stand-in whose embedding is replaced by a
SimHash of character 4-grams (a similarity hash that knows spelling, not meaning); the lookup
latency split (embedding / key / Redis round trip); the section 2.2 dynamic threshold on uniform, periodic and constant
token streams. Entries live in the Redis Cluster."""

from __future__ import annotations

import hashlib
import random
import time
from typing import cast

import numpy as np

from harness.base.errors import BadInput
from harness.experiments.semantic_cache import c7_reference
from harness.experiments.semantic_cache.series import (
    C7_LOSS,
    C7_STREAMS,
    CHARSIM_SWEEP,
    GPTCACHE_PROTOCOL,
    KEY_SCHEMES,
    LSH_SWEEP,
    NN_SWEEP,
    PAIRS,
)
from harness.mechanisms.semantic import common, keys, metrics
from harness.mechanisms.semantic.embed import Embedder, cached_encode
from harness.mechanisms.semantic.store import Entry, Store
from harness.model.driver_contract import CaseContext, Metric, Param, Record
from harness.model.driver_helpers import latency_metrics, torch_threads, write_csv

PARAMS = {
    **common.dataset_params(),
    "lsh_seed": Param(int, 1, "seed of the hyperplanes; repetition n uses lsh_seed + n - 1"),
    "bands": Param(
        int, 8, "LSH bands of the radius index (must divide 64; exact for radius < bands)", (1, 2, 4, 8, 16, 32, 64)
    ),
    "radii": Param(list, list(range(0, 21)), "Hamming radii tried on the calibration split", min=0, max=64),
    "thresholds": Param(
        list,
        [0.99, 0.97, 0.95, 0.925, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6],
        "cosine thresholds tried on the calibration split",
        min=-1,
        max=1,
    ),
    "latency_queries": Param(int, 200, "queries timed one at a time for the latency split", min=1),
    "batch_size": Param(int, 64, "embedding batch size", min=1),
    "ttl_s": Param(int, 300, "TTL of every cache entry (the source's L2 TTL: 5 minutes)", min=1),
    "signature": Param(
        str,
        "lsh",
        "lsh: the semantic key under test; exact: the signature replaced by an exact "
        "text hash (the mechanism removed, to show that the checks would see it); "
        "charsim: the embedding replaced by the stand-in's character n-gram vector",
        ("lsh", "exact", "charsim"),
    ),
    "charsim_ngram": Param(int, 4, "the stand-in: characters per n-gram of its hashed n-gram vector", min=1, max=16),
    "charsim_dim": Param(
        int, 4096, "the stand-in: buckets of its hashed n-gram vector (the hyperplanes' dimension)", min=64, max=65536
    ),
    "c7_period": Param(int, 8, "C7: period (tokens) of the periodic token stream", min=2),
    "c7_static_threshold": Param(
        float, 0.75, "C7: the static cosine threshold compared with the dynamic one", min=-1, max=1
    ),
    "c7_strict_threshold": Param(
        float,
        0.99,
        "C7 instrument: a static threshold far above the dynamic one, which must lose most correct hits",
        min=-1,
        max=1,
    ),
    "c7_known_symbols": Param(
        int,
        9,
        "C7 instrument: symbols of the uniform stream of known entropy "
        "(log2 9 = 3.17 bits, where the formula gives 0.513)",
        min=2,
    ),
    "c7_known_r": Param(
        float, 0.9, "C7 instrument: lag-1 correlation of the AR(1) stream of known r", min=-0.99, max=0.99
    ),
    "c7_max_tokens": Param(
        int,
        0,
        "C7: cut every token stream to this many tokens (0 = the whole query stream); "
        "a short stream cannot measure H or r, which the instrument must show",
        min=0,
    ),
    "c7_threshold": Param(
        str,
        "dynamic",
        "C7: dynamic: the source's entropy formula; static: the formula removed, "
        "every stream gets c7_static_threshold (the mechanism removed, to show "
        "that the checks would see it)",
        ("dynamic", "static"),
    ),
}


def check(where: str, p: dict) -> None:
    common.check_dataset(where, p)
    if not p["radii"] or not p["thresholds"]:
        raise BadInput(f"{where}: radii and thresholds need at least one value each")


def scheme_metrics(prefix: str, c: metrics.CacheCounts, note: str = "") -> dict[str, Metric]:
    """Only correct hits count as hits; wrong hits are errors. The net hit rate counts each
    wrong answer against a right one (a cache that answers every query with its nearest entry
    gains correct hits only by serving more wrong ones). Precision is left out when there was
    no hit (0 of 0 is not a precision)."""
    out = {
        f"{prefix}.correct_hit_rate_pct": Metric(100 * c.correct_hit_rate, "%", "higher", note),
        f"{prefix}.wrong_hit_rate_pct": Metric(100 * c.wrong_hit_rate, "%", "lower", "wrong answers (errors)"),
        f"{prefix}.net_hit_rate_pct": Metric(
            100 * (c.correct - c.wrong) / c.queries if c.queries else 0.0,
            "%",
            "higher",
            "correct hits minus wrong hits, per query",
        ),
        f"{prefix}.recall_pct": Metric(100 * c.recall, "%", "higher"),
    }
    if c.hits:
        out[f"{prefix}.precision_pct"] = Metric(100 * c.precision, "%", "higher")
    return out


def scheme_row(scheme: str, setting: str, c: metrics.CacheCounts) -> list:
    """A row of KEY_SCHEMES."""
    return [
        scheme,
        setting,
        c.queries,
        c.hits,
        c.correct,
        c.wrong,
        c.false_hits_on_new,
        100 * c.correct_hit_rate,
        100 * c.wrong_hit_rate,
        100 * c.precision if c.hits else None,
        100 * c.recall,
    ]


def sweep_row(split: str, c: metrics.CacheCounts) -> list:
    """A sweep's row after its setting (series.SWEEP)."""
    return [
        split,
        100 * c.correct_hit_rate,
        100 * c.wrong_hit_rate,
        100 * c.precision if c.hits else None,
        100 * c.recall,
        c.f1,
    ]


def run(ctx: CaseContext) -> Record:
    p = ctx.params
    ds, wl = common.load(p)
    cal, test = common.split_queries(wl.queries, p["calibration_fraction"], p["split_seed"])
    seed = p["lsh_seed"] + ctx.repetition - 1
    ctx.log(f"{wl.name}; {len(cal)} calibration / {len(test)} test queries; LSH seed {seed}")

    with torch_threads(p["torch_threads"]):
        emb = Embedder.load()
        ins_vec = cached_encode(emb, [t for t, _ in wl.inserts], p["batch_size"], ctx.log)
        q_vec = cached_encode(emb, [t for t, _ in wl.queries], p["batch_size"], ctx.log)
    proj = keys.projection(emb.dim, seed)
    np.save(ctx.raw_path("lsh_projection.npy"), proj)
    common.write_json(
        ctx.raw_path("lsh_projection.json"),
        {
            "seed": seed,
            "rng": "numpy.random.default_rng(seed).standard_normal((dim, 64))",
            "dim": emb.dim,
            "bits": keys.BITS,
            "bands": p["bands"],
            "file": "lsh_projection.npy",
            "sha256_of_float32": hashlib.sha256(proj.tobytes()).hexdigest(),
        },
    )
    ins_sig, q_sig = keys.signatures(ins_vec, proj), keys.signatures(q_vec, proj)
    cproj, ins_csig, q_csig = _stand_in_signatures(p, wl, seed)
    stand_in_instrument = _stand_in_instrument(p, wl, cproj)
    if p["signature"] == "exact":
        ins_sig, q_sig = (
            np.array([keys.text_signature(t) for t, _ in texts], dtype=np.uint64) for texts in (wl.inserts, wl.queries)
        )
    elif p["signature"] == "charsim":
        ins_sig, q_sig = ins_csig, q_csig

    client = ctx.target.cluster_client()
    store = Store(client, p["ttl_s"], p["bands"])
    control = Store(client, p["ttl_s"], p["bands"], prefix="ctl")
    stand = Store(client, p["ttl_s"], p["bands"], prefix="chs")
    removed = common.clear_patterns(ctx.target)
    if removed:
        ctx.log(f"removed {removed} keys left by an earlier run")
    try:
        entries = [Entry(lab, str(i)) for i, (_, lab) in enumerate(wl.inserts)]
        store.put_many([(keys.exact_key(t), e) for (t, _), e in zip(wl.inserts, entries)])
        store.put_many([(keys.exact_key(t, True), e) for (t, _), e in zip(wl.inserts, entries)])
        store.put_signatures(ins_sig, entries)
        store.put_many([(f"semnn_{i}", e) for i, e in enumerate(entries)], nx=False)
        control.put_signatures(np.array([keys.text_signature(t) for t, _ in wl.inserts], dtype=np.uint64), entries)
        stand.put_signatures(ins_csig, entries)
        ctx.log(f"inserted {len(entries)} entries under 6 key schemes")
        out, nn_sim, nlab = _evaluate(ctx, p, wl, cal, test, (store, control, stand), ins_vec, q_vec, (q_sig, q_csig))
        # both set by _evaluate (_lsh_scheme, _charsim_scheme) from the calibrated radii
        radii = int(cast(float, out.metrics["lsh.radius"].value)), int(cast(float, out.metrics["charsim.radius"].value))
        out.metrics.update(_repeats(wl, (store, control, stand), (ins_sig, ins_csig), radii))
        with torch_threads(p["torch_threads"] or 1):
            out.metrics.update(_latency(ctx, p, wl, (store, stand), emb, (proj, cproj), radii))
    finally:
        for s in (store, control, stand):
            s.clear()
        client.close()
    out.metrics.update(stand_in_instrument)
    _c7(p, wl, test, emb, nn_sim, nlab, out)
    _dataset_extras(p, ds, emb, proj, out)
    return out


def _stand_in_signatures(p, wl, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stand-in's hyperplanes (same seed as the semantic key's, its vectors' dimension) and
    the signatures of the inserts' and the queries' character n-gram vectors."""
    cproj = keys.projection(p["charsim_dim"], seed)
    ins, qs = (_stand_in_sigs(p, [t for t, _ in texts], cproj) for texts in (wl.inserts, wl.queries))
    return cproj, ins, qs


def _stand_in_sigs(p, texts: list[str], cproj) -> np.ndarray:
    """The stand-in's signatures of texts: SimHash of their character n-grams (one path for the
    stand-in's keys and its instrument)."""
    return keys.signatures(keys.char_ngram_vectors(texts, p["charsim_ngram"], p["charsim_dim"]), cproj)


KNOWN_PAIRS_TEXTS = 50  # inserted prompts the stand-in's instrument builds its known pairs from


def known_pairs(texts: list[str]) -> list[tuple[str, str, bool]]:
    """(a, b, same) pairs whose answer under a character n-gram hash is known by construction:
    a prompt and itself, a prompt and its upper-cased copy with doubled spaces (the same after
    normalization): the same signature; a prompt and the prompt with its first half, or its second
    half, replaced by another prompt's: different signatures (half its n-grams differ)."""
    out = []
    for a, b in zip(texts, texts[1:] + texts[:1]):
        na, nb = keys.normalize(a), keys.normalize(b)
        ha, hb = len(na) // 2, len(nb) // 2
        out += [(a, a, True), (a, "  ".join(a.upper().split(" ")), True)]
        if na[ha:] != nb[hb:] and len(na) >= 16:
            out.append((na, na[:ha] + nb[hb:], False))
        if na[:ha] != nb[:hb] and len(na) >= 16:
            out.append((na, nb[:hb] + na[ha:], False))
    return out


def _stand_in_instrument(p, wl, cproj) -> dict[str, Metric]:
    """The stand-in's own instrument: its signatures of known pairs (known_pairs) through the same
    code as its keys; every pair must come out as built (equal signatures for the duplicates,
    unequal for the half-replaced prompts), else the stand-in is not the hash it is said to be
    (one that ignores part of the prompt, or mangles it, fails here)."""
    pairs = known_pairs([t for t, _ in wl.inserts[:KNOWN_PAIRS_TEXTS]])
    sa = _stand_in_sigs(p, [a for a, _, _ in pairs], cproj)
    sb = _stand_in_sigs(p, [b for _, b, _ in pairs], cproj)
    agree = [(x == y) == same for x, y, (_, _, same) in zip(sa.tolist(), sb.tolist(), pairs)]
    n_same = sum(same for _, _, same in pairs)
    return {
        "instrument.charsim.known_pairs_agree_pct": Metric(
            100.0 * sum(agree) / len(agree),
            "% of pairs",
            None,
            f"the stand-in's instrument: {len(pairs)} prompt pairs built from {KNOWN_PAIRS_TEXTS} inserted prompts, "
            f"{n_same} known duplicates (itself; upper-cased with doubled spaces) that must get its same signature and "
            f"{len(pairs) - n_same} with half the prompt replaced by another's that must not",
        )
    }


class _Scoring:
    """The queries' labels and truth, the calibration and test splits, and what the schemes
    add up to: metrics and the rows of the schemes' table (in the order they are scored)."""

    def __init__(self, wl, cal: list[int], test: list[int]):
        self.wl, self.cal, self.test = wl, cal, test
        self.qlab = [lab for _, lab in wl.queries]
        self.should = wl.should_hit()
        self.m: dict[str, Metric] = {}
        self.rows: list[list] = []

    def counts(self, idx: list[int], hit, matched) -> metrics.CacheCounts:
        return metrics.cache_counts(
            [bool(hit[i]) for i in idx],
            [matched[i] for i in idx],
            [self.qlab[i] for i in idx],
            [self.should[i] for i in idx],
        )

    def calibrated(self, settings: list, hit_at, matched) -> tuple:
        """The setting with the best F1 on the calibration split, and the sweep: every setting's
        calibration and test rows."""
        cal_counts = [self.counts(self.cal, hit_at(x), matched) for x in settings]
        best = settings[metrics.best_setting(settings, cal_counts)]
        sweep = []
        for x, cc in zip(settings, cal_counts):
            sweep.append([x, *sweep_row("calibration", cc)])
            sweep.append([x, *sweep_row("test", self.counts(self.test, hit_at(x), matched))])
        return best, sweep

    def scheme(self, prefix: str, row_name: str, setting: str, c: metrics.CacheCounts, note: str) -> None:
        self.rows.append(scheme_row(row_name, setting, c))
        self.m.update(scheme_metrics(prefix, c, note))


def _evaluate(ctx, p, wl, cal, test, stores, ins_vec, q_vec, q_sigs) -> tuple[Record, np.ndarray, list]:
    store, control, stand = stores
    sc = _Scoring(wl, cal, test)
    hash_rate = _hash_schemes(sc, store)
    radius, bdist, lab, sweep = _lsh_scheme(ctx, p, sc, store, q_sigs[0], hash_rate)
    csweep = _charsim_scheme(p, sc, stand, q_sigs[1], hash_rate)
    _control_scheme(sc, control, radius, hash_rate)
    for prefix in ("lsh", "charsim", "control.exact_key"):
        sc.m[f"{prefix}.net_gain_over_hash_pp"] = Metric(
            # both set just above by scheme_metrics, always a number
            cast(float, sc.m[f"{prefix}.net_hit_rate_pct"].value) - cast(float, sc.m["hash.net_hit_rate_pct"].value),
            "pp",
            "higher",
            "net hit rate (correct minus wrong hits) over the prompt hash's, test split",
        )
    nn_sim, nlab, nn_sweep = _nn_scheme(p, sc, store, ins_vec, q_vec)
    cal_set = set(cal)
    write_csv(
        ctx.raw_path("per_query.csv"),
        ["query_index", "split", "should_hit", "lsh_distance", "lsh_label_matches", "nn_cosine", "nn_label_matches"],
        [
            [
                i,
                "calibration" if i in cal_set else "test",
                int(sc.should[i]),
                int(bdist[i]),
                int(lab[i] == sc.qlab[i]),
                f"{float(nn_sim[i]):.5f}",
                int(nlab[i] == sc.qlab[i]),
            ]
            for i in range(len(sc.qlab))
        ],
    )
    n_should = sum(sc.should[i] for i in test)
    series = {
        KEY_SCHEMES.name: KEY_SCHEMES.lists(
            sc.rows,
            f"{wl.name}; test split: {len(test)} queries, {n_should} with their answer in "
            f"the cache, {len(test) - n_should} must miss; radius and threshold chosen on a "
            f"disjoint calibration split of {len(cal)} queries (no origin in both).",
        ),
        LSH_SWEEP.name: LSH_SWEEP.lists(sweep),
        CHARSIM_SWEEP.name: CHARSIM_SWEEP.lists(
            csweep,
            f"the stand-in: SimHash of character {p['charsim_ngram']}-grams, same "
            f"hyperplane LSH, store, bands and radius calibration",
        ),
        NN_SWEEP.name: NN_SWEEP.lists(nn_sweep),
    }
    return Record("ok", metrics=sc.m, series=series, details={"workload": wl.name}), nn_sim, nlab


def _hash_schemes(sc: _Scoring, store) -> float:
    """The exact prompt hash (raw and normalized), and its control: the same lookups against an
    empty cache (keys never written). Returns the raw hash's correct hit rate (%)."""
    for scheme, norm in (("hash", False), ("hash_norm", True)):
        got = store.get_many([keys.exact_key(t, norm) for t, _ in sc.wl.queries])
        c = sc.counts(sc.test, [g is not None for g in got], [g.label if g else None for g in got])
        sc.scheme(scheme, scheme, "exact", c, "exact prompt hash, test split")
    got = store.get_many(["ctl_empty_" + keys.exact_key(t) for t, _ in sc.wl.queries])
    c = sc.counts(sc.test, [g is not None for g in got], [g.label if g else None for g in got])
    sc.m.update(scheme_metrics("control.empty_cache", c, "cache off: the same GETs, nothing stored"))
    return cast(float, sc.m["hash.correct_hit_rate_pct"].value)  # set by scheme_metrics: a number


def _lsh_scheme(ctx, p, sc: _Scoring, store, q_sig, hash_rate: float) -> tuple[int, np.ndarray, list, list]:
    """LSH through Redis: banded candidates, nearest by Hamming distance; the radius chosen on
    the calibration split. Returns the radius, each query's distance and matched label, the sweep."""
    t0 = time.perf_counter()
    bsig, bdist = store.nearest_many(q_sig)
    lab = [
        g.label if g else None for g in store.get_many([keys.sem_key(s) if s is not None else "sem_none" for s in bsig])
    ]
    ctx.log(f"LSH lookups through Redis for {len(q_sig)} queries ({time.perf_counter() - t0:.1f} s)")
    radii = sorted(set(int(r) for r in p["radii"]))
    radius, sweep = sc.calibrated(radii, lambda r: bdist <= r, lab)
    c_r0 = sc.counts(sc.test, bdist <= 0, lab)
    c_lsh = sc.counts(sc.test, bdist <= radius, lab)
    note = f"radius {radius} (best F1 on the calibration split), {p['bands']} bands"
    sc.scheme(
        "lsh_r0",
        "lsh r0 (sem_<hex> as an exact key)",
        "radius 0",
        c_r0,
        "the sem_<hex> key as an exact key, test split",
    )
    sc.scheme("lsh", "lsh (Redis, banded)", note, c_lsh, note + ", test split")
    sc.m["lsh.radius"] = Metric(radius, "bits", None, "chosen on the calibration split (best F1 of correct hits)")
    sc.m["lsh.gain_over_hash_pp"] = Metric(100 * c_lsh.correct_hit_rate - hash_rate, "pp", "higher")
    return radius, bdist, lab, sweep


def _charsim_scheme(p, sc: _Scoring, stand, q_csig, hash_rate: float) -> list:
    """The stand-in: the embedding replaced by a hashed vector of the prompt's character
    n-grams, everything else as in the LSH scheme (hyperplanes, signatures, store, bands,
    its own radius chosen on the calibration split by the same rule). The semantic key's
    hits are the embedding's only where they exceed these. Returns the sweep."""
    bsig, bdist = stand.nearest_many(q_csig)
    lab = [
        g.label if g else None
        for g in stand.get_many([keys.sem_key(s, "chs") if s is not None else "chs_none" for s in bsig])
    ]
    radius, sweep = sc.calibrated(sorted(set(int(r) for r in p["radii"])), lambda r: bdist <= r, lab)
    what = f"SimHash of character {p['charsim_ngram']}-grams"
    sc.scheme(
        "charsim_r0",
        f"stand-in: {what} as an exact key",
        "radius 0",
        sc.counts(sc.test, bdist <= 0, lab),
        "the stand-in's chs_<hex> key as an exact key, test split",
    )
    c = sc.counts(sc.test, bdist <= radius, lab)
    note = f"the stand-in ({what}), radius {radius} (best F1 on the calibration split), {p['bands']} bands"
    sc.scheme("charsim", f"stand-in: {what} (Redis, banded)", f"radius {radius}", c, note + ", test split")
    sc.m["charsim.radius"] = Metric(radius, "bits", None, "the stand-in's radius, chosen on the calibration split")
    sc.m["charsim.gain_over_hash_pp"] = Metric(
        100 * c.correct_hit_rate - hash_rate, "pp", "higher", "the stand-in's gain over the prompt hash"
    )
    return sweep


def _control_scheme(sc: _Scoring, control, radius: int, hash_rate: float) -> None:
    """The control: the semantic key replaced by an exact hash, same store layout and radius."""
    csig, cdist = control.nearest_many(np.array([keys.text_signature(t) for t, _ in sc.wl.queries], dtype=np.uint64))
    clab = [
        g.label if g else None
        for g in control.get_many([keys.sem_key(s, "ctl") if s is not None else "ctl_none" for s in csig])
    ]
    c_ctl = sc.counts(sc.test, cdist <= radius, clab)
    sc.scheme(
        "control.exact_key",
        "control: exact hash as the signature",
        f"radius {radius}",
        c_ctl,
        "the LSH signature replaced by a 64-bit text hash",
    )
    sc.m["control.exact_key.gain_over_hash_pp"] = Metric(100 * c_ctl.correct_hit_rate - hash_rate, "pp", "higher")


def _nn_scheme(p, sc: _Scoring, store, ins_vec, q_vec) -> tuple[np.ndarray, list, list]:
    """Exact cosine nearest neighbour (numpy), the entry fetched from Redis; the threshold chosen
    on the calibration split. Returns each query's best cosine and matched label, the sweep."""
    nn_idx, nn_sim = keys.nearest_cosine(q_vec, ins_vec)
    nlab = [g.label if g else None for g in store.get_many([f"semnn_{int(i)}" for i in nn_idx])]
    ths = sorted(set(float(x) for x in p["thresholds"]), reverse=True)
    th, nn_sweep = sc.calibrated(ths, lambda t: nn_sim >= t, nlab)
    c_nn = sc.counts(sc.test, nn_sim >= th, nlab)
    sc.scheme(
        "nn", "cosine NN (exact)", f"cos >= {th:g} (best F1 on calibration)", c_nn, f"cosine >= {th:g}, test split"
    )
    sc.m["nn.threshold"] = Metric(th, "", None, "chosen on the calibration split (best F1 of correct hits)")
    return nn_sim, nlab, nn_sweep


def _repeats(wl, stores, ins_sigs, radii: tuple[int, int]) -> dict[str, Metric]:
    """The instrument of C2's checks: every inserted prompt asked again verbatim, through the
    same keys, store and lookups (the prompt hash, sem_<hex> at radius 0 and at the calibrated
    radius, the exact-hash control, the stand-in at radius 0 and at its radius). Every answer
    is in the cache, so a working lookup hits them all: a key that hits less here is broken,
    not outdone (a blind stand-in would make any semantic key look better than it)."""
    (store, control, stand), (ins_sig, ins_csig), (radius, cradius) = stores, ins_sigs, radii
    texts, labels = [t for t, _ in wl.inserts], [lab for _, lab in wl.inserts]

    def counts(got) -> metrics.CacheCounts:
        return metrics.cache_counts(
            [g is not None for g in got], [g.label if g else None for g in got], labels, [True] * len(texts)
        )

    out: dict[str, Metric] = {}
    note = f"the instrument: the {len(texts)} inserted prompts asked again verbatim"
    c = counts(store.get_many([keys.exact_key(t) for t in texts]))
    out["instrument.repeats.hash.correct_hit_rate_pct"] = Metric(100 * c.correct_hit_rate, "%", "higher", note)
    bsig, bdist = store.nearest_many(ins_sig)
    got = store.get_many([keys.sem_key(s) if s is not None else "sem_none" for s in bsig])
    for name, r in (("lsh_r0", 0), ("lsh", radius)):
        c = counts([g if d <= r else None for g, d in zip(got, bdist)])
        out[f"instrument.repeats.{name}.correct_hit_rate_pct"] = Metric(
            100 * c.correct_hit_rate, "%", "higher", f"{note}, radius {r}"
        )
    csig, cdist = control.nearest_many(np.array([keys.text_signature(t) for t in texts], dtype=np.uint64))
    cgot = control.get_many([keys.sem_key(s, "ctl") if s is not None else "ctl_none" for s in csig])
    c = counts([g if d <= radius else None for g, d in zip(cgot, cdist)])
    out["instrument.repeats.control.exact_key.correct_hit_rate_pct"] = Metric(
        100 * c.correct_hit_rate, "%", "higher", note
    )
    bsig, bdist = stand.nearest_many(ins_csig)
    got = stand.get_many([keys.sem_key(s, "chs") if s is not None else "chs_none" for s in bsig])
    for name, r in (("charsim_r0", 0), ("charsim", cradius)):
        c = counts([g if d <= r else None for g, d in zip(got, bdist)])
        out[f"instrument.repeats.{name}.correct_hit_rate_pct"] = Metric(
            100 * c.correct_hit_rate, "%", "higher", f"{note}, the stand-in at radius {r}"
        )
    return out


def _latency(ctx, p, wl, stores, emb, projs, radii: tuple[int, int]) -> dict[str, Metric]:
    """One query at a time, end to end through the LSH scheme at the chosen radius; the prompt
    hash and the stand-in (its n-gram vector in the embedding's place, its own radius) timed on
    the same query right after it, so that all three see the same load."""
    (store, stand), (proj, cproj), (radius, cradius) = stores, projs, radii
    rng = random.Random(p["split_seed"] + 7)
    texts = [wl.queries[i][0] for i in rng.sample(range(len(wl.queries)), min(p["latency_queries"], len(wl.queries)))]
    emb.encode_one(texts[0])  # warm-up
    rows = []
    for n, text in enumerate(texts):
        t0 = time.perf_counter()
        v = emb.encode_one(text)
        t1 = time.perf_counter()
        sig = int(keys.signatures(v, proj)[0])
        _ = keys.sem_key(sig), keys.band_keys(sig, store.bands)
        t2 = time.perf_counter()
        entry, dist, _best = store.lsh_nearest(sig)
        _ = entry is not None and dist <= radius  # the hit decision, timed with the lookup
        t3 = time.perf_counter()
        store.get(keys.exact_key(text, True))
        t4 = time.perf_counter()
        csig = int(_stand_in_sigs(p, [text], cproj)[0])
        entry, dist, _best = stand.lsh_nearest(csig)
        _ = entry is not None and dist <= cradius
        t5 = time.perf_counter()
        rows.append(
            [1000 * (t1 - t0), 1000 * (t2 - t1), 1000 * (t3 - t2), 1000 * (t3 - t0), 1000 * (t4 - t3), 1000 * (t5 - t4)]
        )
        if (n + 1) % 100 == 0:
            ctx.log(f"latency: {n + 1}/{len(texts)} single-query lookups")
    write_csv(
        ctx.raw_path("lookup_latency_ms.csv"),
        ["embed_ms", "key_ms", "redis_ms", "total_ms", "hash_lookup_ms", "charsim_lookup_ms"],
        [[f"{x:.4f}" for x in r] for r in rows],
    )
    out: dict[str, Metric] = {}
    for j, (name, note) in enumerate(
        (
            ("embed", "all-MiniLM-L6-v2, one query, 1 torch thread unless set"),
            ("key", "64-bit signature + sem_<hex> + band keys"),
            ("redis", "band SMEMBERS pipeline + GET sem_<hex>"),
            ("lookup", "embedding + key + Redis, one query"),
            ("hash_lookup", "normalize + SHA-256 + GET"),
            ("charsim_lookup", "the stand-in: n-gram vector + signature + Redis"),
        )
    ):
        out.update(latency_metrics(name, [r[j] for r in rows], note=note))
    return out


def _c7(p, wl, test, emb, nn_sim, nlab, out: Record) -> None:
    """Section 2.2: the dynamic threshold max(0.4, 0.85 (1 - H/8 (1 - |r|))) over token-id
    streams (H: Shannon entropy in bits, r: lag-1 Pearson correlation). What is measured: H
    and r of each stream (the real query stream, and streams the harness generates from it or
    from a seed), and the correct hits of real cosine-NN lookups at two thresholds; what is
    computed: each threshold (the formula on the measured H and r) and the loss."""
    tok = emb.model[0].tokenizer
    ids = [i for t, _ in wl.queries for i in tok(t, add_special_tokens=False, verbose=False)["input_ids"]]
    ids = ids[: p["c7_max_tokens"]] if p["c7_max_tokens"] else ids
    streams = {
        **metrics.c7_streams(ids, tok.vocab_size, p["c7_period"], p["split_seed"]),
        **metrics.known_streams(len(ids), p["c7_known_symbols"], p["c7_known_r"], p["split_seed"]),
    }
    rows, measured = [], {}
    for name, seq in streams.items():
        h, r, thr = metrics.stream_threshold(seq)
        measured[name] = (h, r)
        origin = "the real query stream's token ids" if name == "query_stream" else "a stream the harness generates"
        note = (
            f"computed, not measured: the source's formula on H = {h:.2f} bits and lag-1 r = {r:.3f}, "
            f"both measured on {origin} ({len(seq)} tokens)"
        )
        if p["c7_threshold"] == "static":
            thr, note = p["c7_static_threshold"], note + "; the formula removed: the static threshold"
        out.metrics[f"c7.{name}.threshold"] = Metric(thr, "", None, note)
        rows.append([name, len(seq), h, r, thr])
    out.metrics["c7.instrument.entropy_error_bits"] = Metric(
        abs(measured["control.known_entropy"][0] - float(np.log2(p["c7_known_symbols"]))),
        "bits",
        "lower",
        f"measured: |H - log2 {p['c7_known_symbols']}| on i.i.d. uniform draws of {p['c7_known_symbols']} symbols",
    )
    reference = c7_reference.uniform_threshold(tok.vocab_size, len(ids))
    out.metrics["c7.reference.uniform_tokens.threshold"] = Metric(
        p["c7_static_threshold"] if p["c7_threshold"] == "static" else reference,
        "",
        None,
        f"the reference, computed without the stream: the formula at the entropy the uniform generator was given "
        f"(log2 of the vocabulary of {tok.vocab_size} ids, at most log2 of the {len(ids)} draws) and r = 0 (the "
        f"static threshold when the formula is removed); the uniform stream's threshold must agree with it",
    )
    out.metrics["c7.instrument.lag1_r_error"] = Metric(
        abs(measured["control.known_r"][1] - p["c7_known_r"]),
        "",
        "lower",
        f"measured: |r - {p['c7_known_r']:g}| on an AR(1) stream of coefficient {p['c7_known_r']:g}",
    )
    out.series[C7_STREAMS.name] = C7_STREAMS.lists(
        rows,
        f"periodic: the first {p['c7_period']} tokens of the query stream "
        f"repeated; every threshold is computed by the formula from the measured "
        f"H and r",
    )
    _c7_loss(p, wl, test, nn_sim, nlab, out)


def _c7_loss(p, wl, test, nn_sim, nlab, out: Record) -> None:
    """Correct hits of exact cosine NN on the test split (real lookups) at the uniform stream's
    dynamic threshold, at the static one, and at the instrument's strict one. A lower
    threshold keeps every hit of a higher one, so the loss is >= 0 whenever the dynamic
    threshold is below the static one: its size is what the lookups measure."""
    labels = [wl.queries[i][1] for i in test]
    all_should = wl.should_hit()
    should = [all_should[i] for i in test]

    def at(t: float) -> metrics.CacheCounts:
        return metrics.cache_counts([bool(nn_sim[i] >= t) for i in test], [nlab[i] for i in test], labels, should)

    dyn = cast(float, out.metrics["c7.uniform_tokens.threshold"].value)  # set by _c7: a number
    static, strict = p["c7_static_threshold"], p["c7_strict_threshold"]
    c_dyn, c_static, c_strict = at(dyn), at(static), at(strict)
    loss = metrics.static_loss_pct(c_dyn.correct, c_static.correct)
    if loss is not None:
        out.metrics["c7.static_loss_pct"] = Metric(
            loss,
            "%",
            None,
            (
                f"computed from measured hit counts: correct hits of exact cosine NN on the test split, {c_dyn.correct} at "
                f"the computed dynamic {dyn:.2f} and {c_static.correct} at {static:g} (wrong hits {c_dyn.wrong} and "
                f"{c_static.wrong}); >= 0 by construction while the dynamic threshold is below the static one"
            ),
        )
        out.metrics["c7.instrument.strict_loss_pct"] = Metric(
            metrics.static_loss_pct(c_dyn.correct, c_strict.correct),
            "%",
            None,
            f"the instrument: correct hits at a strict static {strict:g} ({c_strict.correct}) against the dynamic "
            f"threshold's; a lookup that sees hits must see most of them lost there",
        )
    out.series[C7_LOSS.name] = C7_LOSS.lists(
        [
            [dyn, "dynamic (uniform-token stream), computed", c_dyn.correct, c_dyn.wrong],
            [static, "static", c_static.correct, c_static.wrong],
            [strict, "instrument: strict static", c_strict.correct, c_strict.wrong],
        ]
    )


def _dataset_extras(p, ds, emb, proj, out: Record) -> None:

    if ds.fmt == "pairs":
        with torch_threads(p["torch_threads"]):
            a = cached_encode(emb, [r[0] for r in ds.rows], p["batch_size"])
            b = cached_encode(emb, [r[1] for r in ds.rows], p["batch_size"])
        labels = [r[2] for r in ds.rows]
        cos = (a * b).sum(1)
        ham = keys.hamming(keys.signatures(a, proj), keys.signatures(b, proj))
        rows = []
        for scheme, norm in (("hash", False), ("hash_norm", True)):
            pc = metrics.pair_counts(
                [keys.exact_key(r[0], norm) == keys.exact_key(r[1], norm) for r in ds.rows], labels
            )
            rows.append([scheme, "exact", *_pair_cells(pc)])
        for t in sorted(set(float(x) for x in p["thresholds"])):
            rows.append(["cosine", f">= {t:g}", *_pair_cells(metrics.pair_counts(list(cos >= t), labels))])
        for r in sorted(set(p["radii"])):
            rows.append(["LSH Hamming", f"<= {r}", *_pair_cells(metrics.pair_counts(list(ham <= r), labels))])
        out.metrics["pairs.roc_auc_cosine"] = Metric(metrics.roc_auc(list(map(float, cos)), labels), "", "higher")
        out.metrics["pairs.roc_auc_hamming"] = Metric(metrics.roc_auc([-float(h) for h in ham], labels), "", "higher")
        out.series[PAIRS.name] = PAIRS.lists(
            rows,
            f"{ds.path.name}: {len(labels)} pairs, {sum(labels)} "
            f"labelled 1; a pair is predicted 'same' when the scheme "
            f"matches its two sentences",
        )
    if ds.fmt == "gptcache":
        # GPTCache's own protocol: every origin inserted, every similar asked
        origins = sorted({o for o, _ in ds.rows})
        ov = cached_encode(emb, origins, p["batch_size"])
        qv = cached_encode(emb, [s for _, s in ds.rows], p["batch_size"])
        idx, sim = keys.nearest_cosine(qv, ov)
        rows = []
        for cos_t in (0.9, 0.8, 0.6):
            hit = sim >= cos_t
            correct = int(sum(1 for h, i, (o, _) in zip(hit, idx, ds.rows) if h and origins[i] == o))
            rows.append([cos_t, (cos_t + 1) / 2, correct, int(hit.sum()) - correct, len(ds.rows) - int(hit.sum())])
        out.series[GPTCACHE_PROTOCOL.name] = GPTCACHE_PROTOCOL.lists(rows)


def _pair_cells(pc: metrics.PairCounts) -> list:
    return [
        pc.pairs,
        pc.tp,
        pc.fp,
        pc.fn,
        pc.tn,
        100 * pc.hit_rate,
        100 * pc.precision if pc.tp + pc.fp else None,
        100 * pc.recall,
        pc.f1,
    ]
