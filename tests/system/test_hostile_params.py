"""Parameters and traces a hostile or careless user gives: bounded, refused in one line.

A float parameter had no upper bound (`--set prefix-cache.duration_s=1e9` planned a run of
years); a trace whose requests all have empty `hash_ids` failed inside the simulator with an
IndexError instead of a line naming the trace.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.base.errors import BadInput
from harness.model import driver_contract
from harness.model.driver_contract import DAY_S, INT_LIMIT, Param


def _harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout)


def test_every_numeric_float_parameter_has_an_upper_bound():
    drivers = driver_contract.load_all()
    unbounded = [
        f"{d.name}.{k}"
        for d in drivers.values()
        for k, p in d.params.items()
        if float in (p.type if isinstance(p.type, tuple) else (p.type,)) and p.max is None
    ]
    assert not unbounded, unbounded


@pytest.mark.parametrize("suffix, bound", [("_s", DAY_S), ("_ms", DAY_S * 1000), ("seconds", DAY_S), ("_fraction", 1)])
def test_a_parameter_named_for_a_duration_or_a_fraction_is_bounded_by_its_name(suffix, bound):
    name = f"x{suffix}"
    bounded = driver_contract._with_named_max(name, Param(float, 0.5))
    assert bounded.max == bound
    with pytest.raises(BadInput, match="at most"):
        bounded.check(f"case.{name}", bound * 10.0)
    assert bounded.check(f"case.{name}", float(bound)) == bound


def test_an_integer_duration_is_bounded_too_and_other_integers_keep_the_c_int():
    assert driver_contract._with_named_max("warm_s", Param(int, 3)).max == DAY_S
    assert driver_contract._with_named_max("clients", Param(int, 3)).max is None
    with pytest.raises(BadInput, match=str(INT_LIMIT)):
        Param(int, 3).check("case.clients", INT_LIMIT + 1)


def test_a_default_past_its_bound_is_the_drivers_mistake():
    with pytest.raises(ValueError, match="above its bound"):
        driver_contract._with_named_max("duration_s", Param(float, 2.0 * DAY_S))


def test_an_exponent_without_a_dot_is_a_number_not_text():
    # YAML 1.1 reads `1e9` as a string; it used to be refused as "expected float, got str"
    assert Param(float, 1.0).check("case.rate", "2e1") == 20.0
    with pytest.raises(BadInput, match="expected"):
        Param(float, 1.0).check("case.rate", "fast")
    assert Param(str, "x").check("case.name", "2e1") == "2e1"


@pytest.mark.parametrize("value", ["1e9", "1000000000", "86401"])
def test_a_run_of_years_is_refused_in_one_line(value):
    r = _harness(
        "run", "serving", "-k", "serving/prefix-cache", "--set", f"prefix-cache.duration_s={value}", "--dry-run"
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "prefix-cache.duration_s" in lines[0] and "at most 86400" in lines[0]
    assert "Traceback" not in r.stderr


def test_a_fraction_above_one_is_refused():
    r = _harness("run", "kv-trace", "-k", "kv-trace/crosscheck", "--set", "crosscheck.session_fraction=3", "--dry-run")
    assert r.returncode == 2 and "at most 1" in r.stderr and "Traceback" not in r.stderr


def test_a_trace_whose_requests_are_all_empty_is_named_not_an_index_error(tmp_path):
    from harness.mechanisms.kv_blocks import trace

    path = tmp_path / "empty.jsonl"
    path.write_text(
        "".join(
            json.dumps({"timestamp": i, "input_length": 0, "output_length": 1, "hash_ids": []}) + "\n" for i in range(3)
        )
    )
    with pytest.raises(BadInput, match=r"empty\.jsonl: none of its 3 requests has a KV block"):
        trace.load_trace(path, shown=str(path))
    with pytest.raises(BadInput, match="none of its 2 requests"):
        trace.records_trace([{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []}] * 2)
    one = [
        {"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []},
        {"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [7]},
    ]
    assert trace.records_trace(one).n_blocks == 1  # an empty request among others is fine


def test_the_crosscheck_case_names_the_empty_trace(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text(
        "".join(
            json.dumps({"timestamp": i, "input_length": 0, "output_length": 1, "hash_ids": []}) + "\n" for i in range(3)
        )
    )
    r = _harness(
        "run",
        "kv-trace",
        "-k",
        "kv-trace/crosscheck",
        "--set",
        f"crosscheck.trace={path}",
        "--results-dir",
        str(tmp_path / "res"),
        timeout=300,
    )
    assert "IndexError" not in r.stdout + r.stderr
    assert "none of its 3 requests has a KV block" in r.stderr
