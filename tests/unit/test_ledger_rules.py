"""The ledger's rules after issue 39, on small ledgers written here: every check says which
side is better, what observes it, and has both controls or the reason one cannot exist; a
direction bound lies past what its mechanism-off control tolerates; a band passed on its
better side is `exceeded`; a computed number that disagrees with its independent reference,
or whose reference was not measured, is `inconclusive`; an effect a cheaper stand-in gives as
well is `not attributable`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.base.errors import BadInput
from harness.base.paths import suite_spec
from harness.model import ledger, ledger_parse, spec
from harness.model.stored_run import Metric, Record, RunData
from harness.verdict.analysis import HOLDS, Outcome, analyze

BASE = (
    "suite: redis-cluster, case: redis-benchmark, metric: m, unit: x, observed: 'client timestamps', "
    "instrument: {metric: i, op: '>', value: 1, text: sees}"
)


def _ledger(tmp_path: Path, *checks: str):
    shutil.copy(suite_spec("redis-cluster"), tmp_path / "redis-cluster.yaml")
    body = "".join(f"      - {{{c}}}\n" for c in checks)
    (tmp_path / "claims.yaml").write_text(f"claims:\n  - id: C12\n    section: '2.5'\n    text: t\n    checks:\n{body}")
    return ledger_parse.load_claims(tmp_path)


def _verdict(tmp_path: Path, check: str, metrics: dict) -> tuple[Outcome, str, Outcome]:
    claims = _ledger(tmp_path, check)
    suites = {"redis-cluster": spec.load_suite_file(tmp_path / "redis-cluster.yaml")}
    srun = suites["redis-cluster"].as_run("local", 1, {c.name: {} for c in suites["redis-cluster"].cases})
    rec = Record(
        suite="redis-cluster",
        case="redis-benchmark",
        repetition=1,
        metrics={k: Metric(v, "") for k, v in metrics.items()},
    )
    a = analyze(RunData(Path("."), {}, [rec], {"redis-cluster": srun}, claims))
    cv = a.claims[0].checks[0]
    return cv.outcome, cv.reason, a.claims[0].outcome


@pytest.mark.parametrize(
    "check, message",
    [
        (f"{BASE}, op: '<', value: 2, no_mechanism_off: r", "field 'better' is missing"),
        (f"{BASE}, op: '<', value: 2, better: higher, no_mechanism_off: r", "contradicts op"),
        (f"{BASE}, op: '<', value: 2, better: sideways, no_mechanism_off: r", "is not one of higher, lower"),
        (f"{BASE}, op: '<', value: 2, better: lower", "no mechanism_off control; add one"),
        (f"{BASE}, op: '<', value: 2, better: lower, no_mechanism_off: r, no_instrument: r", "both instrument and"),
        (f"{BASE}, op: '<', value: 2, better: lower, no_mechanism_off: r, observed: ' '", "observed: empty"),
        (
            f"{BASE}, op: '>', value: 2, better: higher, direction: {{op: '>', value: 1}}, "
            "mechanism_off: {metric: plain.m, op: '<', value: 1.5, text: json}",
            "lies inside what the mechanism-off",
        ),
        (
            f"{BASE}, op: '>', value: 2, better: higher, direction: {{op: '<', value: 3}}, no_mechanism_off: r",
            "points away from the better side",
        ),
        (
            f"{BASE}, op: '>', value: 1, better: higher, "
            "mechanism_off: {metric: plain.m, op: '<', value: 1.5, text: json}",
            "value: > 1 lies inside what the mechanism-off",
        ),
        (
            f"{BASE}, op: '>', value: 2, better: higher, no_mechanism_off: r, reference: {{metric: r, tolerance: -1, "
            "text: t}",
            "tolerance: -1 is negative",
        ),
    ],
)
def test_a_check_that_breaks_a_rule_is_refused_with_its_fix(tmp_path, check, message):
    # the base has `observed` already: the empty-observed case overrides it (YAML keeps the last)
    with pytest.raises(BadInput, match=message):
        _ledger(tmp_path, check.replace("observed: 'client timestamps', ", "", "observed: ' '" in check))


def test_a_direction_bound_at_the_controls_tolerance_is_accepted(tmp_path):
    claims = _ledger(
        tmp_path,
        f"{BASE}, op: '>', value: 2, better: higher, direction: {{op: '>', value: 1.5}}, "
        "mechanism_off: {metric: plain.m, op: '<', value: 1.5, text: json}",
    )
    assert claims[0].checks[0].direction.value == 1.5


BAND = (
    f"{BASE}, band: [0.9, 1.1], band_reason: r, better: higher, direction: {{op: '>', value: 0.5}}, "
    "mechanism_off: {metric: plain.m, op: '<', value: 0.5, text: mechanism removed}"
)


@pytest.mark.parametrize(
    "measured, outcome",
    [(1.0, Outcome.REPRODUCED), (1.5, Outcome.EXCEEDED), (0.7, Outcome.DIRECTION), (0.2, Outcome.NOT_REPRODUCED)],
)
def test_a_band_judges_magnitude_and_its_better_side_is_exceeded(tmp_path, measured, outcome):
    got, reason, claim = _verdict(tmp_path, BAND, {"m": measured, "i": 5, "plain.m": 0.1})
    assert got is outcome, reason
    assert (claim in HOLDS) == (got in HOLDS)


def test_a_band_with_no_better_side_is_refuted_past_either_side(tmp_path):
    band = f"{BASE}, band: [0.9, 1.1], band_reason: r, better: neither, no_mechanism_off: r"
    for measured, outcome in ((1.0, Outcome.REPRODUCED), (1.5, Outcome.NOT_REPRODUCED), (0.5, Outcome.NOT_REPRODUCED)):
        assert _verdict(tmp_path, band, {"m": measured, "i": 5})[0] is outcome
    with pytest.raises(BadInput, match="has no direction"):
        _ledger(tmp_path, band + ", direction: {op: '>', value: 0.5}")
    with pytest.raises(BadInput, match="or neither for a band"):
        _ledger(tmp_path, f"{BASE}, op: '<', value: 2, better: neither, no_mechanism_off: r")


def test_a_band_on_the_lower_side_is_exceeded_below_it(tmp_path):
    band = BAND.replace("better: higher, direction: {op: '>', value: 0.5}", "better: lower").replace(
        "mechanism_off: {metric: plain.m, op: '<', value: 0.5, text: mechanism removed}", "no_mechanism_off: r"
    )
    assert _verdict(tmp_path, band, {"m": 0.5, "i": 5})[0] is Outcome.EXCEEDED
    assert _verdict(tmp_path, band, {"m": 1.5, "i": 5})[0] is Outcome.NOT_REPRODUCED


REF = (
    f"{BASE}, op: '<', value: 38, better: lower, no_mechanism_off: r, "
    "reference: {metric: ref.m, tolerance: 0.01, text: the pure-Python reference, not_code: a made-up ledger}"
)


@pytest.mark.parametrize(
    "metrics, outcome, words",
    [
        ({"m": 37.36, "ref.m": 37.36, "i": 5}, Outcome.REPRODUCED, "agrees within 0.01"),
        ({"m": 4.25, "ref.m": 37.36, "i": 5}, Outcome.INCONCLUSIVE, "differs by more than 0.01"),
        ({"m": 4.25, "i": 5}, Outcome.INCONCLUSIVE, "has no independent reference"),
        ({"m": 40.0, "ref.m": 40.0, "i": 5}, Outcome.NOT_REPRODUCED, "the claim needs"),
    ],
)
def test_a_computed_number_is_trusted_only_when_its_reference_agrees(tmp_path, metrics, outcome, words):
    got, reason, _ = _verdict(tmp_path, REF, metrics)
    assert got is outcome and words in reason, reason


STAND_IN = (
    f"{BASE}, op: '>', value: 10, better: higher, mechanism_off: {{metric: plain.m, op: '<', value: 1, "
    "text: exact hash}, stand_in: {metric: charsim, op: '<', than: m, factor: 0.8, text: char 4-grams, no_params: none, no_instrument: none}"
)


@pytest.mark.parametrize(
    "metrics, outcome",
    [
        ({"m": 20, "plain.m": 0, "charsim": 5, "i": 5}, Outcome.REPRODUCED),
        ({"m": 20, "plain.m": 0, "charsim": 19, "i": 5}, Outcome.NOT_ATTRIBUTABLE),
        ({"m": 20, "plain.m": 0, "i": 5}, Outcome.INCONCLUSIVE),
        ({"m": 20, "plain.m": 0, "charsim": 5, "i": 0}, Outcome.INCONCLUSIVE),
    ],
)
def test_an_effect_a_cheaper_stand_in_gives_too_is_not_attributable(tmp_path, metrics, outcome):
    got, reason, _ = _verdict(tmp_path, STAND_IN, metrics)
    assert got is outcome, reason
    if outcome is Outcome.NOT_ATTRIBUTABLE:
        assert "stand-in control (char 4-grams)" in reason


def test_a_missing_control_shows_its_reason(tmp_path):
    got, reason, _ = _verdict(
        tmp_path,
        f"{BASE}, op: '<', value: 2, better: lower, no_mechanism_off: 'a topology has no mechanism'",
        {"m": 1, "i": 5},
    )
    assert got is Outcome.REPRODUCED and "no mechanism-off control (a topology has no mechanism)" in reason


def test_the_projects_ledger_round_trips_through_results_json():
    for claim in ledger_parse.load_claims():
        for k in claim.checks:
            again = ledger.ClaimCheck.from_json(k.to_json())
            assert again == k, (claim.id, k.metric)
            assert (k.better in ledger.BETTER or (k.better == ledger.NEITHER and k.band)) and k.observed
            assert (k.instruments or k.no_instrument) and (k.mechanism_off or k.no_mechanism_off)
