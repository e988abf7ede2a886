"""`harness history` over 3,000 stored runs (pytest-benchmark; `make bench`).

Issue 25: 1,000 runs took 27 s and 3,000 did not finish in 150 s. The cost was the exact
step fit (every segment's cost: O(n^2 log n) a metric, seconds a metric at 3,000 runs);
histories longer than stepdetect.EXACT_MAX are now fitted as asv does (windowed, then
merged). Here: 3,000 runs of 24 metrics each, written through the real results writer,
loaded, analysed, fitted and rendered; the cost per run must stay far below the 30 ms the
issue names as the bound, and a step put into the history must be found where it is.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.model.spec import SuiteRun
from harness.model.stored_run import Metric, Record, write_manifest, write_results

RUNS, METRICS, REPS, STEP_AT = 3000, 24, 3, 2000
BOUND_S_PER_RUN = 0.030


def _skip_unless_enabled(benchmark):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")


@pytest.fixture(scope="module")
def long_history(tmp_path_factory) -> Path:
    from tests.stored_runs import facts

    root = tmp_path_factory.mktemp("history3000")
    rnd = random.Random(25)
    srun = SuiteRun.from_json(
        "kv",
        {
            "cases": [{"name": "bench", "driver": "d", "params": {"clients": 50}}],
            "thresholds": [
                {"case": "bench", "metric": "m0.p99_ms", "op": "<", "value": 50, "unit": "ms", "reason": "r"}
            ],
        },
    )
    man = facts()
    for i in range(RUNS):
        d = root / f"run{i:05d}"
        (d / "raw").mkdir(parents=True)
        started = 1_700_000_000 + i * 3600
        write_manifest(
            d,
            {
                "run_id": d.name,
                "profile": "local",
                "target": "local",
                "suites": ["kv"],
                "started": started,
                "ended": started + 60,
                **man,
            },
        )
        level = 1.3 if i >= STEP_AT else 1.0  # m0 steps up by 30% at run STEP_AT
        recs = [
            Record(
                suite="kv",
                case="bench",
                repetition=rep,
                metrics={
                    f"m{k}.p99_ms": Metric(
                        (10 + k) * (level if k == 0 else 1.0) * (1 + rnd.gauss(0, 0.01)), "ms", "lower"
                    )
                    for k in range(METRICS)
                },
            )
            for rep in range(1, REPS + 1)
        ]
        write_results(d, recs, {"kv": srun}, [])
    return root


def test_history_of_3000_runs(benchmark, request):
    _skip_unless_enabled(benchmark)
    from harness.publish.history_page import write_history

    root = request.getfixturevalue("long_history")
    out = root.parent / "history-out"
    html, js = benchmark.pedantic(write_history, args=(root, out), rounds=1, iterations=1)
    import json

    data = json.loads(js.read_text())
    assert len(data["runs"]) == RUNS and len(data["metrics"]) == METRICS
    m0 = next(m for m in data["metrics"] if m["metric"] == "m0.p99_ms")
    assert [s["run"] for s in m0["steps"]] == [STEP_AT + 1]  # runs count from 1
    assert all(not m["steps"] for m in data["metrics"] if m["metric"] != "m0.p99_ms")
    per_run = benchmark.stats.stats.median / RUNS
    assert per_run < BOUND_S_PER_RUN, f"{per_run * 1000:.1f} ms a run"
