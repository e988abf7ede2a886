"""Verdicts, the claims ledger and comparisons on small synthetic runs with known answers."""

from pathlib import Path

from harness.analysis import analyze
from harness.compare import compare
from harness.drivers import Metric
from harness.results import Record, RunData


def run_of(values: dict[str, list[float]], *, skipped_case=False, better="lower", claims=None) -> RunData:
    recs = []
    for rep in range(1, 4):
        recs.append(Record("s", "c", rep, "ok", metrics={k: Metric(v[rep - 1], "ms", better) for k, v in values.items()}))
    if skipped_case:
        recs.append(Record("s", "m", 1, "skipped", "tool not found"))
    thresholds = [{"case": "c", "metric": "lat", "op": "<", "value": 10, "unit": "ms", "reason": "r"},
                  {"case": "c", "metric": "absent", "op": "<", "value": 10, "unit": "ms", "reason": "r"},
                  {"case": "m", "metric": "ops", "op": ">", "value": 1, "unit": "ops/s", "reason": "r"}]
    return RunData(Path("."), {}, recs, {"s": {"thresholds": thresholds}}, claims or [])


def test_median_decides_missing_fails_skipped_does_not():
    a = analyze(run_of({"lat": [9.0, 11.0, 9.5]}, skipped_case=True))
    v = {t.metric: t.verdict for t in a.thresholds}
    assert v == {"lat": "pass", "absent": "missing", "ops": "skipped"}
    assert a.exit_code == 1 and "absent" in a.exit_reason
    m = a.metric("s", "c", "lat")
    assert (m.median, m.min, m.max) == (9.5, 9.0, 11.0) and m.noisy  # spread 2/9.5 > 10%


def test_failed_record_is_an_environment_failure():
    run = run_of({"lat": [1.0, 1.0, 1.0]})
    run.records.append(Record("s", "c", 4, "failed", "server died"))
    assert analyze(run).exit_code == 3


def test_claims_ledger_verdicts():
    claims = [{"id": "C1", "section": "1", "text": "t", "checks": [{"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 5}]},
              {"id": "C2", "section": "1", "text": "t", "checks": [{"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 50}]},
              {"id": "C3", "section": "1", "text": "t", "checks": [{"suite": "other", "case": "c", "metric": "lat", "op": "<", "value": 5}]},
              {"id": "C4", "section": "1", "text": "t", "checks": [], "not_measurable": "needs a GPU"},
              {"id": "C5", "section": "1", "text": "t", "checks": [{"suite": "s", "case": "m", "metric": "ops", "op": ">", "value": 5}]}]
    a = analyze(run_of({"lat": [9.0, 10.0, 11.0]}, skipped_case=True, claims=claims))
    assert [c.verdict for c in a.claims] == ["not reproduced", "reproduced", "not run", "not measurable here", "not measured"]
    assert "tool not found" in a.claims[4].note


def test_compare_needs_size_and_separation():
    base = analyze(run_of({"lat": [10.0, 10.2, 9.9], "tput": [100.0, 101.0, 99.0]}))
    slower = analyze(run_of({"lat": [12.0, 12.1, 11.9], "tput": [100.5, 99.5, 100.0]}))
    rows = {r["metric"]: r for r in compare(base, slower)}
    assert rows["lat"]["regression"] and rows["lat"]["change"].startswith("+")
    assert rows["tput"]["assessment"] == "no change"
    overlapping = analyze(run_of({"lat": [9.0, 13.0, 11.0]}))
    assert compare(base, overlapping)[0]["assessment"] in ("within noise", "no change")
    faster = analyze(run_of({"lat": [8.0, 8.1, 7.9]}))
    assert compare(base, faster)[0]["assessment"].startswith("improvement")


def test_numbers_for_people():
    from harness.analysis import fmt

    assert [fmt(v) for v in (347.0, 123.45, 1092.0, 12.0, 0.863, 0.0, None)] == \
        ["347", "123.5", "1,092", "12", "0.863", "0", "-"]
