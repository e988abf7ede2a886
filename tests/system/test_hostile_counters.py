"""A serving engine whose counters or cache configuration lie (issue 40, classes 7 and 9): counters
that never move while prompt tokens are served, a counter's creation time that appears or
disappears between two reads (a restart), fractional token counts, numbers written in a way
the Prometheus text format does not allow (`1_000`, Arabic-Indic digits), and a block size in
range that the default tokens_per_hash does not fit (the server's value, not the user's fault).

The engine here is real: a TCP server on 127.0.0.1 (an ephemeral port) in a thread of the test
process, answering /v1/models, /health, /metrics (from the test) and streamed /v1/completions;
every socket has a timeout and the server stops when the test leaves it.
"""

from __future__ import annotations

import importlib
import os
import re
import socket
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.base.errors import EXIT_BAD_INPUT, BadInput
from harness.experiments.serving import client, engines, replay
from harness.infra.target import LlmEndpoint
from tests import REPO
from tests.system.test_hostile_http import Server

metrics = importlib.import_module("harness.infra.serving_engine.metrics")  # the package's `metrics` is a function

SECRET = "pw-c0unt3r-7"
COMPLETION = (
    b'data: {"choices":[{"text":"x","index":0}]}\n\n' * 2
    + b'data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2}}\n\ndata: [DONE]\n\n'
)


def config(block: int = 16) -> str:
    return f'vllm:cache_config_info{{block_size="{block}",num_gpu_blocks="1000",enable_prefix_caching="True"}} 1\n'


def counters(queries, hits, created=None) -> str:
    text = f"vllm:prefix_cache_queries_total {queries}\nvllm:prefix_cache_hits_total {hits}\n"
    return text + (f"vllm:prefix_cache_queries_created {created}\n" if created is not None else "")


class Engine(Server):
    """A fake vLLM: `/metrics` answers `body(n)` on its n-th read (from 1); every completion
    streams two chunks and reports 10 prompt tokens."""

    def __init__(self, body):
        super().__init__(respond=None)  # the socket, its thread and stop: test_hostile_http's Server
        self.body, self.reads = body, 0

    def _request(self, conn) -> str:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 1 << 20:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length:\s*(\d+)", head)
        while length and len(body) < int(length.group(1)):
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return head.split(b" ")[1].decode() if head.count(b" ") >= 2 else "/"

    def _one(self, conn: socket.socket):
        conn.settimeout(10)
        with conn:
            try:
                path = self._request(conn)
                if path.startswith("/v1/completions"):
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + COMPLETION
                    )
                    return
                if path.startswith("/metrics"):
                    self.reads += 1
                    body = self.body(self.reads).encode()
                elif path.startswith("/v1/models"):
                    body = b'{"object":"list","data":[{"id":"smollm2","object":"model"}]}'
                else:
                    body = b""  # /health
                conn.sendall(
                    f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
                )
            except OSError:
                pass


class Ctx:
    log = staticmethod(lambda m: None)


def one_arm(body, arm: str = "trace.on") -> dict:
    """The counts of one arm of the prefix case: three real requests to an engine whose
    `/metrics` answers `body(n)`."""
    from harness.experiments.serving import prefix_case

    reqs = [client.Request(0.05 * i, f"prompt {i}", 2, arm) for i in range(3)]
    with Engine(body) as srv:
        _, counts = prefix_case._arm(
            Ctx(), arm, LlmEndpoint(srv.url(), "smollm2"), reqs, {"timeout_s": 5.0, "stall_s": 2.0}
        )
    assert counts["served"] == 30  # three requests of 10 prompt tokens each were served
    return counts


# ---- counters that do not move are no 0% measurement --------------------------------------
def test_frozen_counters_are_invalid_not_a_zero_hit_rate():
    counts = one_arm(lambda n: config() + counters(100, 50))
    assert counts["hit_pct"] is None
    assert "counted 0 queried tokens while serving 30 prompt tokens" in counts["invalid"], counts


def test_counters_that_grow_far_less_than_the_prompt_tokens_are_invalid():
    counts = one_arm(lambda n: config() + counters(100 + 5 * (n - 1), 50))  # 5 tokens queried of 30 served
    assert counts["hit_pct"] is None and "counted 5 queried tokens while serving 30" in counts["invalid"]


def test_counters_that_follow_the_prompt_tokens_are_measured():
    counts = one_arm(lambda n: config() + counters(100 + 30 * (n - 1), 50 + 15 * (n - 1)))
    assert "invalid" not in counts and counts["hit_pct"] == 50.0


