"""The kv-tiers view on a stored run: tables aggregated across repetitions, claimed
numbers from the ledger's figures, nothing from one repetition alone."""

from __future__ import annotations

from pathlib import Path

from harness.experiments import views
from harness.model.ledger_parse import load_claims
from harness.model.spec import load_all_suites
from harness.model.stored_run import Metric, Record, RunData, Series
from harness.verdict.analysis import analyze


def _run(records):
    suites = load_all_suites()
    s = suites["kv-tiers"]
    srun = s.as_run("local", 2, {c.name: {} for c in s.cases})
    return RunData(Path("."), {}, records, {"kv-tiers": srun}, load_claims(suites=suites))


def _codecs(rep: int, json_ms: float, aligned_ms: float) -> Record:
    names = ["json", "aligned128", "json (control)"]
    series = Series(
        {
            "codec": names,
            "scope": ["sized"] * 3,
            "elements": [1000] * 3,
            "bytes": [20000, 4096, 20000],
            "encode_ms": [1.0, 0.01, 1.0],
            "decode_ms": [json_ms, aligned_ms, json_ms],
            "store_fetch_qps": [80.0, 300.0, 79.0],
        },
        {"decode_ms": "ms"},
    )
    m = {
        "sized.decode_speedup.aligned128_vs_json": Metric(json_ms / aligned_ms, "x"),
        "sized.elements": Metric(1000, "float32 values"),
        "sized.json.decode_ms": Metric(json_ms, "ms"),
    }
    return Record(suite="kv-tiers", case="codecs", repetition=rep, metrics=m, series={"codecs": series})


def _tiers(rep: int, l2_us: float) -> Record:
    series = Series(
        {
            "measure": ["L1.fetch_copy", "L2.fetch_decode", "L3.cold"],
            "tier": ["L1", "L2", "L3"],
            "what": ["copy", "get+decode", "cold read"],
            "n": [24, 24, 24],
            "p50_us": [200.0, l2_us, 9000.0],
            "p99_us": [300.0, 2 * l2_us, 12000.0],
        },
        {"p50_us": "us"},
    )
    return Record(suite="kv-tiers", case="tiers", repetition=rep, series={"tiers": series})


def test_kv_view_aggregates_repetitions_and_takes_claims_from_the_ledger():
    run = _run([_codecs(1, 2.0, 0.01), _codecs(2, 1.6, 0.02), _tiers(1, 1000.0), _tiers(2, 3000.0)])
    blocks = views.build(run, analyze(run), "kv-tiers")
    titles = [b.title for b in blocks]
    assert "Claimed vs measured: chunk decode and QPS (source 3.2)" in titles
    codecs = next(b for b in blocks if b.title.startswith("Codecs on real KV data"))
    json_row = next(r for r in codecs.rows if r[0] == "json")
    assert json_row[codecs.columns.index("decode_ms (ms)")] == (1.8, 1.6, 2.0)  # median (min-max) over repetitions
    claim = next(b for b in blocks if b.title.startswith("Claimed vs measured: chunk"))
    speed = next(r for r in claim.rows if r[0].startswith("decode speedup aligned128"))
    assert speed[1] == 7.9 and speed[2] == (140.0, 80.0, 200.0)
    tiers = next(b for b in blocks if b.title.startswith("Tier access latency"))
    l2 = next(r for r in tiers.rows if r[0] == "L2.fetch_decode")
    assert l2[tiers.columns.index("claimed")] == "~150 us" and (2000.0, 1000.0, 3000.0) in l2
    assert next(r for r in tiers.rows if r[0] == "L1.fetch_copy")[2] == "< 10 us"
