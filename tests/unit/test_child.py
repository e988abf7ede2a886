"""harness.model.child: a job in a fresh process, a typed outcome or a typed error out, and
nothing left running. The child is a real Python process (tests/child_work.py)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time

import pytest

from harness.base.errors import BadInput, EnvironmentProblem, HarnessError
from harness.base.format_versions import CHILD_FORMAT
from harness.infra.process import RemoteHost
from harness.infra.target import PASSWORD_ENV, Node, Target
from harness.model import child

MODULE = "tests.child_work"


def test_an_outcome_comes_back_with_the_log_lines():
    lines = []
    out = child.run(MODULE, {"do": "echo", "value": [1, "two"]}, log=lines.append)
    assert out["got"] == [1, "two"] and out["pid"] != os.getpid()
    assert lines == ["first line", "second line"]


@pytest.mark.parametrize(
    "do, kind, text",
    [
        ("bad_input", BadInput, "the job's input is wrong"),
        ("environment", EnvironmentProblem, "the machine cannot"),
        ("harness_error", HarnessError, "a harness error"),
    ],
)
def test_a_harness_error_comes_back_as_itself(do, kind, text):
    with pytest.raises(kind, match=text) as e:
        child.run(MODULE, {"do": do})
    assert type(e.value) is kind
    if do == "harness_error":
        assert e.value.exit_code == 5


def test_a_bug_comes_back_with_the_childs_traceback():
    with pytest.raises(child.ChildCrashed, match="ZeroDivisionError: division by zero") as e:
        child.run(MODULE, {"do": "crash"})
    assert "child_work.py" in e.value.traceback and "1 / 0" in e.value.traceback


def test_a_child_that_ends_without_an_outcome_names_its_exit_code_and_last_words(tmp_path):
    with pytest.raises(EnvironmentProblem, match=r"exited with code 7 and no outcome: last words \(w.stderr in raw/\)"):
        child.run(MODULE, {"do": "vanish"}, what="the probe", stderr_path=tmp_path / "w.stderr")
    assert (tmp_path / "w.stderr").read_text() == "last words\n"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_timeout_stops_the_child():
    c = child.start(MODULE, {"do": "sleep"})
    with pytest.raises(EnvironmentProblem, match="did not finish within 0.5 s"):
        c.result(timeout=0.5)
    assert c.proc.returncode is not None and not _alive(c.proc.pid)


def test_an_interrupt_while_waiting_kills_the_child_and_goes_on():
    """A Ctrl-C (SIGINT to this process) while the child runs: the child's process group is
    killed and the KeyboardInterrupt reaches the caller."""
    lines = []
    c = child.start(MODULE, {"do": "sleep"}, log=lines.append)
    deadline = time.monotonic() + 30
    while not lines and time.monotonic() < deadline:  # the child is at work
        time.sleep(0.05)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        c.result(timeout=30)
    assert lines == ["sleeping"] and c.proc.returncode is not None and not _alive(c.proc.pid)


def test_the_job_file_carries_its_format_and_no_secret(tmp_path, monkeypatch):
    seen = {}
    real = child.subprocess.Popen

    def spy(argv, **kw):
        seen["job"] = json.loads(open(argv[-1]).read())
        seen["env"] = kw["env"]
        return real(argv, **kw)

    monkeypatch.setattr(child.subprocess, "Popen", spy)
    tgt = Target(
        "inv",
        "cluster",
        [Node("127.77.0.11", 6379)],
        password="pw-S3cret",
        username="ops",
        loadgen=RemoteHost("lg-1", "127.77.0.17"),
    )
    out = child.run(MODULE, {"do": "target", "target": tgt.to_json()}, env={**os.environ, **tgt.to_env()})
    assert out["password_sha256"] == hashlib.sha256(b"pw-S3cret").hexdigest()  # it reached the child
    assert out["echo"] == "***"  # and a secret in an outcome is redacted on its way back
    assert out["username"] == "ops" and out["loadgen"] == "127.77.0.17"
    assert seen["job"]["format_version"] == CHILD_FORMAT and "pw-S3cret" not in json.dumps(seen["job"])
    assert seen["env"][PASSWORD_ENV] == "pw-S3cret"


def test_a_job_of_another_format_is_refused_by_the_child(tmp_path):
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"format_version": CHILD_FORMAT + 1, "job": {}, "outcome": str(tmp_path / "o.json")}))
    assert child.serve(lambda j, log: {}, [str(job)]) == 2 and not (tmp_path / "o.json").exists()
