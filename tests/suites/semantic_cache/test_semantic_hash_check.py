"""C2's exact-hash check can come out either way: on GPTCache's paraphrases no query repeats
an inserted prompt, so the prompt hash hits nothing while its instrument (every inserted
prompt asked again verbatim) hits them all: not reproduced on that traffic; with repeated
prompts in the same stream (gptcache_repeats.json: GPTCache's records plus every other origin
asked again as it is) the hash cache answers them, the empty-cache control does not, and the
verdict follows the measured level. Real cluster, real embedding model."""

from tests.suites.semantic_cache.test_semantic_spec import check_verdict
from tests.suites.semantic_cache.test_semantic_store import FIX, _run

PARAMS = dict(insert_fraction=1.0, latency_queries=2, radii=[0, 4], thresholds=[0.9, 0.8], torch_threads=1)


def test_the_hash_check_needs_prompts_that_repeat(cluster, tmp_path):
    metric = "hash.correct_hit_rate_pct"
    _, plain = _run(
        "semantic-cache-keys",
        "semantic",
        cluster,
        tmp_path / "plain",
        dataset=str(FIX / "gptcache_small.json"),
        **PARAMS,
    )
    _, rep = _run(
        "semantic-cache-keys",
        "semantic",
        cluster,
        tmp_path / "repeats",
        dataset=str(FIX / "gptcache_repeats.json"),
        **PARAMS,
    )
    assert plain[metric] == 0 and plain["control.empty_cache.correct_hit_rate_pct"] == 0
    # 10 of the 30 queries repeat an inserted prompt; the test split holds a share of them
    assert rep[metric] > 0 and rep["control.empty_cache.correct_hit_rate_pct"] == 0
    assert rep["hash.wrong_hit_rate_pct"] == 0  # an exact hash never answers another prompt
    before = check_verdict("C2", "semantic", metric, plain, tmp_path)
    after = check_verdict("C2", "semantic", metric, rep, tmp_path)
    assert plain["instrument.repeats.hash.correct_hit_rate_pct"] == 100
    assert str(before.outcome) == "not reproduced", before.reason  # the instrument held: a real 0%
    assert after.control_held is True, after.reason  # the empty cache stays at 0%
    band = (15.6, 62.4)
    want = "reproduced" if band[0] <= rep[metric] <= band[1] else "not reproduced"
    assert str(after.outcome) == want, (rep[metric], after.reason)
