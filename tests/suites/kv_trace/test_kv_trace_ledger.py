"""The ledger's kv-trace checks (C1, C5, C17, C18, C19) judged on the recorded metrics of a
real local run (the whole Mooncake trace, tests/fixtures/kv_trace/) and with each check's
instrument blinded, its mechanism left in or its number disagreeing with the independent
reference (recount.py): every check can come out the other way. C1 is also judged on
metrics the simulator and the reference compute here, on a slice, with a blind simulator
and a forgetful one in its place."""

from __future__ import annotations

import json

import numpy as np

from harness.base.paths import REPO_ROOT
from harness.experiments.kv_trace import analyses, drivers, recount
from harness.mechanisms.kv_blocks import prefix
from harness.mechanisms.kv_blocks import trace as T
from harness.verdict.analysis import Outcome
from tests import TESTS
from tests.ledger_helpers import verdicts

RECORDED = json.loads((TESTS / "fixtures/kv_trace/prefix_cache_metrics.json").read_text())["metrics"]


KV_CHECKS = {
    "C1": ["reuse.max.token_hit_pct", "reuse.gpu.token_hit_pct"],
    "C5": ["tiers.ttl_kept_pct", "tiers.L3.lruk_gain_pp"],
    "C17": ["tiers.base.of_max_pct"],
    "C18": ["curve.ordering_sizes_pct"],
    "C19": ["blocks.head_share_pct"],
}


def judge(claim: str, **change) -> dict:
    """The claim's kv-trace verdicts with metrics changed (a__b for a.b); `measured__X=v`
    changes X and its reference alike (the simulator and the reference agree on v)."""
    change = {k.replace("__", "."): v for k, v in change.items()}
    for k in [k for k in change if k.startswith("measured.")]:
        change[k[len("measured.") :]] = change[f"reference.{k[len('measured.') :]}"] = change.pop(k)
    metrics = {**RECORDED, **change}
    return {m: cv.outcome for m, cv in verdicts(claim, "prefix-cache", metrics, suite="kv-trace").items()}


def test_recorded_run_gives_the_verdicts_of_the_readme():
    assert judge("C1") == {"reuse.max.token_hit_pct": Outcome.REPRODUCED, "reuse.gpu.token_hit_pct": Outcome.REPRODUCED}
    assert judge("C5") == {"tiers.ttl_kept_pct": Outcome.REPRODUCED, "tiers.L3.lruk_gain_pp": Outcome.NOT_REPRODUCED}
    assert judge("C17") == {"tiers.base.of_max_pct": Outcome.REPRODUCED}
    assert judge("C18") == {"curve.ordering_sizes_pct": Outcome.NOT_REPRODUCED}
    assert judge("C19") == {"blocks.head_share_pct": Outcome.DIRECTION}


def test_c1_checks_need_the_instrument_to_see_reuse_and_the_reuse_to_go_with_sharing():
    blind = judge("C1", reuse__dup__max__token_hit_pct=0.0, reuse__dup__gpu__token_hit_pct=0.0)
    assert set(blind.values()) == {Outcome.INCONCLUSIVE}
    leaky = judge(
        "C1",
        reuse__nosharing__max__token_hit_pct=RECORDED["reuse.max.token_hit_pct"],
        reuse__nosharing__gpu__token_hit_pct=RECORDED["reuse.gpu.token_hit_pct"],
    )
    assert set(leaky.values()) == {Outcome.NOT_ATTRIBUTABLE}
    assert judge("C1", measured__reuse__max__token_hit_pct=45.0)["reuse.max.token_hit_pct"] is Outcome.NOT_REPRODUCED


def test_every_kv_trace_check_has_a_reference_and_a_disagreement_is_inconclusive():
    """Issue 39: a simulator that under-counts confirms an upper bound; its number must agree
    with the independent recount, else the check is inconclusive (and so when the reference
    was not measured)."""
    for claim, names in KV_CHECKS.items():
        for name in names:
            ref = f"reference__{name.replace('.', '__')}"
            off = judge(claim, **{ref: RECORDED[name] + 1.0})[name]
            assert off is Outcome.INCONCLUSIVE, (claim, name, off)
            metrics = {k: v for k, v in RECORDED.items() if k != f"reference.{name}"}
            missing = verdicts(claim, "prefix-cache", metrics, suite="kv-trace")[name]
            assert missing.outcome is Outcome.INCONCLUSIVE, (claim, name, missing.outcome)
            assert missing.check.reference.metric == f"reference.{name}"


def test_c1_with_the_issues_forgetful_simulator_is_inconclusive():
    """The infinite cache remembering only the previous request: 4.25% (below 38%), the
    duplicated trace still seen; the reference (37.36%) and the replayed trace disagree."""
    forgetful = dict(reuse__max__token_hit_pct=4.25, reuse__dup__max__token_hit_pct=52.0)
    assert judge("C1", **forgetful)["reuse.max.token_hit_pct"] is Outcome.INCONCLUSIVE
    only_replayed = judge("C1", measured__reuse__max__token_hit_pct=4.25, reuse__replayed__max__token_hit_pct=6.0)
    assert only_replayed["reuse.max.token_hit_pct"] is Outcome.INCONCLUSIVE


