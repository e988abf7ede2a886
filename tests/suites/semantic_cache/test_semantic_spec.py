"""The semantic-cache spec and ledger: the lab-a100 profile carries the source's numbers as
the ledger's bands, every check of the suite has an instrument control, and helpers that give
the ledger's verdicts of a real case outcome (the tests that remove a mechanism or break an
instrument use them on real runs)."""

from pathlib import Path

import yaml

from harness.base.paths import SUITES_DIR, suite_spec
from harness.model import spec
from harness.model.stored_run import Metric, Record, RunData
from harness.verdict.analysis import analyze
from tests.ledger_helpers import HERE, LAB, as_a_run, ledger

SUITE = "semantic-cache"


def _suite():
    return spec.load_suite_file(suite_spec("semantic-cache"))


def verdicts_of(
    claim_id: str,
    case: str,
    out,
    *,
    params: dict | None = None,
    facts: dict | None = None,
    manifest: dict | None = None,
    drop: tuple[str, ...] = (),
) -> dict:
    """The ledger's real checks of `claim_id` on `case`, judged by harness.verdict.analysis.analyze on a
    RunData holding one record of the real Record `out` (its metrics, series and facts;
    `facts` overrides some, `drop` leaves metrics out), on this machine's measured facts
    (HERE) unless `manifest` says otherwise: {metric: CheckVerdict}."""
    suites, claims = ledger()
    suite = suites[SUITE]
    srun = suite.as_run("local", 1, {c.name: {} for c in suite.cases})
    params, man = as_a_run(claims, SUITE, case, params, manifest)
    rec = Record(
        suite=SUITE,
        case=case,
        repetition=1,
        metrics={k: v for k, v in out.metrics.items() if k not in drop},
        series=dict(out.series),
        params=params,
        facts={**out.facts, **(facts or {})},
    )
    run = RunData(Path("."), man, [rec], {SUITE: srun}, claims)
    claim = next(c for c in analyze(run).claims if c.id == claim_id)
    return {cv.check.metric: cv for cv in claim.checks if cv.check.case == case}


def check_verdict(
    claim_id: str,
    case: str,
    metric: str,
    values: dict[str, float],
    tmp_path: Path = None,
    profile: str = "local",
    manifest: dict | None = None,
):
    """The verdict of the ledger's check on `metric`, for a run whose case measured `values`."""
    from harness.model.driver_contract import Record

    out = Record("ok", metrics={k: Metric(v, "") for k, v in values.items()})
    return verdicts_of(claim_id, case, out, manifest=LAB if profile == "lab-a100" else manifest)[metric]


def test_lab_profile_carries_the_source_numbers_as_the_ledgers_bands():
    s = _suite()
    lab = s.profile("lab-a100")
    assert lab.skipped_fails is True and s.profile("local").skipped_fails is False
    assert lab.conditions["gpu"] == "A100"
    limits = {(t.case, t.metric): (t.value, t.high) for t in lab.thresholds}
    assert all(t.op == "in" for t in lab.thresholds)  # a point is a band: c7 uniform <= 0.51 would pass 0.4
    raw = yaml.safe_load((SUITES_DIR / "claims.yaml").read_text())
    bands = {
        (chk["case"], chk["metric"]): tuple(chk["band"])
        for c in raw["claims"]
        for chk in c.get("checks", [])
        if chk["suite"] == SUITE and "band" in chk
    }
    for key, band in limits.items():
        assert bands.get(key) == band, key  # the same band as the ledger's check of that metric
    for want in [
        ("semantic", "hash.correct_hit_rate_pct"),
        ("semantic", "lsh.net_hit_rate_pct"),
        ("ttft", "hash_cache.p95_ms"),
        ("ttft", "semantic_cache.p95_ms"),
        ("memory", "memory.gpu_change_pct"),
        ("semantic", "c7.uniform_tokens.threshold"),
        ("semantic", "c7.periodic_tokens.threshold"),
        ("semantic", "c7.static_loss_pct"),
        ("entity-keys", "token.correct_hit_rate_pct"),
        ("entity-keys", "entity.correct_hit_rate_pct"),
        ("entity-keys", "static_batch_token_key.added_ms_mean"),
        ("entity-keys", "dynamic_batch_entity_key.added_ms_mean"),
    ]:
        assert want in limits, want
    ttft = s.case_params(s.case("ttft"), "lab-a100")
    assert ttft["queries"] >= 200 and ttft["device"] == "cuda"  # a P95 over at least 200 samples per mode
    assert s.case_params(s.case("entity-keys"), "lab-a100")["max_wait_ms"] == 5
    assert s.case_params(s.case("semantic"), "lab-a100")["c7_static_threshold"] == 0.75
    assert s.case_params(s.case("semantic"), "lab-a100")["dataset_rows"] == 0  # the whole data set
    assert all(t.reason for p in s.profiles.values() for t in p.thresholds)


def test_every_check_of_the_suite_has_an_instrument_and_two_sided_claims_a_band():
    _, claims = ledger()
    checks = [(c.id, chk) for c in claims for chk in c.checks if chk.suite == SUITE]
    assert {cid for cid, _ in checks} == {"C2", "C3", "C4", "C7", "C16", "I24"}
    for cid, chk in checks:
        assert chk.instruments and all(c.text for c in chk.controls), (cid, chk.metric)
        if chk.band is not None:
            assert chk.band_reason, (cid, chk.metric)
    raw = yaml.safe_load((SUITES_DIR / "claims.yaml").read_text())
    figures = {c["id"]: c.get("figures", {}) for c in raw["claims"]}
    assert figures["C3"]["p95_ms"] == [428, 211] and figures["C4"]["gpu_change_pct"] == -39


def test_the_gpu_checks_are_comparable_only_where_the_run_measured_an_a100():
    """The profile's declared conditions decide nothing: the manifest's measured GPU does."""
    values = {"semantic_cache.p95_ms": 200.0, "no_cache.p95_ms": 900.0, "oracle_cache.p95_ms": 20.0}
    here = check_verdict("C3", "ttft", "semantic_cache.p95_ms", values, profile="lab-a100", manifest=HERE)
    assert (
        str(check_verdict("C3", "ttft", "semantic_cache.p95_ms", values, manifest=HERE).outcome)
        == "not comparable here"
        and "gpu: measured none" in check_verdict("C3", "ttft", "semantic_cache.p95_ms", values, manifest=HERE).reason
    )
    assert str(here.outcome) == "reproduced"  # profile lab-a100 in the helper means: the LAB manifest
    blind = {**values, "oracle_cache.p95_ms": 800.0}  # the oracle as slow as the model: the instrument is blind
    assert (
        str(check_verdict("C3", "ttft", "semantic_cache.p95_ms", blind, profile="lab-a100").outcome) == "inconclusive"
    )
