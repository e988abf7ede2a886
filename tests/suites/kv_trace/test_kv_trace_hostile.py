"""Hostile KV-block traces (issue 22): a truncated line, strings for numbers, negative
lengths, a 10-million-entry hash list, binary junk, an empty file... each is one line naming
the file, the line and the field, and exit 2; never a traceback or a hang. Through the
command line (`harness run kv-trace --set prefix-cache.trace=FILE`) and the loader."""

from __future__ import annotations

import json
import os
import time

import pytest

from harness.base.errors import BadInput
from harness.mechanisms.kv_blocks import trace as T
from tests.system.test_hostile import assert_one_line, cli

GOOD = {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}


def line(**change) -> str:
    return json.dumps({**GOOD, **change})


def write(tmp_path, text: str | bytes, name: str = "t.jsonl"):
    p = tmp_path / name
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


HOSTILE = {
    "truncated": ('{"timestamp": 0, "input_length": 600, "outp', "line 1: not a JSON object"),
    "truncated-second": (line() + "\n" + '{"timestamp": 5, "input_len', "line 2: not a JSON object"),
    "string-number": (line(input_length="600"), "line 1: field 'input_length': expected a non-negative integer"),
    "negative-length": (line(output_length=-3), "line 1: field 'output_length': -3 is out of range"),
    "negative-time": (line(timestamp=-1), "line 1: field 'timestamp'"),
    "fraction": (line(timestamp=1.5), "field 'timestamp': expected a non-negative integer, got float 1.5"),
    "nan": ('{"timestamp": NaN, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}', "field 'timestamp'"),
    "huge-int": (line(input_length=10**30), "field 'input_length'"),
    "bool": (line(input_length=True), "field 'input_length': expected a non-negative integer, got bool"),
    "missing-field": (json.dumps({"timestamp": 0, "input_length": 600, "output_length": 3}), "no 'hash_ids' field"),
    "hash-string": (line(hash_ids=[1, "2"]), "field 'hash_ids': entry 1 is str"),
    "hash-negative": (line(hash_ids=[1, -2]), "field 'hash_ids': entry 1 is int -2"),
    "hash-not-list": (line(hash_ids="1,2"), "field 'hash_ids': expected a list"),
    "not-object": ("[1, 2, 3]", "line 1: expected a JSON object"),
    "deep-nesting": ("[" * 200000, "line 1: more than 200 JSON lists or objects"),
    "deep-object": ('{"a": ' * 5000 + "1" + "}" * 5000, "line 1: more than 200 JSON lists or objects"),
    "unsorted": (line(timestamp=10) + "\n" + line(timestamp=5), "line 2: field 'timestamp': 5 is earlier"),
    "empty": ("", "no requests"),
    "blank": ("\n\n   \n", "no requests"),
    "wrong-block-size": (line(input_length=600, hash_ids=list(range(38))), "fit a block size of 16"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_trace_is_one_line_naming_line_and_field(tmp_path, name):
    text, needle = HOSTILE[name]
    p = write(tmp_path, text)
    with pytest.raises(BadInput) as e:
        T.load_trace(p, 512, shown="t.jsonl")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("t.jsonl"), msg
    assert needle in msg, msg


def test_ten_million_hash_ids_are_refused_without_reading_them(tmp_path):
    p = tmp_path / "huge.jsonl"
    with open(p, "w") as f:
        f.write('{"timestamp": 0, "input_length": 5120000000, "output_length": 1, "hash_ids": [')
        chunk = "0, " * 100000
        for _ in range(100):  # 10 million entries, about 30 MB
            f.write(chunk)
        f.write("0]}\n")
    t0 = time.perf_counter()
    with pytest.raises(BadInput, match=r"line 1: longer than 8 MiB"):
        T.load_trace(p, 512)
    assert time.perf_counter() - t0 < 5


def test_binary_junk_is_refused(tmp_path):
    junk = bytes(range(256)) * 64 + b"\n" + os.urandom(4096)
    p = write(tmp_path, junk, "junk.bin")
    with pytest.raises(BadInput, match=r"junk.bin: line 1: not (UTF-8 text|a JSON object)"):
        T.load_trace(p, 512)


def test_a_folder_or_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for p in (tmp_path, fifo):
        with pytest.raises(BadInput, match="not a regular file"):
            T.load_trace(p, 512)


def test_records_are_checked_like_lines():
    with pytest.raises(BadInput, match=r"requests_slice: line 2: field 'input_length'"):
        T.records_trace([GOOD, {**GOOD, "input_length": "x"}], 512, name="requests_slice")


@pytest.mark.parametrize("name", ["truncated", "string-number", "negative-length", "empty", "wrong-block-size"])
def test_cli_run_with_a_hostile_trace_exits_2_with_one_line(tmp_path, name):
    text, needle = HOSTILE[name]
    p = write(tmp_path, text)
    res = cli(
        "run",
        "kv-trace",
        "--profile",
        "local",
        "--results-dir",
        tmp_path / "results",
        "--set",
        f"prefix-cache.trace={p}",
    )
    msg = assert_one_line(res, (2,), needle)
    assert str(p) in msg


def test_cli_names_a_missing_trace(tmp_path):
    res = cli(
        "run",
        "kv-trace",
        "--profile",
        "local",
        "--results-dir",
        tmp_path / "results",
        "--set",
        f"prefix-cache.trace={tmp_path / 'nope.jsonl'}",
    )
    assert_one_line(res, (2,), "no such file")


def test_cli_ten_million_entries_exit_2_fast(tmp_path):
    p = tmp_path / "huge.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [' + "7, " * 10_000_000 + "7]}\n")
    t0 = time.perf_counter()
    res = cli(
        "run",
        "kv-trace",
        "--profile",
        "local",
        "--results-dir",
        tmp_path / "results",
        "--set",
        f"prefix-cache.trace={p}",
    )
    assert_one_line(res, (2,), "line 1: longer than 8 MiB")
    assert time.perf_counter() - t0 < 10


def test_lengths_that_disagree_are_reported_not_refused(tmp_path):
    lines = [line(timestamp=i, hash_ids=[i, i + 100]) for i in range(9)] + [line(timestamp=9, hash_ids=[1])]
    t = T.load_trace(write(tmp_path, "\n".join(lines) + "\n"), 512)
    assert t.n_requests == 10 and t.n_mismatched == 1 and t.mismatched_lines == [10]


def test_a_text_prompt_full_of_brackets_is_text_not_nesting(tmp_path):
    """The guard against deep nesting counted every '[' and '{' of the line, those inside a
    sessions prompt's text too: a prompt of code or JSON (300 brackets) was refused as 'more
    than 200 JSON lists or objects'. Only the line's own lists and objects count."""
    prompt = "def f(x): return [x[i] for i in range(3)]; " * 100 + '{"k": [1, "]"]}'
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps({"session": "a", "at_s": 0.0, "prompt": prompt, "max_tokens": 8}) + "\n")
    trace = T.load_trace(path, 64)
    assert trace.n_requests == 1 and trace.input_len[0] == len(prompt.encode())
