"""A server's usage counts held to what the client sent (issue 63, item 2: invented numbers).

A server that left `prompt_tokens` out of its usage and reported 10^9 cached tokens gave an
`ok` record with a per-conversation hit rate of 505,050,505%; ten times the prompt cached
gave 1000%, and the 16 special tokens a prompt count may carry let 108% through. Now a
cached count (`usage.prompt_tokens_details.cached_tokens`) is at most the smaller of the
server's prompt_tokens and the token ids the client sent, with no slack; with neither it
has no denominator and is no count. Every observer's hit rate outside 0-100% makes the
record invalid, naming the field or the counter.

The engine here is real: an HTTP server on 127.0.0.1 (an ephemeral port) in a thread of the
test process, answering /v1/models, /health, /metrics (vLLM's cache configuration and
prefix-cache counters) and streamed /v1/completions whose usage the test computes from the
prompt each request sent.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.experiments.serving import client, prefix_case
from harness.infra.target import LlmEndpoint, Target
from harness.model.driver_contract import CaseContext, get

pytest.importorskip("aiohttp")

CACHED = "usage.prompt_tokens_details.cached_tokens"
IDS = [1011, 1012, 1013, 1014, 1015, 1016, 1017, 1018, 1019, 1020]  # a token-id prompt of 10 tokens
PARAMS = {
    "max_requests": 4,
    "duration_s": 1.0,
    "instrument_requests": 2,
    "instrument_gap_s": 0.1,
    "timeout_s": 5.0,
    "stall_s": 2.0,
    "seed": 1,
}


def usage(prompt_tokens=None, cached=None) -> dict:
    """A usage object as vLLM sends it with --enable-prompt-tokens-details; prompt_tokens left
    out when None (the issue's server)."""
    u: dict = {"completion_tokens": 2}
    if prompt_tokens is not None:
        u["prompt_tokens"] = prompt_tokens
    if cached is not None:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    return u


def sane_counters(n: int) -> tuple[int, int]:
    """(queries, hits) of the n-th /metrics read: both grow, a tenth of the queries hit."""
    return 10**6 * n, 10**5 * n


class Engine:
    """A fake vLLM: every completion streams two token chunks, then `usage_of(prompt)` for the
    prompt the request sent (token ids or text); `/metrics` answers a cache configuration
    (blocks of 16 tokens, prefix caching on) and the counters `counters(n)` on its n-th read."""

    def __init__(self, usage_of, counters=sane_counters):
        self.usage_of, self.counters, self.reads = usage_of, counters, 0
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                if self.path.startswith("/metrics"):
                    engine.reads += 1
                    q, h = engine.counters(engine.reads)
                    body = (
                        'vllm:cache_config_info{block_size="16",num_gpu_blocks="1000",enable_prefix_caching="True"} 1\n'
                        f"vllm:prefix_cache_queries_total {q}\nvllm:prefix_cache_hits_total {h}\n"
                    ).encode()
                elif self.path.startswith("/v1/models"):
                    body = b'{"object":"list","data":[{"id":"smollm2","object":"model"}]}'
                else:
                    body = b""  # /health
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                prompt = json.loads(self.rfile.read(n))["prompt"]
                chunk = b'data: {"choices":[{"text":"x","index":0}]}\n\n'
                end = {"choices": [], "usage": engine.usage_of(prompt)}
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(chunk * 2 + b"data: %s\n\ndata: [DONE]\n\n" % json.dumps(end).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def one_answer(usage_of, prompt=IDS) -> client.Result:
    """One real request with `prompt` to an engine whose answer reports `usage_of(prompt)`."""
    with Engine(usage_of) as srv:
        res = client.run(srv.url, "smollm2", [client.Request(0.0, prompt, 4)], timeout_s=5, stall_s=2)
    assert res[0].status == "ok" and res[0].chunks == 2, res[0].error  # what the client timed stays
    return res[0]


def prefix_case_against(usage_of, counters=sane_counters, tmp_path=None):
    """The serving-prefix-cache case from start to end against the fake engine: its Record."""
    with Engine(usage_of, counters) as srv:
        d = get("serving-prefix-cache")
        ctx = CaseContext(
            "serving",
            "prefix-cache",
            1,
            "local",
            d.resolve_params("prefix-cache", PARAMS),
            tmp_path,
            Target("local", engines={"external": LlmEndpoint(srv.url, "smollm2")}),
            log=lambda m: None,
        )
        return d.run(ctx)


def no_rate_outside_0_100(out) -> None:
    """No hit rate the record keeps is above 100% or below 0%, whichever observer gave it."""
    rates = {k: m.value for k, m in out.metrics.items() if m.unit == "%" and ("hit" in k or "cached" in k)}
    assert all(v is None or 0.0 <= v <= 100.0 for v in rates.values()), rates


# ---- one answer: the cached count against what the client sent ---------------------------
def test_a_billion_cached_tokens_without_prompt_tokens_are_held_to_the_token_ids_sent():
    """The issue's server: no prompt_tokens, 10^9 cached. The client sent 10 token ids."""
    r = one_answer(lambda p: usage(None, 10**9))
    assert r.cached_tokens is None and r.tpot_ms is None
    assert CACHED in r.usage_problem and "1000000000 cached prompt tokens reported of 10" in r.usage_problem
    assert "prompt token ids sent 10" in r.usage_problem, r.usage_problem


def test_a_cached_count_without_prompt_tokens_for_a_text_prompt_has_no_denominator():
    """A text prompt's token count only the server knows: without its prompt_tokens even a
    small cached count cannot be held to anything, and is not kept."""
    r = one_answer(lambda p: usage(None, 1), prompt="hello there")
    assert r.cached_tokens is None
    assert f"{CACHED} 1 reported without a usable usage.prompt_tokens" in r.usage_problem, r.usage_problem


def test_a_cached_count_without_prompt_tokens_within_the_token_ids_sent_is_kept():
    r = one_answer(lambda p: usage(None, len(p)))
    assert not r.usage_problem and r.cached_tokens == len(IDS) and r.prompt_tokens is None


@pytest.mark.parametrize("prompt_tokens", [None, len(IDS)], ids=["no-prompt-tokens", "prompt-tokens"])
def test_ten_times_the_prompt_cached_is_invalid(prompt_tokens):
    r = one_answer(lambda p: usage(prompt_tokens, 10 * len(p)))
    assert r.cached_tokens is None
    assert "100 cached prompt tokens reported of 10" in r.usage_problem and "1,000.00%" in r.usage_problem, (
        r.usage_problem
    )


def test_no_slack_lets_cached_exceed_the_prompt_sent():
    """A prompt count may carry up to 16 special tokens beyond the token ids sent; a cached
    count may not: each of 1..16 tokens over the 10 ids sent is invalid, with or without
    the server's (padded) prompt_tokens."""
    for extra in range(1, 17):
        for prompt_tokens in (len(IDS) + extra, None):
            r = one_answer(lambda p, pt=prompt_tokens, k=extra: usage(pt, len(p) + k))
            assert r.cached_tokens is None, (extra, prompt_tokens)
            assert f"{len(IDS) + extra} cached prompt tokens reported of 10 " in r.usage_problem, r.usage_problem
            assert CACHED in r.usage_problem


def test_the_whole_prompt_cached_is_a_valid_100_pct():
    r = one_answer(lambda p: usage(len(p), len(p)))
    assert not r.usage_problem and r.cached_tokens == r.prompt_tokens == len(IDS)
    m = prefix_case._usage_observer({"trace.on": [r]}, {"trace.on": {"hit_pct": 40.0}})
    assert m["trace.on.usage_cached_pct"].value == 100.0 and m["trace.on.observers_gap_pp"].value == 60.0


# ---- the whole prefix case ----------------------------------------------------------------
@pytest.mark.parametrize(
    "usage_of,needle",
    [
        (lambda p: usage(None, 10**9), "1000000000 cached prompt tokens reported of"),  # was 505,050,505%
        (lambda p: usage(None, 10 * len(p)), "1,000.00%"),  # was 1000% per conversation
        (lambda p: usage(len(p) + 16, len(p) + 16), "cached prompt tokens reported of"),  # the slack: was 108%
    ],
    ids=["billion-no-prompt-tokens", "ten-times-no-prompt-tokens", "sixteen-over"],
)
def test_invented_cached_counts_make_the_prefix_case_invalid_naming_the_field(tmp_path, usage_of, needle):
    out = prefix_case_against(usage_of, tmp_path=tmp_path)
    assert out.status == "invalid", (out.status, out.reason)
    assert "trace.on.usage_cached_pct: " in out.reason and CACHED in out.reason and needle in out.reason
    assert "\n" not in out.reason
    u = out.metrics["trace.on.usage_cached_pct"]
    assert u.value is None and u.note.startswith("invalid: trace.on.usage_cached_pct: ")
    assert "trace.sessions.engine_hit_p50_pct" not in out.metrics  # no cached count was kept to rate
    no_rate_outside_0_100(out)


def test_the_whole_prompt_cached_gives_an_ok_case_at_100_pct(tmp_path):
    out = prefix_case_against(lambda p: usage(len(p), len(p)), tmp_path=tmp_path)
    assert out.status == "ok", out.reason
    assert out.metrics["trace.on.usage_cached_pct"].value == 100.0
    assert out.metrics["trace.sessions.engine_hit_p50_pct"].value == 100.0
    assert out.metrics["trace.on.engine_hit_pct"].value == pytest.approx(10.0)
    no_rate_outside_0_100(out)


def test_metrics_counting_more_hits_than_queries_make_the_case_invalid_naming_the_counter(tmp_path):
    """/metrics whose hits grow faster than its queries: a hit rate above 100% from the
    engine's own counters is no measurement."""
    out = prefix_case_against(
        lambda p: usage(len(p), 0), counters=lambda n: (100 + 10**6 * n, 10 * 10**6 * n), tmp_path=tmp_path
    )
    assert out.status == "invalid", (out.status, out.reason)
    assert "trace.on.engine_hit_pct: the engine counted more prefix-cache hits than queries" in out.reason
    assert "vllm:prefix_cache_hits_total over vllm:prefix_cache_queries_total" in out.reason, out.reason
    assert out.metrics["trace.on.engine_hit_pct"].value is None
    no_rate_outside_0_100(out)


# ---- rows that did not pass this client's check (a load generator's) ---------------------
def test_summed_usage_over_100_pct_from_unchecked_rows_is_invalid():
    """A load generator's rows come back as they were written: a hit rate above 100% from
    them is invalid too, never a number."""
    rows = [client.Result(0, "trace.on", 0.0, "ok", prompt_tokens=10, cached_tokens=100)]
    m = prefix_case._usage_observer({"trace.on": rows}, {})
    u = m["trace.on.usage_cached_pct"]
    assert u.value is None and u.note.startswith("invalid: trace.on.usage_cached_pct: ")
    assert f"{CACHED} sums to 100 of 10" in u.note and "1,000.00%" in u.note


def test_a_conversation_over_100_pct_from_unchecked_rows_is_invalid():
    from types import SimpleNamespace

    records = [
        {"timestamp": 0, "input_length": 198, "output_length": 1, "hash_ids": [1]},
        {"timestamp": 1, "input_length": 198, "output_length": 1, "hash_ids": [2]},
    ]
    rows = [
        client.Result(0, "trace.on", 0.0, "ok", cached_tokens=10**9),
        client.Result(1, "trace.on", 0.0, "ok", cached_tokens=0),
    ]
    m = prefix_case._per_session(rows, SimpleNamespace(records=records), [7, 9], 198, 10**6, {"policy": "leaf-lru"})
    hp = m["trace.sessions.engine_hit_p50_pct"]
    assert hp.value is None and hp.note.startswith("invalid: trace.sessions.engine_hit_p50_pct: conversation 7: ")
    assert "505,050,505.05%" in hp.note and CACHED in hp.note
    assert "trace.sessions.count" not in m
