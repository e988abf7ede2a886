"""The engine-hotload view on a stored run: prewarm modes side by side and swaps beside
restarts, aggregated across repetitions, claimed numbers from the ledger's figures."""

from __future__ import annotations

from pathlib import Path

from harness.experiments import views
from harness.model.ledger_parse import load_claims
from harness.model.spec import load_all_suites
from harness.model.stored_run import Metric, Record, RunData, Series
from harness.verdict.analysis import analyze


def _run(records):
    suites = load_all_suites()
    s = suites["engine-hotload"]
    srun = s.as_run("local", 2, {c.name: {} for c in s.cases})
    return RunData(Path("."), {}, records, {"engine-hotload": srun}, load_claims(suites=suites))


def _prewarm(rep: int, cold_ms: float) -> Record:
    m = {
        "b1x16.p50_ms": 2.0,
        "b1x16.p99_ms": 3.0,
        "b1x16.cold_first_ms": cold_ms,
        "b1x16.profile0_first_ms": 2.5,
        "b1x16.prewarmed_first_ms": 2.1,
        "cold.first_ms": cold_ms,
        "profile0.first_ms": 2.5,
        "prewarmed.first_ms": 2.1,
        "cold.first_over_p99": cold_ms / 3,
        "profile0.first_over_p99": 2.5 / 3,
        "prewarmed.first_over_p99": 0.7,
    }
    steady = Series({"bucket": ["b1x16"], "n": [12], "p50_ms": [2.0], "p99_ms": [3.0]})
    return Record(
        suite="engine-hotload",
        case="prewarm",
        repetition=rep,
        metrics={k: Metric(v, "ms") for k, v in m.items()},
        series={"steady": steady},
    )


def _swap(rep: int, failed_restart: int) -> Record:
    acts = Series(
        {
            "kind": ["swap", "restart"],
            "to_serving_ms": [900.0, 700.0],
            "outage_ms": [0.0, 700.0],
            "rss_extra_mib": [200.0, 20.0],
        }
    )
    m = {
        "failed_requests": Metric(0, "requests"),
        "control.failed_requests": Metric(failed_restart, "requests"),
        "rss_peak_extra_over_engine": Metric(2.2, "x"),
    }
    return Record(suite="engine-hotload", case="hot-swap", repetition=rep, metrics=m, series={"actions": acts})


def test_engine_view_aggregates_repetitions_and_takes_claims_from_the_ledger():
    run = _run([_prewarm(1, 6.0), _prewarm(2, 10.0), _swap(1, 10), _swap(2, 14)])
    blocks = views.build(run, analyze(run), "engine-hotload")
    first = next(b for b in blocks if b.title.startswith("First request per shape bucket"))
    assert first.rows[0][0] == "b1x16" and first.rows[0][3] == (8.0, 6.0, 10.0)  # cold: median (min-max)
    claim = next(b for b in blocks if b.title.startswith("Claimed vs measured: first-request"))
    assert [r[-1] for r in claim.rows] == ["-", "<= 1", "<= 1"]  # C14's figure, not a number in code
    swaps = next(b for b in blocks if b.title.startswith("Claimed vs measured: hot swap"))
    restart = next(r for r in swaps.rows if "restarts (control)" in r[0])
    assert restart[2] == (12.0, 10.0, 14.0)
    mem = next(r for r in swaps.rows if r[0].startswith("memory during a swap"))
    assert mem[1].startswith(">= 2x") and abs(mem[2] - 3.2) < 1e-9
