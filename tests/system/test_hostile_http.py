"""A hostile server on the other end of the harness's HTTP calls (issue 40, classes 2, 3, 5,
7 and 9): redirects that would carry the credentials elsewhere, a server that drips its
answer a byte at a time, bodies past any size, label sets built to make a parser quadratic,
numbers no engine has, and counters that go backwards.

Every server here is real: a TCP socket on 127.0.0.1 (an ephemeral port) answering HTTP from
a thread of the test process, each bounded in time.
"""

from __future__ import annotations

import importlib
import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import EXIT_ENVIRONMENT, HarnessError
from harness.experiments.serving import engines
from harness.infra import http_get
from harness.infra.monitoring import query, stack
from harness.infra.target import LlmEndpoint
from tests import REPO

metrics = importlib.import_module("harness.infra.serving_engine.metrics")  # the package's `metrics` is a function

SECRET = "pw-s3cret-9"
MODELS = b'{"object":"list","data":[{"id":"smollm2","object":"model"}]}'


# ---- a real HTTP server whose answers the test writes ------------------------------------
def reply(conn: socket.socket, status: int, body: bytes = b"", headers: tuple[str, ...] = ()) -> None:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close", *headers]
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)


class Server:
    """Answers every request with `respond(server, path, conn)`; records (path, headers) of
    each request it gets. Stops (and its handlers give up) when the test leaves it."""

    def __init__(self, respond):
        self.respond, self.requests = respond, []
        self.stopped = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, auth: str = "") -> str:
        return f"http://{auth}127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket):
        conn.settimeout(15)
        with conn:
            try:
                data = b""
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
                path = lines[0].split(" ")[1]
                self.requests.append((path, headers))
                self.respond(self, path, conn)
            except OSError:
                pass


def recorder(server: Server, path: str, conn: socket.socket) -> None:
    """What a helpful other host would answer (if it were ever asked)."""
    if path.startswith("/api/v1/"):
        reply(conn, 200, b'{"status":"success","data":{"resultType":"vector","result":[],"activeTargets":[]}}')
    elif path == "/metrics":
        reply(
            conn,
            200,
            b'vllm:cache_config_info{block_size="16"} 1\nvllm:prefix_cache_queries_total 1\n'
            b"vllm:prefix_cache_hits_total 1\n",
        )
    else:
        reply(conn, 200, MODELS)


def redirector(to: int, status: int = 302):
    def respond(server: Server, path: str, conn: socket.socket) -> None:
        reply(conn, status, b"", (f"Location: http://127.0.0.1:{to}{path}",))

    return respond


def drip(head: bytes, every_s: float = 0.5):
    """Sends `head` then a byte every `every_s` seconds (at most 20 s: never hangs a test)."""

    def respond(server: Server, path: str, conn: socket.socket) -> None:
        conn.sendall(head)
        end = time.monotonic() + 20
        while not server.stopped.is_set() and time.monotonic() < end:
            conn.sendall(b"x")
            time.sleep(every_s)

    return respond


