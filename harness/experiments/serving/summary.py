"""Per-request results of the streaming client turned into metrics and raw rows.

Latency percentiles are numpy's linear percentiles over the requests that completed (status
ok); the share of each failure kind is a metric of its own, so a run where most requests
fail never shows a good P95 alone. Spread over repetitions is the analysis's (each
repetition's percentile is one value there)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from harness.base import stats
from harness.experiments.serving.series import REQUESTS
from harness.model.driver_contract import Metric, Series
from harness.model.driver_helpers import write_csv

from .client import STATUSES, Result, usage_problems

LATE_MS = 10.0  # a request dispatched more than this after its scheduled time is late
COLUMNS = [
    "index",
    "tag",
    "scheduled_s",
    "status",
    "http_status",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "itl_p50_ms",
    "prompt_tokens",
    "output_tokens",
    "chunks",
    "late_ms",
    "send_ms",
    "parse_us",
    "error",
    "usage_problem",
    "cached_tokens",
]


def _f(v, nd=3):
    return "" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else v)


def write_rows(path: Path, results: list[Result], extra: dict | None = None) -> Path:
    """One CSV row per request (the raw record of the run); `extra` adds constant columns."""
    extra = extra or {}
    rows = []
    for r in results:
        itl50 = stats.percentile(r.itl_ms, 50) if r.itl_ms else None
        rows.append(
            [
                r.index,
                r.tag,
                _f(r.scheduled_s),
                r.status,
                _f(r.http_status),
                _f(r.ttft_ms),
                _f(r.tpot_ms),
                _f(r.e2e_ms),
                _f(itl50),
                _f(r.prompt_tokens),
                _f(r.output_tokens),
                r.chunks,
                _f(r.late_ms),
                _f(r.send_ms),
                _f(r.parse_us, 1),
                r.error,
                r.usage_problem,
                _f(r.cached_tokens),
            ]
            + list(extra.values())
        )
    return write_csv(path, COLUMNS + list(extra), rows)


def _pcts(prefix: str, name: str, values: list[float], qs=(50, 95), note: str = "") -> dict[str, Metric]:
    if not values:
        return {}
    return {f"{prefix}.{name}_p{q}_ms": Metric(stats.percentile(values, q), "ms", "lower", note) for q in qs}


def metrics_of(prefix: str, results: list[Result], note: str = "") -> dict[str, Metric]:
    """{prefix}.ttft_p50_ms ... tpot, itl, e2e; errors by kind; lateness; client overhead."""
    ok = [r for r in results if r.status == "ok"]
    n = max(1, len(results))
    m: dict[str, Metric] = {
        f"{prefix}.requests": Metric(len(results), "requests"),
        f"{prefix}.ok": Metric(len(ok), "requests", "higher"),
    }
    # an "ok" result was timed: StreamParser.finish set its ttft_ms and e2e_ms
    m.update(_pcts(prefix, "ttft", cast("list[float]", [r.ttft_ms for r in ok]), (50, 95, 99), note))
    invented = usage_problems(results)
    if invented:  # TPOT divides by the server's token count: an impossible one is no measurement
        for q in (50, 95):
            m[f"{prefix}.tpot_p{q}_ms"] = Metric(None, "ms", "lower", f"invalid: {prefix}.tpot: {invented}")
    else:
        m.update(_pcts(prefix, "tpot", [r.tpot_ms for r in ok if r.tpot_ms is not None], (50, 95), note))
    m.update(_pcts(prefix, "itl", [x for r in ok for x in r.itl_ms], (50, 95), note))
    m.update(_pcts(prefix, "e2e", cast("list[float]", [r.e2e_ms for r in ok]), (50, 95), note))
    failed = len(results) - len(ok)
    m[f"{prefix}.error_pct"] = Metric(100.0 * failed / n, "%", "lower", "requests that did not complete")
    for s in STATUSES[1:]:
        k = sum(r.status == s for r in results)
        if k:
            m[f"{prefix}.{s}"] = Metric(k, "requests", "lower")
    m.update(overhead_of(prefix, results))
    toks = [r.output_tokens for r in ok if r.output_tokens is not None]
    if invented:
        m[f"{prefix}.output_tokens_mean"] = Metric(None, "tokens", None, f"invalid: {prefix}.output_tokens: {invented}")
    elif toks:
        m[f"{prefix}.output_tokens_mean"] = Metric(sum(toks) / len(toks), "tokens", None, "as the server counts them")
    return m


def invalid_usage(prefix: str, results: list[Result]) -> str:
    """'' or the line that makes a case invalid: `prefix`'s usage counts are impossible (client.usage_problems)."""
    why = usage_problems(results)
    return f"{prefix}.tpot: {why}" if why else ""


def overhead_of(prefix: str, results: list[Result]) -> dict[str, Metric]:
    """Lateness of the schedule and the client's own cost per request."""
    late = [r.late_ms for r in results if r.late_ms is not None]
    m = {}
    if late:
        m[f"{prefix}.late_pct"] = Metric(
            100.0 * sum(x > LATE_MS for x in late) / len(late),
            "%",
            "lower",
            f"requests dispatched more than {LATE_MS:g} ms after their scheduled time",
        )
        m[f"{prefix}.late_p95_ms"] = Metric(
            stats.percentile(late, 95), "ms", "lower", "dispatch time minus scheduled time"
        )
    send = [r.send_ms for r in results if r.send_ms is not None]
    if send:
        m[f"{prefix}.client_send_p50_ms"] = Metric(
            stats.percentile(send, 50), "ms", "lower", "client overhead: dispatch to the request body written"
        )
        m[f"{prefix}.client_send_p95_ms"] = Metric(stats.percentile(send, 95), "ms", "lower")
    chunks = sum(r.chunks for r in results)
    if chunks:
        m[f"{prefix}.client_parse_us_per_chunk"] = Metric(
            sum(r.parse_us for r in results) / chunks, "us", "lower", "client overhead: parsing per streamed chunk"
        )
    return m


def series_of(results: list[Result], arm: str, repetition_note: str = "") -> Series:
    """Per-request columns for the view (the raw CSV holds every field)."""
    return REQUESTS.make(
        {
            "arm": [arm] * len(results),
            "index": [r.index for r in results],
            "status": [r.status for r in results],
            "ttft_ms": [r.ttft_ms for r in results],
            "tpot_ms": [r.tpot_ms for r in results],
            "e2e_ms": [r.e2e_ms for r in results],
            "prompt_tokens": [r.prompt_tokens for r in results],
            "late_ms": [r.late_ms for r in results],
        },
        repetition_note,
    )
