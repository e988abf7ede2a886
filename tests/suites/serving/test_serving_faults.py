"""The serving cases when the engine is not there or dies mid-run: the case is `failed` with
the reason (the runner goes on to the next case), and it comes back within its bounds. The
engine is tests/serving_fakes.py's real HTTP server replaying recorded vLLM output."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from harness.infra.target import LlmEndpoint, Target
from harness.model.driver_contract import CaseContext, get
from tests.serving_fakes import FakeServer, free_port

pytest.importorskip("aiohttp")
SMALL = {
    "max_requests": 8,
    "duration_s": 2.0,
    "instrument_requests": 2,
    "instrument_gap_s": 0.2,
    "timeout_s": 5.0,
    "stall_s": 1.0,
}


def run_prefix(tmp_path: Path, engines: dict, params: dict | None = None):
    d = get("serving-prefix-cache")
    ctx = CaseContext(
        "serving",
        "prefix-cache",
        1,
        "local",
        d.resolve_params("prefix-cache", params or SMALL),
        tmp_path,
        Target("local", engines=engines),
        log=lambda m: None,
    )
    return d.run(ctx)


def test_no_engine_in_the_run_fails_the_case_with_the_reason(tmp_path):
    out = run_prefix(tmp_path, {})
    assert out.status == "failed" and "no serving engine 'cached'" in out.reason


def test_an_engine_that_does_not_answer_fails_the_case(tmp_path):
    out = run_prefix(tmp_path, {"cached": LlmEndpoint(f"http://127.0.0.1:{free_port()}", "smollm2", True, True)})
    assert out.status == "failed" and "does not answer" in out.reason


def test_a_server_without_vllms_counters_gives_missing_hit_rates(tmp_path):
    with FakeServer("ok", gap_s=0.0) as srv:
        out = run_prefix(tmp_path, {"external": LlmEndpoint(srv.url, "smollm2")})
    assert out.status == "ok", out.reason
    m = out.metrics
    assert m["trace.on.ok"].value == 8 and m["trace.on.engine_hit_pct"].value is None
    assert "trace.predicted_hit_pct" not in m  # no cache_config_info: no capacity to predict at
    assert "trace.off.requests" not in m  # a user's server: no off arm


def test_an_engine_that_dies_mid_run_fails_the_case_with_the_reason(tmp_path):
    with FakeServer("ok", gap_s=0.05) as srv:

        def kill_after_some():
            while srv.served < 3:
                threading.Event().wait(0.02)
            srv.stop()

        killer = threading.Thread(target=kill_after_some, daemon=True)
        killer.start()
        out = run_prefix(tmp_path, {"external": LlmEndpoint(srv.url, "smollm2")})
        killer.join(30)
    assert out.status == "failed"
    assert "stopped answering during" in out.reason and "does not answer" in out.reason
    assert (tmp_path / "trace.on.csv").exists() or (tmp_path / "instrument.on.csv").exists()
