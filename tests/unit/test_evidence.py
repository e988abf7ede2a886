"""Issue 52 on small ledgers written here: a zero is not evidence, and a control counts only
when its independence is enforced.

- a check of an absence (`<= 0`) names what its count is out of and a counter showing that the
  dangerous situation happened; 0 of 0, or the situation not arising, is `inconclusive`;
- a threshold of 0 from above names its denominator; 0 of 0 is `missing`, never a pass;
- server configuration a check depends on is read back by the case (a fact): another
  setting, or none recorded, is `inconclusive`;
- a stand-in's strength lives in the ledger (its params are the case's parameters, given by
  the runner, refused anywhere else) and its own instrument must see it work;
- a reference names its module and what it must not import: a run whose reference module
  reaches what it checks is `inconclusive` (harness.base.import_graph reads that)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.base import import_graph
from harness.base.errors import BadInput
from harness.base.paths import REPO_ROOT, suite_spec
from harness.model import ledger, ledger_parse, spec
from harness.model.stored_run import Metric, Record, RunData
from harness.verdict.analysis import Outcome, Verdict, analyze

BASE = "suite: redis-cluster, case: redis-benchmark, metric: m, unit: x, observed: 'client histories'"
ABSENCE = (
    f"{BASE}, op: '<=', value: 0, better: lower, of: sent, "
    "instrument: {metric: canary.m, op: '>', value: 0, text: a planted loss is seen}, "
    "mechanism_off: {metric: plain.m, op: '>', value: 0, text: no rule loses updates}, "
    "exercised: {metric: conflicts, op: '>=', value: 5, text: conflicting writes reached the CAS}"
)
GOOD = {"m": 0, "canary.m": 3, "plain.m": 7, "sent": 100, "conflicts": 40}


def _suite_text() -> str:
    """The redis-cluster spec, its thresholds of 0 given a denominator where they have none."""
    return re.sub(
        r'(op: "<=", value: 0, unit: "[^"]*")(?!, of:)', r"\1, of: probes", suite_spec("redis-cluster").read_text()
    )


def _ledger(tmp_path: Path, *checks: str, suite_text: str | None = None):
    target = tmp_path / "redis-cluster.yaml"
    target.write_text(suite_text if suite_text is not None else _suite_text())
    body = "".join(f"      - {{{c}}}\n" for c in checks)
    (tmp_path / "claims.yaml").write_text(f"claims:\n  - id: C12\n    section: '2.5'\n    text: t\n    checks:\n{body}")
    return ledger_parse.load_claims(tmp_path)


def _judged(
    tmp_path: Path,
    check: str,
    metrics: dict,
    facts: dict | None = None,
    params: dict | None = None,
    manifest: dict | None = None,
):
    claims = _ledger(tmp_path, check)
    suite = spec.load_suite_file(tmp_path / "redis-cluster.yaml")
    srun = suite.as_run("local", 1, {c.name: {} for c in suite.cases})
    rec = Record(
        suite="redis-cluster",
        case="redis-benchmark",
        repetition=1,
        metrics={k: Metric(v, "") for k, v in metrics.items()},
        facts=facts or {},
        params=params or {},
    )
    a = analyze(RunData(Path("."), manifest or {}, [rec], {"redis-cluster": srun}, claims))
    return a.claims[0].checks[0]


def test_an_absence_exercised_and_counted_out_of_something_is_judged(tmp_path):
    cv = _judged(tmp_path, ABSENCE, GOOD)
    assert cv.outcome is Outcome.REPRODUCED, cv.reason
    assert "exercise control (conflicting writes reached the CAS): conflicts >= 5 is 40" in cv.reason
    assert cv.check.describe() == "m <= 0 x of sent"


def test_an_absence_whose_situation_did_not_arise_is_inconclusive(tmp_path):
    cv = _judged(tmp_path, ABSENCE, {**GOOD, "conflicts": 2})
    assert cv.outcome is Outcome.INCONCLUSIVE
    assert "the dangerous situation did not occur in the judged run" in cv.reason
    assert "conflicting writes reached the CAS" in cv.reason


def test_an_exercise_counter_not_measured_is_inconclusive(tmp_path):
    cv = _judged(tmp_path, ABSENCE, {k: v for k, v in GOOD.items() if k != "conflicts"})
    assert cv.outcome is Outcome.INCONCLUSIVE and "did not occur" in cv.reason


@pytest.mark.parametrize("sent", [0, None])
def test_zero_of_zero_is_never_a_pass(tmp_path, sent):
    metrics = {**GOOD, "sent": sent} if sent is not None else {k: v for k, v in GOOD.items() if k != "sent"}
    cv = _judged(tmp_path, ABSENCE, metrics)
    assert cv.outcome is Outcome.INCONCLUSIVE
    assert "0 of 0 is no evidence" in cv.reason and "sent" in cv.reason


def test_a_failure_seen_is_still_a_refutation(tmp_path):
    cv = _judged(tmp_path, ABSENCE, {**GOOD, "m": 2})
    assert cv.outcome is Outcome.NOT_REPRODUCED


@pytest.mark.parametrize(
    "check, message",
    [
        (ABSENCE.replace(", of: sent", ""), "needs of: the metric it is out of"),
        (
            ABSENCE.replace(
                "exercised: {metric: conflicts, op: '>=', value: 5, text: conflicting writes reached the CAS}",
                "observed: x",
            ),
            "needs exercised: a counter",
        ),
        (ABSENCE + ", no_exercise: because", "both exercised and no_exercise"),
        (
            f"{BASE}, op: '<', value: 2, better: lower, no_mechanism_off: r, no_instrument: r, of: sent",
            "only a bound of 0 from above",
        ),
        (
            f"{BASE}, op: '<', value: 2, better: lower, no_mechanism_off: r, no_instrument: r, "
            "exercised: {metric: c, op: '>', value: 1, text: t}",
            "belong to a check of an absence",
        ),
        (
            f"{BASE}, op: '<', value: 2, better: lower, no_mechanism_off: r, no_instrument: r, "
            "configured: {maxmemory-policy: [a]}",
            "configured.maxmemory-policy: expected a string",
        ),
    ],
)
def test_an_absence_without_its_evidence_is_refused(tmp_path, check, message):
    with pytest.raises(BadInput, match=message):
        _ledger(tmp_path, check)


CONFIGURED = (
    f"{BASE}, op: '>', value: 1, better: higher, no_mechanism_off: r, "
    "instrument: {metric: i, op: '>', value: 0, text: sees}, "
    "configured: {maxmemory-policy: allkeys-lru, maxmemory: 1048576}"
)


@pytest.mark.parametrize(
    "facts, outcome, words",
    [
        ({"maxmemory-policy": "allkeys-lru", "maxmemory": "1048576"}, Outcome.REPRODUCED, ""),
        (
            {"maxmemory-policy": "allkeys-random", "maxmemory": 1048576},
            Outcome.INCONCLUSIVE,
            "maxmemory-policy read back from the server is allkeys-random, needed allkeys-lru",
        ),
        ({"maxmemory": 1048576}, Outcome.INCONCLUSIVE, "maxmemory-policy read back from the server is not recorded"),
    ],
)
def test_server_configuration_is_read_back_not_trusted(tmp_path, facts, outcome, words):
    cv = _judged(tmp_path, CONFIGURED, {"m": 2, "i": 1}, facts=facts)
    assert cv.outcome is outcome, cv.reason
    assert words in cv.reason


STAND_IN = (
    f"{BASE}, op: '>', value: 1, better: higher, no_mechanism_off: r, "
    "instrument: {metric: i, op: '>', value: 0, text: sees}, "
    "stand_in: {metric: cheap.m, op: '<', than: m, text: a cheaper hash, params: {pipeline: 4}, "
    "instrument: {metric: cheap.exact_found_pct, op: '>=', value: 100, text: the hash finds exact repeats}}"
)


@pytest.mark.parametrize(
    "metrics, params, outcome, words",
    [
        ({"cheap.exact_found_pct": 100}, {"pipeline": 4}, Outcome.REPRODUCED, ""),
        ({"cheap.exact_found_pct": 60}, {"pipeline": 4}, Outcome.INCONCLUSIVE, "the stand-in's own instrument"),
        (
            {"cheap.exact_found_pct": 100},
            {"pipeline": 1},
            Outcome.INCONCLUSIVE,
            "ran with pipeline=1, the ledger fixes pipeline=4",
        ),
    ],
)
def test_a_stand_in_runs_at_the_ledgers_strength_and_is_seen_to_work(tmp_path, metrics, params, outcome, words):
    cv = _judged(tmp_path, STAND_IN, {"m": 3, "i": 1, "cheap.m": 1, **metrics}, params=params)
    assert cv.outcome is outcome, cv.reason
    assert words in cv.reason


def test_a_stand_ins_strength_set_in_the_suite_is_refused(tmp_path):
    text = _suite_text().replace("tests: [get, set]", "tests: [get, set]\n      pipeline: 2", 1)
    assert "pipeline: 2" in text
    with pytest.raises(BadInput, match="pipeline: fixed by the ledger"):
        _ledger(tmp_path, STAND_IN, suite_text=text)


def test_a_stand_ins_strength_must_be_a_parameter_of_its_case(tmp_path):
    with pytest.raises(BadInput, match=r"has no parameter 'pipelines' \(did you mean 'pipeline'"):
        _ledger(tmp_path, STAND_IN.replace("pipeline: 4", "pipelines: 4"))


def test_the_runner_gives_the_case_the_ledgers_strength_and_refuses_set(monkeypatch):
    from harness.run import selection

    claims = [
        ledger.Claim(
            "C0",
            "",
            "t",
            [
                ledger.ClaimCheck(
                    "redis-cluster",
                    "redis-benchmark",
                    "GET.p99_ms",
                    "<",
                    1.0,
                    controls=[ledger.Control("GET.rps", ">", "t", 1.0, kind=ledger.STAND_IN, params={"pipeline": 4})],
                )
            ],
        )
    ]
    monkeypatch.setattr(ledger_parse, "load_claims", lambda *a, **k: claims)
    suites = spec.select_suites(["redis-cluster"])
    plans = selection.make_plans(suites, "local", 1, {})
    assert plans[0].run.cases[0].params["pipeline"] == 4
    with pytest.raises(BadInput, match="--set redis-benchmark.pipeline: fixed by the ledger"):
        selection.make_plans(suites, "local", 1, {"redis-benchmark": {"pipeline": 1}})


REFERENCE = (
    f"{BASE}, op: '>', value: 1, better: higher, no_mechanism_off: r, "
    "instrument: {metric: i, op: '>', value: 0, text: sees}, "
    "reference: {metric: ref.m, tolerance: 0.1, text: a recount, module: harness.x.recount, "
    "independent_of: [harness.x.simulator]}"
)


@pytest.mark.parametrize(
    "record, outcome, words",
    [
        ({"harness.x.recount": {"reaches": []}}, Outcome.REPRODUCED, ""),
        (
            {"harness.x.recount": {"reaches": ["harness.x.simulator"]}},
            Outcome.INCONCLUSIVE,
            "the reference is not independent: harness.x.recount imports harness.x.simulator",
        ),
        ({"harness.x.recount": {"missing": True}}, Outcome.INCONCLUSIVE, "is not in the code the run executed"),
        ({"harness.y": {"reaches": []}}, Outcome.INCONCLUSIVE, "independence was not checked by the run"),
        (None, Outcome.INCONCLUSIVE, "independence was not checked by the run"),
        ({"harness.x.recount": {"reaches": [import_graph.DYNAMIC]}}, Outcome.INCONCLUSIVE, "computed at run time"),
    ],
)
def test_a_reference_that_imports_what_it_checks_is_not_trusted(tmp_path, record, outcome, words):
    cv = _judged(tmp_path, REFERENCE, {"m": 2, "ref.m": 2, "i": 1}, manifest={"references": record} if record else {})
    assert cv.outcome is outcome, cv.reason
    assert words in cv.reason


def test_a_reference_names_its_module_and_what_it_must_not_import(tmp_path):
    with pytest.raises(BadInput, match="give module and independent_of together"):
        _ledger(tmp_path, REFERENCE.replace(", independent_of: [harness.x.simulator]", ""))
    with pytest.raises(BadInput, match="name the module computing it"):
        _ledger(tmp_path, REFERENCE.replace(", module: harness.x.recount, independent_of: [harness.x.simulator]", ""))
    claims = _ledger(
        tmp_path,
        REFERENCE.replace(
            ", module: harness.x.recount, independent_of: [harness.x.simulator]",
            ", not_code: the server's own counters",
        ),
    )
    assert "not code of this project" in claims[0].checks[0].reference.independence()


THRESHOLDS = """
      - {case: redis-benchmark, metric: errors, op: "<=", value: 0, unit: requests, reason: r, of: requests}
