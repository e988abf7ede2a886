"""An open-loop streaming client for OpenAI-compatible servers (`/v1/completions`, SSE).

Each request is sent at its scheduled time (seconds after the start: Poisson arrivals at a
rate, or a trace's timestamps scaled), as its own task: the schedule never waits for an
earlier answer. Per request (`Result`):
- ttft_ms: from the moment the request is dispatched (just before the POST, as vLLM's own
  client times it) to the first streamed chunk that carries a choice; a chunk's time is the
  moment the read that brought it returned (chunks that arrive in one read share it);
- itl_ms: the gaps between later choice chunks; tpot_ms: (last token - first token) / (output
  tokens - 1), output tokens as the server counts them (`stream_options.include_usage`);
- e2e_ms: dispatch to the end of the stream (`[DONE]`);
- status: ok, http_error (a non-200 answer, its status kept), connect_error (refused,
  unreachable), stalled (no byte for `stall_s` mid-stream), timeout (the request's own
  `timeout_s`, or the run's deadline), cut_off (the stream ended before `[DONE]`), error
  (anything else, its type kept), redirected (a 3xx answer: a measured request never
  follows a redirect, whose TTFT would be another server's under the given URL; the run
  that sent it ends its case with `refuse_redirects()`, exit 3);
- usage: the server's token counts are checked against what the client saw (`usage_problem`):
  more completion tokens than the request allowed (`max_tokens`), none for a stream that
  carried text, more prompt tokens than the prompt could make (its token ids, or one per
  byte of its text, plus a few special tokens), more cached prompt tokens
  (`usage.prompt_tokens_details.cached_tokens`) than the prompt (the server's prompt_tokens
  and the token ids the client sent: no slack, a hit rate is never above 100%), a cached
  count with no prompt count to hold it against (no prompt_tokens, and a text prompt whose
  token count only the server knows), or a count that is no whole number >= 0: the count is
  not kept and TPOT is not computed from it; `usage_problems()` says so in one line with
  both readings, and the case makes its metrics invalid;
- late_ms: dispatch time minus scheduled time (the schedule's lateness), send_ms: dispatch to
  the request body written to the socket (aiohttp's trace hook), parse_us: time spent parsing
  the stream's chunks: the client's own overhead.

The run has a deadline (last scheduled time + timeout_s + a margin): whatever is still open
then is cancelled and recorded as a timeout, so a server that hangs cannot hang the case.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urljoin

from harness.base.errors import EnvironmentProblem
from harness.base.safe_text import TEXT, for_terminal
from harness.infra.url_redaction import url_for_display

STATUSES = ("ok", "http_error", "connect_error", "stalled", "timeout", "cut_off", "error", "redirected")
DEADLINE_MARGIN_S = 5.0
MAX_LINE = 1 << 20  # bytes of one SSE line: a server's endless line is an error, not the run's memory


@dataclass
class Request:
    """One scheduled request: `prompt` is text or token ids."""

    at_s: float
    prompt: str | list[int]
    max_tokens: int
    tag: str = ""
    ignore_eos: bool = True
    sampling: dict = field(default_factory=lambda: {"temperature": 0.0})
    delay_s: float = 0.0  # a deliberate wait between dispatch and the POST (an instrument: a known late client)


@dataclass
class Result:
    index: int
    tag: str
    scheduled_s: float
    status: str = "error"
    error: str = ""
    http_status: int | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    chunks: int = 0
    late_ms: float | None = None
    send_ms: float | None = None
    parse_us: float = 0.0
    text: str = ""
    usage_problem: str = ""  # the server's usage counts are impossible for what the client saw: both readings
    cached_tokens: int | None = (
        None  # usage.prompt_tokens_details.cached_tokens: prompt tokens the server served from its cache
    )


def poisson_schedule(n: int, rate_per_s: float, seed: int) -> list[float]:
    """Send times (s) of n Poisson arrivals at `rate_per_s`, the first at 0."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate_per_s)
    return out


