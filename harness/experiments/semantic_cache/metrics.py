"""The metrics each driver of the semantic-cache suite may report (`register(..., metrics=...)`),
one tuple per driver, in the order of drivers.py."""

from harness.base.metrics_model import MetricDecl as M
from harness.mechanisms.semantic.series import TTFT_METRICS


def _scheme(schemes: str) -> tuple[M, ...]:
    """keys_case.scheme_metrics of the schemes `schemes` (a placeholder): correct, wrong and net
    hit rates, recall, and precision (reported when the scheme hit at all)."""
    return (
        M(schemes + ".correct_hit_rate_pct", "%", "higher"),
        M(schemes + ".wrong_hit_rate_pct", "%", "lower"),
        M(schemes + ".net_hit_rate_pct", "%", "higher"),
        M(schemes + ".recall_pct", "%", "higher"),
        M(schemes + ".precision_pct", "%", "higher"),
    )


# semantic-cache-keys (keys_case.py)
KEYS = (
    # C2: every key scheme on the test split, the exact-hash control and the empty-cache control
    *_scheme("{hash|hash_norm|lsh_r0|lsh|charsim_r0|charsim|nn|control.exact_key|control.empty_cache}"),
    M("{lsh|charsim|control.exact_key}.gain_over_hash_pp", "pp", "higher"),
    M("{lsh|charsim|control.exact_key}.net_gain_over_hash_pp", "pp", "higher"),
    # settings chosen on the calibration split
    M("{lsh|charsim}.radius", "bits"),
    M("nn.threshold", ""),
    # instruments: every inserted prompt asked again; the stand-in's known pairs
    M("instrument.repeats.{hash|lsh_r0|lsh|control.exact_key|charsim_r0|charsim}.correct_hit_rate_pct", "%", "higher"),
    M("instrument.charsim.known_pairs_agree_pct", "% of pairs"),
    # the lookup latency split, one query at a time
    M("{embed|key|redis|lookup|hash_lookup|charsim_lookup}.p{50|95|99}_ms", "ms", "lower"),
    # C7: the dynamic threshold per token stream, its reference, the loss and the instrument
    M(
        "c7.{uniform_tokens|periodic_tokens|query_stream|control.periodic_shuffled|control.constant"
        "|control.known_entropy|control.known_r}.threshold",
        "",
    ),
    M("c7.reference.uniform_tokens.threshold", ""),
    M("c7.static_loss_pct", "%"),
    M("c7.instrument.strict_loss_pct", "%"),
    M("c7.instrument.entropy_error_bits", "bits", "lower"),
    M("c7.instrument.lag1_r_error", "", "lower"),
    # a dataset of labelled pairs only
    M("pairs.roc_auc_{cosine|hamming}", "", "higher"),
)

# semantic-cache-gptcache (gptcache_case.py, gptcache_report.py)
_COUNTED = "{nn|gptcache|int8|control.gptcache_no_threshold|control.gptcache_exact_only|instrument.noisy}"
_GPTCACHES = "{gptcache|gptcache_ram}"
GPTCACHE = (
    # accuracy on the test split: the harness's NN, GPTCache and its controls, the int8 arm and its instrument
    *_scheme(_COUNTED),
    M(_COUNTED + ".correct_hits", "queries", "higher"),
    M(_COUNTED + ".wrong_hits", "queries", "lower"),
    M("{nn|gptcache|int8}.threshold", ""),
    # the share GPTCache answered, counted by the client and by GPTCache's own counter
    M("gptcache.answered_pct", "%", "higher"),
    M("reference.gptcache_counter.answered_pct", "%"),
    M("gptcache.{recall|precision}_minus_nn_pp", "pp"),
    M("instrument.repeats.gptcache.correct_hit_rate_pct", "%", "higher"),
    # the int8 arm against FP32 (int8_arm: true)
    M("int8.{precision|recall}_minus_fp32_pp", "pp"),
    M("int8.same_{decision|answer}_pct", "%"),
    M("int8.all.same_{decision|answer}_pct", "%"),
    M("int8.min_cosine_vs_fp32", ""),
    M("{int8|onnx}.served_same_answer_pct", "%"),
    M("instrument.noisy.cosine", ""),
    M("instrument.noisy.accuracy_shift_pp", "pp"),
    # latency, one query at a time through every subject, split into its parts
    M(
        "{torch|onnx|int8|gptcache|gptcache_ram|instrument.delay}.{embed|search|store|lookup}.p{50|95}_ms",
        "ms",
        "lower",
    ),
    M("lookup.speedup_vs_" + _GPTCACHES, "x", "higher"),
    M("control.torch.speedup_vs_" + _GPTCACHES, "x"),
    M("int8.speedup_vs_" + _GPTCACHES, "x", "higher"),
    M("onnx.min_cosine_vs_torch", "", "higher"),
    M("instrument.delay.known_ms", "ms"),
    M("instrument.delay.embed_seen_ms", "ms"),
    # the concurrent pass (int8 arm)
    M("concurrent.{gptcache|gptcache_ram|onnx|int8|instrument.double}.qps", "queries/s", "higher"),
    M("int8.concurrent.speedup_vs_" + _GPTCACHES, "x", "higher"),
    M("onnx.concurrent.speedup_vs_" + _GPTCACHES, "x"),
    M("instrument.double.qps_over_int8", "x"),
    # the speed pass against the LLM (gptcache_speed.py, llm_answer_tokens > 0)
    M("speed.{gptcache_hit|llm_answer}.p50_ms", "ms", "lower"),
    M("speed.llm_tokens_mean", "tokens"),
    M("speed.{gptcache|traffic}_vs_llm", "x", "higher"),
    M("control.empty_gptcache.p50_ms", "ms", "lower"),
    M("control.empty_gptcache.speedup_vs_llm", "x"),
    M("instrument.llm_wait.{known|seen}_ms", "ms"),
)

