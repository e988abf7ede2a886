"""`make test` on a fresh machine runs what CI runs: `make setup-test` installs every Debian
package the tests look for (tests/test_lab_sim.py's list, the browser of the report test),
and every package CI installs (.ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

from tests import test_lab_sim

REPO = Path(__file__).resolve().parents[1]


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
