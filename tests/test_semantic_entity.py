"""Section 3.3 keys: the rule-based entity extractor and the batching plans."""

import pytest

from harness.experiments.semantic_cache import entity_keys as E


def test_extractor_finds_typed_entities():
    e = E.extract("Email john.doe@example.com about Hugging Face Hub on 2023-04-03, version 2.10.0 of Dataset.map()")
    kinds = dict((k, v) for k, v in e.entities)
    assert kinds["email"] == "john doe example com"
    assert kinds["date"] == "2023 04 03"
    assert kinds["number"] == "2 10 0"
    assert ("name", "hugging face hub") in e.entities
    assert "emailslot" in e.template and "dateslot" in e.template and "2023" not in e.template


def test_same_template_same_entities_share_a_key_in_any_order():
    a = E.entity_key("Compare Paris and Berlin in 2020")
    b = E.entity_key("compare  Paris and Berlin in 2020!")
    c = E.entity_key("Compare Paris and Madrid in 2020")
    assert a == b
    assert a != c
    # entity set is sorted: swapping the entities keeps the set, the template is the same
    assert E.entity_key("Compare Berlin and Paris in 2020") == a


def test_sentence_start_word_and_I_are_not_names():
    e = E.extract("Where can I find the docs")
    assert e.entities == ()


def test_dynamic_batches_join_only_equal_keys():
    arrivals = [0.000, 0.001, 0.002, 0.010, 0.0105]
    keys = ["a", "b", "a", "a", "a"]
    out = E.plan_batches(arrivals, keys, max_wait_s=0.005)
    assert out[0] == pytest.approx(0.005) and out[2] == pytest.approx(0.005)  # a joined a
    assert out[1] == pytest.approx(0.006)  # b alone waits its own window
    assert out[3] == pytest.approx(0.015) and out[4] == pytest.approx(0.015)  # a new window after the first closed


def test_dynamic_batch_dispatches_when_full():
    out = E.plan_batches([0.0, 0.001, 0.002], ["k", "k", "k"], max_wait_s=0.005, max_batch=2)
    assert out[:2] == [0.001, 0.001] and out[2] == pytest.approx(0.007)


def test_static_batches_ignore_keys():
    arrivals = [0.0, 0.001, 0.002, 0.003, 0.100]
    out = E.plan_static_batches(arrivals, batch_size=2, max_wait_s=0.05)
    assert out == [0.001, 0.001, 0.003, 0.003, pytest.approx(0.150)]
