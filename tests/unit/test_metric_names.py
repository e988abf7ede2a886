"""Metrics declared like parameters (issue 55): each driver declares the metrics it reports
(MetricDecl: name, unit, better side), and every threshold and ledger check is checked
against them (harness.model.metric_names); a case reporting an undeclared metric is found
where the runner takes its record."""

from __future__ import annotations

import dataclasses

import pytest

from harness.base.errors import BadInput
from harness.base.metrics_model import Metric, MetricDecl, declared
from harness.model import driver_contract, ledger_parse, metric_names, spec
from harness.model.result import Record


def test_a_declaration_matches_its_words_and_its_placeholders_only():
    decls = (MetricDecl("{GET|SET}.p99_ms", "ms", "lower"), MetricDecl("{arm}.ttft_p95_ms", "ms", "lower"))
    assert declared(decls, "GET.p99_ms") is decls[0] and declared(decls, "SET.p99_ms") is decls[0]
    assert declared(decls, "semantic.on.ttft_p95_ms") is decls[1]
    for wrong in ("GETX.p99_ms", "GET.p99_msx", "GET.p99", ".ttft_p95_ms", "a b.ttft_p95_ms", "ttft_p95_ms"):
        assert declared(decls, wrong) is None, wrong


def test_a_declaration_spells_out_its_closed_placeholders_for_a_hint():
    d = MetricDecl("{GET|SET}.{arm}.p99_ms", "ms", "lower")
    assert d.examples() == ["GET.{arm}.p99_ms", "SET.{arm}.p99_ms"]


def test_a_declaration_must_keep_a_literal_part_and_a_known_better_side():
    with pytest.raises(ValueError, match="literal part"):
        MetricDecl("{arm}.{stat}", "ms")
    with pytest.raises(ValueError, match="better"):
        MetricDecl("GET.p99_ms", "ms", "smaller")


def test_every_driver_declares_its_metrics():
    """No driver without declarations: a misspelt metric of its thresholds would pass unseen."""
    own = {n: d for n, d in driver_contract.load_all().items() if d.module.startswith("harness.experiments.")}
    assert len(own) > 30  # every suite's drivers (tests register made-up ones beside them)
    empty = sorted(name for name, d in own.items() if not d.metrics)
    assert not empty, f"drivers that declare no metrics (register(..., metrics=...)): {empty}"


def test_every_threshold_and_ledger_check_names_a_declared_metric():
    """What `harness validate` checks, on the project's own suites and ledger."""
    assert metric_names.problems(spec.load_all_suites(), ledger_parse.load_claims()) == []


def _with_check_metric(claims, claim_id: str, metric: str):
    out = []
    for c in claims:
        if c.id == claim_id:
            c = dataclasses.replace(c, checks=[dataclasses.replace(c.checks[0], metric=metric), *c.checks[1:]])
        out.append(c)
    return out


def test_a_misspelt_ledger_metric_is_refused_with_the_closest_declared_name():
    suites, claims = spec.load_all_suites(), ledger_parse.load_claims()
    first = claims[0].checks[0]
    wrong = first.metric + "x"
    with pytest.raises(BadInput) as e:
        metric_names.refuse_undeclared(suites, _with_check_metric(claims, claims[0].id, wrong))
    line = str(e.value)
    assert "\n" not in line and claims[0].id in line and repr(wrong) in line and "did you mean" in line, line


def test_a_misspelt_threshold_metric_is_refused():
    suites = spec.load_all_suites()
    s = suites["redis-cluster"]
    prof = s.profiles["local"]
    bad = dataclasses.replace(prof.thresholds[0], metric="GET.p99_mss")
    s2 = dataclasses.replace(s, profiles={**s.profiles, "local": dataclasses.replace(prof, thresholds=[bad])})
    found = metric_names.problems({"redis-cluster": s2}, [])
    assert len(found) == 1 and "'GET.p99_mss'" in found[0] and "did you mean 'GET.p99_ms'" in found[0], found


def _driver(*decls: MetricDecl) -> driver_contract.Driver:
    return driver_contract.Driver("made-up", lambda ctx: Record(), {}, metrics=decls)


def test_a_record_with_an_undeclared_metric_or_another_unit_is_found():
    drv = _driver(MetricDecl("{GET|SET}.p99_ms", "ms", "lower"), MetricDecl("ops", None))
    ok = Record(metrics={"GET.p99_ms": Metric(1.0, "ms", "lower"), "ops": Metric(3.0, "ops/s")})
    assert metric_names.undeclared_in(ok, drv) == []
    bad = Record(
        metrics={
            "GET.p99_ms": Metric(1.0, "s", "lower"),
            "SET.p99_ms": Metric(1.0, "ms", "higher"),
            "DEL.p99_ms": Metric(1.0, "ms"),
        }
    )
    assert [w.split(":")[0] for w in metric_names.undeclared_in(bad, drv)] == ["GET.p99_ms", "SET.p99_ms", "DEL.p99_ms"]


def test_the_runner_keeps_an_undeclared_metric_and_says_so_or_fails_the_case_when_strict(monkeypatch, tmp_path):
    from harness.run import runner

    lines = []
    ctx = type("Ctx", (), {"log": staticmethod(lines.append)})()
    drv = _driver(MetricDecl("GET.p99_ms", "ms", "lower"))
    rec = Record(metrics={"GET.p99_ms": Metric(1.0, "ms", "lower"), "GET.p99_mss": Metric(1.0, "ms")})
    monkeypatch.setenv("HARNESS_STRICT_METRICS", "0")
    runner._check_declared(drv, ctx, rec)
    assert rec.metrics["GET.p99_mss"].value == 1.0 and rec.details["undeclared_metrics"] == [
        "GET.p99_mss: not declared"
    ]
    assert lines and "does not declare" in lines[0]
    monkeypatch.setenv("HARNESS_STRICT_METRICS", "1")
    with pytest.raises(TypeError, match="GET.p99_mss"):
        runner._check_declared(drv, ctx, Record(metrics={"GET.p99_mss": Metric(1.0, "ms")}))
