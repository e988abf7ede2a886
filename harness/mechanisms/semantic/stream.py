"""The semantic cache's TTFT stream, shared by the semantic-cache suite (in-process, case
`ttft`) and the serving suite (end to end, over HTTP): the stream's parameters, its
preparation (the workload, the test-split stream, the inserts' signatures and the radius with
the best F1 on the calibration split), the oracle cache's store (the instrument), and the
outcome every mode's TTFTs make (latency per mode, the P95 change semantic vs hash with its
bootstrap interval, the floor the measured hit rate allows).

Streams: `test` (the measurement) is a seeded sample of the test split's queries;
`semantic-hits` samples only the test-split queries that the LSH index answers correctly at
the calibrated radius (their own origin's insert is nearer than any other origin's, within
the radius). It exists to show that the checks see a working cache, and is not a
measurement of the claim. It is chosen with the LSH signatures even when signature=exact, so
that a run with the mechanism and one without it serve the same stream."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import cast

import numpy as np

from harness.base import stats
from harness.base.errors import BadInput
from harness.mechanisms.semantic import common, datasets, keys, metrics
from harness.mechanisms.semantic.embed import cached_encode
from harness.mechanisms.semantic.series import REQUESTS
from harness.mechanisms.semantic.serve import MODES
from harness.mechanisms.semantic.store import Entry
from harness.model.driver_contract import Metric, Param, Record
from harness.model.driver_helpers import latency_metrics, torch_threads, write_csv

STREAMS = ("test", "semantic-hits")
STREAM_PARAMS = {
    **common.dataset_params(),
    "queries": Param(int, 100, "length of the query stream (a seeded sample of the test split's queries)", min=2),
    "stream": Param(
        str,
        "test",
        "test: a seeded sample of the test split (the measurement); semantic-hits: only "
        "test-split queries the LSH cache answers correctly at the calibrated radius, to "
        "show that the checks see a working cache; not a measurement of the claim",
        STREAMS,
    ),
    "stream_seed": Param(int, 3, "seed of the stream sample"),
    "max_new_tokens": Param(int, 32, "tokens decoded per request served by the model, in every mode", min=1),
    "lsh_seed": Param(int, 1, "seed of the hyperplanes"),
    "bands": Param(int, 8, "LSH bands of the radius index", (1, 2, 4, 8, 16, 32, 64)),
    "radii": Param(
        list,
        list(range(0, 8)),
        "Hamming radii tried on the calibration split (below `bands`, where banded lookup is exact)",
        min=0,
        max=64,
    ),
    "signature": Param(
        str,
        "lsh",
        "lsh: the semantic cache under test; exact: its signature replaced by an exact "
        "text hash (the mechanism removed, to show that the checks would see it)",
        ("lsh", "exact"),
    ),
    "oracle": Param(
        str,
        "hit",
        "hit: the oracle cache (the instrument) holds every request of the stream; miss: its "
        "store left empty, so the model serves it (the instrument broken, to show that the "
        "checks then say inconclusive)",
        ("hit", "miss"),
    ),
    "device": Param(str, "auto", "auto (cuda when present), cpu or cuda", ("auto", "cpu", "cuda")),
    "ttl_s": Param(int, 300, "TTL of every cache entry", min=1),
}


def check(where: str, p: dict) -> None:
    common.check_dataset(where, p)
    if any(r >= p["bands"] for r in p["radii"]):
        raise BadInput(f"{where}.radii: keep radii below bands ({p['bands']}), where the banded lookup is exact")


def device_of(p) -> str:
    import torch

    if p["device"] == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if p["device"] == "cuda" and not torch.cuda.is_available():
        raise BadInput("device: cuda was asked for, but torch sees no GPU; use device=auto or cpu")
    return p["device"]


@dataclass
class Stream:
    """A query stream and what the cache holds before it starts."""

    workload: datasets.Workload
    requests: list[tuple[str, str]]  # (text, label), from the test split
    insert_sigs: np.ndarray
    radius: int
    calibration_queries: int


def _best_radius(
    ins_sig: np.ndarray, cal_sig: np.ndarray, wl: datasets.Workload, cal: list[int], radii: list[int]
) -> int:
    """The radius with the best F1 of correct hits of the calibration queries (exhaustive search)."""
    idx, dist = keys.nearest_hamming(cal_sig, ins_sig)
    should = wl.should_hit()
    counts = [
        metrics.cache_counts(
            list(dist <= r), [wl.inserts[i][1] for i in idx], [wl.queries[i][1] for i in cal], [should[i] for i in cal]
        )
        for r in radii
    ]
    return radii[metrics.best_setting(radii, counts)]


def semantic_hits(
    wl: datasets.Workload, test: list[int], test_sig: np.ndarray, ins_sig: np.ndarray, radius: int
) -> list[int]:
    """The test queries the LSH cache answers correctly: an insert of the query's own origin
    lies within `radius` and strictly nearer than every insert of another origin (so no
    tie-break can hand it a wrong entry)."""
    d = keys.hamming(np.asarray(test_sig)[:, None], np.asarray(ins_sig)[None, :])
    labels = np.array([lab for _, lab in wl.inserts], dtype=object)
    out = []
    for row, i in zip(d, test):
        own = labels == wl.queries[i][1]
        if own.any() and row[own].min() <= radius and (own.all() or row[own].min() < row[~own].min()):
            out.append(i)
    return out


def prepare(p: dict, emb, log) -> Stream:
    """The workload, the stream (test split), the inserts' signatures, and the radius with the
    best F1 of correct hits on the calibration split. With stream=semantic-hits the stream is
    drawn from the queries the LSH cache answers correctly (chosen with the LSH signatures and
    radius whatever `signature` says, so that the runs with and without the mechanism serve the
    same stream)."""

    _, wl = common.load(p)
    cal, test = common.split_queries(wl.queries, p["calibration_fraction"], p["split_seed"])
    hits_stream = p["stream"] == "semantic-hits"
    with torch_threads(p["torch_threads"]):
        ins_vec = cached_encode(emb, [t for t, _ in wl.inserts], 64, log)
        cal_vec = cached_encode(emb, [wl.queries[i][0] for i in cal], 64, log)
        test_vec = cached_encode(emb, [wl.queries[i][0] for i in test], 64, log) if hits_stream else None
    proj = keys.projection(emb.dim, p["lsh_seed"])
    ins_sig, cal_sig = keys.signatures(ins_vec, proj), keys.signatures(cal_vec, proj)
    radii = sorted(set(int(r) for r in p["radii"]))
    radius = _best_radius(ins_sig, cal_sig, wl, cal, radii)
    pool = test
    if hits_stream:
        hits_vec = cast(np.ndarray, test_vec)  # encoded above when hits_stream
        pool = semantic_hits(wl, test, keys.signatures(hits_vec, proj), ins_sig, radius)
        if not pool:
            raise BadInput(
                f"stream=semantic-hits: none of the {len(test)} test-split queries is answered by the "
                f"LSH cache at radius {radius}; use more dataset_rows or a higher insert_fraction"
            )
        log(
            f"stream semantic-hits: {len(pool)} of {len(test)} test-split queries hit their own origin "
            f"within radius {radius}"
        )
    if p["signature"] == "exact":
        ins_sig, cal_sig = (
            np.array([keys.text_signature(t) for t in texts], dtype=np.uint64)
            for texts in ([t for t, _ in wl.inserts], [wl.queries[i][0] for i in cal])
        )
        radius = _best_radius(ins_sig, cal_sig, wl, cal, radii)
    rng = random.Random(p["stream_seed"])
    requests = [wl.queries[i] for i in rng.sample(pool, min(p["queries"], len(pool)))]
    return Stream(wl, requests, ins_sig, radius, len(cal))


def fill_oracle(store, requests: list[tuple[str, str]], emb, proj) -> None:
    """The instrument's store: every request of the stream under its own LSH signature,
    computed one query at a time as serve() computes it, so every lookup finds it."""

    sigs = np.array([int(keys.signatures(emb.encode_one(t), proj)[0]) for t, _ in requests], dtype=np.uint64)
    store.put_signatures(sigs, [Entry(lab, f"[oracle answer of request {i}]") for i, (_, lab) in enumerate(requests)])


def outcome_of(ctx, p, s: Stream, rows: list[list], dev: str) -> Record:
    present = {lab for _, lab in s.workload.inserts}
    should = sum(lab in present for _, lab in s.requests)
    write_csv(
        ctx.raw_path("ttft_per_request.csv"),
        ["request", "position", "mode", "ttft_ms", "outcome"],
        [[n, pos, mode, f"{t:.3f}", o] for n, pos, mode, t, o in rows],
    )
    m: dict[str, Metric] = {"ttft.radius": Metric(s.radius, "bits", None, "best F1 on the calibration split")}
    p95: dict[str, float] = {}
    for mode in MODES:
        ms = [r[3] for r in rows if r[2] == mode]
        outs = [r[4] for r in rows if r[2] == mode]
        m.update(
            latency_metrics(mode, ms, note=f"TTFT over {len(ms)} requests on {dev}; wrong hits are served by the model")
        )
        p95[mode] = cast(float, m[f"{mode}.p95_ms"].value)  # a percentile of ms: latency_metrics never gives None
        if mode != "no_cache":
            m.update(_cached_mode_metrics(mode, ms, outs))
    m["ttft.p95_change_semantic_vs_hash_pct"] = Metric(
        100 * (p95["semantic_cache"] - p95["hash_cache"]) / p95["hash_cache"], "%", "lower"
    )
    by_mode = {mode: [r[3] for r in rows if r[2] == mode] for mode in ("hash_cache", "semantic_cache")}
    if min(len(v) for v in by_mode.values()) >= 2:
        lo, hi = stats.change_interval(by_mode["hash_cache"], by_mode["semantic_cache"], 95)
        how = (
            f"of the P95 change semantic vs hash: each mode's {len(by_mode['hash_cache'])} TTFTs resampled on "
            f"their own 2000 times (seed 0); an interval holding 0 is a change resampling alone gives"
        )
        m["ttft.p95_change_semantic_vs_hash_ci_low_pct"] = Metric(
            lo, "%", None, "low end of the 95% bootstrap interval " + how
        )
        m["ttft.p95_change_semantic_vs_hash_ci_high_pct"] = Metric(
            hi, "%", None, "high end of the 95% bootstrap interval " + how
        )
    m["control.p95_change_no_cache_vs_hash_pct"] = Metric(
        100 * (p95["no_cache"] - p95["hash_cache"]) / p95["hash_cache"],
        "%",
        "lower",
        "cache off: the model serves every request of the same stream",
    )
    m["instrument.p95_change_oracle_vs_no_cache_pct"] = Metric(
        100 * (p95["oracle_cache"] - p95["no_cache"]) / p95["no_cache"],
        "%",
        "lower",
        "the instrument: the semantic lookup path answering every request from the store",
    )
    floor = m.get("semantic_cache.p95_floor_ms")
    if floor is not None:
        m["ttft.p95_floor_change_semantic_vs_hash_pct"] = Metric(
            # _cached_mode_metrics gives it quantile_floor's value, never None
            100 * (cast(float, floor.value) - p95["hash_cache"]) / p95["hash_cache"],
            "%",
            None,
            "computed, not measured: the lowest P95 change the semantic cache's measured hit rate allows, "
            "its misses' own quantile against the hash cache's measured P95",
        )
    note = (
        f"{len(s.requests)} requests from the test split (stream {p['stream']}; {should} with their answer in the "
        f"cache), each served in all {len(MODES)} modes in rotating order; SmolLM2-135M-Instruct on {dev}, greedy, "
        f"{p['max_new_tokens']} new tokens whenever the model serves; radius {s.radius} chosen on "
        f"{s.calibration_queries} calibration queries; oracle_cache (the instrument) holds every request under its "
        f"own signature"
    )
    series = {REQUESTS.name: REQUESTS.lists(rows, note)}
    return Record("ok", metrics=m, series=series, details={"device": dev})


def _cached_mode_metrics(mode: str, ms: list[float], outs: list[str]) -> dict[str, Metric]:
    """Correct hits, wrong hits, and the P95 floor the measured hit rate allows (computed from
    the measured misses, labelled as computed)."""
    hits, wrong = outs.count("hit"), outs.count("wrong_hit")
    out = {
        f"{mode}.correct_hit_rate_pct": Metric(100 * hits / len(outs), "%", "higher", "correct hits only"),
        f"{mode}.wrong_hits": Metric(wrong, "requests", "lower", "errors: an entry of another origin"),
        f"{mode}.net_hit_rate_pct": Metric(
            100 * (hits - wrong) / len(outs), "%", "higher", "correct hits minus wrong hits, per request"
        ),
    }
    misses = [t for t, o in zip(ms, outs) if o != "hit"]
    floor = metrics.quantile_floor(hits / len(outs), misses)
    if floor is not None:
        level, value = floor
        out[f"{mode}.p95_floor_ms"] = Metric(
            value,
            "ms",
            None,
            (
                f"computed, not measured: with {hits} of {len(outs)} requests hit (h = {hits / len(outs):.3f}) no P95 "
                f"can fall below the misses' own (0.95 - h) / (1 - h) = {level:.3f} quantile, here of the "
                f"{len(misses)} measured misses"
            ),
        )
    return out
