"""Run an external tool with a timeout and keep its untouched output in the raw folder."""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class ToolRun:
    cmd: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    files: list[Path]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def failure(self, tool: str) -> str:
        if self.timed_out:
            return f"{tool} did not finish within its timeout ({self.duration_s:.0f} s)"
        tail = " | ".join((self.stderr or self.stdout).strip().splitlines()[-3:])
        return f"{tool} exited with code {self.returncode}: {tail or '(no output)'}"


def run_tool(cmd: list[str], raw_dir: Path, name: str, timeout: float, env: dict | None = None) -> ToolRun:
    """Run `cmd`, writing NAME.cmd, NAME.stdout and NAME.stderr under raw_dir."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    files = [raw_dir / f"{name}.cmd", raw_dir / f"{name}.stdout", raw_dir / f"{name}.stderr"]
    files[0].write_text(shlex.join(cmd) + "\n")
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
        rc, out, err, timed_out = p.returncode, p.stdout, p.stderr, False
    except subprocess.TimeoutExpired as e:
        rc, out, err, timed_out = None, e.stdout or b"", e.stderr or b"", True
    dt = time.monotonic() - t0
    files[1].write_bytes(out)
    files[2].write_bytes(err)
    return ToolRun(cmd, rc, out.decode(errors="replace"), err.decode(errors="replace"), dt, timed_out, files)
