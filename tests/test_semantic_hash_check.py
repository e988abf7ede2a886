"""C2's exact-hash check can come out either way: on GPTCache's paraphrases no query repeats
an inserted prompt, so the prompt hash and its control (the same GETs against keys never
written) both hit nothing and the check is inconclusive; with repeated prompts in the same
stream (gptcache_repeats.json: GPTCache's records plus every other origin asked again as it
is) the hash cache answers them, the empty-cache control does not, and the check gives a
verdict. Real cluster, real embedding model."""

from tests.test_semantic_spec import check_verdict
from tests.test_semantic_store import FIX, _run

PARAMS = dict(insert_fraction=1.0, latency_queries=2, radii=[0, 4], thresholds=[0.9, 0.8], torch_threads=1)


def test_the_hash_check_needs_prompts_that_repeat(cluster, tmp_path):
    metric = "hash.correct_hit_rate_pct"
    _, plain = _run("semantic-cache-keys", "semantic", cluster, tmp_path / "plain",
                    dataset=str(FIX / "gptcache_small.json"), **PARAMS)
    _, rep = _run("semantic-cache-keys", "semantic", cluster, tmp_path / "repeats",
                  dataset=str(FIX / "gptcache_repeats.json"), **PARAMS)
    assert plain[metric] == 0 and plain["control.empty_cache.correct_hit_rate_pct"] == 0
    # 10 of the 30 queries repeat an inserted prompt; the test split holds a share of them
    assert rep[metric] > 0 and rep["control.empty_cache.correct_hit_rate_pct"] == 0
    assert rep["hash.wrong_hit_rate_pct"] == 0  # an exact hash never answers another prompt
    before = check_verdict("C2", "semantic", metric, plain, tmp_path)
    after = check_verdict("C2", "semantic", metric, rep, tmp_path)
    assert before.control_held is False and str(before.outcome) == "inconclusive"
    assert after.control_held is True and str(after.outcome) != "inconclusive", after.reason