def test_an_engine_with_caching_off_may_count_nothing():
    """The mechanism-off arm: vLLM without prefix caching counts no queries; 0 hits of the
    prompt tokens served is its measurement."""
    counts = one_arm(lambda n: config() + counters(0, 0), arm="trace.off")
    assert "invalid" not in counts and counts["hit_pct"] == 0.0


def test_the_whole_case_against_frozen_counters_is_invalid(tmp_path):
    """The case from start to end against a server whose counters never move: invalid with
    the reason, and no 0% recorded as the engine's hit rate."""
    pytest.importorskip("aiohttp")
    from harness.infra.target import Target
    from harness.model.driver_contract import CaseContext, get

    params = {
        "max_requests": 4,
        "duration_s": 1.0,
        "instrument_requests": 2,
        "instrument_gap_s": 0.1,
        "timeout_s": 5.0,
        "stall_s": 2.0,
        "seed": 1,
    }
    with Engine(lambda n: config() + counters(100, 50)) as srv:
        d = get("serving-prefix-cache")
        ctx = CaseContext(
            "serving",
            "prefix-cache",
            1,
            "local",
            d.resolve_params("prefix-cache", params),
            tmp_path,
            Target("local", engines={"external": LlmEndpoint(srv.url(), "smollm2")}),
            log=lambda m: None,
        )
        out = d.run(ctx)
    assert out.status == "invalid" and "queried tokens while serving" in out.reason, out.reason
    hp = out.metrics["trace.on.engine_hit_pct"]
    assert hp.value is None and hp.note.startswith("invalid: trace.on.engine_hit_pct: ")


# ---- a restart seen in the counters' creation time -----------------------------------------
@pytest.mark.parametrize("first,second", [(None, 1.7e9), (1.7e9, None)])
def test_a_creation_time_that_appears_or_disappears_is_a_restart(first, second):
    d = engines.Counters(100, 10, first).delta(engines.Counters(400, 100, second))
    assert "restart" in d.problem and "\n" not in d.problem
    assert engines.hit_pct(d, 300) is None


def test_a_creation_time_only_in_the_first_read_makes_the_arm_invalid():
    counts = one_arm(lambda n: config() + counters(100 + 30 * (n - 1), 50, 1.7e9 if n == 1 else None))
    assert counts["hit_pct"] is None and "restart" in counts["invalid"]


# ---- token counters are whole numbers -----------------------------------------------------
@pytest.mark.parametrize(
    "before,after", [((100.5, 10), (200.5, 20)), ((100, 10), (200, 20.25)), ((2.0**60, 0), (2.0**60 + 4096, 0))]
)
def test_fractional_or_inexact_token_counters_are_invalid(before, after):
    d = engines.Counters(*before).delta(engines.Counters(*after))
    assert d.problem and "whole" in d.problem and engines.hit_pct(d, 100) is None


def test_a_fractional_counter_from_the_server_makes_the_arm_invalid():
    counts = one_arm(lambda n: config() + counters(100.5 + 30 * (n - 1), 50))
    assert counts["hit_pct"] is None and "whole" in counts["invalid"]


# ---- only the Prometheus number grammar is a number ----------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        "1_000",
        "١٢٣",
        "１２３",
        "1e1_0",
        "0x10",
        "0x1p4",
        "1,5",
        "12a",
        "Infinit",
        "+NaN",
        "1e",
        ".",
        "+",
        "--1",
        "\u0661",
        "1.5.2",
        "\u0131nf",
        "\u0130NF",
        "na\u0274",
    ],
)
def test_a_value_outside_the_number_grammar_is_no_number(value):
    parsed = metrics.parse_prometheus(f"vllm:prefix_cache_queries_total {value}\nother 7\n")
    assert "vllm:prefix_cache_queries_total" not in parsed and parsed["other"] == [({}, 7.0)]


@pytest.mark.parametrize(
    "value,expected", [("1000", 1000.0), ("-1.5e3", -1500.0), ("+7", 7.0), (".5", 0.5), ("5.", 5.0), ("1E+2", 100.0)]
)
def test_numbers_of_the_grammar_are_read(value, expected):
    assert metrics.parse_prometheus(f"m {value}\n")["m"] == [({}, expected)]


