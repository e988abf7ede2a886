"""Bringing several engines up: in which order, polled without blocking or waited for.

Order ("staggered", the default): the first engine is launched at once and the next one
as soon as vLLM's log says the first is compiled and warm; the later ones then load the
compiled model from vLLM's cache (the engines share one cache entry, see placement) instead
of compiling it again beside the first. Eager engines (the default, EngineConfig.compiled)
compile nothing, so staggered launches them all at once. "parallel" launches them all at
once (each compiles on its own); "sequential" launches each once the one before serves.

`step()` does what can be done now and returns; `wait()` steps until every engine serves
or failed. An engine that fails is stopped and its problem kept; the others go on.
`abort()` stops every engine this startup launched (a Ctrl-C, an error).
"""

from __future__ import annotations

import time
from typing import Callable

from harness.base.errors import BadInput, EnvironmentProblem
from harness.infra.serving_engine.local import LocalEngine

ORDERS = ("staggered", "parallel", "sequential")


def start_order(raw: str | None) -> str:
    """HARNESS_ENGINE_PARALLEL_START: unset = staggered, "1" = parallel, "0" = sequential."""
    value = (raw or "").strip()
    order = {"": "staggered", "1": "parallel", "0": "sequential"}.get(value, value)
    if order not in ORDERS:
        raise BadInput(
            f"HARNESS_ENGINE_PARALLEL_START={value[:40]!r} is not 1 (all at once), 0 (one after the "
            f"other) or staggered; fix or unset it"
        )
    return order


class Startup:
    def __init__(
        self,
        engines: list[LocalEngine],
        timeout: float,
        order: str,
        log: Callable[[str], None],
        owner_pid: int,
        idle: bool = False,
    ):
        self.queue = list(engines)  # not launched yet
        self.starting: list[LocalEngine] = []
        self.launched: list[LocalEngine] = []
        self.problems: dict[LocalEngine, str | None] = {}  # None: it serves
        self.timeout, self.order, self.log, self.owner_pid, self.idle = timeout, order, log, owner_pid, idle

    @property
    def done(self) -> bool:
        return not self.queue and not self.starting

    def step(self) -> bool:
        """Launch what may be launched now, note what became ready or failed; True when done."""
        while self.queue and self._may_launch():
            self._launch(self.queue.pop(0))
        for eng in list(self.starting):
            try:
                ready = eng.poll_ready(eng.spawned_at, self.timeout)
            except EnvironmentProblem as e:
                eng.down()
                self.starting.remove(eng)
                self.problems[eng] = str(e)
                self.log(f"serving engine on port {eng.config.port} did not start: {e}")
                continue
            if ready:
                eng.mark_ready()
                self.starting.remove(eng)
                self.problems[eng] = None
                self.log(
                    f"vLLM on 127.0.0.1:{eng.config.port} serves {eng.endpoint.model} ({eng.start_s:.0f} s to ready)"
                )
        return self.done

    def wait(self, poll_s: float = 0.5) -> dict:
        """Step until every engine serves or failed; {engine: None or its problem}."""
        while not self.step():
            time.sleep(poll_s)
        return dict(self.problems)

    def abort(self) -> None:
        for eng in self.launched:
            if eng.proc is not None:  # only what this startup launched; never an engine that was there before
                eng.down()
        self.queue, self.starting = [], []

    def _may_launch(self) -> bool:
        if self.order == "parallel" or not self.starting:
            return True
        return self.order == "staggered" and all(e.warm() or not e.config.compiled for e in self.starting)

    def _launch(self, eng: LocalEngine) -> None:
        try:
            eng.spawn(self.log, self.owner_pid, idle=self.idle)
        except EnvironmentProblem as e:  # a busy port, say: this one is not started, the others are
            self.problems[eng] = str(e)
            self.log(f"serving engine on port {eng.config.port} did not start: {e}")
            return
        self.launched.append(eng)
        self.starting.append(eng)
