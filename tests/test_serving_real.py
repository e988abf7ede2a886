"""The serving suite's drivers end to end against a real engine: vLLM's CPU build serving the
shipped SmolLM2 (started once for the module with engine-infra's LocalEngine, prefix caching
on, stopped after it, every process checked gone). Small slices so that the module stays
within a few minutes on 2 cores. Skipped, with the reason, when the engine's venv is missing.

The engine's hit rate must match the simulator's prediction for the same engine blocks (it
matched to 0.0 points in every run here); the TTFT figures are not asserted (no timed
assertions), only that they were measured."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from harness.drivers import CaseContext, get
from harness.serving_engine import install
from harness.serving_engine.local import EngineConfig, LocalEngine
from harness.target import Target

PORT = int(os.environ.get("HARNESS_TEST_SERVING_PORT", "8047"))
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(install.installed_version() is None,
                                 reason="the engine venv is not installed (.harness/engine/venv): run `harness engine "
                                        "install` (make setup-test does)")]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = LocalEngine(EngineConfig(port=PORT, prefix_caching=True), state_dir=tmp_path_factory.mktemp("engine"))
    ep = eng.up(timeout=900)
    try:
        yield ep
    finally:
        pids = eng.running_pids()
        eng.down()
        assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def run_case(driver: str, case: str, params: dict, tmp_path: Path, engines: dict, rep: int = 1):
    d = get(driver)
    ctx = CaseContext("serving", case, rep, "local", d.resolve_params(case, params), tmp_path / case,
                      Target("local", engines=engines))
    return d.run(ctx), ctx


def test_prefix_cache_on_a_real_engine_matches_the_simulator(engine, tmp_path):
    out, ctx = run_case("serving-prefix-cache", "prefix-cache",
                        {"max_requests": 10, "duration_s": 8, "instrument_requests": 3, "instrument_prefix_tokens": 256,
                         "instrument_gap_s": 0.5}, tmp_path, {"cached": engine})
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["trace.on.ok"] == 10 and m["instrument.on.ok"] == 3
    assert m["trace.on.engine_hit_pct"] > 0  # the slice shares prefixes (its first block at least)
    assert abs(m["trace.hit_gap_pp"]) <= 5, (m["trace.on.engine_hit_pct"], m["trace.predicted_hit_pct"])
    assert m["instrument.on.engine_hit_pct"] >= 50
    assert "trace.off.requests" not in m and not out.facts["mechanism_off_engine"]  # no off engine in this run
    assert out.facts["engine_block_size"] == 128 and out.facts["engine_kv_tokens"] > 0
    assert {"trace.on.csv", "instrument.on.csv", "details.json"} <= {p.name for p in ctx.raw_dir.iterdir()}


def test_the_peer_client_runs_on_the_same_requests(engine, tmp_path):
    out, ctx = run_case("serving-client-vs-vllm", "client-vs-vllm",
                        {"max_requests": 6, "duration_s": 4, "max_prompt_tokens": 128, "output_tokens": 4, "rounds": 2,
                         "instrument_delay_ms": 0}, tmp_path, {"uncached": engine})
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["harness.ok"] == 12 and m["vllm.ok"] == 12 and m["vllm.failed"] == 0  # 2 rounds each
    assert {"peer.ttft_p50_diff_pct", "peer.tpot_p50_diff_pct", "vllm.ttft_p50_ms"} <= set(m)
    # the same requests: vLLM's client reported the prompt lengths the harness's client got in `usage`
    rows = (ctx.raw_dir / "harness.csv").read_text().splitlines()[1:]
    assert sorted(int(r.split(",")[9]) for r in rows) == sorted(out.series["vllm"].columns["prompt_tokens"])