def payload(model: str, r: Request) -> dict:
    body = {
        "model": model,
        "prompt": r.prompt,
        "max_tokens": r.max_tokens,
        **r.sampling,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if r.ignore_eos:
        body["ignore_eos"] = True
    return body


class StreamParser:
    """The SSE bytes of one streamed completion, as they arrive: choice chunks timed, `usage`
    read. Every chunk of bytes read is split into lines here (a line cut between two reads
    waits for its end), so that a token's time is the time of the read that brought it and
    the client's own cost per token is one JSON decode and a list append."""

    def __init__(self, res: Result, st: float, req: Request | None = None):
        self.res, self.st, self.req = res, st, req
        self.times: list[float] = []  # the arrival of each choice chunk
        self.done = False
        self._text: list[str] = []
        self._rest = b""

    def feed(self, data: bytes, now: float) -> None:
        """Bytes read at `now`: every line they complete is parsed; parse_us counts the time."""
        if self._rest:
            data = self._rest + data
        end = data.rfind(b"\n") + 1
        self._rest = data[end:]
        if len(self._rest) > MAX_LINE:
            raise ValueError(f"an SSE line longer than {MAX_LINE} bytes")
        if end:
            self._lines(data[:end].decode("utf-8").split("\n"), now)
        self.res.parse_us += 1e6 * (time.perf_counter() - now)

    def _lines(self, lines: list[str], now: float) -> None:
        for s in lines:
            if s[:5] != "data:":  # blank lines between events, SSE comments, other fields
                continue
            data = s[5:].strip()
            if data == "[DONE]":
                self.done = True
            elif data:
                d = json.loads(data)
                choices = d.get("choices")
                if choices:
                    self.times.append(now)
                    self._text.append(choices[0].get("text") or "")
                usage = d.get("usage")
                if usage:
                    self.res.prompt_tokens = usage.get("prompt_tokens")
                    self.res.output_tokens = usage.get("completion_tokens")
                    details = usage.get("prompt_tokens_details")
                    self.res.cached_tokens = details.get("cached_tokens") if isinstance(details, dict) else None

    def timings(self) -> None:
        """TTFT, the gaps between choice chunks, their count and the text, into the Result."""
        r, t = self.res, self.times
        r.chunks = len(t)
        if t:
            r.ttft_ms = 1000 * (t[0] - self.st)
            r.itl_ms = [1000 * (b - a) for a, b in zip(t, t[1:])]
        r.text = "".join(self._text)

    def finish(self, end: float) -> None:
        if self._rest:  # the last line, without its newline
            self._lines([self._rest.decode("utf-8")], end)
            self._rest = b""
        self.timings()
        r, t = self.res, self.times
        r.e2e_ms = 1000 * (end - self.st)
        check_usage(r, self.req)
        n = r.output_tokens if r.output_tokens is not None else r.chunks
        if t and n and n > 1 and not r.usage_problem:  # a server whose counts are impossible times no TPOT
            r.tpot_ms = 1000 * (t[-1] - t[0]) / (n - 1)
        if not self.done:
            r.status, r.error = "cut_off", f"the stream ended before [DONE] after {r.chunks} chunks"
        elif not t:
            r.status, r.error = "error", "the stream carried no token"
        else:
            r.status = "ok"


SPECIAL_TOKENS = 16  # what a tokenizer may add to a prompt's text (BOS, a template's markers): prompt_tokens only
CACHED = "usage.prompt_tokens_details.cached_tokens"  # the field a usage problem of the cached count names


def _count(value) -> int | None | str:
    """A usage count as the server sent it: an int >= 0, None when absent, else its text (impossible)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return for_terminal(repr(value), 40)


def check_usage(r: Result, req: Request | None) -> None:
    """The server's usage counts against what the client can observe of the same request:
    completion tokens at most what it asked for (`max_tokens`) and at least one when text
    was streamed; prompt tokens at most what its prompt could make; cached prompt tokens at
    most the prompt (`_check_cached`). An impossible count is not kept (None) and
    `usage_problem` says it with both readings."""
    why = []
    out, prompt = _count(r.output_tokens), _count(r.prompt_tokens)
    if isinstance(out, str):
        why.append(f"completion_tokens {out} is no count")
        out = None
    elif out is not None and req is not None and out > req.max_tokens:
        why.append(
            f"{out} completion tokens reported for {r.chunks} streamed chunks, of at most {req.max_tokens} "
            f"asked for (max_tokens)"
        )
        out = None
    elif out == 0 and r.text:
        why.append(f"0 completion tokens reported for {r.chunks} streamed chunks of text")
        out = None
    if isinstance(prompt, str):
        why.append(f"prompt_tokens {prompt} is no count")
        prompt = None
    elif prompt is not None and req is not None:
        most = (len(req.prompt) if isinstance(req.prompt, list) else len(str(req.prompt).encode())) + SPECIAL_TOKENS
        if prompt > most:
            sent = (
                f"{len(req.prompt)} prompt token ids"
                if isinstance(req.prompt, list)
                else f"a prompt of {len(str(req.prompt).encode())} bytes"
            )
            why.append(f"{prompt} prompt tokens reported for {sent} sent (at most {most})")
            prompt = None
    cached, bad = _check_cached(r.cached_tokens, prompt, req)
    why += [bad] if bad else []
    r.output_tokens, r.prompt_tokens, r.cached_tokens = out, prompt, cached
    if why:
        r.usage_problem = "the server's usage is impossible: " + "; ".join(why)


def _check_cached(value, prompt: int | None, req: Request | None) -> tuple[int | None, str]:
    """(the cached prompt tokens to keep, the problem or ''). The count is held against every
    prompt count there is: the server's own prompt_tokens (`prompt`, already checked; None
    when absent or impossible) and the token ids the client sent. It may be at most the
    smaller, with no slack: more cached tokens than the prompt is a hit rate above 100%.
    With neither (no prompt_tokens, and a text prompt whose token count only the server
    knows) no cached count can be trusted: it has no denominator."""
    cached = _count(value)
    if cached is None:
        return None, ""
    if isinstance(cached, str):
        return None, f"{CACHED} {cached} is no count"
    sent = len(req.prompt) if req is not None and isinstance(req.prompt, list) else None
    known = [
        (n, what) for n, what in ((prompt, "usage.prompt_tokens"), (sent, "prompt token ids sent")) if n is not None
    ]
    if not known:
        return None, (
            f"{CACHED} {cached} reported without a usable usage.prompt_tokens, for a text prompt whose token "
            f"count the client cannot know: a cached count without its denominator is no hit rate"
        )
    most = min(n for n, _ in known)
    if cached <= most:
        return cached, ""
    pct = f", a hit rate of {100 * cached / most:,.2f}%" if most else ""
    return None, (
        f"{cached} cached prompt tokens reported of {most} ({CACHED} {cached} against "
        + ", ".join(f"{what} {n}" for n, what in known)
        + f"): more than the prompt{pct}"
    )


def usage_problems(results: list[Result]) -> str:
    """'' when every completed request's usage counts are possible; else one line: how many
    were not, and the first one's readings (the server's count and what the client saw)."""
    bad = [r for r in results if r.status == "ok" and r.usage_problem]
    if not bad:
        return ""
    return (
        f"{len(bad)} of {sum(r.status == 'ok' for r in results)} completed requests: "
        f"request {bad[0].index}: {bad[0].usage_problem}"
    )


class Redirected(EnvironmentProblem):
    """A measured request was answered with a redirect (exit 3): the case fails, naming both locations."""


def refuse_redirects(results: list[Result]) -> None:
    """Redirected (one line naming the URL asked and where the server sent it) when any
    request was answered with a redirect."""
    for r in results:
        if r.status == "redirected":
            raise Redirected(r.error)


def _redirect(res: Result, resp, url: str, st: float) -> Result:
    """A 3xx answer to a measured request: not followed (the other location's TTFT would be
    recorded under this URL), recorded with both locations."""
    res.http_status = resp.status
    where = resp.headers.get("Location")
    to = url_for_display(urljoin(url, where)) if where else "(no Location given)"
    res.status = "redirected"
    res.error = (
        f"the measured POST to {url_for_display(url)} was answered HTTP {resp.status} redirecting to "
        f"{for_terminal(to, TEXT)}; a benchmark client never follows a redirect (what it timed would be "
        f"the other server's): give the URL that serves the completions itself"
    )
    res.e2e_ms = 1000 * (time.perf_counter() - st)
    return res


def _classify(exc: BaseException) -> tuple[str, str]:
    import aiohttp

    text = f"{type(exc).__name__}: {exc}"[:200]
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return "stalled", text
    if isinstance(exc, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)):
        return "connect_error", text
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "timeout", text
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return "cut_off", text
    return "error", text


def completions_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/v1/completions"


class Limits:
    """One request's limits: in all (`timeout_s`), between two reads (`stall_s`: a stall), to
    connect (`connect_s`). The stall limit is the client's own (_Watch), not aiohttp's
    sock_read, which re-arms a timer on every read."""

    def __init__(self, timeout_s: float = 60.0, stall_s: float = 20.0, connect_s: float = 5.0):
        import aiohttp

        self.stall_s = stall_s
        self.aiohttp = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_s)


def limits(timeout_s: float = 60.0, stall_s: float = 20.0, connect_s: float = 5.0) -> Limits:
    return Limits(timeout_s, stall_s, connect_s)


class _Watch:
    """The stall limit of one request: its task is cancelled once no byte came for `stall_s`
    since the request was written or since the last read (`last`). One timer per `stall_s` of
    the request's life, not one per read: re-arming aiohttp's sock_read timer on every read
    was most of what the client spent over a bare reader. It is also the trace hook's
    context: `sent` is when the request was written to the socket."""

    def __init__(self, stall_s: float):
        self.stall_s = stall_s
        self.sent: float | None = None
        self.last: float | None = None
        self.fired = False
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        # called by send() inside its own task: there is always a current task
        self._task = cast("asyncio.Task[Any]", asyncio.current_task())
        self._handle = asyncio.get_running_loop().call_later(self.stall_s, self._check)

    def _check(self) -> None:
        since = self.last if self.last is not None else self.sent
        left = self.stall_s if since is None else since + self.stall_s - time.perf_counter()
        if left > 0:  # still connecting (sock_connect's limit), or a byte came since
            self._handle = asyncio.get_running_loop().call_later(left, self._check)
        else:
            self.fired = True
            self._task.cancel()

    def stalled(self) -> bool:
        """After a CancelledError: True when this watch alone cancelled the task."""
        if not self.fired:
            return False
        uncancel = getattr(self._task, "uncancel", None)  # Python 3.11+: count the request off
        return uncancel is None or uncancel() == 0

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


def session():
    """An aiohttp session for open-loop load: no connection limit, the send-time trace hook."""
    import aiohttp

    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trace_configs=[_trace_config()])


async def send(session, url: str, model: str, i: int, r: Request, t0: float, lim: Limits) -> Result:
    """One streamed request, dispatched now; `late_ms` is measured from t0 + r.at_s."""
    res = Result(i, r.tag, r.at_s)
    st = time.perf_counter()
    res.late_ms = 1000 * (st - (t0 + r.at_s))
    watch = _Watch(lim.stall_s)
    parser = StreamParser(res, st, r)
    try:
        if r.delay_s:
            await asyncio.sleep(r.delay_s)
        watch.start()
        async with session.post(
            url, json=payload(model, r), timeout=lim.aiohttp, trace_request_ctx=watch, allow_redirects=False
        ) as resp:
            watch.last = time.perf_counter()  # the answer's head
            if watch.sent is not None:
                res.send_ms = 1000 * (watch.sent - st)
            if 300 <= resp.status < 400:
                return _redirect(res, resp, url, st)
            if resp.status != 200:
                return await _http_error(res, resp, st)
            async for data in resp.content.iter_any():
                watch.last = now = time.perf_counter()
                parser.feed(data, now)
            parser.finish(time.perf_counter())
    except asyncio.CancelledError:
        if not watch.stalled():
            res.status, res.error = "timeout", "still open at the run's deadline"
            raise
        parser.timings()  # what arrived before the stall
        res.status, res.error = "stalled", f"no byte for {lim.stall_s:g} s mid-stream"
        res.e2e_ms = 1000 * (time.perf_counter() - st)
    except Exception as exc:  # every failure is a per-request record, never the run's end
        parser.timings()  # what arrived before the failure
        res.status, res.error = _classify(exc)
        res.e2e_ms = 1000 * (time.perf_counter() - st)
    finally:
        watch.close()
    return res


async def _http_error(res: Result, resp, st: float) -> Result:
    res.http_status = resp.status
    # at most 4 KiB of an error answer is read: a server's endless body is not the run's
    body = (await resp.content.read(4096)).decode("utf-8", "replace")[:160].replace("\n", " ")
    res.status, res.error = "http_error", f"HTTP {resp.status}: {body}"
    res.e2e_ms = 1000 * (time.perf_counter() - st)
    return res


def _trace_config():
    import aiohttp

    tc = aiohttp.TraceConfig()

    async def sent(session, ctx, params):
        if isinstance(ctx.trace_request_ctx, _Watch):
            ctx.trace_request_ctx.sent = time.perf_counter()

    tc.on_request_chunk_sent.append(sent)
    tc.on_request_headers_sent.append(sent)
    return tc


async def run_async(
    base_url: str,
    model: str,
    requests: list[Request],
    *,
    timeout_s: float = 60.0,
    stall_s: float = 20.0,
    connect_s: float = 5.0,
) -> list[Result]:
    """Send every request at its scheduled time; one Result per request, in request order."""
    url = completions_url(base_url)
    timeout = limits(timeout_s, stall_s, connect_s)
    order = sorted(range(len(requests)), key=lambda i: requests[i].at_s)
    deadline_s = max((r.at_s for r in requests), default=0.0) + timeout_s + DEADLINE_MARGIN_S
    tasks: dict[int, asyncio.Task] = {}
    async with session() as sess:
        t0 = time.perf_counter()

        async def schedule():
            for i in order:
                delay = t0 + requests[i].at_s - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks[i] = asyncio.create_task(send(sess, url, model, i, requests[i], t0, timeout))

        sched = asyncio.create_task(schedule())
        await asyncio.wait([sched], timeout=deadline_s)
        remaining = t0 + deadline_s - time.perf_counter()
        pending = [t for t in tasks.values() if not t.done()]
        if pending and remaining > 0:
            await asyncio.wait(pending, timeout=remaining)
        return await _collect(requests, tasks, sched)


async def _collect(requests: list[Request], tasks: dict, sched: asyncio.Task) -> list[Result]:
    if not sched.done():
        sched.cancel()
    for t in tasks.values():
        if not t.done():
            t.cancel()
    await asyncio.gather(sched, *tasks.values(), return_exceptions=True)
    out = []
    for i, r in enumerate(requests):
        t = tasks.get(i)
        if t is not None and not t.cancelled() and t.exception() is None:
            out.append(t.result())
        else:
            out.append(Result(i, r.tag, r.at_s, "timeout", "still open (or never sent) at the run's deadline"))
    return out


def run(base_url: str, model: str, requests: list[Request], *, redirects_allowed: bool = False, **kw) -> list[Result]:
    """run_async in a fresh event loop (drivers are synchronous). A request answered with a
    redirect ends it (Redirected, exit 3) unless `redirects_allowed` (a load generator's
    worker, whose rows go back to the fleet that checks them)."""
    results = asyncio.run(run_async(base_url, model, requests, **kw))
    if not redirects_allowed:
        refuse_redirects(results)
    return results
