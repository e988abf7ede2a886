"""A Ctrl-C or SIGTERM that lands while the shield of the run's last writing goes up: the
handlers already replaced are put back, and the interrupt becomes the run's own (its
results and report are still written) rather than a `RuntimeError: generator didn't yield`.

CI once saw exactly that on a double Ctrl-C while the report was being written. The exact
bytecode a signal lands on cannot be chosen from outside, so these tests raise the
interrupt at that point themselves, in-process, around the real code.
"""

from __future__ import annotations

import contextlib
import json
import signal

import pytest
import yaml

from harness import runner, signals

SUITE = {"name": "shield", "description": "d", "claim": {"section": "1", "text": "t"}, "target": "none",
         "cases": [{"name": "sim", "driver": "eviction-simulate",
                    "params": {"rps_requests": 0, "policies": ["lru", "lfu", "hybrid"], "size_fractions": [0.05],
                               "table_fraction": 0.05, "ordering_fractions": [0.05]}}],
         "profiles": {"local": {"repetitions": 1}}}


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


def test_a_ctrl_c_as_the_last_shield_goes_up_is_the_runs_interrupt(monkeypatch, tmp_path):
    """The run has measured its case; a Ctrl-C lands as the shield around the writing goes
    up, before it holds anything. The run is then interrupted: results, manifest and report
    are written, and KeyboardInterrupt (not RuntimeError) goes on to the command line."""
    real_deferred, real_run = runner.deferred_interrupts, runner._run_on_target
    armed = []

    @contextlib.contextmanager
    def landing():
        if armed:
            armed.clear()
            raise KeyboardInterrupt  # in the shield's setup: nothing is held yet
        with real_deferred():
            yield

    def measured_then_armed(*a, **kw):
        real_run(*a, **kw)
        armed.append(True)

    monkeypatch.setattr(runner, "deferred_interrupts", landing)
    monkeypatch.setattr(runner, "_run_on_target", measured_then_armed)
    spec = tmp_path / "shield.yaml"
    spec.write_text(yaml.safe_dump(SUITE))
    lines = []
    with pytest.raises(KeyboardInterrupt):
        runner.run_suites([str(spec)], results_dir=tmp_path / "results", log=lines.append)
    (run_dir,) = (tmp_path / "results").iterdir()
    data = json.loads((run_dir / "results.json").read_text())
    assert data["interrupted"]["case"] == "between cases" and data["interrupted"]["signal"] == "SIGINT"
    assert [r["status"] for r in data["records"]] == ["ok"]  # what was measured is kept
    assert json.loads((run_dir / "manifest.json").read_text())["interrupted"]
    assert (run_dir / "report.html").is_file()
    assert any(line.startswith("interrupted during between cases") for line in lines), lines
