"""The C2 stand-in's own instrument (issue 52): its signatures of known prompt pairs, through
the same code as its keys. The real stand-in reads 100%; a hash that ignores half the prompt
does not."""

from __future__ import annotations

import numpy as np

from harness.experiments.semantic_cache import keys_case
from harness.mechanisms.semantic import keys

TEXTS = [
    "How do I reset my password on the website?",
    "What is the capital city of France today?",
    "Can you recommend a good book about machine learning?",
    "Where can I find the nearest train station?",
]
P = {"charsim_ngram": 4, "charsim_dim": 4096}


class _Workload:
    inserts = [(t, i) for i, t in enumerate(TEXTS)]


def test_known_pairs_hold_duplicates_and_half_replaced_prompts():
    pairs = keys_case.known_pairs(TEXTS)
    assert sum(same for _, _, same in pairs) == 2 * len(TEXTS)
    assert sum(not same for _, _, same in pairs) == 2 * len(TEXTS)
    for a, b, same in pairs:
        assert (keys.normalize(a) == keys.normalize(b)) == same


def test_stand_in_instrument_reads_100_for_the_stand_in():
    m = keys_case._stand_in_instrument(P, _Workload, keys.projection(P["charsim_dim"], 1))
    assert m["instrument.charsim.known_pairs_agree_pct"].value == 100.0


def test_stand_in_instrument_fails_a_hash_of_half_the_prompt(monkeypatch):
    real = keys.char_ngram_vectors

    def half(texts, n=4, dim=4096):
        return real([keys.normalize(t)[: len(keys.normalize(t)) // 2] for t in texts], n, dim)

    monkeypatch.setattr(keys, "char_ngram_vectors", half)
    m = keys_case._stand_in_instrument(P, _Workload, keys.projection(P["charsim_dim"], 1))
    assert m["instrument.charsim.known_pairs_agree_pct"].value < 100


def test_stand_in_instrument_fails_a_hash_of_the_wrong_text(monkeypatch):
    """A stand-in that mangles the prompt (here: every text read as the same one) fails too."""
    monkeypatch.setattr(keys_case, "_stand_in_sigs", lambda p, texts, cproj: np.zeros(len(texts), dtype=np.uint64))
    m = keys_case._stand_in_instrument(P, _Workload, None)
    assert m["instrument.charsim.known_pairs_agree_pct"].value == 50.0