def drip_headers(server: Server, path: str, conn: socket.socket) -> None:
    """The status line and then a header a byte every 0.5 s: never the end of the headers."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    end = time.monotonic() + 20
    while not server.stopped.is_set() and time.monotonic() < end:
        conn.sendall(b"a")
        time.sleep(0.5)


# ---- class 2: credentials never follow a redirect ----------------------------------------
def _engine_calls(ep: LlmEndpoint):
    return {
        "/v1/models": lambda: metrics.served_models(ep, timeout=3),
        "alive": lambda: metrics.alive(ep, timeout=3),
        "/health": lambda: metrics.get(ep, "/health", 3),
        "/metrics": lambda: metrics.metrics(ep, 3),
        "cache_config": lambda: metrics.cache_config(ep, 3),
        "counters": lambda: metrics.prefix_cache_counters(ep, 3),
    }


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_from_the_engine_never_takes_the_credentials_elsewhere(status):
    with Server(recorder) as other, Server(redirector(other.port, status)) as srv:
        ep = LlmEndpoint(srv.url(f"alice:{SECRET}@"), "smollm2", managed=False)
        for what, call in _engine_calls(ep).items():
            try:
                out = call()
            except HarnessError as e:
                out = str(e)
                assert "redirect" in out and "\n" not in out, (what, out)
            assert SECRET not in json.dumps(out, default=str), (what, out)
            assert out in (None, {}) or "redirect" in str(out), (what, out)  # nothing measured from elsewhere
        assert other.requests == [], "the other host was asked something"
        assert srv.requests and all(h.get("authorization", "").startswith("Basic ") for _, h in srv.requests)


def test_a_redirect_from_prometheus_never_takes_the_credentials_elsewhere(tmp_path):
    with Server(recorder) as other, Server(redirector(other.port, 307)) as srv:
        url = srv.url(f"alice:{SECRET}@")
        assert not stack.http_ok(url + "/-/ready", timeout=3)
        assert not stack.targets_up(url, 1, timeout=1)
        with pytest.raises(http_get.HttpGetError, match="redirect") as e:
            query.prom_api(url, "/api/v1/query", {"query": "up", "api_key": "K3Y-value"}, 3)
        assert SECRET not in str(e.value) and "K3Y-value" not in str(e.value)
        out = query.Monitor(url, log=lambda m: None).finish(
            {"start": time.time() - 2, "end": time.time()}, tmp_path, wait=False
        )
        assert out["status"] == "unavailable" and "redirect" in out["reason"] and SECRET not in out["reason"]
        assert other.requests == []
        assert srv.requests and all(h.get("authorization", "").startswith("Basic ") for _, h in srv.requests)


def test_a_redirect_on_the_same_origin_is_followed_with_the_credentials_and_a_loop_is_not():
    """Older vLLM answers /metrics with a 307 to /metrics/ (same scheme, host and port): that
    is followed, credentials kept; a redirect loop ends after MAX_REDIRECTS, one line."""

    def respond(server, path, conn):
        if path == "/metrics":
            reply(conn, 307, b"", ("Location: /metrics/",))
        elif path == "/metrics/":
            reply(conn, 200, b'vllm:cache_config_info{block_size="32",num_gpu_blocks="10"} 1\n')
        elif path == "/v1/models":
            reply(conn, 302, b"", (f"Location: http://127.0.0.1:{server.port}/v1/models",))

    with Server(respond) as srv:
        ep = LlmEndpoint(srv.url(f"alice:{SECRET}@"), "smollm2")
        assert metrics.cache_config(ep, 3)["kv_cache_size_tokens"] == 320
        assert [p for p, _ in srv.requests] == ["/metrics", "/metrics/"]
        assert all(h.get("authorization", "").startswith("Basic ") for _, h in srv.requests)
        t0 = time.monotonic()
        with pytest.raises(metrics.EngineHttpError, match="redirected more than 3 times") as e:
            metrics.served_models(ep, 3)
        assert time.monotonic() - t0 < 3 and SECRET not in str(e.value)
        assert len(srv.requests) == 2 + 4


def test_credentials_go_to_the_host_they_were_given_for_and_not_in_the_host():
    with Server(recorder) as srv:
        assert metrics.served_models(LlmEndpoint(srv.url(f"alice:{SECRET}@"), "smollm2"), timeout=3) == ["smollm2"]
        assert stack.http_ok(srv.url() + "/-/ready")
    import base64

    (_, with_auth), (_, without) = srv.requests
    assert base64.b64decode(with_auth["authorization"].split()[1]).decode() == f"alice:{SECRET}"
    assert "authorization" not in without and SECRET not in with_auth["host"]


def test_prometheus_queries_go_through_the_bounded_get_and_keep_only_sane_points(tmp_path):
    """The monitor asks Prometheus's HTTP API itself (no client library with per-read
    timeouts): a matrix answer becomes series; NaN, infinite and malformed points are dropped."""
    t0 = time.time() - 3
    series = [
        {
            "metric": {"node": "127.0.0.1:7000"},
            "values": [[t0, "1.5"], [t0 + 1, "NaN"], [t0 + 2, "1e400"], ["x", "2"], [t0 + 3, "2.5"], "junk"],
        },
        {"metric": "not a dict", "values": []},
        7,
    ]
    answer = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}}).encode()

    def respond(server, path, conn):
        reply(conn, 200, answer if path.startswith("/api/v1/query_range?") else b"{}")

    with Server(respond) as srv:
        out = query.Monitor(srv.url(f"alice:{SECRET}@"), log=lambda m: None).finish(
            {"start": t0, "end": t0 + 3}, tmp_path, wait=False
        )
    assert out["status"] == "ok", out["reason"]
    ops = next(q for q in out["queries"] if q["key"] == "ops")["series"]
    assert ops == [{"name": "127.0.0.1:7000", "points": [[0.0, 1.5], [3.0, 2.5]]}]
    assert all(h.get("authorization", "").startswith("Basic ") for _, h in srv.requests)
    assert SECRET not in (tmp_path / "raw" / "monitoring" / "ops.json").read_text() + json.dumps(out)


@pytest.mark.parametrize(
    "url,hidden",
    [
        (f"http://alice:{SECRET}@127.0.0.1:1/x?api_key=K3Y-value", (SECRET, "K3Y-value")),
        ("http://alice:Zq9#Kx7/Wm4?Pv8@127.0.0.1:1/metrics", ("Zq9", "Kx7", "Wm4", "Pv8")),
        ("http://T0KEN-only@127.0.0.1:1/", ("T0KEN-only",)),
        (
            "http://127.0.0.1:1/v1?token=abc&x=SECRETVAL&BAREKEY99#frag-secret",
            ("abc", "SECRETVAL", "BAREKEY99", "frag-secret"),
        ),
    ],
)
def test_a_url_in_a_message_hides_the_password_and_query_values(url, hidden):
    shown = http_get.display(url)
    assert "127.0.0.1:1" in shown and not any(h in shown for h in hidden), shown
    with pytest.raises(http_get.HttpGetError) as e:  # nothing listens on port 1
        http_get.get(url, timeout=2)
    assert not any(h in str(e.value) for h in hidden) and "\n" not in str(e.value)


# ---- class 3: a bound per request, not per read -------------------------------------------
@pytest.mark.parametrize(
    "respond",
    [
        drip(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"),
        drip(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"),
        drip_headers,
    ],
    ids=["body-with-length", "body-until-close", "headers"],
)
def test_a_server_that_drips_its_answer_is_given_up_on_within_the_bound(respond):
    with Server(respond) as srv:
        t0 = time.monotonic()
        with pytest.raises(metrics.EngineHttpError, match="no complete answer within 0.8 s") as e:
            metrics.get(LlmEndpoint(srv.url(), "smollm2"), "/metrics", 0.8)
        assert time.monotonic() - t0 < 2.5 and "\n" not in str(e.value)
        t0 = time.monotonic()
        assert not stack.http_ok(srv.url() + "/-/ready", timeout=0.5)
        assert time.monotonic() - t0 < 2.0


def test_every_reader_gives_up_on_a_dripping_server_within_its_bound():
    with Server(drip(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")) as srv:
        ep = LlmEndpoint(srv.url(), "smollm2")
        for call in (
            lambda: metrics.served_models(ep, 0.5),
            lambda: query.prom_api(srv.url(), "/api/v1/query", {"query": "up"}, 0.5),
        ):
            t0 = time.monotonic()
            with pytest.raises(HarnessError, match="no complete answer within 0.5 s"):
                call()
            assert time.monotonic() - t0 < 2.0
        t0 = time.monotonic()
        assert metrics.alive(ep, timeout=0.5).startswith("the engine at http://127.0.0.1")
        assert metrics.cache_config(ep, timeout=0.5) is None and metrics.prefix_cache_counters(ep, 0.5) is None
        assert not stack.targets_up(srv.url(), 1, timeout=1.0)
        assert time.monotonic() - t0 < 6


def test_a_body_over_the_cap_is_one_line_naming_the_url_and_the_cap():
    big = b"x" * (http_get.METRICS_CAP + 1)

    def respond(server, path, conn):
        if path == "/metrics":  # no length given: read until the cap
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + big)
        else:
            reply(conn, 200, b"[" * (http_get.JSON_CAP + 1))

    with Server(respond) as srv:
        ep = LlmEndpoint(srv.url(f"alice:{SECRET}@"), "smollm2")
        with pytest.raises(metrics.EngineHttpError, match=f"over the {http_get.JSON_CAP}-byte cap") as e:
            metrics.served_models(ep, 5)
        assert "127.0.0.1" in str(e.value) and SECRET not in str(e.value)
        with pytest.raises(metrics.EngineHttpError, match=f"more than the {http_get.METRICS_CAP}-byte cap"):
            metrics.metrics(ep, 10)


def test_model_ids_are_bounded_at_the_source():
    many = json.dumps({"data": [{"id": f"m{i}"} for i in range(metrics.MAX_MODELS + 1)]}).encode()
    long = json.dumps({"data": [{"id": "a" * 300}, {"id": "smollm2"}]}).encode()
    deep = b'{"data":' + b"[" * 100000 + b"]" * 100000 + b"}"
    for body, needle in ((many, "over 1000"), (long, "model id of 300 characters"), (deep, "'data' list|JSON")):
        with Server(lambda s, p, c, b=body: reply(c, 200, b)) as srv:
            ep = LlmEndpoint(srv.url(), "smollm2")
            with pytest.raises(metrics.EngineHttpError, match=needle) as e:
                metrics.served_models(ep, 5)
            assert f"127.0.0.1:{srv.port}/v1/models" in str(e.value)
            why = metrics.alive(ep, 5)
            assert why.startswith(f"the engine at http://127.0.0.1:{srv.port}") and len(why) < 400


# ---- class 3: the /metrics parser is linear ----------------------------------------------
LONG = 200_000
HOSTILE_LINES = {
    "spaces in the label set": "x{" + " " * LONG + "} 1",
    "an unterminated label value": 'x{a="' + "b" * LONG + "} 1",
    "a long label value": 'vllm:cache_config_info{block_size="' + "9" * LONG + '"} 1',
    "many labels": "vllm:cache_config_info{" + ",".join(f'l{i}="v"' for i in range(LONG // 6)) + "} 1",
    "backslashes": 'x{a="' + "\\" * LONG + '"} 1',
    "a long value": "x " + "1" * LONG,
}


def test_hostile_label_sets_parse_in_linear_time(tmp_path):
    """Each 200 kB line parsed in a process with a deadline (the regex parser took minutes)."""
    files = []
    for n, line in enumerate(HOSTILE_LINES.values()):
        files.append(tmp_path / f"metrics{n}.txt")
        files[-1].write_text("# HELP x\n" + line + "\nup 1\n")
    code = (
        "import sys, time; from harness.infra.serving_engine.metrics import parse_prometheus as p\n"
        "for f in sys.argv[1:]:\n"
        "    t = time.perf_counter(); out = p(open(f).read())\n"
        "    print(round(time.perf_counter() - t, 3), 'up' in out, flush=True)\n"
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", code, *map(str, files)], capture_output=True, text=True, timeout=20, cwd=REPO
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"parsing 200 kB lines took over 20 s; done: {e.stdout!r}")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split() for line in r.stdout.splitlines()]
    assert len(rows) == len(HOSTILE_LINES)
    for what, (seconds, up) in zip(HOSTILE_LINES, rows):
        assert float(seconds) < 1.0 and up == "True", (what, seconds, up)  # the lines after it still parse


def test_a_16_mib_metrics_page_parses_in_about_a_second():
    page = (REPO / "tests" / "fixtures" / "vllm-metrics.txt").read_text()
    body = page * (http_get.METRICS_CAP // len(page))
    t0 = time.perf_counter()
    parsed = metrics.parse_prometheus(body, names={metrics.CACHE_INFO, metrics.QUERIES})
    assert time.perf_counter() - t0 < 2.5
    assert len(parsed[metrics.QUERIES]) == http_get.METRICS_CAP // len(page)


LABEL_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


def _escaped(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(LABEL_NAME, st.text(max_size=30), max_size=6), st.floats(allow_nan=False))
def test_labels_round_trip(labels, value):
    line = "m{" + ",".join(f'{k}="{_escaped(v)}"' for k, v in labels.items()) + f"}} {value!r}"
    assert metrics.parse_prometheus("# x\n" + line + "\n") == {"m": [(labels, value)]}


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list('vlm:_cache_config_info{}"=,\\ \t\n\r.-+0123456789eEinfaNbk#')), max_size=300)
)
def test_any_text_parses_or_is_skipped_and_never_raises_but_the_harness_error(text):
    parsed = metrics.parse_prometheus(text)
    assert isinstance(parsed, dict)
    try:
        metrics.cache_config_from(parsed, "http://127.0.0.1:1")
    except metrics.EngineAnswerWrong as e:
        assert "\n" not in str(e) and "http://127.0.0.1:1" in str(e)


# ---- classes 5 and 9: numbers no engine has are the server's fault ---------------------
@pytest.mark.parametrize(
    "label,value",
    [
        ("block_size", "inf"),
        ("block_size", "-16"),
        ("block_size", "1e400"),
        ("block_size", "nan"),
        ("block_size", "0"),
        ("block_size", "16.5"),
        ("num_gpu_blocks", "-1"),
        ("num_gpu_blocks", "1" * 1000),
        ("kv_cache_size_tokens", "Infinity"),
        ("block_size", "\x1b[2J16"),
    ],
)
def test_a_cache_config_no_engine_has_names_the_server_and_exits_3(label, value):
    body = f'vllm:cache_config_info{{block_size="16",num_gpu_blocks="100",{label}="{value}"}} 1.0\n'.encode()
    with Server(lambda s, p, c: reply(c, 200, body)) as srv:
        ep = LlmEndpoint(srv.url(f"alice:{SECRET}@"), "smollm2")
        with pytest.raises(metrics.EngineAnswerWrong) as e:
            metrics.cache_config(ep, 5)
    msg = str(e.value)
    assert e.value.exit_code == EXIT_ENVIRONMENT and "\n" not in msg and "\x1b" not in msg
    assert f"alice:***@127.0.0.1:{srv.port}" in msg and label in msg and "the server's answer is wrong" in msg
    assert SECRET not in msg and len(msg) < 400


def test_a_wrong_cache_config_of_the_users_server_ends_the_run_before_it_starts(tmp_path, monkeypatch):
    from harness.infra.serving_engine.for_run import engines_for_run
    from harness.infra.target import Target

    body = b'vllm:cache_config_info{block_size="inf"} 1\n'
    with Server(lambda s, p, c: reply(c, 200, body if p == "/metrics" else MODELS)) as srv:
        monkeypatch.setenv("HARNESS_LLM_URL", srv.url(f"alice:{SECRET}@"))
        monkeypatch.setenv("HARNESS_LLM_MODEL", "smollm2")
        with pytest.raises(metrics.EngineAnswerWrong) as e:
            with engines_for_run([("s/a", ("cached",))], Target("local"), tmp_path, "local", {}, log=lambda m: None):
                pass
    assert e.value.exit_code == EXIT_ENVIRONMENT and "block_size='inf'" in str(e.value)
    assert f"alice:***@127.0.0.1:{srv.port}" in str(e.value) and SECRET not in str(e.value)


def test_a_wrong_cache_config_fails_the_case_without_blaming_the_user(tmp_path, monkeypatch):
    from harness.infra.target import Target
    from harness.model.driver_contract import CaseContext, get
    from harness.run import runner

    def respond(server, path, conn):
        reply(conn, 200, b'vllm:cache_config_info{block_size="-16"} 1\n' if path == "/metrics" else MODELS)

    monkeypatch.setattr(engines, "warm_up", lambda ep, log: None)  # the config is read right after
    with Server(respond) as srv:
        d = get("serving-prefix-cache")
        ctx = CaseContext(
            "serving",
            "prefix-cache",
            1,
            "local",
            d.resolve_params("prefix-cache", {}),
            tmp_path,
            Target("local", engines={"external": LlmEndpoint(srv.url(), "smollm2")}),
            log=lambda m: None,
        )
        outcome, bad_input = runner._outcome(d, ctx, tmp_path)
    assert outcome.status == "failed" and not bad_input
    assert f"127.0.0.1:{srv.port}" in outcome.reason and "block_size='-16'" in outcome.reason
    assert not (tmp_path / "traceback.txt").exists()


# ---- class 7: impossible counter deltas are no measurement -------------------------------
@pytest.mark.parametrize(
    "before,after,needle",
    [
        ((1000, 900, 1.0), (100, 90, 1.0), "went backwards"),  # a restarted engine: a plausible 90% otherwise
        ((100, 10, 1.0), (110, 110, 1.0), "more prefix-cache hits than queries"),  # 1000% otherwise
        ((100, 10, 1.0), (5000, 4000, 2.0), "re-created"),  # restarted and grown back past the first read
        ((-5, -5, None), (10, 5, None), "below zero"),
        ((100, 10, None), (100, 20, None), "more prefix-cache hits than queries"),
    ],
)
def test_impossible_counter_deltas_make_the_hit_rate_invalid(before, after, needle):
    d = engines.Counters(*before).delta(engines.Counters(*after))
    assert needle in d.problem and "\n" not in d.problem
    assert engines.hit_pct(d, prompt_tokens=1000) is None


def test_sane_counter_deltas_are_measured():
    d = engines.Counters(100, 10, 1.0).delta(engines.Counters(300, 110, 1.0))
    assert d.problem == "" and engines.hit_pct(d, 1000) == 50.0
    assert engines.hit_pct(engines.Counters(0, 0).delta(engines.Counters(0, 0)), 200) == 0.0  # caching off
    assert engines.hit_pct(engines.Counters(None, None), 10) is None  # no counters: missing, not invalid


class CounterServer:
    """The engine's answers: /v1/models, and /metrics whose counters follow `reads` (one
    (queries, hits) pair per read, the last one repeated)."""

    def __init__(self, reads):
        self.reads, self.n = reads, 0

    def __call__(self, server, path, conn):
        if path != "/metrics":
            return reply(conn, 200, MODELS)
        q, h = self.reads[min(self.n, len(self.reads) - 1)]
        self.n += 1
        reply(
            conn,
            200,
            f'vllm:prefix_cache_queries_total{{engine="0"}} {q}\n'
            f'vllm:prefix_cache_hits_total{{engine="0"}} {h}\n'.encode(),
        )


@pytest.mark.parametrize(
    "reads,needle",
    [
        ([(1000, 900), (100, 90)], "went backwards"),
        ([(100, 10), (110, 110)], "more prefix-cache hits than queries"),
    ],
)
def test_the_prefix_case_records_impossible_counters_as_invalid(monkeypatch, reads, needle):
    from harness.experiments.serving import prefix_case

    class Ctx:
        log = staticmethod(lambda m: None)

    monkeypatch.setattr(prefix_case.client, "run", lambda *a, **k: [])  # the measurement itself: none here
    with Server(CounterServer(reads)) as srv:
        _, counts = prefix_case._arm(
            Ctx(), "trace.on", LlmEndpoint(srv.url(), "smollm2"), [], {"timeout_s": 1, "stall_s": 1}
        )
    assert counts["hit_pct"] is None and needle in counts["invalid"]
    assert counts["invalid"].startswith("trace.on.engine_hit_pct: ")


def test_a_restarted_engine_makes_the_prefix_case_invalid_not_a_measurement(tmp_path, monkeypatch):
    """The whole case against a real (fake) server, the engine's counters going backwards
    between the reads around each arm: the case is invalid with the reason, no hit rate."""
    pytest.importorskip("aiohttp")
    from harness.infra import serving_engine
    from harness.infra.target import Target
    from harness.model.driver_contract import CaseContext, get
    from tests.serving_fakes import FakeServer

    reads = iter(range(10**6, 0, -1000))
    monkeypatch.setattr(
        serving_engine,
        "prefix_cache_counters",
        lambda ep, timeout=5.0: {"queries": float(q := next(reads)), "hits": q * 0.9, "created": 1.0},
    )
    params = {
        "max_requests": 4,
        "duration_s": 1.0,
        "instrument_requests": 2,
        "instrument_gap_s": 0.1,
        "timeout_s": 5.0,
        "stall_s": 1.0,
    }
    with FakeServer("ok", gap_s=0.0) as srv:
        d = get("serving-prefix-cache")
        ctx = CaseContext(
            "serving",
            "prefix-cache",
            1,
            "local",
            d.resolve_params("prefix-cache", params),
            tmp_path,
            Target("local", engines={"external": LlmEndpoint(srv.url, "smollm2")}),
            log=lambda m: None,
        )
        out = d.run(ctx)
    assert out.status == "invalid" and "went backwards" in out.reason, out.reason
    hp = out.metrics["trace.on.engine_hit_pct"]
    assert hp.value is None and hp.note.startswith("invalid: trace.on.engine_hit_pct: ")


# ---- red team, round 2: a server's text never chooses what the harness hides -------------
@pytest.mark.parametrize(
    "respond",
    [
        lambda server, path, conn: reply(conn, 307, b"", ("Location: http://x:e@evil.example/",)),
        lambda server, path, conn: reply(conn, 302, b"", ("Location: //ad:min@evil.example:1/",)),
        lambda server, path, conn: conn.sendall(b"HTTP/1.1 xyz http://u:e@z/\r\n\r\n"),
    ],
    ids=["location", "scheme-relative-location", "status-line"],
)
def test_a_servers_location_or_error_never_becomes_a_secret(respond, monkeypatch):
    """`Location: http://x:e@evil.example/` made 'e' a secret: every later redact() gave
    "pr***fix cach*** hit rat***" and results.json's keys "sch***ma_v***rsion"."""
    from harness.infra import redaction, secret_store

    monkeypatch.setattr(secret_store, "_SECRETS", set())
    with Server(respond) as srv:
        said = metrics.alive(LlmEndpoint(srv.url(), "smollm2"), 3)  # why it is not alive
        with pytest.raises(http_get.HttpGetError) as e:
            http_get.get(srv.url() + "/v1/models", timeout=3)
    for text in (said, str(e.value)):
        assert text and ":e@" not in text and "min@" not in text, text
    assert secret_store.known_secrets() == []
    assert redaction.redact("prefix cache hit rate") == "prefix cache hit rate"


