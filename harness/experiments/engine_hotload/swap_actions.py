"""The actions the hot-swap case runs under the request stream: each round a hot swap and its
controls (a restart, an in-place swap, a no-drain swap, a pause), interleaved (run_actions),
and the long requests that straddle each hot swap's switch (Straddle)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.experiments.engine_hotload.fingerprint import Fingerprints
from harness.experiments.engine_hotload.lifecycle import parse_buckets
from harness.experiments.engine_hotload.served import Served
from harness.experiments.engine_hotload.workload import Request
from harness.model.driver_contract import CaseContext

ARMS = ("swap", "restart", "in-place", "no-drain", "pause")  # one round of actions, in this order


class Straddle:
    """Long requests sent back to back through the slot, from the new engine's prewarm (the
    first feeds the swap asks for) until the slot has switched (or the swap returned), and one
    short probe sent as soon as the slot has switched: the hot swap switches while a long
    request that has just begun is in flight on the old engine (`fresh`, the swap's
    `switch_when`), and the probe, answered by the new engine, comes back before it does. That
    is the situation the drain exists for, created on purpose rather than left to the
    scheduler's timing (a 2-core CI host under load once switched with none in flight). Whether
    one really straddled the switch is judged from the answers (swap_exercise), not from this
    class; its records are kept apart from the paced stream's."""

    def __init__(self, served, slot, prints: Fingerprints | None, bucket, t0: float, records: list, probe=None):
        self.served, self.slot, self.prints, self.bucket, self.t0 = served, slot, prints, bucket, t0
        self.probe_bucket = probe if probe is not None else served.buckets[0]
        self.records = records
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._began: float | None = None  # when the long request now in flight was sent (None: none is)
        self._last_s = 0.0  # how long the last long request took

    def begin(self) -> None:
        if not self._threads:
            version = self.slot.version
            self._threads = [
                threading.Thread(target=self._run, args=(version,), name="straddle", daemon=True),
                threading.Thread(target=self._probe, args=(version,), name="straddle-probe", daemon=True),
            ]
            for t in self._threads:
                t.start()

    def fresh(self) -> bool:
        """A long request is in flight and began less than a quarter of the last one's time ago
        (any long request in flight while none has finished yet): switching now leaves most of
        it to run on the old engine after the switch."""
        with self._lock:
            if self._began is None:
                return False
            return self._last_s == 0.0 or time.perf_counter() - self._began < 0.25 * self._last_s

    def end(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)

    def _send(self, bucket, v: int) -> Request:
        t = time.perf_counter()
        try:
            out, version = self.slot.infer(self.served.feeds.feeds(self.slot.engine.io(), bucket, v))
            by = self.prints.which(bucket.name, v, out) if self.prints is not None else ""
            return Request(t - self.t0, (time.perf_counter() - t) * 1e3, True, -1, bucket.name, version, "", by)
        except Exception as e:  # a failed request is data
            return Request(
                t - self.t0,
                (time.perf_counter() - t) * 1e3,
                False,
                -1,
                bucket.name,
                -1,
                f"{type(e).__name__}: {e}"[:300],
            )

    def _run(self, version_at_begin: int) -> None:
        v = 0
        while not self._stop.is_set() and self.slot.version == version_at_begin:
            with self._lock:
                self._began = time.perf_counter()
            rec = self._send(self.bucket, v)
            with self._lock:
                self._last_s, self._began = time.perf_counter() - self._began, None
            self.records.append(rec)
            v += 1

    def _probe(self, version_at_begin: int) -> None:
        """One short request as soon as the slot has switched (its answer, the new version's,
        is the first the clients get from the new engine)."""
        while not self._stop.is_set() and self.slot.version == version_at_begin:
            time.sleep(0.0002)
        if self.slot.version != version_at_begin:
            self.records.append(self._send(self.probe_bucket, 0))


def _act(kind: str, slot, load, served, drain: str, pause_s: float, straddle: Straddle | None = None):
    """One action on the slot: the hot swap (drain as the case says), a restart (the control:
    close, then load), an in-place swap (loading aside removed: the new engine loaded and warmed
    under the slot's lock), a no-drain swap (the drain removed: the old engine closed under a
    call in flight) or a pause (the slot's lock held for pause_s, nothing loaded: a stall of
    known length, the instrument)."""
    if kind == "restart":
        return slot.restart(load)
    if kind == "pause":
        return slot.hold(pause_s)

    def feeds_for(b):
        if straddle is not None:  # the new engine is loaded and checked: its prewarm begins
            straddle.begin()
        return served.feeds.feeds(slot.engine.io(), b, 0)

    if kind == "in-place":
        return slot.swap(load, served.buckets, feeds_for, aside=False)
    return slot.swap(
        load,
        served.buckets,
        feeds_for,
        drain="broken" if kind == "no-drain" else drain,
        switch_when=straddle.fresh if straddle is not None else None,
    )


def run_actions(
    ctx: CaseContext,
    served: Served,
    slot,
    files: list[Path],
    verifiers: list,
    done: list,
    errors: list,
    prints: Fingerprints | None = None,
    straddles: list | None = None,
    t0: float = 0.0,
    reported: list | None = None,
) -> None:
    """The hot swaps and, interleaved, the controls (a restart, an in-place swap, a no-drain
    swap and a pause per hot swap), `gap_s` apart, under the stream. Each action's window is taken here,
    around the call, with the clock the request threads use. Every action that loads one loads
    the other file than the one served (so every hot swap changes the model version the
    clients get); a hot swap has its straddling requests (Straddle) when `straddles` is a list."""
    p = ctx.params
    reported = [] if reported is None else reported
    time.sleep(p["before_s"])
    plan = [kind for _ in range(p["swaps"]) for kind in ARMS]
    serving = 0  # index in files of the file the driver last had loaded
    straddle_bucket = parse_buckets([p["straddle"]])[0]
    for k, kind in enumerate(plan):
        start = time.perf_counter()
        idx = serving if kind == "pause" else 1 - serving
        label = f"v{k + 1} {files[idx].name}"

        def load(i=idx, lb=label):
            eng = served.open(files[i], label=lb, verifier=verifiers[i])
            reported.append(eng.reported())  # the runtime's own settings for each engine the driver loads
            return eng

        straddle = (
            Straddle(served, slot, prints, straddle_bucket, t0, straddles)
            if kind == "swap" and straddles is not None
            else None
        )
        try:
            called = time.perf_counter()
            rep = _act(kind, slot, load, served, p["drain"], p["pause_ms"] / 1e3, straddle)
            done.append((kind, rep, called, time.perf_counter(), files[serving].name, files[idx].name))
            serving = idx
            ctx.log(f"{kind} {k + 1}: serving {files[idx].name} after {rep.durations_ms()['to_serving_ms']:.0f} ms")
        except Exception as e:
            errors.append(f"{kind} {k + 1}: {type(e).__name__}: {e}")
        finally:
            if straddle is not None:  # after the window was taken: waiting for it is not the swap's time
                straddle.end()
        if k < len(plan) - 1:
            time.sleep(max(0.0, p["gap_s"] - (time.perf_counter() - start)))
    time.sleep(p["after_s"])
