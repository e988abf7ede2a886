"""ansible-lint, syntax checks of both inventories, and the roles' early `fail` checks
(they stop before anything starts and say how to fix the input)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.base.paths import REPO_ROOT
from tests.system.test_ansible_local import ANSIBLE_DIR, ANSIBLE_PLAYBOOK, make_inventory, playbook

ANSIBLE_LINT = Path(sys.executable).parent / "ansible-lint"
needs_playbook = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK, reason="ansible-playbook not installed (apt-get install ansible)"
)


@pytest.mark.skipif(
    not ANSIBLE_LINT.exists(), reason="ansible-lint not installed in this venv (pip install ansible-lint)"
)
def test_ansible_lint_passes():
    out = subprocess.run(
        [str(ANSIBLE_LINT), "--nocolor", "ansible/"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Passed" in out.stdout + out.stderr


@needs_playbook
@pytest.mark.parametrize("inventory", ["lab.yml", "local.yml"])
@pytest.mark.parametrize("play", ["site.yml", "teardown.yml"])
def test_playbooks_pass_the_syntax_check(inventory, play):
    out = playbook(str(ANSIBLE_DIR / "inventories" / inventory), play, "--syntax-check")
    assert out.returncode == 0, out.stdout + out.stderr


def test_committed_local_inventory_uses_7000_to_7005():
    from harness.infra.inventory import _find_group

    tree = yaml.safe_load((ANSIBLE_DIR / "inventories" / "local.yml").read_text())
    hosts = _find_group(tree, "redis")["hosts"]
    assert sorted(h["redis_cluster_port"] for h in hosts.values()) == list(range(7000, 7006))
    assert tree["all"]["vars"]["ansible_connection"] == "local"


@needs_playbook
def test_too_few_hosts_fail_early_with_the_fix(tmp_path):
    inv = make_inventory(tmp_path, [7610, 7611, 7612, 7613, 7614], tmp_path / "redis")
    out = playbook(inv, "site.yml")
    assert out.returncode != 0
    assert "has 5 hosts" in out.stdout and "needs at least 6" in out.stdout
    assert not (tmp_path / "redis").exists()  # nothing was set up


@needs_playbook
def test_a_foreign_redis_on_the_port_is_left_alone(tmp_path):
    from harness.infra.redis_server import RedisProcess

    # a port below 55535 (the role refuses higher ones: the bus port is port + 10000)
    foreign = RedisProcess("127.0.0.1", 7639, tmp_path / "foreign").start()
    ports = [foreign.port] + list(range(7631, 7636))
    inv = make_inventory(tmp_path, ports, tmp_path / "redis")
    try:
        out = playbook(inv, "site.yml")
        assert foreign.client().ping()
    finally:
        foreign.stop()
    assert out.returncode != 0
    assert "does not run" in out.stdout and "another redis_cluster_port" in out.stdout, out.stdout[-2500:]
    for port in ports[1:]:
        assert not (tmp_path / "redis" / str(port) / "redis.conf").exists()


@needs_playbook
def test_gpu_host_without_a_driver_fails_with_the_fix(tmp_path):
    """This machine has no NVIDIA driver: the gpu_host role must stop at its first check."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi; the missing-driver check cannot be shown here")
    inv = tmp_path / "gpu.yml"
    inv.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                    },
                    "children": {
                        "gpu": {
                            "hosts": {"gpu-local": {"gpu_host_harness_repo": "https://example.invalid/harness.git"}}
                        }
                    },
                }
            }
        )
    )
    out = playbook(str(inv), "site.yml")
    assert out.returncode != 0
    assert "nvidia-smi failed on gpu-local" in out.stdout and "install the NVIDIA" in out.stdout