# semantic-cache-ttft: the TTFT stream's metrics (mechanisms.semantic.series.TTFT_METRICS; serving's
# semantic-e2e reports the same)
TTFT = TTFT_METRICS

# semantic-cache-memory (memory_case.py; the GPU figures only on a GPU)
_RUNS = "{no_cache|hash_cache|semantic_cache|control.no_cache|instrument.extra_allocation}"
MEMORY = (
    M(_RUNS + ".rss_peak_mb", "MiB", "lower"),
    M(_RUNS + ".ru_maxrss_mb", "MiB", "lower"),
    M(_RUNS + ".gpu_peak_mb", "MiB", "lower"),
    M("memory.{rss|hash_rss|gpu}_change_pct", "%", "lower"),
    M("control.{rss|gpu}_change_pct", "%", "lower"),
    # the instrument: a known extra allocation
    M("instrument.known_mb", "MiB"),
    M("instrument.{rss|gpu}_seen_mb", "MiB"),
)

# semantic-cache-embed-perf (perf_case.py)
EMBED_PERF = (
    M("embed_batch.{ours|st}_qps", "texts/s", "higher"),
    M("embed_batch.ours_vs_st", "x", "higher"),
    M("embed_batch.min_cosine_vs_st", "", "higher"),
    M("embed_single.qps", "texts/s", "higher"),
    M("lsh_sign.seconds", "s", "lower"),
    M("lsh_sign.vectors_per_s", "vectors/s", "higher"),
)

# semantic-cache-entity-keys (entity_case.py)
_KEYS = "{token|entity|lsh|entity_lsh|control.exact_key}"
_BATCHING = (  # entity_case.ARMS but the baseline, control.no_batching
    "static_batch_token_key|dynamic_batch_token_key|dynamic_batch_entity_key|control.static_batch_entity_key"
    "|instrument.fixed_wait|standin.dynamic_unique_key"
)
_ARMS = "{" + _BATCHING + "|control.no_batching}"
ENTITY_KEYS = (
    # correct and wrong hits per key scheme through Redis, and the instrument (every insert asked again)
    M(_KEYS + ".correct_hit_rate_pct", "%", "higher"),
    M(_KEYS + ".wrong_hit_rate_pct", "%", "lower"),
    M("instrument.repeats." + _KEYS + ".correct_hit_rate_pct", "%", "higher"),
    # per batching arm (dispatcher.py)
    M(_ARMS + ".added_ms_mean", "ms", "lower"),
    M(_ARMS + ".added.p{50|95|99}_ms", "ms", "lower"),
    M(_ARMS + ".worker_wait_ms_mean", "ms", "lower"),
    M(_ARMS + ".end_to_end_ms_mean", "ms", "lower"),
    M(_ARMS + ".requests_per_batch", "requests"),
    M("{" + _BATCHING + "}.e2e_added_ms_mean", "ms", "lower"),  # over no batching: every arm but the baseline
    # the stand-in's window and the instrument's known wait (parameters), and the stand-in's instrument
    M("standin.dynamic_unique_key.window_ms", "ms"),
    M("standin.dynamic_unique_key.wait_vs_window", "x"),
    M("instrument.fixed_wait.known_ms", "ms"),
    # added latency against static batching with token keys
    M("batching.dynamic_vs_static_added_ms", "ms", "lower"),
    M("standin.unique_vs_static_added_ms", "ms", "lower"),
    M("control.static_vs_static_added_ms", "ms", "lower"),
)
