"""vLLM serving SmolLM2 on loopback: `harness engine up|down|status`, and the runner's engines.

One engine is one port: `python -m vllm.entrypoints.openai.api_server` from the engine's own
venv, in a session (and process group) of its own, its output in a log file. It runs three
processes (the API server, `VLLM::EngineCore`, its worker) plus multiprocessing's resource
tracker; all are in the API server's process group. The state file (.harness/engine/
port-P/state.json) names the group and every pid seen, written as soon as the server
exists and again as its children appear, so that `down` (from any process) stops them all:
SIGTERM to each, SIGKILL after a grace. Only processes that are provably this engine's are
ever signalled (harness.infra.ownership): a recorded pid whose live process has the recorded
start time and runs in the engine's own folder (its cwd, where the server was started),
and the descendants and process-group members of such a process. A name (`VLLM::...`), a
command line or a process group that a state file names proves nothing; the group is
never signalled as a whole.

Ready when `GET /v1/models` lists the served model. A start that fails, times out or is
interrupted (Ctrl-C, SIGTERM) stops what it started and, on failure, says why with the tail
of the log. The port is locked (harness.infra.cluster.PortLock) while an `up` starts and for a
whole `harness run`, so two starts on one port never race.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, cast

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.signals import deferred_interrupts
from harness.infra.cluster import PortLock
from harness.infra.model_wheels import smollm2_dir
from harness.infra.ownership import (
    DamagedState,
    Proc,
    boot_id,
    cwd_of,
    descendants,
    gone_owner,
    is_ours,
    not_ours_note,
    note,
    open_log,
    open_state,
    own_dir,
    spawned,
    split_owned,
    start_time,
    terminate,
    write_private,
)
from harness.infra.redis_server import check_port_number, check_ports_free
from harness.infra.secret_store import SECRET_ENV
from harness.infra.serving_engine import install, placement
from harness.infra.serving_engine.metrics import EngineHttpError, served_models
from harness.infra.target import LlmEndpoint

HOST = "127.0.0.1"
SERVED_NAME = "smollm2"
START_TIMEOUT_S = 600.0  # 30-80 s on 2 idle cores (eager); much more when the machine is busy
STOP_GRACE_S = 15.0
LOG_TAIL_LINES = 15
# vLLM 0.32's CPU build saves its AOT-compiled model but cannot load it back ("'function'
# object has no attribute 'finalize_loading'"), so every start compiled again (~100 s); with
# its older compile cache a second start takes ~50 s. Set unless the user set it.
AOT_ENV = "VLLM_USE_AOT_COMPILE"
# CPU features with native bf16 matrix products; without them vLLM's CPU build (bf16 by
# default) cannot build its oneDNN bf16 matmul, falls back to torch's, and is about 5x slower
# than float32: 12.5 s against 2.4 s for a 512-token prompt on an AVX2-only 2-core EPYC.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")
# vLLM's line once the model is loaded, profiled and warm (compiled too, unless eager).
WARM_MARK = b"init engine (profile, create kv cache, warmup model) took"


@dataclass(frozen=True)
class EngineConfig:
    """How one engine is started. `kv_cache_gib` is VLLM_CPU_KVCACHE_SPACE (whole GiB);
    `cpus`: "auto" and "nobind" are vLLM's own VLLM_CPU_OMP_THREADS_BIND ("auto" pins the
    worker to core 0 on this 2-core machine, for every engine); a core list ("1", "0-3")
    pins every process of the engine there once it serves (harness.infra.serving_engine.placement)."""

    port: int = 8011
    kv_cache_gib: int = 1
    prefix_caching: bool = True
    max_model_len: int = 2048
    cpus: str = "auto"
    dtype: str = "auto"  # "auto": cpu_dtype() of this host; or float32, bfloat16, float16
    # False: --enforce-eager. On 2 cores torch.compile took 48 s (its cache warm) to 121 s
    # (cold) of each start, against 8.6 s for an eager start, and the compiled model served a
    # 512-token prompt only 5-10% faster (1.9-2.2 s against 2.1-2.3 s; 16 output tokens after
    # a cached prefix 1.6 s against 1.8 s): the cases measure the prefix cache's effect, which
    # is the same in both. engine.json's `compiled` says which one ran.
    compiled: bool = False

    def resolved_dtype(self) -> str:
        return cpu_dtype() if self.dtype == "auto" else self.dtype

    def check(self) -> "EngineConfig":
        check_port_number(self.port, "--port")
        if not isinstance(self.cpus, str):
            raise BadInput(
                f"--cpus: {str(self.cpus)[:40]!r} is not 'auto', 'nobind' or a core list such as 1 or 0-3,5; "
                f"give one of those"
            )
        placement.core_list(self.cpus)
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise BadInput(
                f"--dtype: {str(self.dtype)[:40]!r} is not auto, float32, bfloat16 or float16; give one of those"
            )
        for name, value, lo, hi in (
            ("--kv-cache-gib", self.kv_cache_gib, 1, 1024),
            ("--max-model-len", self.max_model_len, 16, 1 << 20),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise BadInput(f"{name}: {value!r} is not a whole number from {lo} to {hi}; give one in that range")
        return self


def cpu_dtype(cpuinfo: Path = CPUINFO) -> str:
    """The dtype this host's CPU runs fastest: bfloat16 where it has native bf16 (AVX512-BF16
    or AMX), float32 on other x86 CPUs, vLLM's own choice ("auto") where the flags cannot be
    read or are not x86's."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return "auto"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), None)
    if flags is None:
        return "auto"
    return "bfloat16" if BF16_FLAGS & set(flags) else "float32"