@pytest.mark.parametrize("status, headers", [(304, ()), (302, ()), (301, ("Location: ",))])
def test_a_redirect_with_nowhere_to_go_says_so(status, headers):
    def respond(server, path, conn):
        reply(conn, status, b"", headers)

    with Server(respond) as srv:
        with pytest.raises(http_get.HttpGetError) as e:
            http_get.get(srv.url() + "/metrics", timeout=3)
    assert f"answered HTTP {status} with no Location to follow" in str(e.value)
    assert "another scheme" not in str(e.value)


@pytest.mark.parametrize(
    "url, hidden",
    [
        ("http://127.0.0.1:1/v1;api_key=K3YVAL/models", "K3YVAL"),
        ("http://127.0.0.1:1/x;jsessionid=S3SS;token=T0K3N?a=b", "T0K3N"),
        ("http://127.0.0.1:1/x;plain=V4LUE", "V4LUE"),
    ],
)
def test_a_path_parameter_is_hidden_like_a_query_value(url, hidden):
    shown = http_get.display(url)
    assert hidden not in shown and "127.0.0.1:1" in shown, shown
    with pytest.raises(http_get.HttpGetError) as e:
        http_get.get(url, timeout=2)
    assert hidden not in str(e.value)


# ---- issue 53, class 2: a redirect never changes what is measured ---------------------------
PARAMS_SMALL = {
    "max_requests": 4,
    "duration_s": 1.0,
    "instrument_requests": 2,
    "instrument_gap_s": 0.1,
    "timeout_s": 5.0,
    "stall_s": 2.0,
}


