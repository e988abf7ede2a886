"""The semantic-cache spec and ledger: the lab-a100 profile carries the source's numbers
verbatim, and a helper that gives the ledger's verdict of one check on given metrics (the
tests that disable a mechanism use it to show that the check's outcome changes)."""

from pathlib import Path

import pytest
import yaml

from harness import spec
from harness.analysis import analyze
from harness.paths import SUITES_DIR
from harness.results import Metric, Record, RunData
from harness.spec import SuiteRun

SUITE = "semantic-cache"


def _suite():
    return spec.load_suite_file(SUITES_DIR / "semantic-cache.yaml")


def check_verdict(claim_id: str, case: str, metric: str, values: dict[str, float], tmp_path: Path,
                  profile: str = "local"):
    """The verdict of the ledger's check on `metric` of claim `claim_id`, for one run whose
    case `case` measured `values` (three equal repetitions) under `profile`'s conditions."""
    raw = yaml.safe_load((SUITES_DIR / "claims.yaml").read_text())
    mine = [c for c in raw["claims"] if c["id"] == claim_id]
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump({"claims": mine}))
    suite = _suite()
    claims = spec.load_claims(tmp_path, suites={SUITE: suite})
    recs = [Record(SUITE, case, rep, "ok", metrics={k: Metric(v, "", None) for k, v in values.items()})
            for rep in (1, 2, 3)]
    run = SuiteRun.from_json(SUITE, {"cases": [{"name": c.name, "driver": c.driver} for c in suite.cases],
                                     "conditions": suite.profile(profile).conditions})
    a = analyze(RunData(Path("."), {}, recs, {SUITE: run}, claims))
    return next(cv for c in a.claims for cv in c.checks if cv.check.metric == metric and cv.check.case == case)


@pytest.fixture
def ledger_verdict(tmp_path):
    def verdict(claim_id, case, metric, values, profile="local"):
        return check_verdict(claim_id, case, metric, values, tmp_path, profile)

    return verdict


def test_lab_profile_carries_the_source_numbers_verbatim():
    s = _suite()
    lab = s.profile("lab-a100")
    assert lab.skipped_fails is True and s.profile("local").skipped_fails is False
    assert lab.conditions["gpu"] == "A100"
    limits = {(t.case, t.metric, t.op, t.value) for t in lab.thresholds}
    for want in [("semantic", "hash.correct_hit_rate_pct", ">=", 31.2),
                 ("semantic", "lsh.correct_hit_rate_pct", ">=", 67.8),
                 ("ttft", "hash_cache.p95_ms", "<=", 428), ("ttft", "semantic_cache.p95_ms", "<=", 211),
                 ("memory", "memory.gpu_change_pct", "<=", -39),
                 ("semantic", "c7.uniform_tokens.threshold", "<=", 0.51),
                 ("semantic", "c7.periodic_tokens.threshold", ">=", 0.82),
                 ("semantic", "c7.static_loss_pct", ">=", 32),
                 ("entity-keys", "token.correct_hit_rate_pct", ">=", 42),
                 ("entity-keys", "entity.correct_hit_rate_pct", ">=", 89),
                 ("entity-keys", "static_batch_token_key.added_ms_mean", "<=", 18),
                 ("entity-keys", "dynamic_batch_entity_key.added_ms_mean", "<=", 2.3)]:
        assert want in limits, want
    ttft = s.case_params(s.case("ttft"), "lab-a100")
    assert ttft["queries"] >= 200 and ttft["device"] == "cuda"  # a P95 over at least 200 samples per mode
    assert s.case_params(s.case("entity-keys"), "lab-a100")["max_wait_ms"] == 5
    assert s.case_params(s.case("semantic"), "lab-a100")["c7_static_threshold"] == 0.75
    assert s.case_params(s.case("semantic"), "lab-a100")["dataset_rows"] == 0  # the whole data set
    assert all(t.reason for p in s.profiles.values() for t in p.thresholds)


def test_every_ledger_check_of_the_suite_has_a_control_and_two_sided_claims_a_band():
    raw = yaml.safe_load((SUITES_DIR / "claims.yaml").read_text())
    checks = [(c["id"], chk) for c in raw["claims"] for chk in c.get("checks", []) if chk["suite"] == SUITE]
    assert {cid for cid, _ in checks} == {"C2", "C3", "C4", "C7", "C16"}
    for cid, chk in checks:
        assert chk.get("control", {}).get("text"), (cid, chk["metric"])
        if "band" in chk:
            assert chk["band_reason"], (cid, chk["metric"])
    figures = {c["id"]: c.get("figures", {}) for c in raw["claims"]}
    assert figures["C3"]["p95_ms"] == [428, 211] and figures["C4"]["gpu_change_pct"] == -39


def test_lab_conditions_make_the_gpu_checks_comparable_and_local_ones_not(ledger_verdict):
    values = {"semantic_cache.p95_ms": 200.0, "no_cache.p95_ms": 900.0}
    assert str(ledger_verdict("C3", "ttft", "semantic_cache.p95_ms", values).outcome) == "not comparable here"
    assert str(ledger_verdict("C3", "ttft", "semantic_cache.p95_ms", values, "lab-a100").outcome) == "reproduced"
    cache_off = {**values, "semantic_cache.p95_ms": 900.0}  # the cache never hits: as slow as no cache
    assert str(ledger_verdict("C3", "ttft", "semantic_cache.p95_ms", cache_off, "lab-a100").outcome) == "inconclusive"


def _checks():
    raw = yaml.safe_load((SUITES_DIR / "claims.yaml").read_text())
    return [(c["id"], chk) for c in raw["claims"] for chk in c.get("checks", []) if chk["suite"] == SUITE]


@pytest.mark.parametrize("claim_id, chk", _checks(), ids=lambda x: x if isinstance(x, str) else x["metric"])
def test_each_check_turns_inconclusive_when_the_mechanism_is_removed(claim_id, chk, tmp_path):
    """With the mechanism on (a value inside the claim, the control clearly apart) the check
    gives a verdict; with it removed (the measurement falls to the control's level) the same
    check is inconclusive. Run under the lab profile, whose conditions match the claims'."""
    ctl = chk["control"]
    measured = sum(chk["band"]) / 2 if "band" in chk else chk["value"] * (1.1 if chk["op"].startswith(">") else 0.9)
    than = ctl.get("than", chk["metric"])
    base = measured if than == chk["metric"] else 100.0  # a control judged against another metric of the run
    ref = base * ctl.get("factor", 1.0)
    if ctl["op"].startswith("<"):
        control = 0.0 if ref > 0 else ref - abs(ref) - 1
    else:
        control = ref + abs(ref) + 1
    on = {chk["metric"]: measured, than: base, ctl["metric"]: control}
    # removed: the mechanism's side falls to the control's level
    off = {chk["metric"]: control if than == chk["metric"] else measured, than: control, ctl["metric"]: control}
    before = check_verdict(claim_id, chk["case"], chk["metric"], on, tmp_path, "lab-a100")
    after = check_verdict(claim_id, chk["case"], chk["metric"], off, tmp_path, "lab-a100")
    assert str(before.outcome) == "reproduced", before.reason
    assert str(after.outcome) == "inconclusive", after.reason
