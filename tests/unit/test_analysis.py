"""Verdicts, the claims ledger and comparisons on small synthetic runs with known answers."""

from pathlib import Path

import pytest

from harness.model.ledger import Claim
from harness.model.spec import SuiteRun
from harness.model.stored_run import Metric, Record, RunData
from harness.verdict.analysis import Outcome, Verdict, analyze
from harness.verdict.baseline import compare


def run_of(
    values: dict[str, list[float]], *, skipped_case=False, better="lower", claims=None, conditions=None
) -> RunData:
    recs = []
    for rep in range(1, 4):
        recs.append(
            Record(
                suite="s",
                case="c",
                repetition=rep,
                metrics={k: Metric(v[rep - 1], "ms", better) for k, v in values.items()},
            )
        )
    if skipped_case:
        recs.append(Record(suite="s", case="m", repetition=1, status="skipped", reason="tool not found"))
    thresholds = [
        {"case": "c", "metric": "lat", "op": "<", "value": 10, "unit": "ms", "reason": "r"},
        {"case": "c", "metric": "absent", "op": "<", "value": 10, "unit": "ms", "reason": "r"},
        {"case": "m", "metric": "ops", "op": ">", "value": 1, "unit": "ops/s", "reason": "r"},
    ]
    suite = SuiteRun.from_json(
        "s",
        {
            "thresholds": thresholds,
            "cases": [{"name": "c", "driver": "d"}, {"name": "m", "driver": "d"}],
            "conditions": conditions or {},
        },
    )
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
    run.records.append(Record(suite="s", case="c", repetition=4, status="failed", reason="server died"))
    assert analyze(run).exit_code == 3


INSTRUMENT = {"metric": "slow_lat", "op": ">", "than": "lat", "factor": 2, "text": "a known slower path"}
MECH_OFF = {"metric": "off_lat", "op": ">", "than": "lat", "factor": 2, "text": "the mechanism removed"}


def _claim(cid, check, **kw):
    return {"id": cid, "section": "1", "text": "t", "checks": [check] if check else [], **kw}


def test_claims_ledger_verdicts():
    chk = {"suite": "s", "case": "c", "metric": "lat", "instrument": [INSTRUMENT]}
    claims = [
        _claim("C1", {**chk, "op": "<", "value": 5}),
        _claim("C2", {**chk, "op": "<", "value": 50}),
        _claim("C3", {**chk, "suite": "other", "op": "<", "value": 5}),
        _claim("C4", None, not_measurable="needs a GPU"),
        _claim("C5", {"suite": "s", "case": "m", "metric": "ops", "op": ">", "value": 5, "instrument": INSTRUMENT}),
    ]
    a = analyze(run_of({"lat": [9.0, 10.0, 11.0], "slow_lat": [40.0, 41.0, 39.0]}, skipped_case=True, claims=claims))
    assert [c.outcome for c in a.claims] == [
        Outcome.NOT_REPRODUCED,
        Outcome.REPRODUCED,
        Outcome.NOT_RUN,
        Outcome.NOT_MEASURABLE,
        Outcome.NOT_MEASURED,
    ]
    assert "tool not found" in a.claims[4].checks[0].reason
    assert a.claims[1].checks[0].control_held is True and a.claims[1].checks[0].controls[0].reference == 20.0


# The verdict rule (DESIGN.md): a table of measured worlds and the verdict each must give.
# lat is the claimed effect's metric (claim: lat < 50), slow_lat the instrument's known slower
# path, off_lat the same workload with the mechanism removed.
WORLDS = [
    # (lat, slow_lat, off_lat, verdict)
    (10.0, 40.0, 40.0, Outcome.REPRODUCED),  # effect there, instrument sees, gone without the mechanism
    (10.0, 12.0, 40.0, Outcome.INCONCLUSIVE),  # the instrument is blind: nothing can be said
    (60.0, 150.0, 150.0, Outcome.NOT_REPRODUCED),  # instrument sees, claimed effect absent
    (60.0, 150.0, 61.0, Outcome.NOT_REPRODUCED),  # absent, and the mechanism changes nothing: still a no
    (10.0, 40.0, 11.0, Outcome.NOT_ATTRIBUTABLE),  # effect there just as much with the mechanism off
    (10.0, 40.0, None, Outcome.INCONCLUSIVE),  # effect there, mechanism-off control not measured
    (60.0, None, 150.0, Outcome.INCONCLUSIVE),  # instrument not measured: no verdict either way
]


