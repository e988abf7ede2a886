"""The harness's own heavy paths on a large results folder (pytest-benchmark): loading,
analysis, report rendering, the history of 30 runs, step detection, and the tool parsers.

Runs only with `make bench` (--benchmark-enable): each run is autosaved under .benchmarks/
and compared with the last saved one; a median more than BENCH_FAIL (25%) slower fails.
The normal test run skips these (the project's pytest options disable benchmarks) before
building anything.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.model.spec import SuiteRun
from harness.model.stored_run import Metric, Record, Series, load_run, write_manifest, write_results
from harness.verdict.analysis import analyze

SUITES, CASES, REPS, METRICS, ROWS = 8, 10, 5, 40, 200
FIX = Path(__file__).resolve().parent.parent / "fixtures"


def _skip_unless_enabled(benchmark):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")


def _write_big_run(
    d: Path,
    rnd: random.Random,
    suites=SUITES,
    cases=CASES,
    reps=REPS,
    metrics=METRICS,
    rows=ROWS,
    started=1_767_225_600,
) -> Path:
    from tests.stored_runs import facts

    (d / "raw").mkdir(parents=True)
    write_manifest(
        d,
        {
            "run_id": d.name,
            "profile": "local",
            "target": "local",
            "started": started,
            "ended": started + 600,
            **facts(),
        },
    )
    recs, runs = [], {}
    for s in range(suites):
        name = f"suite{s}"
        runs[name] = SuiteRun.from_json(
            name,
            {
                "cases": [{"name": f"case{c}", "driver": "d"} for c in range(cases)],
                "thresholds": [
                    {"case": f"case{c}", "metric": "m0.p99_ms", "op": "<", "value": 50, "unit": "ms", "reason": "r"}
                    for c in range(cases)
                ],
            },
        )
        for c in range(cases):
            for rep in range(1, reps + 1):
                ms = {f"m{k}.p99_ms": Metric(10 + k + rnd.random(), "ms", "lower") for k in range(metrics)}
                series = {
                    "timeline": Series(
                        {"second": list(range(rows)), "ops": [1000 + rnd.random() * 50 for _ in range(rows)]},
                        {"ops": "ops/s"},
                    )
                }
                recs.append(Record(suite=name, case=f"case{c}", repetition=rep, metrics=ms, series=series))
    write_results(d, recs, runs, [])
    return d


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    return _write_big_run(tmp_path_factory.mktemp("big") / "20260101-000000-big", random.Random(1))


@pytest.fixture(scope="module")
def thirty_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hist")
    rnd = random.Random(2)
    for i in range(30):
        _write_big_run(
            root / f"20260101-{i:06d}-r",
            rnd,
            suites=3,
            cases=5,
            reps=3,
            metrics=10,
            rows=20,
            started=1_767_225_600 + i * 86400,
        )
    return root


def test_load_results_folder(benchmark, request):
    _skip_unless_enabled(benchmark)
    d = request.getfixturevalue("big_run")
    data = benchmark.pedantic(load_run, args=(d,), rounds=5, iterations=1)
    assert len(data.records) == SUITES * CASES * REPS


def test_analyze(benchmark, request):
    _skip_unless_enabled(benchmark)
    data = load_run(request.getfixturevalue("big_run"))
    a = benchmark.pedantic(analyze, args=(data,), rounds=5, iterations=1)
    assert len(a.metrics) == SUITES * CASES * METRICS and len(a.thresholds) == SUITES * CASES


def test_render_report(benchmark, request):
    from harness.publish.render import render_html

    _skip_unless_enabled(benchmark)
    data = load_run(request.getfixturevalue("big_run"))
    a = analyze(data)
    html = benchmark.pedantic(render_html, args=(data, a), rounds=3, iterations=1)
    assert html.count("<table") > SUITES * CASES


def test_history_of_thirty_runs(benchmark, request):
    from harness.publish.history_page import render_history
    from harness.verdict.metric_history import build_history, find_runs, load_runs

    _skip_unless_enabled(benchmark)
    root = request.getfixturevalue("thirty_runs")

    def go():
        data = build_history(load_runs(find_runs(root)))
        return data, render_history(data, str(root))

    data, html = benchmark.pedantic(go, rounds=3, iterations=1)
    assert len(data["runs"]) == 30 and html.count("<svg") == 3 * 5 * 10


def test_step_detection_300_points(benchmark):
    from harness.verdict.stepdetect import detect_steps

    _skip_unless_enabled(benchmark)
    rnd = random.Random(3)
    y = [100 * (1 + rnd.gauss(0, 0.02)) * (1.3 if i >= 200 else 1) for i in range(300)]
    steps = benchmark.pedantic(detect_steps, args=(y,), rounds=3, iterations=1)
    assert [s.index for s in steps] == [200]


def test_parse_memtier_and_pool_histograms(benchmark):
    from harness.infra.load_tools.memtier import parse_files, pooled_percentiles

    _skip_unless_enabled(benchmark)
    texts = [(FIX / "memtier" / n).read_text() for n in ("cluster_ratio1-1.json", "cluster_ratio1-10_runcount2.json")]

    def go():
        parsed = [parse_files(t) for t in texts * 5]
        enc = [
            p.sections[n].histograms["Totals"] for p in parsed for n in p.sections if n != p.chosen or n == "ALL STATS"
        ]
        return pooled_percentiles(enc)

    pooled, n = benchmark(go)
    assert pooled and n > 0


def test_parse_redis_benchmark(benchmark):
    from harness.infra.load_tools.redis_benchmark import parse_csv

    _skip_unless_enabled(benchmark)
    text = (FIX / "redis-benchmark" / "cluster_get_set.stdout").read_text()
    rows = benchmark(parse_csv, text)
    assert rows
