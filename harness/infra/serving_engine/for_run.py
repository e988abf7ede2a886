"""The serving engines of one `harness run`: started once per run and ready before the first
selected case whose driver declares `engines=(...)`, stopped after the last such case and
on every way out (exceptions, Ctrl-C, SIGTERM, SIGHUP).

Where the run has a suite before the first such case's suite and the engines compile the
model (EngineConfig.compiled; see background_allowed), or with HARNESS_ENGINE_EARLY_START=1,
the engines start in the background during that suite, at SCHED_IDLE (they get only CPU
time nothing else wants), and are set back to normal priority once they serve, before
anything is measured on them (harness.infra.serving_engine.placement); the manifest's
`engines_start.background_during` names the cases that ran beside the start. Otherwise
(eager engines, the default), or with HARNESS_ENGINE_EARLY_START=0, or without the right to
set a task's priority back (not root), they start right before the first case that needs them.

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
from typing import Callable, cast

from harness.base.errors import BadInput
from harness.base.signals import deferred_interrupts
from harness.infra.redaction import redact
from harness.infra.serving_engine import install, placement
from harness.infra.serving_engine.external import EXTERNAL, external_engines
from harness.infra.serving_engine.local import START_TIMEOUT_S, EngineConfig, LocalEngine, model_folder
from harness.infra.serving_engine.metrics import alive, cache_config
from harness.infra.serving_engine.startup import Startup, start_order
from harness.infra.target import Target
from harness.infra.url_redaction import url_for_display

CONFIGS = {"cached": True, "uncached": False}  # name -> prefix caching
PORT_ENV = "HARNESS_ENGINE_PORT"  # first port of the harness-started engines (default 8011)
KV_ENV = "HARNESS_ENGINE_KV_GIB"  # KV cache of each, whole GiB (default 1)
PARALLEL_ENV = "HARNESS_ENGINE_PARALLEL_START"  # 1: all at once, 0: one after the other, unset: staggered
EARLY_ENV = "HARNESS_ENGINE_EARLY_START"  # "1"/"0": background start during the suite before or not
TIMEOUT_ENV = "HARNESS_ENGINE_START_TIMEOUT"
DEFAULT_PORT = 8011


@dataclass
class EnginePlan:
    """Which configurations the run needs and between which cases."""

    configs: list[str] = field(default_factory=list)
    first: str | None = None  # the first case that needs an engine
    last: str | None = None
    between: list[str] = field(default_factory=list)  # cases without engines inside [first, last]
    early: str | None = None  # the first case of the suite before `first`'s: the background start


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
        out.between = [n for n, e in cases[positions[0] : positions[-1] + 1] if not e]
        suites = [n.split("/")[0] for n, _ in cases[: positions[0]]]
        before = [s for s in suites if s != out.first.split("/")[0]]
        if before:
            out.early = cases[suites.index(before[-1])][0]
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


def early_start() -> str:
    """HARNESS_ENGINE_EARLY_START: "1", "0" or "" (unset)."""
    value = os.environ.get(EARLY_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise BadInput(
            f"{EARLY_ENV}={value[:40]!r} is not 1 (start in the background), 0 (right before "
            f"the first case) or unset (in the background only for compiled engines); fix or unset it"
        )
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
    return {
        n: EngineConfig(
            port=port + order.index(n),
            kv_cache_gib=kv,
            prefix_caching=CONFIGS[n],
            cpus=str(cores[i]) if own_core else "auto",
        ).check()
        for i, n in enumerate(names)
    }


class RunEngines:
    """Started by `at()` when the first case that needs it comes; `close()` stops everything."""

    def __init__(
        self, plan: EnginePlan, tgt: Target, run_dir: Path, target_name: str, man: dict, log: Callable[[str], None]
    ):
        self.plan, self.tgt, self.run_dir, self.man, self.log = plan, tgt, Path(run_dir), man, log
        self.engines: dict[str, LocalEngine] = {}
        self.done = False  # started and stopped again: once per run
        self.external = None
        self.window: set[str] = set()  # the cases from the first to the last that needs an engine
        self.kept: set[str] = set()  # engines this run found running and leaves running
        self.startup: Startup | None = None  # launched, not all ready yet
        self.started_t0 = 0.0
        self.during: list[str] = []  # the cases that ran while they started
        if plan.configs and not tgt.engines:
            self.external = external_engines(target_name)
        self.configs = engine_configs(plan.configs) if plan.configs and not self.external else {}
        early_start()  # a bad value is refused before anything is measured

    def preflight(self) -> None:
        """Before any case: the engine's venv and model are there (else exit 3 with the fix);
        a server the user named is used as it is."""
        if self.external:
            self.tgt.engines.update(self.external)
            ep = self.external[EXTERNAL]
            self.man["engines"] = {
                EXTERNAL: {
                    "base_url": url_for_display(ep.base_url),
                    "model": ep.model,
                    "managed": False,
                    "cache_config": cache_config(ep),
                }
            }
            self.log(f"serving engine: using {url_for_display(ep.base_url)} (model {ep.model}); nothing is started")
        elif self.configs:
            install.require_installed()
            model_folder()
            if self.plan.between:
                self.log(
                    f"note: the engines keep running during {', '.join(self.plan.between)} "
                    f"(between the cases that need them)"
                )

    def at(self, case: str) -> None:
        """Call before each case: starts the engines (in the background from the plan's
        `early` case; ready at the first case that needs them), stops them once the last one
        is done, and notes an engine that died."""
        if not self.configs:
            return
        if self.startup is None and not self.engines and not self.done:
            if case == self.plan.first:
                self.begin(background=False)
            elif case == self.plan.early and self.background_allowed():
                self.begin(background=True)
        if self.startup is not None:
            if case == self.plan.first:
                self.finish()
            else:
                self.during.append(case)
                self.tick()
        elif self.engines and case not in self.window:
            self.stop()
        elif self.engines:
            self.check_alive()

    def tick(self) -> None:
        """Between repetitions: a background start moves on (launches the next engine once the
        first is warm, notes one that serves); nothing otherwise."""
        if self.startup is not None:
            self.startup.step()

    def background_allowed(self) -> bool:
        """HARNESS_ENGINE_EARLY_START: "1" always, "0" never; unset: only engines that compile.
        A compile is CPU work, which SCHED_IDLE holds back; an eager start is mostly reading
        the venv and the weights from disk and faulting them in, which it cannot (the disk
        has no I/O scheduler here): measured, two eager starts beside semantic-cache doubled
        its first semantic and embed-perf repetitions (28 -> 55 s, 23 -> 59 s), failed
        embed-perf's threshold (0.64x) and saved no time."""
        value = early_start()
        if value == "0" or (value == "" and not any(c.compiled for c in self.configs.values())):
            return False
        if not placement.can_restore_priority():
            self.log(
                "note: the serving engines start right before their suite (setting an idle-priority "
                "engine back to normal priority needs root)"
            )
            return False
        return True

    def begin(self, background: bool) -> None:
        """Launch the configurations (reusing one `harness engine up` left with the same
        settings); `background`: at idle priority, while the cases before theirs run."""
        order = start_order(os.environ.get(PARALLEL_ENV))
        timeout = float(_env_int(TIMEOUT_ENV, int(START_TIMEOUT_S), 10, 7200))
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
                self.log(
                    f"serving engine {name!r}: using the one running on port {cfg.port} "
                    f"(started by {eng.started_by()}); it keeps running after the run"
                )
                self.kept.add(name)
                self.tgt.engines[name] = eng.endpoint
            else:
                to_start.append(eng)
        if background and to_start:
            early = cast(str, self.plan.early)  # at() starts in the background only at `early`
            self.log(f"serving engines: starting in the background at idle priority during {early.split('/')[0]}")
        self.startup = Startup(to_start, timeout, order, self.log, os.getpid(), idle=background and bool(to_start))
        self.started_t0, self.during = time.monotonic(), []
        self.tick()

    def finish(self) -> None:
        """Wait until every launched engine serves or failed; one that fails is noted, and the
        cases that need it fail with the reason."""
        startup, self.startup = cast(Startup, self.startup), None  # at() calls this only while a start is on
        try:
            problems = startup.wait()
        except BaseException as e:  # Ctrl-C while they start: they are stopped; keep their logs
            with deferred_interrupts(), contextlib.suppress(OSError):
                startup.abort()
                for name, eng in self.engines.items():
                    if eng in startup.launched:
                        self._record(name, eng, problem=f"interrupted while starting ({type(e).__name__})")
            raise
        for name, eng in self.engines.items():
            if name in self.kept:
                continue
            if eng in problems and problems[eng] is None:
                self.tgt.engines[name] = eng.endpoint
            self._record(name, eng, problem=problems.get(eng))
        self.man["engines_start"] = {
            "wall_s": round(time.monotonic() - self.started_t0, 1),
            "order": startup.order,
            "started": [n for n, e in self.engines.items() if e in startup.launched],
            "idle_priority": startup.idle,
            "background_during": self.during,
        }

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
            self.startup = None  # whatever it launched is stopped below
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

    def _record(
        self,
        name: str,
        eng: LocalEngine,
        problem: str | None = None,
        died: str | None = None,
        stopped: int | None = None,
    ) -> None:
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
    return {
        "config": name,
        "base_url": ep.base_url,
        "model": ep.model,
        "managed": True,
        "vllm": {"package": install.PACKAGE, "version": install.installed_version(eng.venv)},
        "argv": [redact(a) for a in st.get("argv", [])],
        "kv_cache_gib": eng.config.kv_cache_gib,
        "prefix_caching": eng.config.prefix_caching,
        "max_model_len": eng.config.max_model_len,
        "dtype": eng.config.resolved_dtype(),
        "compiled": eng.config.compiled,
        "cpus": eng.config.cpus,
        "placement": eng.placed or None,
        "start_s": eng.start_s if eng.start_s is not None else st.get("start_s"),
        "pids": st.get("pids", []),
        "started_at": st.get("started"),
        "cache_config": cache_config(ep, timeout=3.0),
    }


@contextlib.contextmanager
def engines_for_run(
    cases: list[tuple[str, tuple[str, ...]]],
    tgt: Target,
    run_dir: Path,
    target_name: str,
    man: dict,
    log: Callable[[str], None] = print,
):
    """Yield a RunEngines whose `at(case)` the runner calls before each case; whatever
    happens, every engine it started is stopped when the block is left."""
    run = RunEngines(plan_engines(cases), tgt, run_dir, target_name, man, log)
    if run.configs:
        names = [n for n, _ in cases]
        first, last = cast(str, run.plan.first), cast(str, run.plan.last)  # set: some case needs an engine
        run.window = set(names[names.index(first) : names.index(last) + 1])
    run.preflight()
    try:
        yield run
    finally:
        if run.engines:
            run.stop()