@pytest.mark.parametrize("lat,slow,off,expected", WORLDS)
def test_the_verdict_rule(lat, slow, off, expected):
    check = {
        "suite": "s",
        "case": "c",
        "metric": "lat",
        "op": "<",
        "value": 50,
        "instrument": INSTRUMENT,
        "mechanism_off": MECH_OFF,
    }
    values = {"lat": [lat] * 3}
    if slow is not None:
        values["slow_lat"] = [slow] * 3
    if off is not None:
        values["off_lat"] = [off] * 3
    cv = analyze(run_of(values, claims=[_claim("C1", check)])).claims[0].checks[0]
    assert cv.outcome is expected, cv.reason
    if expected is Outcome.NOT_REPRODUCED:  # the measured value and the instrument's numbers are shown
        assert f"measured {lat:g}" in cv.reason and "instrument control" in cv.reason and "held" in cv.reason
    if expected is Outcome.INCONCLUSIVE and slow == 12.0:
        assert "did not hold" in cv.reason and "12 vs 20" in cv.reason
    if expected is Outcome.NOT_ATTRIBUTABLE:
        assert "without the mechanism" in cv.reason and "11 vs 20" in cv.reason


def test_a_refutation_is_never_turned_into_inconclusive_by_a_mechanism_off_control():
    """A check whose only control is mechanism-off: an absent effect is a no, not a shrug."""
    check = {"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 5, "mechanism_off": MECH_OFF}
    for off in (40.0, 9.0):  # the control holds / does not
        cv = (
            analyze(run_of({"lat": [10.0] * 3, "off_lat": [off] * 3}, claims=[_claim("C1", check)])).claims[0].checks[0]
        )
        assert cv.outcome is Outcome.NOT_REPRODUCED, (off, cv.reason)


def test_results_of_the_earlier_format_still_judge_their_one_control_first():
    """Stored results.json before controls had kinds: `control` is read as an instrument."""
    old = {
        "suite": "s",
        "case": "c",
        "metric": "lat",
        "op": "<",
        "value": 50,
        "control": {"metric": "slow_lat", "op": ">", "than": "lat", "factor": 2, "text": "old"},
    }
    cv = analyze(run_of({"lat": [10.0] * 3, "slow_lat": [12.0] * 3}, claims=[_claim("C1", old)])).claims[0].checks[0]
    assert cv.outcome is Outcome.INCONCLUSIVE and cv.controls[0].kind == "instrument"


def test_a_check_without_control_or_control_metric_is_inconclusive():
    claims = [
        _claim("C1", {"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 50}),
        _claim("C2", {"suite": "s", "case": "c", "metric": "lat", "op": "<", "value": 50, "instrument": INSTRUMENT}),
    ]
    a = analyze(run_of({"lat": [9.0, 10.0, 11.0]}, claims=claims))
    assert [c.outcome for c in a.claims] == [Outcome.INCONCLUSIVE, Outcome.INCONCLUSIVE]
    assert "no control" in a.claims[0].checks[0].reason and "not measured" in a.claims[1].checks[0].reason


@pytest.mark.parametrize(
    "lat,expected",
    [
        ([1.0, 1.0, 1.0], Outcome.REPRODUCED),  # inside [0.5, 2]
        ([4.0, 4.0, 4.0], Outcome.DIRECTION),  # outside the band, right sign
        ([-1.0, -1.0, -1.0], Outcome.NOT_REPRODUCED),  # wrong sign
    ],
)
def test_bands_and_direction(lat, expected):
    check = {
        "suite": "s",
        "case": "c",
        "metric": "lat",
        "band": [0.5, 2.0],
        "band_reason": "~1x, 2x either way",
        "direction": {"op": ">", "value": 0},
        "mechanism_off": {"metric": "off", "op": "<", "value": 0.1, "text": "off"},
    }
    a = analyze(run_of({"lat": lat, "off": [0.0, 0.0, 0.0]}, claims=[_claim("C1", check)]))
    assert a.claims[0].outcome is expected


def test_conditions_are_what_the_run_measured_not_what_the_profile_declares():
    check = {
        "suite": "s",
        "case": "c",
        "metric": "lat",
        "op": "<",
        "value": 1,
        "instrument": INSTRUMENT,
        "conditions": {"redis_hosts": 6, "loadgen_separate": True, "clients": 200, "gpu": "A100"},
    }
    values = {"lat": [9.0, 10.0, 11.0], "slow_lat": [40.0, 41.0, 39.0]}
    declared = {"redis_hosts": 6, "clients": 200, "gpu": "A100", "hosts": "6 hosts"}  # strings decide nothing
    run = run_of(values, claims=[_claim("C1", check)], conditions=declared)
    run.manifest = {
        "target_nodes": {"nodes": [{"host": "127.0.0.1", "port": 7000 + i, "role": "primary"} for i in range(6)]},
        "gpu": {"present": False},
        "host": {"cpu_logical": 2},
    }
    for r in run.records:
        r.params = {"clients": 50}
    cv = analyze(run).claims[0].checks[0]
    assert cv.outcome is Outcome.NOT_COMPARABLE
    for part in (
        "redis_hosts: measured 1 (this machine), claim 6",
        "clients: measured 50, claim 200",
        "gpu: measured none, claim A100",
        "loadgen_separate: measured no (load generator on this machine)",
    ):
        assert part in cv.reason, cv.reason
    run.manifest = {
        "target_nodes": {"nodes": [{"host": f"10.0.0.{i}", "port": 6379, "role": "primary"} for i in range(1, 7)]},
        "loadgen": {"address": "10.0.0.9"},
        "host_identity": {
            a: {"boot_id": f"{i:08x}-0000-4000-8000-{i:012x}"}
            for i, a in enumerate([*(f"10.0.0.{j}" for j in range(1, 7)), "10.0.0.9"], 1)
        },
        "gpu": {"present": True, "gpus": [{"name": "NVIDIA A100-SXM4-80GB"}]},
    }
    for r in run.records:
        r.params = {"clients": 200}
    assert analyze(run).claims[0].checks[0].outcome is Outcome.NOT_REPRODUCED


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
    from harness.verdict.display import fmt

    assert [fmt(v) for v in (347.0, 123.45, 1092.0, 12.0, 0.863, 0.0, None)] == [
        "347",
        "123.5",
        "1,092",
        "12",
        "0.863",
        "0",
        "-",
    ]


def test_a_metric_the_case_says_it_could_not_measure_gives_its_reason_hostile_text_bounded():
    """A case that knows why a claimed metric is absent says so (details.absent_metrics): the
    'not measured' reason carries it, bounded and made printable (it comes from a stored file);
    a case that said nothing, or said it in the wrong type, gives the bare 'no metric'."""
    claims = [
        _claim("C1", {"suite": "s", "case": "c", "metric": "gain", "op": ">", "value": 1, "instrument": INSTRUMENT})
    ]
    run = run_of({"lat": [1.0, 1.0, 1.0], "slow_lat": [9.0, 9.0, 9.0]}, claims=claims)
    assert analyze(run).claims[0].checks[0].reason == "c: no metric gain"
    run.records[1].details = {"absent_metrics": {"gain": ["a list"]}}
    assert analyze(run).claims[0].checks[0].reason == "c: no metric gain"
    run.records[0].details = {"absent_metrics": {"gain": "neither arm held the SLO\x1b[31m at 4 req/s" + "x" * 5000}}
    cv = analyze(run).claims[0].checks[0]
    assert cv.outcome is Outcome.NOT_MEASURED
    assert cv.reason.startswith("c: no metric gain: neither arm held the SLO") and "\x1b" not in cv.reason
    assert len(cv.reason) < 1500, len(cv.reason)
