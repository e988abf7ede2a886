"""A real request dispatcher for section 3.3's batching claim: requests arrive on a seeded
Poisson schedule (a thread sleeping until each arrival time), a dispatcher thread groups
them by a rule, and a worker thread runs the model once per batch.

Rules:
- "dynamic": the source's rule - a request joins the open batch of its key; a batch is
  dispatched `max_wait_s` after its first request arrived, or at once when `max_batch`
  requests have joined. Requests with other keys never join it.
- "static": requests are grouped in arrival order whatever their keys, `max_batch` per
  batch, or when the oldest has waited `max_wait_s` (the source's baseline).
- "none": every request is dispatched alone on arrival (the control: no batching).

Times per request (perf_counter seconds): arrival (before its key is computed), dispatch,
start (the worker begins its batch) and done. Added latency = dispatch - arrival: the key
computation and the wait the batching rule imposes; the wait for a busy worker (start -
dispatch) and the end-to-end time are kept beside it, since on a shared CPU they depend
mostly on the host's load.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

RULES = ("dynamic", "static", "none")


@dataclass
class Request:
    index: int
    text: str
    key: str = ""
    arrival: float = 0.0
    dispatch: float = 0.0
    start: float = 0.0
    done: float = 0.0
    batch: int = -1  # which batch served it
    batch_size: int = 0

    @property
    def added_ms(self) -> float:
        return 1000 * (self.dispatch - self.arrival)

    @property
    def queue_ms(self) -> float:
        return 1000 * (self.start - self.dispatch)

    @property
    def end_to_end_ms(self) -> float:
        return 1000 * (self.done - self.arrival)


def poisson_offsets(n: int, rate_per_s: float, seed: int) -> list[float]:
    """Arrival offsets (s) of n requests of a Poisson process, first at its first gap."""
    return [float(x) for x in np.cumsum(np.random.default_rng(seed).exponential(1 / rate_per_s, n))]


class Dispatcher:
    def __init__(self, rule: str, run_batch: Callable[[list[Request]], None], max_wait_s: float, max_batch: int):
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}")
        self.rule, self.run_batch, self.max_wait_s, self.max_batch = rule, run_batch, max_wait_s, max_batch
        self.cv = threading.Condition()
        self.open: dict[str, tuple[float, list[Request]]] = {}
        self.work: queue.Queue = queue.Queue()
        self.closed = False
        self.batches = 0
        self._threads = [
            threading.Thread(target=self._batcher, daemon=True),
            threading.Thread(target=self._worker, daemon=True),
        ]

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        with self.cv:
            self.closed = True
            self.cv.notify()
        for t in self._threads:
            t.join()

    def submit(self, req: Request, key_of: Callable[[str], str]) -> None:
        req.arrival = time.perf_counter()
        req.key = key_of(req.text)
        with self.cv:
            if self.rule == "none":
                self._dispatch([req])
                return
            group = req.key if self.rule == "dynamic" else "*"
            if group not in self.open:
                self.open[group] = (req.arrival + self.max_wait_s, [])
            members = self.open[group][1]
            members.append(req)
            if len(members) >= self.max_batch:
                self._dispatch(self.open.pop(group)[1])
            self.cv.notify()

    def _dispatch(self, reqs: list[Request]) -> None:
        now = time.perf_counter()
        for r in reqs:
            r.dispatch = now
        self.work.put(reqs)

    def _batcher(self) -> None:
        with self.cv:
            while True:
                now = time.perf_counter()
                for g in [g for g, (deadline, _) in self.open.items() if deadline <= now]:
                    self._dispatch(self.open.pop(g)[1])
                if self.closed and not self.open:
                    break
                nxt = min((d for d, _ in self.open.values()), default=None)
                self.cv.wait(None if nxt is None else max(0.0, nxt - now))
        self.work.put(None)

    def _worker(self) -> None:
        while (batch := self.work.get()) is not None:
            start = time.perf_counter()
            for r in batch:
                r.start, r.batch, r.batch_size = start, self.batches, len(batch)
            self.run_batch(batch)
            done = time.perf_counter()
            for r in batch:
                r.done = done
            self.batches += 1


def replay(
    rule: str,
    texts: Sequence[str],
    offsets: Sequence[float],
    key_of: Callable[[str], str],
    run_batch: Callable[[list[Request]], None],
    max_wait_s: float,
    max_batch: int,
) -> list[Request]:
    """Send `texts[i]` at `offsets[i]` seconds after the start through a Dispatcher; the
    requests with their times once every batch is done."""
    reqs = [Request(i, t) for i, t in enumerate(texts)]
    with Dispatcher(rule, run_batch, max_wait_s, max_batch) as d:
        t0 = time.perf_counter()
        for r, off in zip(reqs, offsets):
            delay = t0 + off - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            d.submit(r, key_of)
    return reqs
