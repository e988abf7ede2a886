"""C2's stand-in (issue 39, attribution to the named mechanism): the semantic key's hits are the
SBERT embedding's only where they exceed those of a non-semantic similarity hash, a SimHash of
the prompt's character 4-grams, run through the same hyperplanes, key, store, bands and radius
rule in the same run. The unit tests pin what the stand-in's vector is; the run tests (real
Redis Cluster, all-MiniLM-L6-v2) show that the stand-in arm is the semantic key's pipeline with
only the vector replaced, and that the ledger calls a semantic key that is such a hash
`not attributable` and a blind stand-in `inconclusive`."""

import numpy as np
import pytest

from harness.mechanisms.semantic import keys
from harness.model import driver_contract
from harness.model.driver_contract import CaseContext
from tests.suites.semantic_cache.test_semantic_spec import check_verdict, verdicts_of

KEYS = dict(
    dataset_rows=60,
    insert_fraction=1.0,
    latency_queries=2,
    radii=[0, 4, 8, 12, 16],
    thresholds=[0.9, 0.8],
    torch_threads=1,
)
# the C2 checks that judge the semantic key's hits at the calibrated radius
JUDGED = ("lsh.net_hit_rate_pct", "lsh.net_gain_over_hash_pp")


def _cos(a: str, b: str) -> float:
    va, vb = keys.char_ngram_vectors([a, b])
    return float(va @ vb)


def test_char_ngram_vectors_are_unit_deterministic_and_case_blind():
    v = keys.char_ngram_vectors(["How do I reset my password?", "", "how do i RESET my password"])
    assert v.shape == (3, 4096) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v[0], keys.char_ngram_vectors(["How do I reset my password?"])[0])  # no PYTHONHASHSEED
    assert float(v[0] @ v[2]) == pytest.approx(1.0, abs=1e-5)  # normalized text: case and punctuation are not n-grams


def test_char_ngrams_see_spelling_not_meaning():
    """The stand-in knows spelling: a typo stays close, a paraphrase in other words does not
    (SBERT puts that paraphrase at cosine 0.79, semantic-cache.md)."""
    base = "How do I reset my password?"
    typo = _cos(base, "How do I resett my pasword?")
    paraphrase = _cos(base, "I forgot my login password, what should I do?")
    unrelated = _cos(base, "What is the capital city of Australia?")
    assert typo > 0.6 > 0.4 > paraphrase > unrelated
    assert keys.char_ngram_vectors([base], n=3).shape == (1, 4096)
    assert keys.char_ngram_vectors([base], dim=256).shape == (1, 256)


def _run(cluster, tmp, **params):
    drv = driver_contract.get("semantic-cache-keys")
    p = drv.resolve_params("test", {**KEYS, **params})
    out = drv.run(CaseContext("semantic-cache", "semantic", 1, "local", p, tmp, cluster, log=lambda m: None))
    assert out.status == "ok", out.reason
    return out


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    """The semantic case on a seeded 60 records as designed, and with the semantic key's
    embedding replaced by the stand-in's vector (signature=charsim)."""
    base = tmp_path_factory.mktemp("standin")
    return {
        name: _run(cluster, base / name, **extra) for name, extra in (("on", {}), ("charsim", {"signature": "charsim"}))
    }