def _prefix_case(tmp_path, url: str):
    """The serving-prefix-cache case of a run against the server at `url`: its outcome as the
    runner records it (an error becomes a failed outcome) and whether the user's input was blamed."""
    from harness.infra.target import Target
    from harness.model.driver_contract import CaseContext, get
    from harness.run import runner

    d = get("serving-prefix-cache")
    ctx = CaseContext(
        "serving",
        "prefix-cache",
        1,
        "local",
        d.resolve_params("prefix-cache", PARAMS_SMALL),
        tmp_path,
        Target("local", engines={"external": LlmEndpoint(url, "smollm2")}),
        log=lambda m: None,
    )
    return runner._outcome(d, ctx, tmp_path)


def _exit_code_of(tmp_path, outcome) -> int:
    """The exit code `harness run` gives a run of this one record (its results folder analysed)."""
    from harness.model.stored_run import load_run, write_manifest, write_results
    from harness.verdict.analysis import analyze
    from tests.stored_runs import suite_run

    run_dir = tmp_path / "20260101-000000-run001"
    run_dir.mkdir()
    write_manifest(run_dir, {"run_id": run_dir.name, "profile": "local", "target": "local", "suites": ["kv"]})
    write_results(run_dir, [outcome.stored(suite="kv", case="bench", repetition=1)], {"kv": suite_run()}, [])
    return analyze(load_run(run_dir)).exit_code


