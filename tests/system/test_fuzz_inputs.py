"""Fuzz (hypothesis) for issue 25: generated inventories and generated results folders.

Inventories: groups, hosts and variables made of hostile and random values (options such
as `-oProxyCommand=...`, shell text, huge numbers, nested lists, aliases from shared
values). Reading one gives a valid host (an IP address or a host name, never an option),
or one line of BadInput; never a traceback.

Results folders: each of manifest.json, results.json, report.html and junit.xml is a
valid file, random JSON or bytes, a folder, a FIFO, a link to a file outside the folder,
a link to /dev/zero, a dangling link, a huge sparse file or missing. `harness report` on
it renders or says in one line what is wrong; it never writes outside the folder, never
blocks, and leaves no temporary file.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import BadInput
from harness.infra import inventory
from harness.infra.target import HOST_RE, USER_RE
from tests.system.test_hostile import _check_cli, cli, hostile_run

HOSTILE = [
    "-oProxyCommand=touch /tmp/fuzz-pwned",
    "$(touch /tmp/fuzz-pwned)",
    "`id`",
    "a;b",
    "a|b",
    "--",
    "-",
    "",
    " ",
    "a b",
    "a\nb",
    "user@host",
    "host:22",
    "../../etc",
    "10.0.0.1",
    "fe80::1",
    "lg-1",
    "h" * 300,
    "{{ lookup('pipe', 'id') }}",
    "\x00",
    "-F/etc/passwd",
    "127.0.0.1",
    "%h",
    "*",
]
scalars = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
KEYS = [
    "ansible_host",
    "ansible_user",
    "ansible_port",
    "harness_ssh_config",
    "ansible_ssh_common_args",
    "ansible_ssh_private_key_file",
    "redis_cluster_port",
    "monitoring_prometheus_port",
    "ansible_connection",
]
host_vars = st.one_of(st.none(), values, st.dictionaries(st.sampled_from(KEYS), values, max_size=5))
host_names = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12), st.integers())
hosts = st.one_of(values, st.dictionaries(host_names, host_vars, max_size=3))
group = st.fixed_dictionaries(
    {}, optional={"hosts": hosts, "vars": st.one_of(values, st.dictionaries(st.sampled_from(KEYS), values, max_size=3))}
)
groups = st.dictionaries(
    st.sampled_from(["redis", "loadgen", "monitoring", "other"]), st.one_of(group, values), max_size=4
)
trees = st.one_of(
    st.fixed_dictionaries(
        {
            "all": st.fixed_dictionaries(
                {"children": groups}, optional={"vars": st.dictionaries(st.sampled_from(KEYS), values, max_size=3)}
            )
        }
    ),
    groups,
    values,
)


def _valid_host(h: str) -> bool:
    try:
        ipaddress.ip_address(h)
        return True
    except ValueError:
        return bool(HOST_RE.fullmatch(h)) and not h.startswith("-")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(tree=trees)
def test_fuzz_inventories(tmp_path, monkeypatch, tree):
    monkeypatch.delenv(inventory.LOADGEN_ENV, raising=False)
    path = tmp_path / "inv.yml"
    try:
        path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    except (yaml.YAMLError, UnicodeEncodeError, ValueError):
        return
    for read in (
        lambda: inventory.group_hosts(path, "redis"),
        lambda: inventory.loadgen_host(path),
        lambda: inventory.prometheus_url(path),
    ):
        try:
            got = read()
        except BadInput as e:
            assert str(e) and "\n" not in str(e).strip() and len(str(e)) < 2000, str(e)
            continue
        if isinstance(got, inventory.RemoteHost):
            assert _valid_host(got.address) and _valid_host(got.name)
            assert got.user is None or USER_RE.fullmatch(got.user)
            argv = got.ssh_argv("true")
            assert argv[-3:] == ["--", got.address, "true"]
            opts = argv[1:-3]  # flag, value, flag, value: no value of the inventory is read as a flag
            assert len(opts) % 2 == 0 and set(opts[0::2]) <= {"-F", "-o", "-l", "-p", "-i"}, argv
            assert all(
                v.startswith(("BatchMode=", "ConnectTimeout=")) for f, v in zip(opts[0::2], opts[1::2]) if f == "-o"
            )
        elif isinstance(got, str):  # the Prometheus URL
            host = got.split("://", 1)[1].rsplit(":", 1)[0].strip("[]")
            assert _valid_host(host), got
    assert not Path("/tmp/fuzz-pwned").exists()


# ---- results folders ---------------------------------------------------------------------
@contextmanager
def _deadline(seconds: int):
    """A report that blocks (on a FIFO, say) fails the example instead of hanging the run."""

    def fire(signum, frame):
        raise AssertionError(f"harness report did not return within {seconds} s (blocked?)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


KINDS = [
    "valid",
    "json",
    "bytes",
    "folder",
    "fifo",
    "link-outside",
    "link-dev-zero",
    "link-dangling",
    "huge",
    "missing",
]
_VALID: dict = {}


def _valid_files(tmp: Path) -> dict:
    if not _VALID:
        (tmp / "valid").mkdir(parents=True, exist_ok=True)
        d = hostile_run(tmp / "valid")
        assert cli("report", d)[0] == 0
        _VALID.update({n: (d / n).read_bytes() for n in ("manifest.json", "results.json", "report.html", "junit.xml")})
    return _VALID


def _make(p: Path, kind: str, valid: bytes, blob, outside: Path) -> None:
    if kind == "valid":
        p.write_bytes(valid)
    elif kind == "json":
        p.write_text(json.dumps(blob.decode("latin-1") if isinstance(blob, bytes) else blob))
    elif kind == "bytes":
        p.write_bytes(blob if isinstance(blob, bytes) else str(blob).encode("utf-8", "surrogatepass"))
    elif kind == "folder":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "link-outside":
        (outside / p.name).write_bytes(valid)
        p.symlink_to(outside / p.name)
    elif kind == "link-dev-zero":
        p.symlink_to("/dev/zero")
    elif kind == "link-dangling":
        p.symlink_to(outside / "does-not-exist")
    elif kind == "huge":
        with open(p, "wb") as f:
            f.truncate(300 << 20)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    kinds=st.fixed_dictionaries(
        {n: st.sampled_from(KINDS) for n in ("manifest.json", "results.json", "report.html", "junit.xml")}
    ),
    blob=st.one_of(values, st.binary(max_size=64)),
)
def test_fuzz_results_folders(tmp_path, kinds, blob):
    import shutil

    valid = _valid_files(tmp_path)
    d, outside = tmp_path / "fuzzrun", tmp_path / "outside"
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(outside, ignore_errors=True)
    d.mkdir()
    outside.mkdir()
    for name, kind in kinds.items():
        _make(d / name, kind, valid[name], blob, outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    with _deadline(60):
        result = cli("report", d)
    _check_cli(result)
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before, "written through a link"
    assert not [p for p in d.rglob("*.tmp")]
    if result[0] == 0:
        assert (d / "report.html").is_file() and not (d / "report.html").is_symlink()


def test_fuzz_kinds_include_every_special_file():
    """The generator above covers each kind the issue names (links, FIFOs, devices, huge)."""
    assert {"fifo", "link-outside", "link-dev-zero", "huge", "folder"} <= set(KINDS)
    with pytest.raises(BadInput):
        inventory.loadgen_host(Path("/dev/zero"))
