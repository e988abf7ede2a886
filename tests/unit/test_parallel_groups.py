"""`make test` runs the tests on two workers (tests/conftest.py): what keeps them apart holds.

A file that brings up the simulated lab shares one group with every other such file (two
labs cannot be up at once); every name in the grouping is a real test file; and each
worker's cluster port range holds no port a test file fixes for itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests import TESTS
from tests.conftest import GROUPS, LONG_FIRST, WORKER_PORTS, group_of

FILES = sorted(p for p in TESTS.rglob("test_*.py") if "benchmarks" not in p.parts)


def test_every_file_that_brings_up_the_simulated_lab_is_in_the_lab_group():
    starts = re.compile(r"make\(\"lab-sim-up\"|\"lab-sim\" / \"up\.sh\"")  # make("lab-sim-up" or .../"up.sh"
    lab_users = [f.stem for f in FILES if f.name != Path(__file__).name and starts.search(f.read_text())]
    assert {"test_lab_sim", "test_lab_sim_engine", "test_failover"} <= set(lab_users)  # the scan finds them
    assert {f: group_of(f + ".py") for f in lab_users} == {f: "lab" for f in lab_users}


def test_the_grouping_names_real_files_and_groups():
    stems = {f.stem for f in FILES}
    assert set(GROUPS) <= stems, set(GROUPS) - stems
    groups = {group_of(f.name) for f in FILES}
    assert set(LONG_FIRST) <= groups, set(LONG_FIRST) - groups
    assert group_of("tests/system/test_lab_sim_engine.py::test_x[a::b]") == "lab"
    assert group_of("tests/system/test_cli.py::test_help") == "test_cli"
    # the code mutations go out by suite; the file's other tests stay one group
    assert (
        group_of("tests/system/test_mutation_suite.py::test_the_ledger_catches_the_mutation[kv-trace/x]")
        == "mutations-kv-trace"
    )
    assert (
        group_of("tests/system/test_mutation_suite.py::test_every_edit_still_fits_the_checkout[kv-trace/x]")
        == "test_mutation_suite"
    )


def test_each_workers_cluster_ports_hold_no_port_a_test_file_fixes():
    """Files place their clusters at offsets up to +99 from their worker's base port; a fixed
    port of another file inside that range would meet them when the two run at once."""
    fixed = {}
    for f in FILES:
        for n in re.findall(r"(?<![\d.])(7\d{3})(?![\d.])", f.read_text()):
            fixed.setdefault(int(n), set()).add(f.name)
    assert 7570 in fixed and 7690 in fixed  # the scan sees the interrupt and monitoring files' ports
    for base in WORKER_PORTS:
        inside = {n: sorted(files) for n, files in fixed.items() if base < n < base + 100}
        assert not inside, f"worker range {base}-{base + 99} holds fixed ports {inside}"
    assert len(set(WORKER_PORTS)) == len(WORKER_PORTS)
    assert all(b + 100 <= c for b, c in zip(sorted(WORKER_PORTS), sorted(WORKER_PORTS)[1:]))
