"""The metrics each driver of the serving suite may report (`register(..., metrics=...)`), one
tuple per driver, in the order of drivers.py."""

from harness.base.metrics_model import MetricDecl as M
from harness.mechanisms.semantic.series import TTFT_METRICS


def _client(arms: str) -> tuple[M, ...]:
    """summary.metrics_of: the streaming client's figures of an arm's requests (`arms`: its
    name, or a placeholder of several with a literal part: `.ok` alone is too short a name)."""
    return (
        M(arms + ".requests", "requests"),
        M(arms + ".ok", "requests", "higher"),
        M(arms + ".ttft_p{50|95|99}_ms", "ms", "lower"),
        M(arms + ".{tpot|itl|e2e}_p{50|95}_ms", "ms", "lower"),
        M(arms + ".error_pct", "%", "lower"),
        # the requests that failed, by kind (client.STATUSES), each where there was one; never
        # "redirected": a redirect ends the case before its metrics (client.refuse_redirects)
        M(arms + ".{http|connect}_error", "requests", "lower"),
        M(arms + ".stalled", "requests", "lower"),
        M(arms + ".timeout", "requests", "lower"),
        M(arms + ".cut_off", "requests", "lower"),
        M(arms + ".error", "requests", "lower"),
        # the schedule's lateness and the client's own cost (summary.overhead_of)
        M(arms + ".late_pct", "%", "lower"),
        M(arms + ".late_p95_ms", "ms", "lower"),
        M(arms + ".client_send_p{50|95}_ms", "ms", "lower"),
        M(arms + ".client_parse_us_per_chunk", "us", "lower"),
        M(arms + ".output_tokens_mean", "tokens"),
    )


# serving-prefix-cache (prefix_case.py)
PREFIX_CACHE = (
    # per arm: the trace slice and the instrument, each with prefix caching on and off
    *_client("trace.{on|off}"),
    *_client("instrument.{on|off|cold}"),
    M("{trace|instrument}.{on|off}.engine_hit_pct", "%"),
    M("instrument.cold.engine_hit_pct", "%"),
    # the engine's hit rate read a second way (each answer's usage), and per conversation beside the simulator
    M("{trace|instrument}.{on|off}.usage_cached_pct", "%"),
    M("instrument.cold.usage_cached_pct", "%"),
    M("{trace|instrument}.{on|off}.observers_gap_pp", "pp"),
    M("instrument.cold.observers_gap_pp", "pp"),
    M("trace.sessions.count", "sessions"),
    M("trace.sessions.{engine|predicted}_hit_p50_pct", "%"),
    M("trace.sessions.max_gap_pp", "pp", "lower"),
    # the instrument: one long prefix asked again and again
    M("instrument.{on|off}.repeat_ttft_p50_ms", "ms", "lower"),
    M("instrument.ttft_cut_x", "x", "higher"),
    # the trace slice: what caching buys, and the simulator's prediction beside the engine's hit rate
    M("trace.ttft_p50_speedup_x", "x", "higher"),
    M("{trace|instrument}.{tpot|itl}_p50_change_pct", "%"),
    M("instrument.itl_p50_change_vs_cold_pct", "%"),
    M("trace.prompt_tokens", "tokens"),
    M("trace.predicted_hit_pct", "%"),
    M("trace.predicted_max_hit_pct", "%"),
    M("trace.hit_gap_pp", "pp"),
    M("trace.hit_gap_abs_pp", "pp", "lower"),
)

# serving-semantic-e2e (semantic_case.py): the semantic cache's TTFT stream, as the semantic-cache
# suite's ttft case reports it (mechanisms.semantic.series.TTFT_METRICS), and the engine's errors
SEMANTIC_E2E = (*TTFT_METRICS, M("engine.errors", "requests", "lower"))

# serving-client-vs-vllm (peer_case.py)
CLIENT_VS_VLLM = (
    *_client("harness"),
    # vLLM's benchmark client, its rounds pooled
    M("vllm.ok", "requests", "higher"),
    M("vllm.failed", "requests", "lower"),
    M("vllm.{ttft|tpot}_p{50|95}_ms", "ms", "lower"),
    M("vllm.itl_p50_ms", "ms", "lower"),
    M("vllm.own_round_median_ttft_ms", "ms", "lower"),
    # the two clients against each other
    M("peer.{ttft|tpot}_{p50|p95}_diff_pct", "%"),
    M("peer.{ttft|tpot}_{p50|p95}_absdiff_pct", "%", "lower"),
    # the instrument: the harness's client made late by a known wait
    M("instrument.late.ok", "requests", "higher"),
    M("instrument.late.error_pct", "%", "lower"),
    M("instrument.late.ttft_p{50|95|99}_ms", "ms", "lower"),
    M("instrument.late.ttft_p50_diff_pct", "%"),
)

# serving-sweep (sweep_case.py)
_ARMS = "{prefix.on|prefix.off|instrument.on|instrument.off|semantic.on|semantic.hash|semantic.off|semantic.oracle}"
_SEMANTIC = "semantic.{on|hash|off|oracle}"
SWEEP = (
    # per arm; a load is req/s in open loop and users in closed loop (unit None)
    M(_ARMS + ".max_at_slo", None, "higher"),
    M(_ARMS + ".slo_failed_at", None),
    M(_ARMS + ".knee", None),
    M(_ARMS + ".points", "points"),
    M(_ARMS + ".invalid_points", "points", "lower"),
    M(_ARMS + ".requests", "requests"),
    M(_ARMS + ".error_pct", "%", "lower"),
    M(_SEMANTIC + ".wrong_hit_pct", "%", "lower"),
    # what each cache buys, on over off
    M("{prefix|instrument|semantic}.capacity_gain_x", "x", "higher"),
    M("{prefix|instrument|semantic}.ttft_p95_change_pct", "%", "lower"),
    M("{prefix|instrument|semantic}.prefill_tokens_saved_per_s", "tokens/s", "higher"),
    M("{prefix|instrument}.on.engine_hit_pct", "%"),
    M("semantic.on.cache_hit_pct", "%"),
    # C3 against the curve: semantic vs hash over the loads every semantic arm ran steadily
    M("semantic.shared_levels", "loads"),
    M(_SEMANTIC + ".ttft_p95_shared_ms", "ms"),
    M("semantic.vs_hash.ttft_p95_change_pct", "%", "lower"),
)
