"""Running one point of a load sweep: open loop (every request sent at its scheduled time,
whatever the answers do) or closed loop (a fixed number of users, each sending its next
request when its previous one has finished), over any way of serving a request.

`serve(i, request, t0)` is a coroutine that sends request i and returns its Result (the
engine through the streaming client, or the semantic cache in front of the engine). Both
loops stop at a deadline: whatever is still open then is cancelled and recorded as a
timeout, so a server that hangs cannot hang the sweep.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, Callable, Coroutine

from .client import DEADLINE_MARGIN_S, Request, Result

Serve = Callable[[int, Request, float], Coroutine[Any, Any, Result]]


async def _finish(reqs: list[Request], tasks: dict, deadline: float) -> list[Result]:
    pending = [t for t in tasks.values() if not t.done()]
    left = deadline - time.perf_counter()
    if pending and left > 0:
        await asyncio.wait(pending, timeout=left)
    for t in tasks.values():
        if not t.done():
            t.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    out = []
    for i, r in enumerate(reqs):
        t = tasks.get(i)
        if t is not None and not t.cancelled() and t.exception() is None:
            out.append(t.result())
        elif t is not None and not t.cancelled():
            out.append(Result(i, r.tag, r.at_s, "error", f"{type(t.exception()).__name__}: {t.exception()}"[:200]))
        else:
            out.append(Result(i, r.tag, r.at_s, "timeout", "still open (or never sent) at the point's deadline"))
    return out


async def open_loop(reqs: list[Request], serve: Serve, timeout_s: float) -> list[Result]:
    """Every request at its scheduled time (its `at_s` after the start)."""
    t0 = time.perf_counter()
    deadline = t0 + max((r.at_s for r in reqs), default=0.0) + timeout_s + DEADLINE_MARGIN_S
    tasks: dict[int, asyncio.Task] = {}
    for i in sorted(range(len(reqs)), key=lambda i: reqs[i].at_s):
        delay = t0 + reqs[i].at_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if time.perf_counter() >= deadline:
            break
        tasks[i] = asyncio.create_task(serve(i, reqs[i], t0))
    return await _finish(reqs, tasks, deadline)


async def closed_loop(
    reqs: list[Request], serve: Serve, users: int, duration_s: float, timeout_s: float
) -> list[Result]:
    """`users` users, each sending the next request of `reqs` as soon as its previous one has
    finished, until `duration_s`; a request's scheduled time is the moment it was sent (a
    closed loop has no schedule to fall behind), so the requests after the warm-up are those
    sent after it. Requests not sent by then are left out."""
    t0 = time.perf_counter()
    deadline = t0 + duration_s + timeout_s + DEADLINE_MARGIN_S
    tasks: dict[int, asyncio.Task] = {}
    sent: list[Request] = []
    lock = asyncio.Lock()

    async def user():
        while time.perf_counter() - t0 < duration_s:
            async with lock:
                if len(sent) >= len(reqs):
                    return
                i = len(sent)
                sent.append(replace(reqs[i], at_s=time.perf_counter() - t0))
            tasks[i] = asyncio.create_task(serve(i, sent[i], t0))
            await asyncio.wait([tasks[i]])

    workers = [asyncio.create_task(user()) for _ in range(users)]
    await asyncio.wait(workers, timeout=max(0.0, deadline - time.perf_counter()))
    for w in workers:
        w.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    return await _finish(sent, tasks, deadline)
