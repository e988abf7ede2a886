"""Every metric a threshold or a ledger check names, checked against what its case's driver
declares (`register(..., metrics=...)`, harness.base.metrics_model.MetricDecl).

A misspelt metric in a suite's thresholds or in claims.yaml is refused here, by `harness
validate` and before a run measures anything, instead of showing up after the run as
"missing". A metric a case reports that its driver does not declare is found where the run
stores it (`undeclared_in`).
"""

from __future__ import annotations

from collections.abc import Iterator

from harness.base.errors import BadInput, did_you_mean
from harness.model import driver_contract
from harness.model.ledger import Claim
from harness.model.result import Record
from harness.model.spec import Suite


def named_in_suite(suite: Suite) -> Iterator[tuple[str, str, str]]:
    """(where, case, metric) for every metric the suite's thresholds name (their `of` too)."""
    for prof in suite.profiles.values():
        for t in prof.thresholds:
            where = f"{suite.path or suite.name}: profile {prof.name!r}, threshold {t.case}/{t.metric}"
            yield where, t.case, t.metric
            if t.of:
                yield where + " (of)", t.case, t.of


def named_in_claims(claims: list[Claim]) -> Iterator[tuple[str, str, str, str]]:
    """(where, suite, case, metric) for every metric a ledger check names: the check's own, the
    one its count is out of, its controls' (a stand-in's own instrument too, and the metrics they
    compare with) and its reference's."""
    for claim in claims:
        for i, ch in enumerate(claim.checks):
            where = f"claims.yaml: {claim.id} check {i + 1} ({ch.suite}/{ch.case} {ch.metric})"
            yield where, ch.suite, ch.case, ch.metric
            if ch.of:
                yield where + " of", ch.suite, ch.case, ch.of
            own = [(f"{c.kind} control", c) for c in ch.controls]
            own += [(f"{c.kind} control's instrument", c.instrument) for c in ch.controls if c.instrument]
            for label, c in own:
                yield f"{where}, {label}", ch.suite, ch.case, c.metric
                if c.than:
                    yield f"{where}, {label}'s than", ch.suite, ch.case, c.than
            if ch.reference is not None:
                yield where + ", reference", ch.suite, ch.case, ch.reference.metric


def problems(suites: dict[str, Suite], claims: list[Claim]) -> list[str]:
    """One line per metric named in a threshold or check that its case's driver does not declare."""
    drivers = driver_contract.load_all()
    out = []

    def check(where: str, suite: Suite | None, case: str, metric: str) -> None:
        if suite is None:
            return  # the spec's own loading names an unknown suite
        try:
            driver = drivers.get(suite.case(case).driver)
        except KeyError:
            return  # an unknown case or driver: refused where the spec is loaded
        if driver is None or driver.metric(metric) is not None:
            return
        names = [n for d in driver.metrics for n in d.examples()]
        out.append(
            f"{where}: metric {metric!r} is not one that driver {driver.name!r} declares"
            f"{did_you_mean(metric, names)}; fix the name, or declare it in the driver's metrics= "
            f"({driver.module}; {len(driver.metrics)} declared)"
        )

    for suite in suites.values():
        for where, case, metric in named_in_suite(suite):
            check(where, suite, case, metric)
    for where, sname, case, metric in named_in_claims(claims):
        check(where, suites.get(sname), case, metric)
    return out


def refuse_undeclared(suites: dict[str, Suite], claims: list[Claim]) -> None:
    """BadInput (exit 2) naming the first metric no declaration matches, and how many more."""
    found = problems(suites, claims)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise BadInput(found[0] + more)


def undeclared_in(record: Record, driver: driver_contract.Driver) -> list[str]:
    """The metrics of a case's record that its driver does not declare, or declares with another
    unit or better side: each `name: why`."""
    out = []
    for name, m in record.metrics.items():
        d = driver.metric(name)
        if d is None:
            out.append(f"{name}: not declared")
        elif d.unit is not None and d.unit != m.unit:
            out.append(f"{name}: unit {m.unit!r}, declared {d.unit!r} ({d.name})")
        elif m.better is not None and d.better != m.better:
            out.append(f"{name}: better {m.better!r}, declared {d.better!r} ({d.name})")
    return out