def test_c1_on_the_simulator_and_on_a_blind_one():
    """Metrics computed here on a slice of the trace; then a simulator that never hits: it
    passes the mechanism-off control (no reuse without sharing) but not the instrument."""
    s = T.load_trace(REPO_ROOT / "data/mooncake/conversation_trace.jsonl", 512).slice(0, 2500)
    real = {k: m.value for k, m in analyses.reuse(s, 912, "leaf-lru").items()}
    p = {**{k: v.default for k, v in drivers.MAIN_PARAMS.items()}, "max_requests": 2500, "capacities_tokens": [10**9]}
    ref = recount.recount(REPO_ROOT / p["trace"], p, drivers.ORDER, analyses.label, log=lambda m: None)
    real.update({k: v for k, (v, _) in ref.items() if k.startswith("reference.reuse.")})
    assert {cv.outcome for cv in verdicts("C1", "prefix-cache", real, suite="kv-trace").values()} == {
        Outcome.REPRODUCED
    }
    none = prefix.rates(T.duplicated(s), np.zeros(2 * s.n_blocks, dtype=bool))
    blind = {**real, **{k: 100 * none.token for k in real if k.startswith("reuse.") and k.endswith("token_hit_pct")}}
    assert {cv.outcome for cv in verdicts("C1", "prefix-cache", blind, suite="kv-trace").values()} == {
        Outcome.INCONCLUSIVE
    }


def test_c5_checks_with_their_controls_broken():
    blind_ttl = judge("C5", tiers__short_ttl__kept_pct=100.0)
    assert blind_ttl["tiers.ttl_kept_pct"] is Outcome.INCONCLUSIVE
    assert judge("C5", measured__tiers__ttl_kept_pct=80.0)["tiers.ttl_kept_pct"] is Outcome.NOT_REPRODUCED
    blind_policy = judge("C5", tiers__L3__random_loss_pp=0.0)
    assert blind_policy["tiers.L3.lruk_gain_pp"] is Outcome.INCONCLUSIVE
    gain = judge("C5", measured__tiers__L3__lruk_gain_pp=1.0)
    assert gain["tiers.L3.lruk_gain_pp"] is Outcome.REPRODUCED
    assert judge("C5", tiers__L3__lruk_gain_pp=1.0)["tiers.L3.lruk_gain_pp"] is Outcome.INCONCLUSIVE  # not recounted
    artefact = judge("C5", measured__tiers__L3__lruk_gain_pp=1.0, tiers__nosharing__lruk_gain_pp=1.0)
    assert artefact["tiers.L3.lruk_gain_pp"] is Outcome.NOT_ATTRIBUTABLE


def test_c17_sizing_check_needs_capacity_to_matter_and_l3_to_carry_it():
    assert judge("C17", tiers__small__of_max_pct=99.0)["tiers.base.of_max_pct"] is Outcome.INCONCLUSIVE
    assert judge("C17", tiers__L1L2__of_max_pct=99.0)["tiers.base.of_max_pct"] is Outcome.NOT_ATTRIBUTABLE
    assert judge("C17", measured__tiers__base__of_max_pct=60.0)["tiers.base.of_max_pct"] is Outcome.NOT_REPRODUCED


def test_c18_and_c19_on_kv_blocks_with_their_controls_broken():
    assert judge("C18", curve__ordering_known_sizes_pct=50.0)["curve.ordering_sizes_pct"] is Outcome.INCONCLUSIVE
    assert judge("C18", measured__curve__ordering_sizes_pct=100.0)["curve.ordering_sizes_pct"] is Outcome.REPRODUCED
    assert judge("C18", curve__ordering_sizes_pct=100.0)["curve.ordering_sizes_pct"] is Outcome.INCONCLUSIVE
    random_too = judge("C18", measured__curve__ordering_sizes_pct=100.0, curve__ordering_random_sizes_pct=100.0)
    assert random_too["curve.ordering_sizes_pct"] is Outcome.NOT_ATTRIBUTABLE
    law = RECORDED["blocks.zipf_control.expected_head_share_pct"]
    assert judge("C19", blocks__zipf_control__head_share_pct=0.5 * law)["blocks.head_share_pct"] is Outcome.INCONCLUSIVE
    assert judge("C19", blocks__uniform_head_share_pct=12.0)["blocks.head_share_pct"] is Outcome.NOT_ATTRIBUTABLE
    assert judge("C19", measured__blocks__head_share_pct=30.0)["blocks.head_share_pct"] is Outcome.REPRODUCED
    assert judge("C19", blocks__head_share_pct=30.0)["blocks.head_share_pct"] is Outcome.INCONCLUSIVE
