"""harness.base.files.build_once: a kept artefact (the converted SmolLM2 folder, the exported ONNX
files) is built by one process while another waits and takes it; a failed build leaves
nothing. Two test workers or two runs once wrote the same temporary path at the same time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.files import build_once

# A builder in its own process: notes its start in builds.log, takes a second, writes a
# folder with one file (a folder, as the SmolLM2 conversion makes).
CHILD = """
import sys, time
from pathlib import Path
from harness.base.files import build_once
out, log = Path(sys.argv[1]), Path(sys.argv[2])
def build(tmp):
    with open(log, "a") as f:
        f.write(f"build {tmp.name}\\n")
    tmp.mkdir()
    time.sleep(1.0)
    (tmp / "config.json").write_text("{}")
print(build_once(out, build))
"""


def test_two_processes_build_once_and_both_get_the_whole_result(tmp_path):
    out, log = tmp_path / "cache" / "model-hf", tmp_path / "builds.log"
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(log)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [str(out), str(out)]
    assert len(log.read_text().splitlines()) == 1, log.read_text()  # one builder; the other waited
    assert (out / "config.json").read_text() == "{}"
    assert sorted(p.name for p in out.parent.iterdir()) == [".model-hf.lock", "model-hf"]  # no temporary left


def test_a_failed_build_leaves_nothing_and_the_next_call_builds_again(tmp_path):
    out = tmp_path / "graph.onnx"

    def broken(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise RuntimeError("export failed")

    with pytest.raises(RuntimeError, match="export failed"):
        build_once(out, broken)
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == [".graph.onnx.lock"]
    seen = []
    assert build_once(out, lambda tmp: seen.append(tmp.suffix) or tmp.write_bytes(b"whole")) == out
    assert out.read_bytes() == b"whole" and seen == [".onnx"]  # the temporary keeps the suffix (ORT reads it)
    assert build_once(out, lambda tmp: pytest.fail("built again")) == out  # kept
