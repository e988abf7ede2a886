"""The serving engines of one `harness run`: started once, right before the first selected
case whose driver declares `engines=(...)`, stopped after the last such case and on every
way out (exceptions, Ctrl-C, SIGTERM); never while other suites measure, where avoidable.

The runner hands over plain data (no drivers, no plans): the run's cases in order, each
with the engine configurations its driver measures, and calls `at(case)` before each
case. Configurations: "cached" (prefix caching on) and "uncached" (`--no-enable-prefix-
caching`, the mechanism-off control), the same KV-cache size, on ports HARNESS_ENGINE_PORT
and the next one (8011, 8012). A server the user points at (HARNESS_LLM_URL, or the
inventory's `llm` group) is used instead and nothing is started.

Per configuration the run folder gets `engine/<config>/engine.log` and `engine.json` (vLLM's
version, command line, KV size, prefix caching, `vllm:cache_config_info`, the measured start
time, the pids, whether it died during the run); the manifest gets a summary under
`engines`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.errors import BadInput, EnvironmentProblem
from harness.process import redact, url_for_display
from harness.serving_engine import install
from harness.serving_engine.external import EXTERNAL, external_engines
from harness.serving_engine.local import START_TIMEOUT_S, EngineConfig, LocalEngine, model_folder
from harness.serving_engine.metrics import alive, cache_config
from harness.signals import deferred_interrupts
from harness.target import Target

CONFIGS = {"cached": True, "uncached": False}  # name -> prefix caching
PORT_ENV = "HARNESS_ENGINE_PORT"  # first port of the harness-started engines (default 8011)
KV_ENV = "HARNESS_ENGINE_KV_GIB"  # KV cache of each, whole GiB (default 1)
PARALLEL_ENV = "HARNESS_ENGINE_PARALLEL_START"  # "0": start the configurations one after the other
TIMEOUT_ENV = "HARNESS_ENGINE_START_TIMEOUT"
DEFAULT_PORT = 8011
# Measured on this 2-core machine (busy, load 8-23): both one after the other 1146 s to ready,
# both at once 589 s (README). Each engine's worker also gets a core of its own (engine_configs).
PARALLEL_DEFAULT = True


@dataclass
class EnginePlan:
    """Which configurations the run needs and between which cases."""

    configs: list[str] = field(default_factory=list)
    first: str | None = None  # the first case that needs an engine
    last: str | None = None
    between: list[str] = field(default_factory=list)  # cases without engines inside [first, last]


def plan_engines(cases: list[tuple[str, tuple[str, ...]]]) -> EnginePlan:
    """`cases`: ("suite/case", the driver's engine configurations) in run order."""
    out = EnginePlan()
    positions = [i for i, (_, engines) in enumerate(cases) if engines]
    for name, engines in cases:
        for cfg in engines:
            if cfg not in CONFIGS:
                raise BadInput(f"case {name}: engine configuration {cfg!r} is not one of {', '.join(CONFIGS)}")
            if cfg not in out.configs:
                out.configs.append(cfg)
    if positions:
        out.first, out.last = cases[positions[0]][0], cases[positions[-1]][0]
        out.between = [n for n, e in cases[positions[0]:positions[-1] + 1] if not e]
    return out


def _env_int(name: str, default: int, lo: int, hi: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise BadInput(f"{name}={raw[:40]!r} is not a whole number from {lo} to {hi}; fix or unset it")
    return value


def engine_configs(names: list[str], cpu_count: int | None = None) -> dict[str, EngineConfig]:
    """The EngineConfig of each configuration name, from the environment's settings. With
    two configurations and at least two cores each engine's worker gets a core of its own
    (vLLM would pin both to core 0, where they would start, and serve, on one core)."""
    port = _env_int(PORT_ENV, DEFAULT_PORT, 1, 65535 - len(CONFIGS))
    kv = _env_int(KV_ENV, 1, 1, 1024)
    order = list(CONFIGS)
    cores = sorted(os.sched_getaffinity(0))[:cpu_count] if cpu_count is not None else sorted(os.sched_getaffinity(0))
    own_core = len(names) > 1 and len(cores) >= len(names)
    return {n: EngineConfig(port=port + order.index(n), kv_cache_gib=kv, prefix_caching=CONFIGS[n],
                            cpus=str(cores[i]) if own_core else "auto").check()
            for i, n in enumerate(names)}


class RunEngines:
    """Started by `at()` when the first case that needs it comes; `close()` stops everything."""

    def __init__(self, plan: EnginePlan, tgt: Target, run_dir: Path, target_name: str, man: dict,
                 log: Callable[[str], None]):
        self.plan, self.tgt, self.run_dir, self.man, self.log = plan, tgt, Path(run_dir), man, log
        self.engines: dict[str, LocalEngine] = {}
        self.done = False  # started and stopped again: once per run
        self.external = None
        self.window: set[str] = set()  # the cases from the first to the last that needs an engine
        self.kept: set[str] = set()  # engines this run found running and leaves running
        if plan.configs and not tgt.engines:
            self.external = external_engines(target_name)
        self.configs = engine_configs(plan.configs) if plan.configs and not self.external else {}

    def preflight(self) -> None:
        """Before any case: the engine's venv and model are there (else exit 3 with the fix);
        a server the user named is used as it is."""
        if self.external:
            self.tgt.engines.update(self.external)
            ep = self.external[EXTERNAL]
            self.man["engines"] = {EXTERNAL: {"base_url": url_for_display(ep.base_url), "model": ep.model,
                                              "managed": False, "cache_config": cache_config(ep)}}
            self.log(f"serving engine: using {url_for_display(ep.base_url)} (model {ep.model}); nothing is started")
        elif self.configs:
            install.require_installed()
            model_folder()
            if self.plan.between:
                self.log(f"note: the engines keep running during {', '.join(self.plan.between)} "
                         f"(between the cases that need them)")

    def at(self, case: str) -> None:
        """Call before each case: starts the engines at the first case that needs them, stops
        them once the last one is done, and notes an engine that died."""
        if not self.configs:
            return
        if case == self.plan.first and not self.engines and not self.done:
            self.start()
        elif self.engines and case not in self.window:
            self.stop()
        elif self.engines:
            self.check_alive()

    def start(self) -> None:
        """Start the configurations (reusing one `harness engine up` left with the same
        settings); one that fails is noted, and the cases that need it fail with the reason."""
        timeout = float(_env_int(TIMEOUT_ENV, int(START_TIMEOUT_S), 10, 7200))
        parallel = os.environ.get(PARALLEL_ENV, "1" if PARALLEL_DEFAULT else "0").strip() == "1"
        self.man["engines"] = {}
        to_start = []
        for name, cfg in self.configs.items():
            eng = LocalEngine(cfg)
            eng.lock.acquire("--port (HARNESS_ENGINE_PORT)")  # held until the run stops it
            self.engines[name] = eng
            left = eng.leftover()
            if left:
                self.log(f"the engine on port {cfg.port} was {left}; it is stopped and a fresh one started")
                eng.down()
            if eng.reusable():
                self.log(f"serving engine {name!r}: using the one running on port {cfg.port} "
                         f"(started by {eng.started_by()}); it keeps running after the run")
                self.kept.add(name)
                self.tgt.engines[name] = eng.endpoint
            else:
                to_start.append(eng)
        t0 = time.monotonic()
        try:
            problems = start_engines(to_start, timeout, parallel, self.log, os.getpid())
        except BaseException as e:  # Ctrl-C while they start: they are stopped; keep their logs
            with deferred_interrupts(), contextlib.suppress(OSError):
                for name, eng in self.engines.items():
                    if eng in to_start:
                        self._record(name, eng, problem=f"interrupted while starting ({type(e).__name__})")
            raise
        for name, eng in self.engines.items():
            if eng in to_start and not problems.get(eng):
                self.tgt.engines[name] = eng.endpoint
            self._record(name, eng, problem=problems.get(eng))
        self.man["engines_start"] = {"wall_s": round(time.monotonic() - t0, 1), "parallel": parallel,
                                     "started": [n for n, e in self.engines.items() if e in to_start]}

    def check_alive(self) -> None:
        for name, ep in list(self.tgt.engines.items()):
            if name not in self.engines:
                continue
            problem = alive(ep)
            if problem:
                self.log(f"serving engine {name!r} died during the run ({problem}); the cases that need it fail")
                del self.tgt.engines[name]
                self._record(name, self.engines[name], died=problem)
                if name not in self.kept:
                    self.engines[name].down()  # what is left of it (the API server, a worker)

    def stop(self) -> None:
        with deferred_interrupts():
            stopped = []
            for name, eng in self.engines.items():
                try:
                    if name not in self.kept and eng.started_wall is not None:  # launched by this run
                        self._record(name, eng, stopped=eng.down())
                        stopped.append(name)
                finally:
                    eng.lock.release()
                    self.tgt.engines.pop(name, None)
            if stopped:
                self.log(f"stopped the serving engines ({', '.join(stopped)})")
            self.engines = {}
            self.done = True

    def _record(self, name: str, eng: LocalEngine, problem: str | None = None, died: str | None = None,
                stopped: int | None = None) -> None:
        """engine/<name>/engine.json and engine.log in the run folder; the manifest's summary."""
        folder = self.run_dir / "engine" / name
        folder.mkdir(parents=True, exist_ok=True)
        if eng.log_file.exists():
            shutil.copyfile(eng.log_file, folder / "engine.log")
        rec = self.man.setdefault("engines", {}).get(name) or engine_record(name, eng)
        if problem:
            rec["start_problem"] = problem
        if died:
            rec["died"] = died
        if stopped is not None:
            rec["stopped_processes"] = stopped
            rec["stopped_at"] = time.time()
        self.man["engines"][name] = rec
        (folder / "engine.json").write_text(json.dumps(rec, indent=1) + "\n")


def engine_record(name: str, eng: LocalEngine) -> dict:
    st = eng.state()
    ep = eng.endpoint
    return {"config": name, "base_url": ep.base_url, "model": ep.model, "managed": True,
            "vllm": {"package": install.PACKAGE, "version": install.installed_version(eng.venv)},
            "argv": [redact(a) for a in st.get("argv", [])], "kv_cache_gib": eng.config.kv_cache_gib,
            "prefix_caching": eng.config.prefix_caching, "max_model_len": eng.config.max_model_len,
            "cpus": eng.config.cpus,
            "start_s": eng.start_s if eng.start_s is not None else st.get("start_s"), "pids": st.get("pids", []),
            "started_at": st.get("started"), "cache_config": cache_config(ep, timeout=3.0)}


def start_engines(engines: list[LocalEngine], timeout: float, parallel: bool, log, owner_pid: int) -> dict:
    """Start each engine (all at once when `parallel`); {engine: None when it serves, else
    the problem (it is stopped)}. An interrupt stops every one of them before it goes on."""
    out: dict = {}
    try:
        if parallel:
            for eng in engines:
                try:
                    eng.spawn(log, owner_pid)
                except EnvironmentProblem as e:  # a busy port, say: this one is not started, the others are
                    out[eng] = str(e)
            out.update(wait_all([e for e in engines if e not in out], timeout, log))
        else:
            for eng in engines:
                try:
                    eng.up(timeout, log, owner_pid)
                    out[eng] = None
                except EnvironmentProblem as e:
                    out[eng] = str(e)
    except BaseException:
        with deferred_interrupts():
            for eng in engines:
                if eng.proc is not None:  # only what this run launched; never an engine that was there before
                    eng.down()
        raise
    for eng, problem in out.items():
        if problem:
            log(f"serving engine on port {eng.config.port} did not start: {problem}")
    return out


def wait_all(engines: list[LocalEngine], timeout: float, log: Callable[[str], None] = print) -> dict:
    """Wait for spawned engines together; a failed one is stopped, the others go on."""
    t0 = time.monotonic()
    pending = list(engines)
    out: dict = {}
    while pending:
        for eng in list(pending):
            try:
                if eng.poll_ready(t0, timeout):
                    eng.mark_ready()
                    log(f"vLLM on 127.0.0.1:{eng.config.port} serves {eng.endpoint.model} ({eng.start_s:.0f} s to ready)")
                    pending.remove(eng)
                    out[eng] = None
            except EnvironmentProblem as e:
                eng.down()
                pending.remove(eng)
                out[eng] = str(e)
        time.sleep(0.5)
    return out


@contextlib.contextmanager
def engines_for_run(cases: list[tuple[str, tuple[str, ...]]], tgt: Target, run_dir: Path, target_name: str,
                    man: dict, log: Callable[[str], None] = print):
    """Yield a RunEngines whose `at(case)` the runner calls before each case; whatever
    happens, every engine it started is stopped when the block is left."""
    run = RunEngines(plan_engines(cases), tgt, run_dir, target_name, man, log)
    if run.configs:
        names = [n for n, _ in cases]
        run.window = set(names[names.index(run.plan.first):names.index(run.plan.last) + 1])
    run.preflight()
    try:
        yield run
    finally:
        if run.engines:
            run.stop()
