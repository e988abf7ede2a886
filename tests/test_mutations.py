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
     "test_engine_hotload_controls.py::test_hot_swap_check_is_not_reproduced_when_the_drain_is_removed", "not reproduced"),
    ("C14", "engine-hotload/incompatible-swap", "wrong_verdicts",
     "the compatibility check off on the measured side (real run)",
     "test_engine_hotload_controls.py::test_incompatible_swap_check_on_a_real_run_and_with_the_check_removed",
     "reproduced -> not reproduced"),
    ("C14", "engine-hotload/prewarm", "profile0.first_over_p99",
     "prewarm off is no slower on ONNX Runtime here: the instrument is blind (real run)",
     "test_engine_hotload_controls.py::test_prewarm_checks_on_onnx_runtime_are_inconclusive_with_both_numbers", "inconclusive"),
    ("C14", "engine-hotload/prewarm", "prewarmed.first_over_p99",
     "as profile0 (real run)",
     "test_engine_hotload_controls.py::test_prewarm_checks_on_onnx_runtime_are_inconclusive_with_both_numbers", "inconclusive"),
    ("C14", "engine-hotload/trt-prewarm", "profile0.first_over_p99",
     "no GPU here: the check's metrics, wiring only",
     "test_engine_hotload_controls.py::test_trt_checks_are_not_comparable_on_a_host_without_a_gpu",
     "not comparable here / reproduced"),
    ("C14", "engine-hotload/trt-prewarm", "prewarmed.first_over_p99",
     "no GPU here: the check's metrics, wiring only",
     "test_engine_hotload_controls.py::test_trt_checks_are_not_comparable_on_a_host_without_a_gpu",
     "not comparable here / reproduced"),
    ("C14", "engine-hotload/trt-hot-swap", "failed_requests",
     "no GPU here: the check's metrics, wiring only",
     "test_engine_hotload_controls.py::test_trt_hot_swap_memory_check_needs_a_sampler_that_sees_the_second_engine",
     "not comparable here / reproduced"),
    ("C14", "engine-hotload/trt-hot-swap", "gpu_peak_extra_over_engine",
     "no GPU here: an extra under 1x the engine; the restart control as high as the swap (sampler blind)",
     "test_engine_hotload_controls.py::test_trt_hot_swap_memory_check_needs_a_sampler_that_sees_the_second_engine",
     "not reproduced / inconclusive"),
    ("C20", "prompt-cas/cas", "as-written.applied_pct",
     "none needed: the rule as written applies nothing (real run)",
     "test_prompt_cas.py::test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed", "not reproduced"),
    ("C20", "prompt-cas/cas", "incremented.mixups_read",
     "the atomic write removed (plain arm's counts, real run); instrument blind; readers dead",
     "test_prompt_cas.py::test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed",
     "reproduced -> not reproduced / inconclusive"),
    ("C20", "prompt-cas/cas", "incremented.replica_mixups_read",
     "readers that die read nothing: not measured (real run, readers on a dead port)",
     "test_prompt_cas.py::test_readers_that_die_leave_the_mixups_not_measured", "not measured"),
    ("C20", "prompt-cas/cas", "incremented.lost_updates",
     "the version check removed (atomic arm's lost updates, real run)",
     "test_prompt_cas.py::test_c20_verdicts_on_a_real_run_and_with_each_mechanism_removed", "reproduced -> not reproduced"),
    ("C11b", "failover/primary-killed", "plain.rejoined_as_replica",
     "nodes.conf removed before the restart (real run of the no-nodes-conf control)",
     "test_failover.py::test_c11b_rejoin_needs_the_nodes_conf", "reproduced -> not reproduced"),
    ("C11b", "failover/partition", "plain.old_primary_is_replica",
     "the link left up (no-cut control, real run on the simulated lab); asserts the control's values",
     "test_failover.py::test_partition_on_the_simulated_lab", "reproduced"),
    ("C8", "cold-start/flush-one-primary", "cold_node.excess_growth_per_s",
     "the flush removed (flush=false, real run): the instrument is blind; real facts: 3 primaries, a 1/3 share",
     "test_cold_start.py::test_c8_checks_refute_the_growth_and_need_the_flush",
     "not comparable here / not reproduced / inconclusive"),
    ("C8", "cold-start/flush-one-primary", "cold_node.excess_attempts_growth_per_s",
     "retries off everywhere (retries=0, real run): the warm-up instrument is blind",
     "test_cold_start.py::test_c8_attempts_check_is_blind_without_retries", "inconclusive"),
    ("C9", "cold-start/pool-by-cluster-size", "p10.pool.peak_occupancy_pct",
     "the flush removed at 10 primaries (real run)",
     "test_cold_start.py::test_pool_check_needs_the_flush", "not reproduced / not attributable"),
    ("C9", "cold-start/pool-by-cluster-size", "p20.pool.peak_offered_pct",
     "the flush removed at 20 primaries (real run)",
     "test_cold_start.py::test_pool_refusal_check_at_20_primaries", "not reproduced"),
    ("C18", "eviction/simulate", "sim.calibrated.lru.long_tail_pct",
     "LRU, LFU and the hybrid replaced by random eviction (as_random, real simulation)",
     "test_eviction.py::test_c18_mechanism_removed_every_simulated_check_is_not_reproduced", "not reproduced"),
    ("C18", "eviction/simulate", "sim.calibrated.lfu.hit_rate_pct",
     "as above", "test_eviction.py::test_c18_mechanism_removed_every_simulated_check_is_not_reproduced",
     "not reproduced"),
    ("C18", "eviction/simulate", "sim.calibrated.lfu.long_tail_pct",
     "as above (random keeps about as much of the tail)",
     "test_eviction.py::test_c18_mechanism_removed_every_simulated_check_is_not_reproduced",
     "not reproduced / not attributable"),
    ("C18", "eviction/simulate", "sim.calibrated.hybrid.hit_rate_pct",
     "as above", "test_eviction.py::test_c18_mechanism_removed_every_simulated_check_is_not_reproduced",
     "not reproduced"),
    ("C18", "eviction/simulate", "sim.calibrated.hybrid.long_tail_pct",
     "as above", "test_eviction.py::test_c18_mechanism_removed_every_simulated_check_is_not_reproduced",
     "not reproduced"),
    ("C18", "eviction/simulate", "sim.ordering_sizes_pct",
     "as above", "test_eviction.py::test_c18_mechanism_removed_every_simulated_check_is_not_reproduced",
     "not reproduced"),
    ("C18", "eviction/redis", "redis.allkeys-lru.hit_rate_pct",
     "the real allkeys-random replay in allkeys-lru's place (real redis-server)",
     "test_eviction.py::test_c18_redis_checks_on_real_redis_servers", "not reproduced"),
    ("C18", "eviction/redis", "redis.allkeys-lfu.hit_rate_pct",
     "the real allkeys-random replay in allkeys-lfu's place (real redis-server)",
     "test_eviction.py::test_c18_redis_checks_on_real_redis_servers", "reproduced -> not reproduced"),
    ("C19", "eviction/trace", "real.head_share_pct",
     "the skew removed (skew=false, uniform draws); the Zipf instrument broken (expected share doubled)",
     "test_eviction.py::test_c19_on_the_real_trace_and_with_the_skew_removed",
     "not reproduced / direction reproduced, magnitude differs"),
    ("C2", "semantic-cache/semantic", "hash.correct_hit_rate_pct",
     "paraphrases never repeat a prompt; instrument: inserted prompts asked again (real run); instrument metrics dropped",
     "test_semantic_verdicts.py::test_c2_without_the_semantic_key_is_not_reproduced_with_the_instrument_held",
     "not reproduced"),
    ("C2", "semantic-cache/semantic", "lsh_r0.correct_hit_rate_pct",
     "the sem_<hex> key as written (radius 0) / signature=exact (real run)",
     "test_semantic_verdicts.py::test_c2_without_the_semantic_key_is_not_reproduced_with_the_instrument_held",
     "not reproduced"),
    ("C2", "semantic-cache/semantic", "lsh.correct_hit_rate_pct",
     "signature=exact: the LSH key replaced by an exact text hash (real run)",
     "test_semantic_verdicts.py::test_c2_without_the_semantic_key_is_not_reproduced_with_the_instrument_held",
     "not reproduced"),
    ("C2", "semantic-cache/semantic", "lsh.gain_over_hash_pp",
     "signature=exact (real run); the repeats instrument's metrics left out (same real run)",
     "test_semantic_verdicts.py::test_c2_with_its_instrument_not_measured_is_inconclusive",
     "reproduced -> not reproduced / inconclusive"),
    ("C3", "semantic-cache/ttft", "ttft.p95_change_semantic_vs_hash_pct",
     "signature=exact on the semantic-hits stream; oracle=miss breaks the instrument (real runs)",
     "test_semantic_verdicts.py::test_c3_ttft_the_oracle_sees_a_cache_and_the_exact_key_is_not_reproduced",
     "not reproduced / inconclusive"),
    ("C3", "semantic-cache/ttft", "semantic_cache.p95_ms",
     "no GPU here (needs gpu: A100, measured none); the oracle slowed to the model's P95 (check's metrics)",
     "test_semantic_spec.py::test_the_gpu_checks_are_comparable_only_where_the_run_measured_an_a100",
     "not comparable here / reproduced / inconclusive"),
    ("C3", "semantic-cache/ttft", "hash_cache.p95_ms",
     "no GPU here (needs gpu: A100): not comparable, wiring as semantic_cache.p95_ms",
     "test_semantic_spec.py::test_the_gpu_checks_are_comparable_only_where_the_run_measured_an_a100",
     "not comparable here"),
    ("C4", "semantic-cache/memory", "memory.rss_change_pct",
     "the model held from the start, all-hit stream (real run); facts memory_measured=gpu; instrument metric dropped",
     "test_semantic_verdicts.py::test_c4_every_mode_holds_the_model_and_rss_is_not_comparable_with_gpu_memory",
     "not comparable here / not reproduced / inconclusive"),
    ("C4", "semantic-cache/memory", "memory.gpu_change_pct",
     "no GPU here: the metrics a GPU run records, the known allocation seen / unseen",
     "test_semantic_verdicts.py::test_c4_gpu_check_on_the_metrics_a_gpu_run_records",
     "not reproduced / inconclusive"),
    ("C7", "semantic-cache/semantic", "c7.uniform_tokens.threshold",
     "c7_threshold=static (formula removed); c7_max_tokens=40 breaks the H/r instrument (real runs)",
     "test_semantic_verdicts.py::test_c7_without_the_formula_is_not_reproduced_and_with_a_short_stream_inconclusive",
     "not reproduced / inconclusive"),
    ("C7", "semantic-cache/semantic", "c7.periodic_tokens.threshold",
     "c7_threshold=static; c7_max_tokens=40 (real runs)",
     "test_semantic_verdicts.py::test_c7_without_the_formula_is_not_reproduced_and_with_a_short_stream_inconclusive",
     "not reproduced / inconclusive"),
    ("C7", "semantic-cache/semantic", "c7.static_loss_pct",
     "c7_threshold=static: dynamic = static, loss 0 (real run)",
     "test_semantic_verdicts.py::test_c7_without_the_formula_is_not_reproduced_and_with_a_short_stream_inconclusive",
     "not reproduced"),
    ("C16", "semantic-cache/entity-keys", "entity.correct_hit_rate_pct",
     "paraphrases share no template; instrument: inserted prompts asked again (real run); instrument metrics dropped",
     "test_semantic_verdicts.py::test_c16_without_batching_is_not_reproduced_with_the_known_wait_seen",
     "not reproduced / inconclusive"),
    ("C16", "semantic-cache/entity-keys", "token.correct_hit_rate_pct",
     "as entity (real run)",
     "test_semantic_verdicts.py::test_c16_without_batching_is_not_reproduced_with_the_known_wait_seen",
     "not reproduced"),
    ("C16", "semantic-cache/entity-keys", "dynamic_batch_entity_key.added_ms_mean",
     "batching=off (real run); instrument metrics dropped (same real run)",
     "test_semantic_verdicts.py::test_c16_without_its_instruments_is_inconclusive",
     "not reproduced / inconclusive"),
    ("C16", "semantic-cache/entity-keys", "static_batch_token_key.added_ms_mean",
     "batching=off (real run)",
     "test_semantic_verdicts.py::test_c16_without_batching_is_not_reproduced_with_the_known_wait_seen",
     "not reproduced"),
    ("C16", "semantic-cache/entity-keys", "batching.dynamic_vs_static_added_ms",
     "batching=off (real run); 4000 requests/s: static batches fill faster than the window (real dispatcher)",
     "test_semantic_dispatcher.py::test_the_c16_cut_depends_on_how_fast_static_batches_fill",
     "direction reproduced, magnitude differs -> not reproduced"),
    ("C1", "serving/prefix-cache", "trace.on.engine_hit_pct",
     "the engine's counters blinded (instrument 0); caching left on in the off arm; more reuse (metrics of a "
     "recorded real run)",
     "test_serving_ledger.py::test_c1_engine_check_needs_counters_that_see_reuse_and_reuse_that_goes_with_caching",
     "inconclusive / not attributable / not reproduced"),
    ("C2", "serving/semantic-e2e", "semantic_cache.correct_hit_rate_pct",
     "the oracle store left empty (instrument); the hash cache hitting as often (metrics of a recorded real run)",
     "test_serving_ledger.py::test_c2_end_to_end_check_with_its_controls_broken",
     "inconclusive / reproduced / not attributable"),
    ("C3", "serving/semantic-e2e", "ttft.p95_change_semantic_vs_hash_pct",
     "recorded real run: the oracle not under half of no cache's P95 (blind); a fast oracle with the cache's "
     "P95 as no cache's (mechanism left out) or slower",
     "test_serving_ledger.py::test_c3_end_to_end_check_turns_with_its_controls",
     "reproduced / not attributable / not reproduced"),
    ("I23", "serving/client-vs-vllm", "peer.ttft_p50_absdiff_pct",
     "recorded real run (11-14% apart at load 30); the clients agreeing, then the known late client unseen "
     "(instrument); a client 25% late",
     "test_serving_ledger.py::test_peer_checks_need_the_instrument_and_hold_when_the_clients_agree",
     "reproduced / inconclusive / not reproduced"),
    ("I23", "serving/client-vs-vllm", "peer.tpot_p50_absdiff_pct",
     "as the TTFT check: agreeing, then the known late client unseen (metrics of a recorded real run)",
     "test_serving_ledger.py::test_peer_checks_need_the_instrument_and_hold_when_the_clients_agree",
     "reproduced / inconclusive"),
    ("I24", "semantic-cache/gptcache", "lookup.speedup_vs_gptcache",
     "the ONNX session replaced by the torch embedding (real run); a torch path as fast; the known wait unseen "
     "(metrics of a recorded run)",
     "test_semantic_gptcache.py::test_i24_speed_checks_on_the_metrics_of_a_recorded_run",
     "not reproduced / not attributable / inconclusive"),
    ("I24", "semantic-cache/gptcache", "lookup.speedup_vs_gptcache_ram",
     "as lookup.speedup_vs_gptcache, against GPTCache with its SQLite file in RAM",
     "test_semantic_gptcache.py::test_i24_speed_checks_on_the_metrics_of_a_recorded_run",
     "not reproduced / not attributable / inconclusive"),
    ("I24", "semantic-cache/gptcache", "onnx.lookup.p50_ms",
     "the ONNX session replaced by the torch embedding (real run, never reproduced); metrics as the speedup's",
     "test_semantic_gptcache.py::test_i24_speed_checks_without_the_onnx_session_never_reproduce",
     "not reproduced / not attributable / inconclusive"),
    ("I24", "semantic-cache/gptcache", "gptcache.recall_minus_nn_pp",
     "semantic matching removed: GPTCache's threshold grid [0.999] (real run; its verbatim repeats still hit)",
     "test_semantic_gptcache.py::test_i24_accuracy_checks_on_real_runs_and_with_the_mechanism_removed",
     "reproduced -> not reproduced"),
    ("I24", "semantic-cache/gptcache", "gptcache.precision_minus_nn_pp",
     "the similarity decision removed: GPTCache's threshold grid [0] accepts every nearest entry (real run)",
     "test_semantic_gptcache.py::test_i24_accuracy_checks_on_real_runs_and_with_the_mechanism_removed",
     "reproduced -> not reproduced"),
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
     "test_kv_tiers_controls.py::test_codec_checks_flip_when_the_aligned_codec_is_replaced_by_json",
     "not reproduced / not attributable"),
    ("C15", "kv-tiers/codecs", "qps_gain_pct.aligned128_vs_json",
     "the aligned codec replaced by JSON; a loopback Redis makes it not comparable",
     "test_kv_tiers_controls.py::test_codec_checks_flip_when_the_aligned_codec_is_replaced_by_json",
     "not reproduced / not comparable here"),
    ("C17", "kv-tiers/tiers", "L1.fetch_copy.p50_us",
     "L1 taken away (served from L2): the instrument cannot tell the tiers apart",
     "test_kv_tiers_controls.py::test_tier_checks_need_their_controls", "inconclusive / not comparable here"),
    ("C17", "kv-tiers/tiers", "L2.fetch_decode.p50_us",
     "the 64-byte GET as the measure: the instrument sees it is no chunk fetch",
     "test_kv_tiers_controls.py::test_tier_checks_need_their_controls", "inconclusive / not comparable here"),
    ("C17", "kv-tiers/tiers", "L3.cold.p50_us",
     "page cache kept (no drop): cold reads are warm ones",
     "test_kv_tiers_controls.py::test_tier_checks_need_their_controls", "inconclusive / not comparable here"),
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
    for v in row[5].replace("->", " / ").split(" / "):
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
