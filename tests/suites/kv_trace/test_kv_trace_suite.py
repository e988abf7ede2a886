"""The kv-trace suite end to end through the command line: the shared trace gets the capacity
curve, C1 with a verdict, the tier table with its controls and the Mooncake paper's figures
labelled as the paper's; a user's own trace (--set prefix-cache.trace=FILE) gets the same
page without the paper's figures. Sized down (fewer policies and capacities) to fit the
test budget; the local profile runs the full curve."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from harness.base.paths import REPO_ROOT, suite_spec
from harness.model import spec
from harness.model.stored_run import load_run
from harness.verdict.analysis import analyze
from tests.system.test_hostile import assert_one_line, cli

TRACE = REPO_ROOT / "data/mooncake/conversation_trace.jsonl"
SMALL = [
    "--set",
    "prefix-cache.policies=[lru, lfu, hybrid, random, opt, leaf-lru]",
    "--set",
    "prefix-cache.capacities_tokens=[100000, 3000000, 50000000, 1000000000]",
    "--set",
    "crosscheck.session_fraction=0.005",
]


def run(tmp_path, *extra):
    code, out, err = cli("run", "kv-trace", "--profile", "local", "--results-dir", tmp_path / "results", *SMALL, *extra)
    assert code == 0, err[-2000:]
    run_dir = next((tmp_path / "results").iterdir())
    return run_dir, unescape(re.sub(r"<[^>]+>", " ", (run_dir / "report.html").read_text()))


def verdict_of(run_dir, claim: str) -> str:
    return next(c.outcome.value for c in analyze(load_run(run_dir)).claims if c.id == claim)


def test_the_suite_is_valid_and_names_its_trace():
    s = spec.load_suite_file(suite_spec("kv-trace"))
    for profile in ("local", "lab-sim", "lab-a100"):
        params = s.case_params(s.case("prefix-cache"), profile)
        assert params["trace"] == "data/mooncake/conversation_trace.jsonl" and params["block_size"] == 512


def test_shared_trace_report_shows_curve_c1_tiers_and_the_papers_figures(tmp_path):
    run_dir, text = run(tmp_path)
    rec = next(r for r in json.loads((run_dir / "results.json").read_text())["records"] if r["case"] == "prefix-cache")
    assert rec["facts"]["trace_is_mooncake_conversation"] is True
    m = {k: v["value"] for k, v in rec["metrics"].items()}
    assert m["reuse.max.token_hit_pct"] == pytest.approx(37.362, abs=0.01)
    assert m["curve.opt_violations"] == 0
    assert 0 < m["curve.lru.at_3M.share_of_max_pct"] < 50 < m["curve.lru.at_50M.share_of_max_pct"]
    # one pool against per-instance caches, with the recount beside it and both controls
    for name in ("pool.shared.token_hit_pct", "pool.instances.round_robin.token_hit_pct"):
        assert m[name] == pytest.approx(m[f"reference.{name}"], abs=1e-6), name
    assert m["pool.one_instance.gap_pp"] == 0 and m["pool.dup.shared_gain_over_round_robin_pp"] > 25
    assert "One shared KV pool against per-instance caches" in text and "Reuse per conversation" in text
    assert m["sessions.count"] > 100 and 0 < m["sessions.max.with_hits_pct"] <= 100
    assert "Prefix-cache hit rate against capacity" in text and "The source's tiers on the trace" in text
    assert "What the Mooncake paper states for this trace (the paper's figures, not measured here)" in text
    assert "stated by the paper" in text and "less than 50% of the maximum" in text
    assert verdict_of(run_dir, "C1") == "reproduced"
    assert verdict_of(run_dir, "C17") != "not run"


def test_a_users_trace_gets_the_same_page_without_the_papers_figures(tmp_path):
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(TRACE.read_text().splitlines(keepends=True)[:1500]))
    run_dir, text = run(
        tmp_path,
        "--set",
        f"prefix-cache.trace={mine}",
        "--set",
        f"crosscheck.trace={mine}",
        "--set",
        "crosscheck.session_fraction=0.05",
    )
    rec = next(r for r in json.loads((run_dir / "results.json").read_text())["records"] if r["case"] == "prefix-cache")
    assert rec["facts"]["trace_is_mooncake_conversation"] is False and rec["facts"]["trace_file"] == str(mine)
    assert rec["metrics"]["trace.requests"]["value"] == 1500
    assert "Prefix-cache hit rate against capacity" in text and "KV-cache reuse on the trace (C1)" in text
    assert "Not shown: they describe the Mooncake conversation trace" in text
    assert "stated by the paper" not in text and "paper T2" not in text
    assert verdict_of(run_dir, "C1") in ("reproduced", "not reproduced")


def test_tier_parameters_are_checked_before_anything_runs(tmp_path):
    res = cli(
        "run",
        "kv-trace",
        "--profile",
        "local",
        "--results-dir",
        tmp_path / "r",
        "--set",
        "prefix-cache.tier_gb=[24, 128]",
    )
    assert_one_line(res, (2,), "give three values, for L1, L2 and L3")
    res = cli(
        "run",
        "kv-trace",
        "--profile",
        "local",
        "--results-dir",
        tmp_path / "r",
        "--set",
        "prefix-cache.tier_policies=[lru, lru, mru]",
    )
    assert_one_line(res, (2,), "is not lru, leaf-lru or lru-K")
