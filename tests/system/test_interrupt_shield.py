"""Interrupts at the edges of the run's last writing: a signal while the handlers of a
held-back block go in puts back those already replaced; a Ctrl-C (or two) after the last
case, or a second one while the first stops the run, is held by the run's gate, so the
results and the report are always written.

CI twice saw a double Ctrl-C at the end of a run lose the report. The exact bytecode a
signal lands on cannot be chosen from outside, so these tests send the signals at those
points themselves, in-process, around the real code.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import yaml

from harness.base import signals
from harness.run import runner

SUITE = {
    "name": "shield",
    "description": "d",
    "claim": {"section": "1", "text": "t"},
    "target": "none",
    "cases": [
        {
            "name": "sim",
            "driver": "eviction-simulate",
            "params": {
                "rps_requests": 0,
                "policies": ["lru", "lfu", "hybrid"],
                "size_fractions": [0.05],
                "table_fraction": 0.05,
                "ordering_fractions": [0.05],
            },
        }
    ],
    "profiles": {"local": {"repetitions": 1}},
}


def test_an_interrupt_while_the_handlers_go_in_puts_back_those_replaced(monkeypatch):
    """A SIGTERM between SIGINT's hold and SIGTERM's: SIGINT's handler is restored, not
    left holding every later Ctrl-C forever."""
    before = signal.getsignal(signal.SIGINT)
    real = signal.signal
    calls = []

    def lands_on_the_second(sig, handler):
        calls.append(sig)
        if len(calls) == 2:
            raise signals.Terminated()
        return real(sig, handler)

    monkeypatch.setattr(signals.signal, "signal", lands_on_the_second)
    with pytest.raises(signals.Terminated):
        with signals.deferred_interrupts():
            pytest.fail("the block ran though the interrupt came first")
    monkeypatch.undo()
    assert calls[:2] == [signal.SIGINT, signal.SIGTERM]
    assert signal.getsignal(signal.SIGINT) is before


def _run(tmp_path, lines):
    spec = tmp_path / "shield.yaml"
    spec.write_text(yaml.safe_dump(SUITE))
    return runner.run_suites([str(spec)], results_dir=tmp_path / "results", log=lines.append)


def _the_run(tmp_path):
    (run_dir,) = (tmp_path / "results").iterdir()
    return run_dir, json.loads((run_dir / "results.json").read_text())


@pytest.mark.parametrize("where", ["after the last case", "as the writing starts"])
def test_a_ctrl_c_after_the_last_case_waits_for_the_report(monkeypatch, tmp_path, where):
    """The run has measured its case; a double Ctrl-C lands after it, before or as the
    run's files are written (CI once saw the report missing: the first Ctrl-C landed in the
    statements between the last case and the writing). Real signals, sent in-process at
    that point: they are held, the report is written and the run ends as it would have."""
    if where == "after the last case":  # where CI saw it: deciding whether the run is kept
        real = runner._Run.refused

        def refused_and_signalled(self, error):
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            return real(self, error)

        monkeypatch.setattr(runner._Run, "refused", refused_and_signalled)
    else:
        real_close = runner._close_run

        def close_signalled(*a, **kw):
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            return real_close(*a, **kw)

        monkeypatch.setattr(runner, "_close_run", close_signalled)
    lines = []
    outcome = _run(tmp_path, lines)
    run_dir, data = _the_run(tmp_path)
    assert outcome.exit_code == 0 and "interrupted" not in data
    assert [r["status"] for r in data["records"]] == ["ok"]
    assert (run_dir / "report.html").is_file() and (run_dir / "verdicts.json").is_file()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the gate is gone


def test_a_second_ctrl_c_while_the_first_stops_the_run_is_held(monkeypatch, tmp_path):
    """A Ctrl-C during the case stops the run; a second one while it stops (here: as the
    results are decided on) is held, not raised: results, manifest and report are written,
    the run says it was interrupted, and one KeyboardInterrupt goes on to the command line."""
    real_run, real_refused = runner._run_on_target, runner._Run.refused

    def measured_then_interrupted(*a, **kw):
        real_run(*a, **kw)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the interrupt lands here
        pytest.fail("the first Ctrl-C was not raised")

    def refused_and_signalled(self, error):
        os.kill(os.getpid(), signal.SIGINT)
        return real_refused(self, error)

    monkeypatch.setattr(runner, "_run_on_target", measured_then_interrupted)
    monkeypatch.setattr(runner._Run, "refused", refused_and_signalled)
    lines = []
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, lines)
    run_dir, data = _the_run(tmp_path)
    assert data["interrupted"]["case"] == "between cases" and data["interrupted"]["signal"] == "SIGINT"
    assert [r["status"] for r in data["records"]] == ["ok"]  # what was measured is kept
    assert json.loads((run_dir / "manifest.json").read_text())["interrupted"]
    assert (run_dir / "report.html").is_file()
    assert any(line.startswith("interrupted during between cases") for line in lines), lines
