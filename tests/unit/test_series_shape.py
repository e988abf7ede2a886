"""A series declared once (harness.base.metrics_model.SeriesShape): the driver that writes it
and the view that reads it both go through the declaration, and each side's slip is an
error where it happens, not an empty table in the report."""

from __future__ import annotations

import pytest

from harness.base.metrics_model import Column, SeriesShape

SHAPE = SeriesShape("points", (Column("arm", "text"), Column("level"), Column("ttft_ms", unit="ms"),
                               Column("held", "flag"), Column("errors.", "int", family=True)), "a note")


def test_a_declared_series_is_built_with_its_units_and_note():
    s = SHAPE.make({"arm": ["a", "b"], "level": [1, 2.5], "ttft_ms": [3.0, None], "held": [True, False],
                    "errors.timeout": [0, 1]}, units={"level": "req/s"})
    assert s.units == {"ttft_ms": "ms", "level": "req/s"} and s.note == "a note"
    assert s.columns["errors.timeout"] == [0, 1]


@pytest.mark.parametrize("columns, words", [
    ({"arm": ["a"], "level": [1], "held": [True]}, "declared columns missing: ['ttft_ms']"),
    ({"arm": ["a"], "level": [1], "ttft_ms": [1], "held": [True], "tftt_ms": [1]}, "declares no column 'tftt_ms'"),
    ({"arm": [1], "level": [1], "ttft_ms": [1], "held": [True]}, "'arm': 1 is not text"),
    ({"arm": ["a"], "level": [True], "ttft_ms": [1], "held": [True]}, "'level': True is not number"),
    ({"arm": ["a"], "level": [1], "ttft_ms": [1], "held": [1]}, "'held': 1 is not flag"),
    ({"arm": ["a"], "level": [1], "ttft_ms": [1], "held": [True], "errors.x": [0.5]}, "'errors.x': 0.5 is not int"),
])
def test_a_driver_that_writes_another_series_than_declared_is_stopped(columns, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        SHAPE.make(columns)


def test_a_declared_unit_cannot_be_overridden_and_rows_keep_the_declared_order():
    with pytest.raises(ValueError, match="has its unit declared"):
        SHAPE.make({"arm": [], "level": [], "ttft_ms": [], "held": []}, units={"ttft_ms": "s"})
    s = SHAPE.rows([{"held": True, "ttft_ms": 2.0, "level": 1, "arm": "a", "errors.x": 3}])
    assert list(s.columns) == ["arm", "level", "ttft_ms", "held", "errors.x"]


def test_a_view_that_asks_for_an_undeclared_column_is_stopped():
    assert SHAPE["ttft_ms"] == "ttft_ms" and SHAPE["errors.MOVED"] == "errors.MOVED"
    with pytest.raises(KeyError, match="declares no column 'ttft_p95'"):
        SHAPE["ttft_p95"]


def test_a_value_column_takes_numbers_and_texts_but_not_flags():
    shape = SeriesShape("pairs", (Column("capacity_blocks", "value"),))
    assert shape.make({"capacity_blocks": [24, 1.5, "24/160/640", None]}).columns["capacity_blocks"][2] == "24/160/640"
    with pytest.raises(ValueError, match="True is not value"):
        shape.make({"capacity_blocks": [True]})