def model_folder(model_dir: Path | None = None) -> Path:
    """The SmolLM2 folder vLLM serves (converted once from the shipped GGUF), or exit 3 with the fix."""
    if model_dir is None:
        model_dir = smollm2_dir()
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise EnvironmentProblem(
            f"the model folder {model_dir} is missing (no config.json); run `make setup`, "
            f"which installs SmolLM2 and converts it"
        )
    return model_dir


def known_ports(engine_dir: Path | None = None) -> list[int]:
    """The ports with an engine state file under .harness/engine (port-P/state.json): every
    engine `harness engine up` or a run started here and has not stopped yet."""
    out = []
    for f in Path(engine_dir or install.ENGINE_DIR).glob("port-*/state.json"):
        digits = f.parent.name[len("port-") :]
        if digits.isdigit() and 1 <= int(digits) <= 65535:
            out.append(int(digits))
    return sorted(out)


class LocalEngine:
    def __init__(
        self,
        config: EngineConfig = EngineConfig(),
        *,
        state_dir: Path | None = None,
        venv: Path = install.VENV_DIR,
        model_dir: Path | None = None,
    ):
        self.config = config.check()
        self.state_dir = Path(state_dir or install.ENGINE_DIR / f"port-{config.port}")
        self.venv = Path(venv)
        self.model_dir = model_dir
        self.proc: subprocess.Popen | None = None
        self.lock = PortLock(HOST, [config.port])
        self.start_s: float | None = None  # launch to ready, seconds
        self.spawned_at = 0.0
        self.started_wall: float | None = None
        self.argv_used: list[str] = []
        self.owner_pid: int | None = None
        self.owner_start: int | None = None
        self.leader: Proc | None = None  # the API server this object started: pid and start time
        self._seen: dict[int, Proc] = {}  # its processes seen so far, recorded in the state file
        self.idle = False  # started at SCHED_IDLE (in the background); set back once it serves
        self.placed: dict = {}

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "engine.log"

    @property
    def endpoint(self) -> LlmEndpoint:
        return LlmEndpoint(
            f"http://{HOST}:{self.config.port}", SERVED_NAME, managed=True, prefix_caching=self.config.prefix_caching
        )

    def argv(self, python: Path, model: Path) -> list[str]:
        c = self.config
        return [
            str(python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--served-model-name",
            SERVED_NAME,
            "--host",
            HOST,
            "--port",
            str(c.port),
            "--max-model-len",
            str(c.max_model_len),
            "--dtype",
            c.resolved_dtype(),
            "--enable-prefix-caching" if c.prefix_caching else "--no-enable-prefix-caching",
            "--enable-prompt-tokens-details",  # each answer's usage names its prompt tokens served from the cache
            *([] if c.compiled else ["--enforce-eager"]),
        ]

    def env(self) -> dict:
        drop = set(SECRET_ENV) | {"VIRTUAL_ENV", "HARNESS_LLM_URL"}  # the engine needs none of the harness's secrets
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env.setdefault(AOT_ENV, "0")
        env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            VLLM_CPU_KVCACHE_SPACE=str(self.config.kv_cache_gib),
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            PYTHONUNBUFFERED="1",
        )
        env.update(placement.binding_env(self.config.cpus))
        return env

    # ---- start -------------------------------------------------------------------------
    def up(
        self,
        timeout: float = START_TIMEOUT_S,
        log: Callable[[str], None] = lambda m: None,
        owner_pid: int | None = None,
    ) -> LlmEndpoint:
        """Start the engine and wait until it serves; the state file names its processes
        from the moment it exists. `owner_pid`: the run whose end makes it a leftover. A
        start that fails or is interrupted stops what it started."""
        locked_here = not self.lock.held  # a run holds the lock already; `engine up` takes it now
        self.lock.acquire("--port")
        try:
            self.spawn(log, owner_pid)
            t0 = time.monotonic()
            try:
                while not self.poll_ready(t0, timeout):
                    time.sleep(0.5)
            except BaseException:
                self.down()
                raise
            self.start_s = round(time.monotonic() - self.spawned_at, 1)
            self.mark_ready()
            log(f"vLLM on {HOST}:{self.config.port} serves {SERVED_NAME} ({self.start_s:.0f} s to ready)")
            return self.endpoint
        finally:
            if locked_here:
                self.lock.release()

    def spawn(
        self, log: Callable[[str], None] = lambda m: None, owner_pid: int | None = None, idle: bool = False
    ) -> None:
        """Check the venv, the model and the port, then launch the server (not waiting);
        with `idle`, at SCHED_IDLE (set back by mark_ready)."""
        python = install.require_installed(self.venv)
        model = model_folder(self.model_dir)
        self._refuse_running()
        check_ports_free(HOST, [self.config.port], "the serving engine", flag="--port")
        own_dir(self.state_dir)
        self.argv_used, self.owner_pid = self.argv(python, model), owner_pid
        self.owner_start = start_time(owner_pid) if owner_pid else None
        log(
            f"starting vLLM on {HOST}:{self.config.port} (prefix caching {'on' if self.config.prefix_caching else 'off'}, "
            f"KV cache {self.config.kv_cache_gib} GiB, {self.config.resolved_dtype()}{', idle priority' if idle else ''}); "
            + (
                "compiled; about 125 s on 2 idle cores (160-200 s before its compile cache is warm)"
                if self.config.compiled
                else "eager; 30-80 s on 2 idle cores"
            )
            + f", log in {self.log_file}"
        )
        self.idle = idle
        self.spawned_at, self.started_wall = time.monotonic(), time.time()
        with (
            deferred_interrupts(),
            open_log(self.log_file) as out,
        ):  # the pid is in the state file before a Ctrl-C lands
            self.proc = subprocess.Popen(
                self.argv_used,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(),
                start_new_session=True,
                cwd=str(self.state_dir),
                preexec_fn=placement.go_idle if idle else None,
            )
            self.leader = spawned(self.proc.pid)
            self._seen = {self.leader.pid: self.leader}
            self._write_state()

    def _refuse_running(self) -> None:
        if self.running_pids():
            raise EnvironmentProblem(
                f"a serving engine is already running on {HOST}:{self.config.port} (started by "
                f"{self.started_by()}); it was left as it is: stop it with `harness engine down --port "
                f"{self.config.port}`, or choose another port with --port"
            )

    def poll_ready(self, t0: float, timeout: float) -> bool:
        """True once `/v1/models` lists the model; EnvironmentProblem (with the log's tail)
        when the server exited or `timeout` passed since `t0`. Names new children in the state file."""
        code = cast(subprocess.Popen, self.proc).poll()  # asked after spawn(), which sets proc
        if code is not None:
            raise EnvironmentProblem(
                f"vLLM on {HOST}:{self.config.port} exited with code {code} while starting; "
                f"the end of its log ({self.log_file}): {self.log_tail()}"
            )
        found = {p.pid: p for p in self._mine()}
        if set(found) - set(self._seen):  # children appeared: name them in the state file now
            self._seen.update(found)
            self._write_state()
        try:
            if SERVED_NAME in served_models(self.endpoint, timeout=2.0):
                return True
        except EngineHttpError:
            pass
        if time.monotonic() - t0 > timeout:
            raise EnvironmentProblem(
                f"vLLM on {HOST}:{self.config.port} did not answer /v1/models within "
                f"{timeout:.0f} s; the end of its log ({self.log_file}): {self.log_tail()}"
            )
        return False

    def mark_ready(self) -> None:
        """It serves: pinned to its cores (a core list) and back to normal priority (idle start)."""
        if self.start_s is None:
            self.start_s = round(time.monotonic() - self.spawned_at, 1)
        cores = placement.core_list(self.config.cpus)
        if cores or self.idle:
            pids = self.running_pids()
            self.placed = {
                "threads": placement.settle(pids, cores, restore=self.idle),
                "cores": sorted(cores) if cores else None,
                "started_idle": self.idle,
                "policies": placement.policy_counts(pids),
            }
        # what start-up ran and ended (a tool vLLM called while loading, caught by a poll) is
        # no process of the serving engine: the state names the ones that serve
        self._seen = {pid: p for pid, p in self._seen.items() if self._still(p)}
        self._write_state()

    def warm(self) -> bool:
        """vLLM's log says the model is loaded and warm (compiled and its compile cache written, unless eager)."""
        try:
            return WARM_MARK in self.log_file.read_bytes()
        except OSError:
            return False

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_file.read_bytes()[-32768:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
        return " | ".join(kept)[-3000:] or "(empty log)"

    # ---- processes ---------------------------------------------------------------------
    def _mine(self) -> list[Proc]:
        """The live processes of the server this object started: it, its descendants and
        its process group's members (its own child: its pid is its own until reaped). Once
        it has exited, the members of its group that still run in the engine's folder."""
        if self.proc is None or self.leader is None:
            return []
        if self.proc.poll() is None:
            return [self.leader, *descendants([self.leader], [self.leader])]
        real = os.path.realpath(self.state_dir)
        return [p for p in descendants([], [self.leader]) if cwd_of(p.pid) == real]

    def _owned(self, st: dict) -> tuple[list[Proc], list[int], bool]:
        """(the live processes that are provably this engine's, the live pids the state names
        that are not, whether those have no start time: an older harness's state)."""
        ours, foreign, legacy = split_owned(st, "procs", lambda p: is_ours(p, self.state_dir))
        leaders = [p for p in ours if p.pid == st.get("pgid")]
        found = {p.pid: p for p in [*ours, *descendants(ours, leaders), *self._mine()]}
        return sorted(found.values(), key=lambda p: p.pid), foreign, legacy

    def running_pids(self) -> list[int]:
        """Every live process of this engine (provably its own: harness.infra.ownership)."""
        return [p.pid for p in self._owned(self._state())[0]]

    def down(self, grace: float = STOP_GRACE_S, log: Callable[[str], None] = note) -> int:
        """Stop every process of this engine (SIGTERM to each, SIGKILL after `grace`);
        returns how many were running. A second Ctrl-C waits until they are all gone.
        Processes the state names that are not provably the engine's are left alone, and
        `log` says so."""
        with deferred_interrupts():
            ours, foreign, legacy = self._owned(self._state_to_stop())
            stopped = terminate(ours, lambda p: self.state_dir, grace, check=self._still)
            late = [p for p in self._owned(self._state_to_stop())[0] if p.pid not in {q.pid for q in ours}]
            terminate(late, lambda p: self.state_dir, 5.0, check=self._still)
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
                self.proc = None
            if foreign:
                log(
                    not_ours_note(
                        self.state_file,
                        foreign,
                        legacy,
                        f"stop them yourself if they are this engine's, then remove {self.state_dir}",
                    )
                )
            if not (foreign and legacy):
                self.state_file.unlink(missing_ok=True)
        return stopped

    def _state_to_stop(self) -> dict:
        """The state, for `down`: a damaged one still lets the server this object started
        be stopped (it is its own child); without one, it is the one-line refusal."""
        try:
            return self._state()
        except DamagedState:
            if self.proc is None:
                raise
            return {}

    @staticmethod
    def _still(p: Proc) -> bool:
        """The process found to be the engine's is still that process (the same start time)."""
        return p.start is not None and start_time(p.pid) == p.start

    # ---- state -------------------------------------------------------------------------
    def _write_state(self) -> None:
        pgid = self.leader.pid if self.leader else None
        write_private(
            self.state_file,
            json.dumps(
                {
                    "host": HOST,
                    "port": self.config.port,
                    "pgid": pgid,
                    "boot": boot_id(),
                    "pids": sorted(self._seen),
                    "procs": [p.as_json() for p in sorted(self._seen.values(), key=lambda p: p.pid)],
                    "owner_pid": self.owner_pid,
                    "owner_start": self.owner_start,
                    "config": asdict(self.config),
                    "argv": self.argv_used,
                    "log": str(self.log_file),
                    "started": self.started_wall,
                    "start_s": self.start_s,
                }
            ),
        )

    def _state(self) -> dict:
        """The state file's fields the harness uses, checked; {} when there is none.
        DamagedState (one line, exit 3) when it cannot be used."""
        f = open_state(self.state_file, "process of this engine")
        if f is None:
            return {}
        cfg = f.doc.get("config")
        if cfg is not None and not (
            isinstance(cfg, dict)
            and len(cfg) <= 64
            and all(
                isinstance(k, str)
                and len(k) <= 100
                and (v is None or type(v) in (bool, int, float) or (isinstance(v, str) and len(v) <= 200))
                for k, v in cfg.items()
            )
        ):
            raise f.bad("config", "an object of the engine's settings")
        return {
            **f.owned_procs(),
            "pgid": f.pid("pgid"),
            "config": cfg,
            "log": f.text("log"),
            "start_s": f.number("start_s"),
            "started": f.number("started"),
            "argv": f.texts("argv"),
        }

    def state(self) -> dict:
        return self._state()

    def reusable(self) -> bool:
        """An engine already running here (from `harness engine up`) with this very
        configuration, serving: a run may measure it instead of starting its own."""

        def same(cfg) -> bool:  # the cores it is pinned to do not matter here
            return isinstance(cfg, dict) and {**cfg, "cpus": None} == {**asdict(self.config), "cpus": None}

        if not self.running_pids() or not same(self._state().get("config")):
            return False
        try:
            return SERVED_NAME in served_models(self.endpoint, timeout=3.0)
        except EngineHttpError:
            return False

    def started_by(self) -> str:
        owner = self._state().get("owner_pid")
        return f"harness run pid {owner}" if owner else "harness engine up"

    def leftover(self) -> str | None:
        """When the engine running here was started by a `harness run` that is gone: which."""
        st = self._state()
        why = gone_owner(st.get("owner_pid"), st.get("owner_start"))
        return why if why and self.running_pids() else None

    def status(self) -> dict:
        st = self._state()
        pids = [p.pid for p in self._owned(st)[0]]
        out = {
            "host": HOST,
            "port": self.config.port,
            "running": bool(pids),
            "pids_alive": pids,
            "config": st.get("config"),
            "started_by": self.started_by() if st else None,
            "start_s": st.get("start_s"),
            "log": st.get("log"),
        }
        try:
            serving = SERVED_NAME in served_models(self.endpoint, timeout=3.0)
        except EngineHttpError as e:
            serving = False
            if pids:
                out["problem"] = str(e)
        if serving and not pids:  # one started elsewhere (no state file here) still answers
            out.update(running=True, started_by="another process (no state file here)")
        out["serving"] = serving
        return out
