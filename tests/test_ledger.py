"""The claims ledger as a whole: every check can come out the other way (it has a control),
every suite's lab-a100 profile fails on a skip, and no driver presents."""

from __future__ import annotations

import pytest

from harness import drivers, spec
from harness.drivers import CaseOutcome


def test_every_claim_check_has_a_control():
    claims = spec.load_claims()
    missing = [f"{c.id}: {k.suite}/{k.case} {k.metric}" for c in claims for k in c.checks if k.control is None]
    assert not missing, "checks without a control (their verdict could not come out the other way): " + "; ".join(missing)
    for c in claims:
        assert c.checks or c.not_measured or c.not_measurable, c.id


def test_every_suite_has_a_lab_profile_where_a_skip_fails():
    for name, s in spec.load_all_suites().items():
        assert "local" in s.profiles and "lab-a100" in s.profiles, name
        assert s.profiles["lab-a100"].skipped_fails, f"{name}: a lab run without a tool must not end green"
        assert not s.profiles["local"].skipped_fails, name


def test_drivers_never_build_tables_or_charts():
    with pytest.raises(ValueError, match="drivers measure"):
        CaseOutcome(details={"tables": []})

def test_a_suites_code_is_found_from_its_name():
    for name, s in spec.load_all_suites().items():
        package = "harness.experiments." + name.replace("-", "_")
        for case in s.cases:
            d = drivers.get(case.driver)
            assert d.name.startswith(name + "-"), f"{name}/{case.name}: driver {d.name} is not prefixed by its suite"
            assert d.module.startswith(package + "."), f"{name}/{case.name}: driver {d.name} lives in {d.module}"
