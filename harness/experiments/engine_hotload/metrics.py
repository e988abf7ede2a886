"""The metrics the engine-hotload drivers report, either backend (ort, trt): cold start, prewarm,
signed load, hot swap and incompatible swap (cases.py, signed_load.py, hot_swap_case.py, incompatible_swap_case.py)."""

from harness.base.metrics_model import MetricDecl as M

PREWARM_MODE = "{cold|profile0|prewarmed}"  # cases.MODE_PREFIX: no prewarm, the source's profile 0, every profile
BUCKET = "b{batch}x{seq}"  # a served shape bucket (lifecycle.Bucket.name)
ARM = "{swap|in_place|pause}"  # swap_service.service_metrics: the hot swap and the actions beside it

COLD_START = (
    # median over fresh processes: each stage, and from nothing to the first result
    M("read_ms", "ms", "lower"),
    M("verify_ms", "ms", "lower"),
    M("deserialize_ms", "ms", "lower"),
    M("context_ms", "ms", "lower"),
    M("first_infer_ms", "ms", "lower"),
    M("total_ms", "ms", "lower"),
    M("engine_mib", "MiB"),
)

PREWARM = (
    # per prewarm mode: the very first request, and the worst bucket's first request over steady state
    M(PREWARM_MODE + ".first_ms", "ms", "lower"),
    M(PREWARM_MODE + ".first_over_p50", "x", "lower"),
    M(PREWARM_MODE + ".first_over_p99", "x", "lower"),
    # per shape bucket: its first request in each mode, and its steady state
    M(BUCKET + "." + PREWARM_MODE + "_first_ms", "ms", "lower"),
    M(BUCKET + ".p50_ms", "ms", "lower"),
    M(BUCKET + ".p99_ms", "ms", "lower"),
    # the full prewarm itself
    M("prewarm_runs", "inferences"),
    M("prewarm_ms", "ms", "lower"),
)

SIGNED_LOAD = (
    # verification on: what was tried, refused and deserialized
    M("load_attempts", "files"),
    M("refusal_cases", "files"),
    M("bad_files_confirmed", "files"),
    M("refused", "files", "higher"),
    M("wrong_verdicts", "files", "lower"),
    M("deserialized_refused", "files", "lower"),
    M("deserialized_intact", "files"),
    M("toctou.changed_after_check", "files"),
    # the control: the same loads with verification off
    M("control.refused", "files"),
    M("control.wrong_verdicts", "files", "lower"),
    M("control.deserialized_refused", "files", "lower"),
    M("control.deserialized_intact", "files", "lower"),
    # cost of the check, and the run-time recheck (control: an unchanged copy)
    M("verify_ms", "ms", "lower"),
    M("verify_over_deserialize", "x", "lower"),
    M("runtime_recheck_ms", "ms", "lower"),
    M("runtime_recheck_detects_change", "bool", "higher"),
    M("control.runtime_recheck_detects_change", "bool"),
)

HOT_SWAP = (
    # the stream: requests and failures, by the action whose window they fall in
    M("requests", "requests", "higher"),
    M("swaps_done", "swaps", "higher"),
    M("restarts_done", "restarts"),
    M("failed_requests", "requests", "lower"),
    M("swap_window.failed_requests", "requests", "lower"),
    M("{control|no_drain|in_place}.failed_requests", "requests"),
    # steady state (no action's window) and the restart control's outage
    M("steady.p50_ms", "ms", "lower"),
    M("steady.p99_ms", "ms", "lower"),
    M("steady.gap_ms", "ms", "lower"),
    M("restart.outage_ms", "ms", "lower"),
    M("restart.outage_over_steady", "x"),
    M("restart.no_engine_ms", "ms"),
    # what the clients saw across a hot swap, an in-place swap and a pause
    M(ARM + ".window_max_ms", "ms", "lower"),
    M(ARM + ".window_p99_ms", "ms", "lower"),
    M(ARM + ".window_requests", "requests"),
    M(ARM + ".window_over_steady", "x", "lower"),
    M(ARM + ".window_max_over_call", "x", "lower"),
    M(ARM + ".gap_ms", "ms", "lower"),
    M(ARM + ".gap_over_steady", "x", "lower"),
    M(ARM + ".gap_over_restart_outage", "x", "lower"),
    M(ARM + ".call_ms", "ms", "lower"),
    # the hot swap's phases
    M("swap.to_serving_ms", "ms", "lower"),
    M("swap.switch_ms", "ms", "lower"),
    M("swap.drain_ms", "ms", "lower"),
    # whether each hot swap created its situation, told from the answers
    M("swap.requests_across", "requests"),
    M("swap.new_answers", "requests"),
    M("swap.swaps_answered_by_new", "swaps"),
    M("swap.inflight_requests", "requests"),
    M("swap.swaps_with_inflight", "swaps"),
    M("unrecognised_answers", "requests"),
    M("straddle_requests", "requests"),
    # memory: the RSS peak during a hot swap (control: a restart), and on a GPU its memory's
    M("engine_mib", "MiB"),
    M("rss_peak_extra_mib", "MiB", "lower"),
    M("rss_peak_extra_over_engine", "x", "lower"),
    M("control.rss_peak_extra_over_engine", "x"),
    M("gpu_peak_extra_over_engine", "x"),
    M("control.gpu_peak_extra_over_engine", "x"),
)

INCOMPATIBLE_SWAP = (
    # swaps with the compatibility check on (control: off)
    M("swaps_attempted", "swaps"),
    M("expected_refusals", "swaps"),
    M("incompatible_loaded", "swaps"),
    M("refused", "swaps", "higher"),
    M("wrong_verdicts", "swaps", "lower"),
    M("control.wrong_verdicts", "swaps"),
    M("served_changed_on_refusal", "swaps", "lower"),
    M("accepted_answered_by_new", "swaps"),
    # the request stream during the attempts
    M("requests", "requests"),
    M("failed_requests", "requests", "lower"),
)