def test_nan_and_infinities_are_read_as_such():
    parsed = metrics.parse_prometheus("a NaN\nb +Inf\nc -Inf\nd inf\n")
    assert parsed["b"][0][1] == parsed["d"][0][1] == float("inf") and parsed["c"][0][1] == float("-inf")
    assert parsed["a"][0][1] != parsed["a"][0][1]  # NaN


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=12))
@example("1_000")
@example("٣")
@example("１２")
@example("0x1f")
@example("1e1_0")
def test_only_ascii_numbers_are_read(value):
    parsed = metrics.parse_prometheus(f"m {value}\n")
    if "m" in parsed:
        shown = value.strip()
        assert shown.isascii() and "_" not in shown and not shown.lower().startswith(("0x", "+0x", "-0x")), value


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=False))
def test_every_float_python_writes_is_read_back(x):
    assert metrics.parse_prometheus(f"m {x!r}\n")["m"] == [({}, x)]


def test_counters_written_with_underscores_are_missing_not_read():
    with Engine(lambda n: config() + counters("1_000", "١٢٣")) as srv:
        assert metrics.prefix_cache_counters(LlmEndpoint(srv.url(), "smollm2"), timeout=5.0) is None


# ---- a block size in range that tokens_per_hash does not fit -------------------------------
def test_the_servers_block_size_is_named_as_the_servers():
    server = f"http://alice:***@127.0.0.1:{os.getpid()}"
    with pytest.raises(BadInput) as e:
        replay.check_block(16, 24, server=server, case="prefix-cache")
    msg = str(e.value)
    assert "\n" not in msg and server in msg and "block_size=24" in msg
    assert "prefix-cache.tokens_per_hash=12" in msg  # the nearest value that fits 24


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 1 << 16), st.integers(1, 1 << 16))
def test_the_suggested_tokens_per_hash_fits_and_is_nearest(block, tokens):
    fit = replay.fitting_tokens_per_hash(tokens, block)
    assert 1 <= fit <= replay.MAX_TOKENS_PER_HASH and (fit % block == 0 or block % fit == 0)
    for other in range(max(1, tokens - abs(fit - tokens) + 1), min(tokens + abs(fit - tokens), 1 + (1 << 16))):
        assert other % block and block % other  # nothing nearer fits


def test_a_block_size_of_24_fails_the_case_naming_the_server(tmp_path):
    pytest.importorskip("aiohttp")
    from harness.infra.target import Target
    from harness.model.driver_contract import CaseContext, get
    from harness.run import runner

    with Engine(lambda n: config(24) + counters(100 * n, 50 * n)) as srv:
        d = get("serving-prefix-cache")
        ep = LlmEndpoint(srv.url(f"alice:{SECRET}@"), "smollm2")
        ctx = CaseContext(
            "serving",
            "prefix-cache",
            1,
            "local",
            d.resolve_params("prefix-cache", {}),
            tmp_path,
            Target("local", engines={"external": ep}),
            log=lambda m: None,
        )
        outcome, bad_input = runner._outcome(d, ctx, tmp_path)
    reason = outcome.reason
    assert bad_input and f"alice:***@127.0.0.1:{srv.port}" in reason and SECRET not in reason, reason
    assert "block_size=24" in reason and "prefix-cache.tokens_per_hash=12" in reason and "\n" not in reason


def test_the_users_engine_block_is_named_as_the_users(tmp_path):
    """A server that does not say its block size: the block is the user's engine_block, and
    the line names both parameters."""
    with pytest.raises(BadInput) as e:
        replay.check_block(16, 24, case="prefix-cache")
    assert "prefix-cache.engine_block=24" in str(e.value) and "prefix-cache.tokens_per_hash=12" in str(e.value)


def _free_base_port() -> int:
    """A base port whose cluster ports (base..base+5) and their bus ports (+10000) are free."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        ports = [base + i for i in range(6)] + [base + 10000 + i for i in range(6)]
        if ports[-1] > 65535:
            continue
        try:
            for p in ports:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return base
    pytest.skip("no free range of ports for the local cluster")


def test_the_cli_names_the_server_for_a_block_size_of_24(tmp_path):
    pytest.importorskip("aiohttp")
    with Engine(lambda n: config(24) + counters(100 * n, 50 * n)) as srv:
        env = dict(os.environ, HARNESS_LLM_URL=srv.url(f"alice:{SECRET}@"), HARNESS_LLM_MODEL="smollm2")
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "run",
                "serving",
                "-k",
                "prefix-cache",
                "--set",
                "prefix-cache.duration_s=5",
                "--base-port",
                str(_free_base_port()),
                "--results-dir",
                str(tmp_path / "r"),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=120,
        )
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert p.returncode == EXIT_BAD_INPUT and len(errors) == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert f"127.0.0.1:{srv.port}" in errors[0] and "block_size=24" in errors[0], errors
    assert "prefix-cache.tokens_per_hash=12" in errors[0] and SECRET not in p.stderr + p.stdout