@pytest.mark.parametrize("status", [307, 308, 301, 302])
def test_a_redirect_of_the_measured_post_fails_the_case_naming_both_locations(tmp_path, status):
    """The issue's example: the streaming POST followed a 307 to another port and the case
    was recorded `ok` with the other server's TTFT under the given URL. Now the case fails
    with one line naming both locations, the other server is never asked, and the run exits 3."""
    pytest.importorskip("aiohttp")
    from harness.experiments.serving import client
    from tests.serving_fakes import FakeServer

    with FakeServer("ok", gap_s=0.0) as other:

        def respond(server, path, conn):
            if path.startswith("/v1/completions"):
                reply(conn, status, b"", (f"Location: http://127.0.0.1:{other.port}/v1/completions",))
            else:
                reply(conn, 200, MODELS)

        with Server(respond) as srv:
            url = srv.url(f"alice:{SECRET}@")
            with pytest.raises(client.Redirected) as e:
                client.run(url, "smollm2", [client.Request(0.0, "hello", 4)], timeout_s=5, stall_s=2)
            outcome, bad_input = _prefix_case(tmp_path, url)
        assert other.served == 0, "the other server was asked the measured request"
    for line in (str(e.value), outcome.reason):
        assert f"127.0.0.1:{srv.port}" in line and f"127.0.0.1:{other.port}/v1/completions" in line, line
        assert f"HTTP {status}" in line and "\n" not in line and SECRET not in line, line
    assert outcome.status == "failed" and not bad_input and e.value.exit_code == EXIT_ENVIRONMENT
    assert _exit_code_of(tmp_path, outcome) == EXIT_ENVIRONMENT


