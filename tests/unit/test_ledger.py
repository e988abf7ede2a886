"""The claims ledger as a whole: every check can come out the other way (it has a control),
every suite's lab-a100 profile fails on a skip, and no driver presents."""

from __future__ import annotations

import pytest

from harness.base.paths import suite_spec
from harness.model import driver_contract, ledger_parse, spec
from harness.model.driver_contract import Record


def test_a_check_without_a_control_is_refused(tmp_path):
    """The ledger loader refuses a check with no control, and the old single `control` form."""
    import shutil

    from harness.base.errors import BadInput

    for name in ("redis-cluster.yaml",):
        shutil.copy(suite_spec(name.removesuffix(".yaml")), tmp_path / name)
    check = (
        "      - {suite: redis-cluster, case: redis-benchmark, metric: GET.p99_ms, op: '<', value: 1.2, unit: ms,"
        " better: lower, observed: o, no_mechanism_off: r%s}\n"
    )
    for extra, message in (
        ("", "no instrument control; add one"),
        (", control: {metric: x, op: '<', value: 1, text: t}", "unknown field 'control'"),
    ):
        (tmp_path / "claims.yaml").write_text(
            "claims:\n  - id: C12\n    section: '2.5'\n    text: t\n    checks:\n" + check % extra
        )
        with pytest.raises(BadInput, match=message):
            ledger_parse.load_claims(tmp_path)
    (tmp_path / "claims.yaml").write_text(
        "claims:\n  - id: C12\n    section: '2.5'\n    text: t\n    checks:\n"
        + check % (", instrument: {metric: control.GET.p99_ms, op: '>', than: GET.p99_ms, factor: 1.5, text: t}")
    )
    assert [k.instruments[0].metric for k in ledger_parse.load_claims(tmp_path)[0].checks] == ["control.GET.p99_ms"]


def test_every_suite_has_a_lab_profile_where_a_skip_fails():
    for name, s in spec.load_all_suites().items():
        assert "local" in s.profiles and "lab-a100" in s.profiles, name
        assert s.profiles["lab-a100"].skipped_fails, f"{name}: a lab run without a tool must not end green"
        assert not s.profiles["local"].skipped_fails, name


def test_drivers_never_build_tables_or_charts():
    with pytest.raises(ValueError, match="drivers measure"):
        Record(details={"tables": []})


def test_a_suites_code_is_found_from_its_name():
    for name, s in spec.load_all_suites().items():
        package = "harness.experiments." + name.replace("-", "_")
        for case in s.cases:
            d = driver_contract.get(case.driver)
            assert d.name.startswith(name + "-"), f"{name}/{case.name}: driver {d.name} is not prefixed by its suite"
            assert d.module.startswith(package + "."), f"{name}/{case.name}: driver {d.name} lives in {d.module}"