def test_the_stand_in_is_the_semantic_keys_pipeline_with_only_the_vector_replaced(runs):
    """With the embedding replaced by the stand-in's vector, the semantic key scores exactly
    what the stand-in arm scores (same hyperplane seed, store, bands, radius rule): the arm
    removes the embedding and nothing else. With the embedding, the arm is measured beside it
    in the same run, and its own instrument (verbatim repeats) sees every hit."""
    on, cs = ({k: x.value for k, x in runs[n].metrics.items()} for n in ("on", "charsim"))
    for m in (
        "correct_hit_rate_pct",
        "wrong_hit_rate_pct",
        "net_hit_rate_pct",
        "recall_pct",
        "radius",
        "gain_over_hash_pp",
        "net_gain_over_hash_pp",
    ):
        assert cs[f"lsh.{m}"] == pytest.approx(cs[f"charsim.{m}"]), m
        assert on[f"charsim.{m}"] == pytest.approx(cs[f"charsim.{m}"]), m  # the arm does not depend on the key
    assert on["instrument.repeats.charsim.correct_hit_rate_pct"] == 100
    assert on["instrument.repeats.charsim_r0.correct_hit_rate_pct"] == 100
    assert on["charsim_lookup.p50_ms"] < on["lookup.p50_ms"]  # no model in the stand-in's lookup
    rows = runs["on"].series["schemes"].columns["scheme"]
    assert any(str(r).startswith("stand-in:") for r in rows)


def test_c2_with_a_similarity_hash_for_the_embedding_is_not_attributable(runs):
    """The issue's mutation, as a parameter: the semantic key's gain over the prompt hash is
    there (a similarity hash does hit paraphrases), but it does not exceed the stand-in's, so
    the ledger must not attribute it to the embedding."""
    v = verdicts_of("C2", "semantic", runs["charsim"])
    for metric in JUDGED:
        stand = [r for r in v[metric].controls if r.kind == "stand_in"]
        assert stand and all(r.held is False for r in stand), metric
        assert str(v[metric].outcome) != "reproduced"
    assert str(v["lsh.net_gain_over_hash_pp"].outcome) == "not attributable"


def test_c2_with_a_blind_stand_in_is_inconclusive(runs):
    """A stand-in that hits nothing would let any key pass the stand-in control; its own
    instrument (the verbatim repeats through its lookup) must then make the check inconclusive."""
    v = verdicts_of("C2", "semantic", runs["on"], drop=("instrument.repeats.charsim.correct_hit_rate_pct",))
    for metric in JUDGED:
        assert str(v[metric].outcome) == "inconclusive", (metric, v[metric].reason)


def test_c2_stand_in_held_with_the_embedding(runs):
    """With all-MiniLM-L6-v2 the semantic key beats the character hash by more than the
    control's margin on these 60 records, so the stand-in control holds."""
    v = verdicts_of("C2", "semantic", runs["on"])
    stand = [r for r in v["lsh.net_gain_over_hash_pp"].controls if r.kind == "stand_in"]
    assert stand and all(r.held is True for r in stand), v["lsh.net_gain_over_hash_pp"].reason


def test_net_hits_count_a_wrong_answer_against_a_right_one():
    """A cache that answers every query with its nearest entry has more correct hits than a
    calibrated one, and many more wrong ones: judged on net hits it does not reproduce C2's gain
    (on correct hits alone it did, issue 39's mutation semantic-cache/lsh-answers-everything)."""
    from harness.experiments.semantic_cache.keys_case import scheme_metrics
    from harness.mechanisms.semantic.metrics import CacheCounts

    m = scheme_metrics(
        "lsh", CacheCounts(queries=100, hits=95, correct=43, wrong=52, should_hit=50, false_hits_on_new=45)
    )
    assert m["lsh.correct_hit_rate_pct"].value == pytest.approx(43)
    assert m["lsh.net_hit_rate_pct"].value == pytest.approx(-9)
    metrics = {
        "lsh.net_gain_over_hash_pp": -9.0,
        "control.exact_key.net_gain_over_hash_pp": 0.0,
        "charsim.net_gain_over_hash_pp": 10.0,
        "instrument.repeats.lsh.correct_hit_rate_pct": 100.0,
        "instrument.repeats.charsim.correct_hit_rate_pct": 100.0,
        "instrument.charsim.known_pairs_agree_pct": 100.0,
    }  # the stand-in's own instrument, held
    assert str(check_verdict("C2", "semantic", "lsh.net_gain_over_hash_pp", metrics).outcome) == "not reproduced"
