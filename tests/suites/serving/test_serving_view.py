"""The serving view on the recorded metrics of real runs of the three cases
(tests/fixtures/serving/*_metrics.json): prefix caching on and off, the engine's hit rate beside
the simulator's, the semantic cache end to end, the two clients side by side (saying which one
is late), the client's overhead; claimed numbers from the ledger only."""

from __future__ import annotations

import json
from pathlib import Path

from harness.experiments import views
from harness.experiments.views import Table
from harness.model import ledger_parse, spec
from harness.model.stored_run import Metric, Record, RunData
from harness.verdict.analysis import analyze
from tests import TESTS
from tests.ledger_helpers import HERE

FIX = TESTS / "fixtures" / "serving"
CASES = {"prefix-cache": "prefix_cache", "semantic-e2e": "semantic_e2e", "client-vs-vllm": "client_vs_vllm"}


def _run(claims=None) -> RunData:
    suites = spec.load_all_suites()
    srun = suites["serving"].as_run("local", 1, {c.name: {} for c in suites["serving"].cases})
    recs = [
        Record(
            suite="serving",
            case=case,
            repetition=1,
            metrics={
                k: Metric(v, "")
                for k, v in json.loads((FIX / f"{f}_metrics.json").read_text())["metrics"].items()
                if v is not None
            },
        )
        for case, f in CASES.items()
    ]
    return RunData(
        Path("."),
        dict(HERE),
        recs,
        {"serving": srun},
        ledger_parse.load_claims(suites=suites) if claims is None else claims,
    )


def _tables(run: RunData) -> dict[str, Table]:
    return {b.title: b for b in views.build(run, analyze(run), "serving") if isinstance(b, Table)}


def test_every_part_of_the_suite_is_shown():
    t = _tables(_run())
    assert {b.split(":")[0] for b in t} >= {
        "Prefix caching on and off",
        "The semantic cache in front of the engine",
        "The streaming client's own overhead and the schedule's lateness",
    }
    prefix = next(v for k, v in t.items() if k.startswith("Prefix caching on and off"))
    arms = {r[0]: r for r in prefix.rows}
    assert arms["trace slice, prefix caching on"][4] > 30  # the engine's own hit rate
    assert arms["trace slice, prefix caching off (mechanism off)"][4] == 0
    assert arms["trace slice, prefix caching on"][1] < arms["trace slice, prefix caching off (mechanism off)"][1]
    sem = next(v for k, v in t.items() if k.startswith("The semantic cache in front of the engine"))
    assert "428 ms with the hash cache, 211 ms with the semantic cache" in sem.note  # C3's figures, the ledger's
    assert [r[0] for r in sem.rows][-1] == "oracle cache (instrument)"


def test_the_engine_hit_rate_stands_beside_the_prediction_and_the_claim_comes_from_the_ledger():
    t = _tables(_run())
    hit = next(v for k, v in t.items() if k.startswith("The engine's prefix-cache hit rate"))
    rows = {r[0]: r[1] for r in hit.rows}
    assert rows["engine (measured, its /metrics)"] == rows["simulator at the engine's capacity (predicted)"]
    assert rows["claimed (C1): reuse below (%)"] == 38
    assert "measured what the simulator predicted" in hit.note
    run = _run()
    for c in run.claims:
        c.figures = {}
    hit = next(v for k, v in _tables(run).items() if k.startswith("The engine's prefix-cache hit rate"))
    assert {r[0]: r[1] for r in hit.rows}["claimed (C1): reuse below (%)"] == "-"


def test_the_peer_table_says_which_client_is_late():
    t = _tables(_run())
    peer = next(v for k, v in t.items() if k.startswith("The harness's client beside vLLM's"))
    assert "vLLM's client measured 13.6% later" in peer.note and "within 10%" in peer.note
    ttft = next(r for r in peer.rows if r[0] == "TTFT P50")
    assert ttft[1] < ttft[2]  # harness below vLLM's


def test_the_sweep_shows_curves_knee_capacity_and_c3_against_the_curve():
    """The load sweep's part of the report, from the stored record of a real local sweep (all
    eight arms, one repetition): TTFT and goodput against load per arm, the knee marked where
    an arm had one, the highest load at the SLO per arm, what each cache buys, and C3's
    semantic-against-hash change at every rate."""
    from harness.experiments.views import Chart

    rec = Record.from_json(json.loads((FIX / "sweep_local_record.json").read_text())["record"])
    suites = spec.load_all_suites()
    srun = suites["serving"].as_run("local", 1, {c.name: {} for c in suites["serving"].cases})
    run = RunData(Path("."), dict(HERE), [rec], {"serving": srun}, ledger_parse.load_claims(suites=suites))
    blocks = views.build(run, analyze(run), "serving")
    charts = {b.title: b for b in blocks if isinstance(b, Chart)}
    tables = {b.title: b for b in blocks if isinstance(b, Table)}
    ttft = charts["Load sweep: TTFT P95 against load (first repetition)"]
    names = {s["name"] for s in ttft.series}
    assert {"semantic cache in front", "prompt-hash cache in front", "prefix caching off (mechanism off)"} <= names
    assert "one long prefix repeated, caching off: knee" in names  # the one arm that saturated
    assert "Load sweep: Goodput (requests meeting the SLO per second) against load (first repetition)" in charts
    cap = tables["Load sweep: the highest load at the SLO per arm"]
    assert len(cap.rows) == 8 and cap.rows[0][0] == "prefix caching on" and "8" in str(cap.rows[0][1])
    buys = {r[0]: r for r in tables["What the hit rate buys"].rows}
    assert set(buys) == {"prefix", "instrument", "semantic"} and "2" in str(buys["prefix"][3])
    c3 = tables[
        "C3 against the curve: TTFT P95, semantic cache against the hash cache, at every load both ran steadily"
    ]
    # 4 and 16 req/s: at 8 the semantic arm's schedule ran late (an invalid point is left out)
    assert [r[0] for r in c3.rows] == [4.0, 16.0], c3.rows


def test_the_report_says_which_case_ran_fewer_repetitions_than_the_suite():
    """The local profile runs the sweep once (case_repetitions) and the other cases twice: the
    suite's header says so, instead of a bare "Repetitions: 2"."""
    from harness.publish.render import render_html

    rec = Record.from_json(json.loads((FIX / "sweep_local_record.json").read_text())["record"])
    suites = spec.load_all_suites()
    srun = suites["serving"].as_run("local", 2, {c.name: {} for c in suites["serving"].cases})
    run = RunData(Path("."), dict(HERE), [rec], {"serving": srun}, ledger_parse.load_claims(suites=suites))
    assert "Repetitions: 2 (sweep 1)." in render_html(run, analyze(run))
