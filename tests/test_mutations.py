"""The mutation table: for every ledger check, how its mechanism is removed (or its instrument
broken), the test that does it - a real run where the suite fits the test budget, recorded real
output or the check's own metrics otherwise - and the verdict that test asserts.

A check added to the ledger without a row here fails `test_every_ledger_check_has_a_row`; a row
naming a test that does not exist fails `test_every_row_names_a_test_that_exists`. The README's
per-claim table (tests/ledger_table.py) lists the same checks with a fresh run's verdicts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness import spec
from harness.analysis import Outcome

TESTS = Path(__file__).parent
README = TESTS.parent / "README.md"

# (claim, suite/case, metric, what is removed or broken, test, verdict asserted)
ROWS = [
    ("C11a", "failover/primary-killed", "plain.served_at_end_pct",
     "replicas: the measured side is the 3 + 0 cluster's (real run)",
     "test_failover.py::test_c11a_check_holds_and_turns_around_without_replicas", "not reproduced"),
    ("C14", "engine-hotload/hot-swap", "failed_requests",
     "the drain removed (real run, drain=broken: the old engine closed under a call in flight)",
     "test_engine_controls.py::test_hot_swap_check_is_not_reproduced_when_the_drain_is_removed", "not reproduced"),
    ("C14", "engine-hotload/incompatible-swap", "wrong_verdicts",
     "the compatibility check off on the measured side (real run)",
     "test_engine_controls.py::test_incompatible_swap_check_on_a_real_run_and_with_the_check_removed",
     "reproduced -> not reproduced"),
    ("C14", "engine-hotload/prewarm", "profile0.first_over_p99",
     "prewarm off is no slower on ONNX Runtime here: the instrument is blind (real run)",
     "test_engine_controls.py::test_prewarm_checks_on_onnx_runtime_are_inconclusive_with_both_numbers", "inconclusive"),
    ("C14", "engine-hotload/prewarm", "prewarmed.first_over_p99",
     "as profile0 (real run)",
     "test_engine_controls.py::test_prewarm_checks_on_onnx_runtime_are_inconclusive_with_both_numbers", "inconclusive"),
    ("C14", "engine-hotload/trt-prewarm", "profile0.first_over_p99",
     "no GPU here: the check's metrics, wiring only",
     "test_engine_controls.py::test_trt_checks_are_not_comparable_on_a_host_without_a_gpu",
     "not comparable here / reproduced"),
    ("C14", "engine-hotload/trt-prewarm", "prewarmed.first_over_p99",
     "no GPU here: the check's metrics, wiring only",
     "test_engine_controls.py::test_trt_checks_are_not_comparable_on_a_host_without_a_gpu",
     "not comparable here / reproduced"),
    ("C14", "engine-hotload/trt-hot-swap", "failed_requests",
     "no GPU here: the check's metrics, wiring only",
     "test_engine_controls.py::test_trt_hot_swap_memory_check_needs_a_sampler_that_sees_the_second_engine",
     "not comparable here / reproduced"),
    ("C14", "engine-hotload/trt-hot-swap", "gpu_peak_extra_over_engine",
     "no GPU here: an extra under 1x the engine; the restart control as high as the swap (sampler blind)",
     "test_engine_controls.py::test_trt_hot_swap_memory_check_needs_a_sampler_that_sees_the_second_engine",
     "not reproduced / inconclusive"),
    ("C20", "prompt-cas/cas", "as-written.applied_pct",
     "none needed: the rule as written applies nothing (real run)",
     "test_cas.py::test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed", "not reproduced"),
    ("C20", "prompt-cas/cas", "incremented.mixups_read",
     "the atomic write removed (plain arm's counts, real run); instrument blind; readers dead",
     "test_cas.py::test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed",
     "reproduced -> not reproduced / inconclusive"),
    ("C20", "prompt-cas/cas", "incremented.replica_mixups_read",
     "readers that die read nothing: not measured (real run, readers on a dead port)",
     "test_cas.py::test_readers_that_die_leave_the_mixups_not_measured", "not measured"),
    ("C20", "prompt-cas/cas", "incremented.lost_updates",
     "the version check removed (atomic arm's lost updates, real run)",
     "test_cas.py::test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed", "reproduced -> not reproduced"),
    ("C11b", "failover/primary-killed", "plain.rejoined_as_replica",
     "nodes.conf removed before the restart (real run of the no-nodes-conf control)",
     "test_failover.py::test_c11b_rejoin_needs_the_nodes_conf", "reproduced -> not reproduced"),
    ("C11b", "failover/partition", "plain.old_primary_is_replica",
     "the link left up (no-cut control, real run on the simulated lab); asserts the control's values",
     "test_failover.py::test_partition_on_the_simulated_lab", "reproduced"),
    ("C12", "redis-cluster/redis-benchmark", "GET.p99_ms",
     "instrument broken: the 4x-clients control no slower; a P99 above 1.2 ms; one host measured",
     "test_redis_benchmark.py::test_c12_on_the_measured_lab_reproduces_only_with_an_instrument_that_sees",
     "inconclusive / not reproduced"),
    ("C12", "redis-cluster/redis-benchmark", "SET.p99_ms",
     "as GET; and a real run's hosts (loopback, one host) make it not comparable",
     "test_redis_benchmark.py::test_c12_locally_is_not_comparable_and_names_the_measured_hosts",
     "not comparable here"),
    ("C13", "redis-cluster/memtier", "Totals.ops_per_sec",
     "instrument broken: one connection as fast; 60k ops/s on the lab (recorded memtier output replayed elsewhere)",
     "test_redis_benchmark.py::test_c13_checks_can_come_out_either_way", "inconclusive / not reproduced"),
    ("C15", "kv-tiers/codecs", "sized.decode_speedup.aligned128_vs_json",
     "the aligned codec replaced by JSON (its control measures exactly that in a real run)",
     "test_kv_controls.py::test_codec_checks_flip_when_the_aligned_codec_is_replaced_by_json",
     "not reproduced / not attributable"),
    ("C15", "kv-tiers/codecs", "qps_gain_pct.aligned128_vs_json",
     "the aligned codec replaced by JSON; a loopback Redis makes it not comparable",
     "test_kv_controls.py::test_codec_checks_flip_when_the_aligned_codec_is_replaced_by_json",
     "not reproduced / not comparable here"),
    ("C17", "kv-tiers/tiers", "L1.fetch_copy.p50_us",
     "L1 taken away (served from L2): the instrument cannot tell the tiers apart",
     "test_kv_controls.py::test_tier_checks_need_their_controls", "inconclusive / not comparable here"),
    ("C17", "kv-tiers/tiers", "L2.fetch_decode.p50_us",
     "the 64-byte GET as the measure: the instrument sees it is no chunk fetch",
     "test_kv_controls.py::test_tier_checks_need_their_controls", "inconclusive / not comparable here"),
    ("C17", "kv-tiers/tiers", "L3.cold.p50_us",
     "page cache kept (no drop): cold reads are warm ones",
     "test_kv_controls.py::test_tier_checks_need_their_controls", "inconclusive / not comparable here"),
    ("C21", "redis-cluster/acl", "source.reads_allowed",
     "the rule reordered (trailing -@all removed) on the real cluster",
     "test_acl.py::test_the_ledger_checks_flip_when_the_mechanism_is_removed", "reproduced -> not reproduced"),
    ("C21", "redis-cluster/acl", "fixed.forbidden_not_refused",
     "a read-all rule in the working rule's place on the real cluster",
     "test_acl.py::test_the_ledger_checks_flip_when_the_mechanism_is_removed", "not reproduced"),
    ("C21", "engine-hotload/signed-load", "deserialized_refused",
     "verification off",
     "test_mutations.py::test_signing_checks_need_verification_off_to_let_files_through",
     "inconclusive"),
    ("C21", "engine-hotload/signed-load", "wrong_verdicts",
     "verification off",
     "test_mutations.py::test_signing_checks_need_verification_off_to_let_files_through",
     "inconclusive"),
    ("C21", "engine-hotload/signed-load", "runtime_recheck_detects_change",
     "an unchanged copy rechecked: flagged too means the recheck flags everything",
     "test_mutations.py::test_signing_checks_need_verification_off_to_let_files_through",
     "not attributable"),
    ("C1", "kv-trace/prefix-cache", "reuse.max.token_hit_pct",
     "a blind simulator (never a hit) in the real one's place on a slice; sharing left in (recorded real run)",
     "test_kv_trace_ledger.py::test_c1_checks_need_the_instrument_to_see_reuse_and_the_reuse_to_go_with_sharing",
     "inconclusive / not attributable"),
    ("C1", "kv-trace/prefix-cache", "reuse.gpu.token_hit_pct",
     "as reuse.max: the duplicated trace's reuse blinded, the sharing left in (recorded real run)",
     "test_kv_trace_ledger.py::test_c1_checks_need_the_instrument_to_see_reuse_and_the_reuse_to_go_with_sharing",
     "inconclusive / not attributable"),
    ("C5", "kv-trace/prefix-cache", "tiers.ttl_kept_pct",
     "shortened TTLs that cost nothing (instrument blind; recorded real run)",
     "test_kv_trace_ledger.py::test_c5_checks_with_their_controls_broken", "inconclusive / not reproduced"),
    ("C5", "kv-trace/prefix-cache", "tiers.L3.lruk_gain_pp",
     "random eviction at L3 no worse (instrument blind); a gain without sharing (recorded real run)",
     "test_kv_trace_ledger.py::test_c5_checks_with_their_controls_broken", "inconclusive / not attributable"),
    ("C17", "kv-trace/prefix-cache", "tiers.base.of_max_pct",
     "tiny tiers reaching the maximum (instrument blind); L1+L2 alone reaching it (recorded real run)",
     "test_kv_trace_ledger.py::test_c17_sizing_check_needs_capacity_to_matter_and_l3_to_carry_it",
     "inconclusive / not attributable"),
    ("C18", "kv-trace/prefix-cache", "curve.ordering_sizes_pct",
     "random in the hybrid's place also ordered at every size (instrument blind; recorded real run)",
     "test_kv_trace_ledger.py::test_c18_and_c19_on_kv_blocks_with_their_controls_broken", "inconclusive"),
    ("C19", "kv-trace/prefix-cache", "blocks.head_share_pct",
     "the Zipf instrument off its law; uniform draws as skewed as the trace (recorded real run)",
     "test_kv_trace_ledger.py::test_c18_and_c19_on_kv_blocks_with_their_controls_broken",
     "inconclusive / not attributable"),
]


def _ledger_checks() -> set[tuple[str, str, str]]:
    return {(c.id, f"{k.suite}/{k.case}", k.metric) for c in spec.load_claims() for k in c.checks}


def test_every_ledger_check_has_a_row():
    have = {(r[0], r[1], r[2]) for r in ROWS}
    missing = sorted(_ledger_checks() - have)
    assert not missing, "ledger checks without a row in the mutation table: " + "; ".join(map(str, missing))
    stale = sorted(have - _ledger_checks())
    assert not stale, "rows for checks the ledger no longer has: " + "; ".join(map(str, stale))


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[0]}-{r[2]}" for r in ROWS])
def test_every_row_names_a_test_that_exists(row):
    file, _, func = row[4].partition("::")
    path = TESTS / file
    assert path.is_file(), row
    assert func.split("[")[0] in _functions(path), f"{row[4]}: no such test"
    words = {o.value for o in Outcome}
    for v in row[5].replace("->", "/").split("/"):
        assert v.strip() in words, f"{row}: {v.strip()!r} is not a verdict"


def test_the_readme_lists_every_ledger_check():
    text = README.read_text()
    for claim, where, metric in sorted(_ledger_checks()):
        assert f"`{metric}" in text and where in text, f"README's ledger table lacks {claim} {where} {metric}"


def test_signing_checks_need_verification_off_to_let_files_through():
    """C21's signed-load checks (metrics of the recorded real run's shape): verification off
    must let the bad files through (instrument), an unchanged copy must not be flagged
    (mechanism off: the change, not the recheck, is what is detected)."""
    from tests.ledger_helpers import verdicts

    ok = {"deserialized_refused": 0, "wrong_verdicts": 0, "runtime_recheck_detects_change": 1,
          "control.deserialized_refused": 5, "control.wrong_verdicts": 5, "control.runtime_recheck_detects_change": 0}
    assert {cv.outcome for cv in verdicts("C21", "signed-load", ok).values()} == {Outcome.REPRODUCED}
    got = verdicts("C21", "signed-load", {**ok, "control.deserialized_refused": 0, "control.wrong_verdicts": 0,
                                          "control.runtime_recheck_detects_change": 1})
    assert got["deserialized_refused"].outcome is Outcome.INCONCLUSIVE
    assert got["wrong_verdicts"].outcome is Outcome.INCONCLUSIVE
    assert got["runtime_recheck_detects_change"].outcome is Outcome.NOT_ATTRIBUTABLE
    got = verdicts("C21", "signed-load", {**ok, "deserialized_refused": 2, "runtime_recheck_detects_change": 0})
    assert got["deserialized_refused"].outcome is Outcome.NOT_REPRODUCED
    assert got["runtime_recheck_detects_change"].outcome is Outcome.NOT_REPRODUCED