def test_a_load_generator_hands_a_redirect_back_and_the_fleet_refuses_it():
    """A load generator's worker keeps its rows (the fleet merges them); the merged rows end the case."""
    pytest.importorskip("aiohttp")
    from harness.experiments.serving import client

    with Server(redirector(1, 307)) as srv:
        rows = client.run(
            srv.url(), "smollm2", [client.Request(0.0, "hello", 4)], timeout_s=5, stall_s=2, redirects_allowed=True
        )
    assert rows[0].status == "redirected" and "127.0.0.1:1/v1/completions" in rows[0].error
    with pytest.raises(client.Redirected):
        client.refuse_redirects(rows)


# ---- issue 53, class 3: numbers a server invents ------------------------------------------
def _inventing_server(completion_tokens=10**9, prompt_tokens=5, cached_tokens=None):
    """A real streaming server (tests.serving_fakes) that streams 3 token chunks and then
    reports the usage given: 10^9 completion tokens by default (and, when given, its cached
    prompt tokens as vLLM's --enable-prompt-tokens-details reports them)."""
    from tests.serving_fakes import FakeServer, synthetic_events

    srv = FakeServer("ok", gap_s=0.002, tokens=3)
    events = synthetic_events(3)
    usage = json.loads(events[-2][len(b"data: ") :])
    usage["usage"] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + (completion_tokens if isinstance(completion_tokens, int) else 0),
    }
    if cached_tokens is not None:
        usage["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    events[-2] = b"data: %s\n\n" % json.dumps(usage).encode()
    srv.events, srv.honour_max_tokens = events, False
    return srv


@pytest.mark.parametrize(
    "usage, needle",
    [
        ({}, "1000000000 completion tokens reported for 3 streamed chunks, of at most 4 asked for"),
        ({"completion_tokens": 0}, "0 completion tokens reported for 3 streamed chunks"),
        ({"completion_tokens": "3"}, "completion_tokens '3' is no count"),
        (
            {"completion_tokens": 3, "prompt_tokens": 10**9},
            "1000000000 prompt tokens reported for 2 prompt token ids sent",
        ),
        ({"completion_tokens": 3, "prompt_tokens": 2, "cached_tokens": 5}, "5 cached prompt tokens reported of 2"),
        ({"completion_tokens": 3, "prompt_tokens": 2, "cached_tokens": -1}, "cached_tokens -1 is no count"),
    ],
)
def test_impossible_usage_counts_are_no_measurement(usage, needle):
    pytest.importorskip("aiohttp")
    from harness.experiments.serving import client, summary

    with _inventing_server(**usage) as srv:
        res = client.run(srv.url, "smollm2", [client.Request(0.0, [11, 12], 4)], timeout_s=5, stall_s=2)
    r = res[0]
    assert r.status == "ok" and r.chunks == 3 and r.ttft_ms is not None  # what the client itself timed stays
    assert needle in r.usage_problem and r.tpot_ms is None, (r.usage_problem, r.tpot_ms)
    m = summary.metrics_of("x", res)
    assert m["x.tpot_p50_ms"].value is None and needle in m["x.tpot_p50_ms"].note
    assert m["x.tpot_p50_ms"].note.startswith("invalid: x.tpot: 1 of 1 completed requests")


def test_possible_usage_counts_are_measured():
    pytest.importorskip("aiohttp")
    from harness.experiments.serving import client

    with _inventing_server(completion_tokens=4, prompt_tokens=2, cached_tokens=1) as srv:
        r = client.run(srv.url, "smollm2", [client.Request(0.0, [11, 12], 4)], timeout_s=5, stall_s=2)[0]
    assert r.status == "ok" and not r.usage_problem and r.output_tokens == 4 and r.tpot_ms is not None
    assert r.cached_tokens == 1  # the server's per-answer count of prompt tokens served from its cache


def test_a_server_that_invents_completion_tokens_makes_the_case_invalid(tmp_path):
    """The issue's example: three streamed chunks reported as 10^9 completion tokens gave
    `ok` and a TPOT of 2e-8 ms. Now the case is invalid with the two readings, no TPOT."""
    pytest.importorskip("aiohttp")
    with _inventing_server() as srv:
        outcome, bad_input = _prefix_case(tmp_path, srv.url)
    assert outcome.status == "invalid" and not bad_input, (outcome.status, outcome.reason)
    assert (
        "1000000000 completion tokens reported for 3 streamed chunks" in outcome.reason and "\n" not in outcome.reason
    )
    tpot = outcome.metrics["trace.on.tpot_p50_ms"]
    assert tpot.value is None and tpot.note.startswith("invalid: trace.on.tpot: ")
    assert all(v.value is None or v.value > 1e-3 for k, v in outcome.metrics.items() if "tpot" in k)
    assert _exit_code_of(tmp_path, outcome) == EXIT_ENVIRONMENT