"""


@pytest.mark.parametrize("requests, verdict", [(100, Verdict.PASS), (0, Verdict.MISSING), (None, Verdict.MISSING)])
def test_a_threshold_of_zero_counts_out_of_something(tmp_path, requests, verdict):
    text = _suite_text()
    anchor = "    thresholds:\n"
    text = text.replace(anchor, anchor + THRESHOLDS.lstrip("\n"), 1)
    (tmp_path / "s.yaml").write_text(text)
    suite = spec.load_suite_file(tmp_path / "s.yaml")
    srun = suite.as_run("local", 1, {c.name: {} for c in suite.cases})
    metrics = {"errors": 0, **({"requests": requests} if requests is not None else {})}
    rec = Record(
        suite="redis-cluster",
        case="redis-benchmark",
        repetition=1,
        metrics={k: Metric(v, "") for k, v in metrics.items()},
    )
    a = analyze(RunData(Path("."), {}, [rec], {"redis-cluster": srun}, []))
    t = next(t for t in a.thresholds if t.metric == "errors")
    assert t.verdict is verdict, t.detail
    if verdict is Verdict.MISSING:
        assert "0 of 0 is no evidence" in t.detail


def test_a_threshold_of_zero_without_a_denominator_is_refused(tmp_path):
    text = _suite_text().replace(
        "    thresholds:\n", "    thresholds:\n" + THRESHOLDS.lstrip("\n").replace(", of: requests", ""), 1
    )
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(BadInput, match="needs of: the metric it is out of"):
        spec.load_suite_file(tmp_path / "s.yaml")


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        f = tmp_path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(body)
    return tmp_path


def test_the_import_graph_follows_imports_through_modules_and_inside_functions(tmp_path):
    root = _tree(
        tmp_path,
        {
            "harness/__init__.py": "",
            "harness/x/__init__.py": "",
            "harness/x/simulator.py": "def f(): return 1\n",
            "harness/x/helper.py": "def g():\n    from .simulator import f\n    return f()\n",
            "harness/x/recount.py": "from harness.x import helper\n",
            "harness/x/clean.py": "import json\n",
            "harness/x/peer.py": "def h():\n    import libcachesim.sub\n",
            "harness/x/via.py": "from harness.x import peer\n",
        },
    )
    assert import_graph.reaches(root, "harness.x.via", ["libcachesim", "harness.x.simulator"]) == ["libcachesim"]
    # an import by a constant name through importlib is an import; by a computed name, it reaches anything
    _tree(
        root,
        {
            "harness/x/lazy.py": "import importlib\ndef f():\n    return importlib.import_module('harness.x.simulator')\n",
            "harness/x/computed.py": "def f(n):\n    return __import__(n)\n",
        },
    )
    assert import_graph.reaches(root, "harness.x.lazy", ["harness.x.simulator"]) == ["harness.x.simulator"]
    assert import_graph.reaches(root, "harness.x.computed", ["harness.x.simulator"]) == [import_graph.DYNAMIC]
    assert import_graph.reaches(root, "harness.x.clean", ["libcachesim"]) == []
    assert import_graph.reaches(root, "harness.x.recount", ["harness.x.simulator"]) == ["harness.x.simulator"]
    assert import_graph.reaches(root, "harness.x.clean", ["harness.x.simulator"]) == []
    assert import_graph.reaches(root, "harness.x.gone", ["harness.x.simulator"]) is None


def test_every_reference_of_the_ledger_is_independent_by_the_runs_reader():
    """The run's own reader (harness.base.import_graph) on this checkout; the test of the
    import graph in test_architecture.py reads it again with its own code."""
    for claim in ledger_parse.load_claims():
        for chk in claim.checks:
            ref = chk.reference
            if ref is not None and ref.module:
                assert import_graph.reaches(REPO_ROOT, ref.module, ref.independent_of) == [], (claim.id, ref.module)
