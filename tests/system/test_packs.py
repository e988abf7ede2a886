"""Claim packs (docs/packs.md): the example pack written from the docs, validated and run
through the command line, its source on the report's first screen and in verdicts.json; a
pack with a bad field is one line and exit 2; the seed pack is the ledger a plain run judges."""

from __future__ import annotations

import json
import re

import pytest

from harness.experiments.semantic_cache import gptcache_subject
from harness.model import ledger_parse, packs, spec
from tests import REPO
from tests.conftest import TEST_CLUSTER_PORT
from tests.system.test_hostile import assert_one_line, cli


def write_docs_pack(folder):
    """docs/packs.md's example pack, its files where the doc's first lines say."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (REPO / "docs" / "packs.md").read_text()
    placed = 0
    for body in re.findall(r"```yaml\n(.*?)```", text, re.S):
        first = body.splitlines()[0]
        if first.startswith("# my-pack/"):
            (folder / first[len("# my-pack/") :].strip()).write_text(body)
            placed += 1
    assert placed == 2, f"docs/packs.md shows {placed} of the example's 2 files (pack.yaml, claims.yaml)"
    return folder


def test_the_pack_of_docs_packs_validates_runs_and_shows_its_source(tmp_path):
    pack = write_docs_pack((tmp_path / "my-pack").resolve())
    code, out, err = cli("packs")
    assert code == 0 and out.startswith("seed ") and "claims" in out, (out, err)
    code, out, err = cli("validate", str(pack))
    assert code == 0 and "ok (pack my-pack: 1 claim, 1 case)" in out, (out, err)
    code, out, err = cli("run", "--pack", str(pack), "--dry-run")
    assert code == 0 and "claim pack my-pack" in out and "kv-trace" in out and "redis-cluster" not in out, out
    code, out, err = cli("run", "--pack", str(pack), "--results-dir", str(tmp_path / "results"))
    assert code == 0, err[-3000:]
    run_dir = next((tmp_path / "results").iterdir())
    man = json.loads((run_dir / "manifest.json").read_text())
    assert man["pack"]["name"] == "my-pack" and man["suites"] == ["kv-trace"], man.get("pack")
    rec = json.loads((run_dir / "results.json").read_text())
    assert [c["id"] for c in rec["claims"]] == ["B1"]  # the pack's ledger is what the run stores and judges
    pc = next(r for r in rec["records"] if r["case"] == "prefix-cache")
    assert pc["params"]["gpu_memory_gib"] == 40  # the pack's setup
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    assert verdicts["pack"] == {
        "name": "my-pack",
        "title": "A blog post on prefix caching for chat services",
        "source_url": "https://example.org/prefix-caching-in-practice",
    }
    (b1,) = verdicts["claims"]
    assert b1["id"] == "B1" and b1["verdict"] == "reproduced", b1  # 37.4% of the trace's prompt tokens
    html = (run_dir / "report.html").read_text()
    assert "Claim pack <b>my-pack</b>" in html and 'href="https://example.org/prefix-caching-in-practice"' in html
    assert "a prefix cache reuses more than 30% of the prompt tokens of a chat service" in html


BAD = {
    "http-url": (("url: https://example.org/prefix-caching-in-practice", "url: http://example.org/x"), "source.url"),
    "script-url": (("url: https://example.org/prefix-caching-in-practice", "url: javascript:alert(1)"), "source.url"),
    "no-quotes": (
        (
            '    - {text: "a prefix cache reuses more than 30% of the prompt tokens of a chat service", where: "second paragraph"}\n',
            "",
        ),
        "source: field 'quotes' is missing",
    ),
    "kind": (("kind: blog", "kind: tweet"), "source.kind: 'tweet' is not one of"),
    "name": (("name: my-pack", "name: My Pack"), "field 'name'"),
    "unknown-suite": (("  kv-trace:\n", "  kv-trac:\n"), "params.kv-trac: no suite 'kv-trac'"),
    "unknown-param": (("{gpu_memory_gib: 40}", "{gpu_memory_gb: 40}"), "gpu_memory_gb"),
    "metric": (("metric: reuse.max.token_hit_pct", "metric: reuse.max.token_hit_pc"), "reuse.max.token_hit_pc"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_pack_with_a_bad_field_is_one_line_naming_it(tmp_path, case):
    (old, new), expected = BAD[case]
    pack = write_docs_pack((tmp_path / "my-pack").resolve())
    for name in ("pack.yaml", "claims.yaml"):
        text = (pack / name).read_text()
        (pack / name).write_text(text.replace(old, new, 1))
    assert_one_line(cli("validate", str(pack)), (2,), expected)


def test_the_seed_pack_is_the_ledger_a_plain_run_judges():
    seed = packs.load("seed")
    assert seed.claims_path == (spec.SUITES_DIR / spec.CLAIMS_FILE).resolve()
    assert [c.id for c in seed.claims()] == [c.id for c in ledger_parse.load_claims()]
    assert packs.names()[0] == "seed" and seed.source.quotes
    assert_one_line(cli("run", "--pack", "nope", "--dry-run"), (2,), "no claim pack 'nope'")


def test_the_mooncake_pack_runs_and_judges_its_three_claims(tmp_path):
    """`harness run --pack mooncake`: only the kv-trace case its claims need, judged by the
    pack's ledger on the shipped trace (deterministic: a simulation and its recount). M1's
    'up to 50%' is not what this trace shows (37.4%), M2's 'approximately 40%' is, and one pool
    beats round-robin per-instance caches (M3), each beside its controls and reference."""
    code, out, err = cli("run", "--pack", "mooncake", "--results-dir", str(tmp_path / "r"))
    assert code == 0, err[-3000:]
    run_dir = next((tmp_path / "r").iterdir())
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    assert verdicts["pack"]["name"] == "mooncake"
    got = {c["id"]: c["verdict"] for c in verdicts["claims"]}
    assert got == {"M1": "direction reproduced, magnitude differs", "M2": "reproduced", "M3": "reproduced"}, got
    assert json.loads((run_dir / "manifest.json").read_text())["suites"] == ["kv-trace"]


def test_the_gptcache_pack_runs_on_gptcache_and_judges_its_two_claims(tmp_path):
    """`harness run --pack gptcache`: the semantic-cache suite's gptcache case with the pack's
    setup (every origin cached, GPTCache's default threshold, the speed pass against SmolLM2),
    smaller here (200 records, 3 speed queries of up to 16 tokens, one repetition). G1's
    checks carry their controls and GPTCache's own hit counter as the reference; G2 is judged
    on the traffic's mean, which the misses bound far below 100x."""
    if gptcache_subject.missing():
        pytest.skip(gptcache_subject.missing())
    small = ("dataset_rows=200", "llm_queries=3", "llm_answer_tokens=16", "latency_queries=4")
    sets = [a for s in small for a in ("--set", f"gptcache.{s}")]
    code, out, err = cli(
        "run", "--pack", "gptcache", "--repeat", "1", "--base-port", str(TEST_CLUSTER_PORT + 94),
        "--results-dir", str(tmp_path / "r"), *sets,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    run_dir = next((tmp_path / "r").iterdir())
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    assert verdicts["pack"] == {
        "name": "gptcache",
        "title": packs.load("gptcache").title,
        "source_url": "https://github.com/zilliztech/GPTCache",
    }
    claims = {c["id"]: c for c in verdicts["claims"]}
    assert set(claims) == {"G1", "G2"}
    g1 = claims["G1"]["checks"]
    assert [c["metric"] for c in g1] == ["gptcache.correct_hit_rate_pct", "gptcache.answered_pct"]
    assert all(k["held"] for c in g1 for k in c["controls"]), g1
    ref = g1[1]["reference"]
    assert ref is not None and ref["agrees"], ref  # GPTCache's own counter saw the hits the client saw
    g2 = claims["G2"]["checks"][0]
    # the LLM arm's 500 ms instrument: on a host loaded enough that the timing does not see it
    # (a fresh-clone run beside four other jobs saw -357 ms), the check must say inconclusive,
    # naming the instrument; where it is seen, the claimed speed-up's direction holds
    if all(k["held"] for k in g2["controls"] if k["kind"] == "instrument" and "held" in k):
        assert g2["verdict"] == "direction reproduced, magnitude differs", g2["reason"]
    else:
        assert g2["verdict"] == "inconclusive" and "instrument" in g2["reason"], g2["reason"]
    assert 1.1 < g2["measured"]["median"] < 100
    rec = json.loads((run_dir / "results.json").read_text())
    (case,) = [r for r in rec["records"] if r["case"] == "gptcache"]
    m = {k: v["value"] for k, v in case["metrics"].items()}
    assert m["speed.gptcache_hit.p50_ms"] < m["speed.llm_answer.p50_ms"] <= m["control.empty_gptcache.p50_ms"] * 1.5
    assert (run_dir / "raw" / "semantic-cache" / "gptcache").is_dir()
