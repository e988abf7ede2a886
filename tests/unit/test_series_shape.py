"""A series declared once (harness.base.metrics_model.SeriesShape): the driver that writes it
and the view that reads it both go through the declaration, and each side's slip is an
error where it happens, not an empty table in the report."""

from __future__ import annotations

import json

import pytest

from harness.base.metrics_model import Column, SeriesShape

SHAPE = SeriesShape(
    "points",
    (
        Column("arm", "text"),
        Column("level"),
        Column("ttft_ms", unit="ms"),
        Column("held", "flag"),
        Column("errors.", "int", family=True),
    ),
    "a note",
)


def test_a_declared_series_is_built_with_its_units_and_note():
    s = SHAPE.make(
        {"arm": ["a", "b"], "level": [1, 2.5], "ttft_ms": [3.0, None], "held": [True, False], "errors.timeout": [0, 1]},
        units={"level": "req/s"},
    )
    assert s.units == {"ttft_ms": "ms", "level": "req/s"} and s.note == "a note"
    assert s.columns["errors.timeout"] == [0, 1]


@pytest.mark.parametrize(
    "columns, words",
    [
        ({"arm": ["a"], "level": [1], "held": [True]}, "declared columns missing: ['ttft_ms']"),
        ({"arm": ["a"], "level": [1], "ttft_ms": [1], "held": [True], "tftt_ms": [1]}, "declares no column 'tftt_ms'"),
        ({"arm": [1], "level": [1], "ttft_ms": [1], "held": [True]}, "'arm': 1 is not text"),
        ({"arm": ["a"], "level": [True], "ttft_ms": [1], "held": [True]}, "'level': True is not number"),
        ({"arm": ["a"], "level": [1], "ttft_ms": [1], "held": [1]}, "'held': 1 is not flag"),
        ({"arm": ["a"], "level": [1], "ttft_ms": [1], "held": [True], "errors.x": [0.5]}, "'errors.x': 0.5 is not int"),
    ],
)
def test_a_driver_that_writes_another_series_than_declared_is_stopped(columns, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        SHAPE.make(columns)


def test_numpy_scalars_count_as_their_python_kind():
    np = pytest.importorskip("numpy")
    s = SHAPE.make(
        {"arm": [np.str_("a")], "level": [np.int64(2)], "ttft_ms": [np.float32(1.5)], "held": [np.bool_(True)]}
    )
    assert s.columns == {"arm": ["a"], "level": [2], "ttft_ms": [1.5], "held": [True]}


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


def _declared() -> dict[str, dict[str, list[SeriesShape]]]:
    """suite name -> {series name: its shapes} from every suite folder's series.py (two cases
    may store different series under one name: redis-cluster's "runs")."""
    import importlib
    import pkgutil

    import harness.experiments as experiments

    out: dict[str, dict[str, list[SeriesShape]]] = {}
    for mod in pkgutil.iter_modules(experiments.__path__):
        if mod.ispkg and importlib.util.find_spec(f"harness.experiments.{mod.name}.series"):
            series = importlib.import_module(f"harness.experiments.{mod.name}.series")
            shapes = out.setdefault(mod.name.replace("_", "-"), {})
            for v in vars(series).values():
                if isinstance(v, SeriesShape) and v not in shapes.get(v.name, []):
                    shapes.setdefault(v.name, []).append(v)
    return out


def _fits(shape: SeriesShape, stored: dict) -> bool:
    try:
        made = shape.make(
            stored["columns"],
            stored.get("note", ""),
            {k: u for k, u in (stored.get("units") or {}).items() if not shape.column(k).unit},
        )
    except (ValueError, KeyError):
        return False
    return made.units == (stored.get("units") or {})


def test_every_suite_declares_its_series_and_real_stored_runs_fit_them():
    """Every suite folder has a series.py; the series of the real runs stored in the tests'
    fixtures (semantic-cache's local run, the sweep's record, kv-trace's) fit the declarations
    their views read them by."""
    from tests import TESTS

    declared = _declared()
    assert set(declared) == {
        "cold-start",
        "engine-hotload",
        "eviction",
        "failover",
        "kv-tiers",
        "kv-trace",
        "prompt-cas",
        "redis-cluster",
        "semantic-cache",
        "serving",
    }
    records = [r for f in (TESTS / "fixtures").rglob("results.json") for r in json.loads(f.read_text())["records"]]
    records.append(json.loads((TESTS / "fixtures" / "serving" / "sweep_local_record.json").read_text())["record"])
    checked = 0
    for r in records:
        for name, s in (r.get("series") or {}).items():
            shapes = declared.get(r["suite"], {}).get(name, [])
            if shapes:
                assert any(_fits(shape, s) for shape in shapes), (r["suite"], name)
                checked += 1
    assert checked >= 10


def test_a_view_takes_rows_and_orders_columns_without_building_a_series_of_its_own():
    from harness.base.metrics_model import Series

    s = Series({"arm": ["a", "b", "c"], "x": [1, 2, 3]}, {"x": "ms"}, "n")
    assert s.take([2, 0]).columns == {"arm": ["c", "a"], "x": [3, 1]} and s.take([1]).units == {"x": "ms"}
    assert list(s.select(["x", "arm"]).columns) == ["x", "arm"] and s.select(["arm"]).units == {}


def test_no_suite_builds_a_series_but_through_its_declaration():
    """`Series(...)` appears nowhere in harness/experiments/ but in the views' aggregation
    (views.py): drivers build through series.py's shapes, views take rows and columns."""
    import ast

    from tests import REPO

    found = []
    for path in sorted((REPO / "harness" / "experiments").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Series":
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found and all(f.startswith("harness/experiments/views.py:") for f in found), found


def test_rows_given_as_lists_take_the_declared_order_and_their_length_is_checked():
    shape = SeriesShape("pairs", (Column("arm", "text"), Column("level"), Column("ttft_ms", unit="ms")))
    s = shape.lists([["a", 1, 2.0], ["b", 2, None]])
    assert s.columns == {"arm": ["a", "b"], "level": [1, 2], "ttft_ms": [2.0, None]} and s.units == {"ttft_ms": "ms"}
    with pytest.raises(ValueError, match="not its 3 declared columns"):
        shape.lists([["a", 1]])
