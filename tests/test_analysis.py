"""Verdicts, the claims ledger and comparisons on small synthetic runs with known answers."""

from pathlib import Path

import pytest

from harness.analysis import Outcome, Verdict, analyze
from harness.compare import compare
from harness.results import Metric, Record, RunData
from harness.spec import Claim, SuiteRun


def run_of(values: dict[str, list[float]], *, skipped_case=False, better="lower", claims=None,
           conditions=None) -> RunData:
    recs = []
    for rep in range(1, 4):
        recs.append(Record("s", "c", rep, "ok", metrics={k: Metric(v[rep - 1], "ms", better) for k, v in values.items()}))
    if skipped_case:
        recs.append(Record("s", "m", 1, "skipped", "tool not found"))
    thresholds = [{"case": "c", "metric": "lat", "op": "<", "value": 10, "unit": "ms", "reason": "r"},
                  {"case": "c", "metric": "absent", "op": "<", "value": 10, "unit": "ms", "reason": "r"},
                  {"case": "m", "metric": "ops", "op": ">", "value": 1, "unit": "ops/s", "reason": "r"}]
    suite = SuiteRun.from_json("s", {"thresholds": thresholds, "cases": [{"name": "c", "driver": "d"},
                                                                          {"name": "m", "driver": "d"}],
                                     "conditions": conditions or {}})
    return RunData(Path("."), {}, recs, {"s": suite}, [Claim.from_json(c) for c in (claims or [])])


def test_median_decides_missing_fails_skipped_does_not():
    a = analyze(run_of({"lat": [9.0, 11.0, 9.5]}, skipped_case=True))
    v = {t.metric: t.verdict for t in a.thresholds}
    assert v == {"lat": Verdict.PASS, "absent": Verdict.MISSING, "ops": Verdict.SKIPPED}
    assert a.exit_code == 1 and "absent" in a.exit_reason
    m = a.metric("s", "c", "lat")
    assert (m.median, m.min, m.max) == (9.5, 9.0, 11.0) and m.noisy  # spread 2/9.5 > 10%


def test_failed_record_is_an_environment_failure():
    run = run_of({"lat": [1.0, 1.0, 1.0]})
    run.records.append(Record("s", "c", 4, "failed", "server died"))
    assert analyze(run).exit_code == 3


CONTROL = {"metric": "control_lat", "op": ">", "than": "lat", "factor": 2, "text": "mechanism off"}


def _claim(cid, check, **kw):
    return {"id": cid, "section": "1", "text": "t", "checks": [check] if check else [], **kw}


def test_claims_ledger_verdicts():
    chk = {"suite": "s", "case": "c", "metric": "lat", "control": CONTROL}
    claims = [_claim("C1", {**chk, "op": "<", "value": 5}),
              _claim("C2", {**chk, "op": "<", "value": 50}),
              _claim("C3", {**chk, "suite": "other", "op": "<", "value": 5}),
              _claim("C4", None, not_measurable="needs a GPU"),
              _claim("C5", {"suite": "s", "case": "m", "metric": "ops", "op": ">", "value": 5, "control": CONTROL})]
    a = analyze(run_of({"lat": [9.0, 10.0, 11.0], "control_lat": [40.0, 41.0, 39.0]}, skipped_case=True, claims=claims))
    assert [c.outcome for c in a.claims] == [Outcome.NOT_REPRODUCED, Outcome.REPRODUCED, Outcome.NOT_RUN,
                                            Outcome.NOT_MEASURABLE, Outcome.NOT_MEASURED]
    assert "tool not found" in a.claims[4].checks[0].reason
    assert a.claims[1].checks[0].control_held is True and a.claims[1].checks[0].control_reference == 20.0


@pytest.mark.parametrize("control_values,expected", [
    ([40.0, 41.0, 39.0], Outcome.REPRODUCED),   # the control differs as stated: the check counts
    ([12.0, 11.0, 10.0], Outcome.INCONCLUSIVE),  # mechanism off looks the same: nothing was shown
])
def test_a_check_counts_only_when_its_control_differs(control_values, expected):
    claims = [_claim("C1", {"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 50, "control": CONTROL})]
    a = analyze(run_of({"lat": [9.0, 10.0, 11.0], "control_lat": control_values}, claims=claims))
    assert a.claims[0].outcome is expected
    if expected is Outcome.INCONCLUSIVE:
        assert "did not differ" in a.claims[0].checks[0].reason


def test_a_check_without_control_or_control_metric_is_inconclusive():
    claims = [_claim("C1", {"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 50}),
              _claim("C2", {"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 50, "control": CONTROL})]
    a = analyze(run_of({"lat": [9.0, 10.0, 11.0]}, claims=claims))
    assert [c.outcome for c in a.claims] == [Outcome.INCONCLUSIVE, Outcome.INCONCLUSIVE]
    assert "no control" in a.claims[0].checks[0].reason and "not measured" in a.claims[1].checks[0].reason


@pytest.mark.parametrize("lat,expected", [
    ([1.0, 1.0, 1.0], Outcome.REPRODUCED),          # inside [0.5, 2]
    ([4.0, 4.0, 4.0], Outcome.DIRECTION),           # outside the band, right sign
    ([-1.0, -1.0, -1.0], Outcome.NOT_REPRODUCED),   # wrong sign
])
def test_bands_and_direction(lat, expected):
    check = {"suite": "s", "case": "c", "metric": "lat", "band": [0.5, 2.0], "band_reason": "~1x, 2x either way",
             "direction": {"op": ">", "value": 0}, "control": {"metric": "off", "op": "<", "value": 0.1, "text": "off"}}
    a = analyze(run_of({"lat": lat, "off": [0.0, 0.0, 0.0]}, claims=[_claim("C1", check)]))
    assert a.claims[0].outcome is expected


def test_different_conditions_are_not_comparable_not_a_refutation():
    check = {"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 1, "control": CONTROL,
             "conditions": {"hosts": "6 hosts", "clients": 200}}
    values = {"lat": [9.0, 10.0, 11.0], "control_lat": [40.0, 41.0, 39.0]}
    a = analyze(run_of(values, claims=[_claim("C1", check)], conditions={"hosts": "one 2-core VM", "clients": 50}))
    assert a.claims[0].outcome is Outcome.NOT_COMPARABLE
    assert "hosts: here one 2-core VM, claim 6 hosts" in a.claims[0].checks[0].reason
    same = analyze(run_of(values, claims=[_claim("C1", check)], conditions={"hosts": "6 hosts", "clients": 200}))
    assert same.claims[0].outcome is Outcome.NOT_REPRODUCED


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
    from harness.report.format import fmt

    assert [fmt(v) for v in (347.0, 123.45, 1092.0, 12.0, 0.863, 0.0, None)] == \
        ["347", "123.5", "1,092", "12", "0.863", "0", "-"]
