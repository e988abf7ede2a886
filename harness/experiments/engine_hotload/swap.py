"""Hot swap: the application's job, not the runtime's (TensorRT has no in-place replace).

    new = load aside (verified) -> contexts -> compatibility check -> prewarm aside
    -> switch one reference (under a lock held for microseconds)
    -> wait until the calls in flight on the old engine have finished -> close the old one

Compatibility (`io_problems`): the new engine must have the same IO tensors by name, each
with the same mode, dtype, location and format (where the backend has them), the same
fixed dimensions, and optimization profiles whose ranges cover every shape the service
sends. An incompatible engine is refused with a message naming the tensor that differs;
the old engine keeps serving.

The drain is what makes the swap safe: `drain="broken"` (the mechanism removed, for the
hot-swap check's mechanism-off run) closes the old engine right after the switch, under a
call still in flight, which then fails (a call whose engine was closed under it fails).

Loading aside is what makes the swap uninterrupted: `aside=False` (that mechanism removed,
the latency checks' mechanism-off arm) loads, checks and warms the new engine while holding
the slot's lock, so every request waits for it; it fails nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from harness.base.errors import BadInput, HarnessError
from harness.experiments.engine_hotload.lifecycle import (
    Bucket,
    Engine,
    FeedsFor,
    Profile,
    TensorSpec,
    covering_profiles,
    served_shapes,
)

DRAINS = ("wait", "broken")  # wait for the calls in flight on the old engine; close it under them (a control)


class IncompatibleEngine(BadInput):
    """The new engine's IO tensors or profiles do not match the served one (the user's model: exit 2)."""


def _fixed_dims_differ(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return True
    return any(x >= 0 and y >= 0 and x != y for x, y in zip(a, b))


def io_problems(
    old_io: list[TensorSpec], new_io: list[TensorSpec], new_profiles: list[Profile], buckets: list[Bucket]
) -> list[str]:
    """Every reason the new engine cannot replace the old one, each naming its tensor."""
    problems = []
    old = {t.name: t for t in old_io}
    new = {t.name: t for t in new_io}
    for name in old:
        if name not in new:
            problems.append(
                f"tensor {name!r} ({old[name].mode}) is missing from the new engine "
                f"(its {old[name].mode}s: {', '.join(t.name for t in new_io if t.mode == old[name].mode) or 'none'})"
            )
    for name in new:
        if name not in old:
            problems.append(f"tensor {name!r} ({new[name].mode}) of the new engine does not exist in the served engine")
    for name in old.keys() & new.keys():
        a, b = old[name], new[name]
        for attr in ("mode", "dtype", "location", "format"):
            va, vb = getattr(a, attr), getattr(b, attr)
            if va is not None and vb is not None and va != vb:
                problems.append(f"tensor {name!r}: {attr} {vb} in the new engine, {va} in the served one")
        if _fixed_dims_differ(a.shape, b.shape):
            problems.append(
                f"tensor {name!r}: shape {list(b.shape)} in the new engine, {list(a.shape)} in the "
                "served one (-1 = dynamic; fixed dimensions must match)"
            )
    if problems:
        return problems
    for bucket in buckets:
        shapes = served_shapes(old_io, bucket)  # what the service sends today
        if not covering_profiles(new_profiles, shapes):
            worst = _first_uncovered(new_profiles, shapes)
            problems.append(
                f"tensor {worst!r}: served shape {list(shapes[worst])} (bucket {bucket.name}) is outside "
                f"every optimization profile of the new engine"
            )
    return problems


def _first_uncovered(profiles: list[Profile], shapes: dict) -> str:
    for name, shape in shapes.items():
        ok = False
        for p in profiles:
            lo, _, hi = p.ranges.get(name, ((), (), ()))
            if len(lo) == len(shape) and all(a <= s <= c for s, a, c in zip(shape, lo, hi)):
                ok = True
                break
        if not ok:
            return name
    return next(iter(shapes))


def check_compatible(old: Engine, new: Engine, buckets: list[Bucket]) -> None:
    problems = io_problems(old.io(), new.io(), new.profiles(), buckets)
    if problems:
        raise IncompatibleEngine("swap refused: " + "; ".join(problems))


@dataclass
class SwapReport:
    started: float  # perf_counter timestamps
    loaded: float = 0.0
    checked: float = 0.0
    warmed: float = 0.0
    switched: float = 0.0
    drained: float = 0.0
    released: float = 0.0
    switch_s: float = 0.0  # time the lock was held to switch the reference
    switch_wait_s: float = 0.0  # warm to switch: the wait for the driver's switch_when
    inflight_at_switch: int = 0
    old_label: str = ""
    new_label: str = ""
    version: int = 0
    prewarm: list = field(default_factory=list)

    def durations_ms(self) -> dict:
        return {
            "load_ms": (self.loaded - self.started) * 1e3,
            "check_ms": (self.checked - self.loaded) * 1e3,
            "prewarm_ms": (self.warmed - self.checked) * 1e3,
            "switch_wait_ms": self.switch_wait_s * 1e3,
            "switch_ms": self.switch_s * 1e3,
            "drain_ms": (self.drained - self.switched) * 1e3,
            "release_ms": (self.released - self.drained) * 1e3,
            "to_serving_ms": (self.switched - self.started) * 1e3,
        }


class EngineSlot:
    """One reference to the serving engine, with a count of calls in flight per engine."""

    def __init__(self, engine: Engine):
        self._cond = threading.Condition()
        self._engine = engine
        self._inflight: dict[int, int] = {id(engine): 0}
        self.version = 0
        self.swapping = threading.Lock()

    @property
    def engine(self) -> Engine:
        return self._engine

    def infer(self, feeds) -> tuple[dict, int]:
        with self._cond:
            eng, version = self._engine, self.version
            self._inflight[id(eng)] += 1
        try:
            return eng.infer(feeds), version
        finally:
            with self._cond:
                self._inflight[id(eng)] -= 1
                if self._inflight[id(eng)] == 0:
                    self._cond.notify_all()

    def swap(
        self,
        load_new: Callable[[], Engine],
        buckets: list[Bucket],
        feeds_for: FeedsFor,
        drain_timeout_s: float = 60.0,
        check: bool = True,
        drain: str = "wait",
        aside: bool = True,
        switch_when: Callable[[], bool] | None = None,
        switch_wait_s: float = 5.0,
    ) -> SwapReport:
        """Load, check and warm a new engine aside, switch, drain and close the old one.
        On any failure before the switch the new engine is closed and the old one serves on.
        check=False skips the compatibility check (the refused-swap case's control only);
        drain="broken" switches while a call is in flight on the old engine and closes it at
        once, without waiting (the drain removed: the failures check's mechanism-off arm);
        aside=False loads, checks and warms the new engine under the slot's lock, so every
        request waits (loading aside removed: the latency checks' mechanism-off arm);
        switch_when: once the new engine is warm, switch when it is true (polled, at most
        switch_wait_s): the driver's way to switch while a request it sent is in flight."""
        if drain not in DRAINS:
            raise ValueError(f"drain {drain!r} is not one of {', '.join(DRAINS)}")
        with self.swapping:
            rep = SwapReport(time.perf_counter())
            with contextlib.nullcontext() if aside else self._cond:
                new = self._prepare(load_new, rep, buckets, feeds_for, check)
            old = self._switch(new, rep, drain_timeout_s if drain == "broken" else None, switch_when, switch_wait_s)
            if drain == "wait":
                with self._cond:
                    if not self._cond.wait_for(lambda: self._inflight[id(old)] == 0, timeout=drain_timeout_s):
                        raise HarnessError(f"calls on the old engine did not finish within {drain_timeout_s} s")
                    del self._inflight[id(old)]
            # drain "broken": the calls in flight keep their count (they decrement it when they end)
            rep.drained = time.perf_counter()
            old.close()
            rep.released = time.perf_counter()
            return rep

    def _prepare(
        self, load_new: Callable[[], Engine], rep: SwapReport, buckets: list[Bucket], feeds_for: FeedsFor, check: bool
    ) -> Engine:
        """Load, check and warm the new engine (aside: requests keep running on the old one);
        on any failure the new engine is closed and the error raised."""
        new = load_new()
        rep.loaded = time.perf_counter()
        try:
            if check:
                check_compatible(self._engine, new, buckets)
            rep.checked = time.perf_counter()
            rep.prewarm = [vars(r) for r in new.prewarm(buckets, feeds_for)]
            rep.warmed = time.perf_counter()
        except BaseException:
            new.close()
            raise
        return new

    def _switch(
        self,
        new: Engine,
        rep: SwapReport,
        until_in_flight_s: float | None = None,
        switch_when: Callable[[], bool] | None = None,
        switch_wait_s: float = 0.0,
    ) -> Engine:
        """Point the slot at `new` (under the lock, for microseconds); returns the old engine.
        until_in_flight_s: first wait up to that long for a call in flight on the old engine
        and switch while it runs (the broken drain's switch, so that it closes under a call);
        switch_when: first wait up to switch_wait_s for it to be true."""
        t_begin = time.perf_counter()
        deadline = t_begin + (until_in_flight_s or 0.0)
        wanted = t_begin + (switch_wait_s if switch_when is not None else 0.0)
        while True:
            t0 = time.perf_counter()
            ready = switch_when is None or t0 >= wanted or switch_when()
            with self._cond:
                old = self._engine
                if ready and (until_in_flight_s is None or self._inflight[id(old)] > 0 or t0 >= deadline):
                    self._inflight.setdefault(id(new), 0)
                    self._engine = new
                    self.version += 1
                    rep.inflight_at_switch = self._inflight[id(old)]
                    break
            time.sleep(0.0005)
        rep.switched = time.perf_counter()
        rep.switch_s = rep.switched - t0
        rep.switch_wait_s = t0 - t_begin
        rep.version, rep.old_label, rep.new_label = self.version, old.label, new.label
        return old

    def hold(self, seconds: float) -> SwapReport:
        """Hold the slot's lock for `seconds` and change nothing: a stall of known length that
        every request arriving meanwhile waits out (the latency checks' instrument: the
        clients must see it). No engine is loaded or switched."""
        with self.swapping:
            rep = SwapReport(time.perf_counter())
            with self._cond:
                time.sleep(seconds)
            rep.loaded = rep.checked = rep.warmed = rep.switched = rep.drained = rep.released = time.perf_counter()
            rep.version, rep.old_label, rep.new_label = self.version, self._engine.label, self._engine.label
            return rep

    def restart(self, load_new: Callable[[], Engine]) -> SwapReport:
        """The hot swap's control: replace the engine the way a restart does. The served
        engine is closed first, then the new one is loaded in its place; requests that
        arrive in between fail (the engine is closed). Same files, same stream, no swap aside."""
        with self.swapping:
            rep = SwapReport(time.perf_counter())
            with self._cond:
                old = self._engine
            old.close()
            rep.drained = time.perf_counter()
            new = load_new()
            rep.loaded = rep.checked = rep.warmed = time.perf_counter()
            with self._cond:
                self._inflight.setdefault(id(new), 0)
                self._engine = new
                self.version += 1
            rep.switched = rep.released = time.perf_counter()
            rep.version, rep.old_label, rep.new_label = self.version, old.label, new.label
            return rep
