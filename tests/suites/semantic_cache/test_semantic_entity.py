"""Section 3.3 keys: the rule-based entity extractor."""

from harness.experiments.semantic_cache import entity_keys


def test_extractor_finds_typed_entities():
    e = entity_keys.extract(
        "Email john.doe@example.com about Hugging Face Hub on 2023-04-03, version 2.10.0 of Dataset.map()"
    )
    kinds = dict((k, v) for k, v in e.entities)
    assert kinds["email"] == "john doe example com"
    assert kinds["date"] == "2023 04 03"
    assert kinds["number"] == "2 10 0"
    assert ("name", "hugging face hub") in e.entities
    assert "emailslot" in e.template and "dateslot" in e.template and "2023" not in e.template


def test_same_template_same_entities_share_a_key_in_any_order():
    a = entity_keys.entity_key("Compare Paris and Berlin in 2020")
    b = entity_keys.entity_key("compare  Paris and Berlin in 2020!")
    c = entity_keys.entity_key("Compare Paris and Madrid in 2020")
    assert a == b
    assert a != c
    # entity set is sorted: swapping the entities keeps the set, the template is the same
    assert entity_keys.entity_key("Compare Berlin and Paris in 2020") == a


def test_sentence_start_word_and_I_are_not_names():
    e = entity_keys.extract("Where can I find the docs")
    assert e.entities == ()
