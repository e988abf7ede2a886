"""A user's KV-block trace in each supported format (Mooncake's JSONL, Alibaba Bailian's)
through the loader, the independent recount, and the kv-trace suite with its ledger.

No Bailian release file ships here (its files are Git LFS objects of 28-132 MB). The Bailian
file of these tests is the first requests of the shipped Mooncake conversation trace written
in Bailian's documented schema (the qwen-bailian-usagetraces-anon README): each 512-token
block split into 16-token blocks whose ids derive from the block's own, the timestamp in
seconds, and the conversations made explicit (chat_id, parent_chat_id: a request's parent is
the last request before it with the same second block). Both files then carry the same
requests, so what the suite measures on one can be checked against the other."""

from __future__ import annotations

import json
import math

import pytest

from harness.base.errors import BadInput
from harness.base.paths import REPO_ROOT
from harness.experiments.kv_trace import recount
from harness.mechanisms.kv_blocks import trace as T
from harness.model.stored_run import load_run
from harness.verdict.analysis import analyze
from tests.system.test_hostile import assert_one_line, cli

TRACE = REPO_ROOT / "data/mooncake/conversation_trace.jsonl"
SPLIT = 512 // 16


def mooncake_lines(n: int) -> list[dict]:
    with open(TRACE, encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(n)]


def as_bailian(lines: list[dict]) -> list[dict]:
    out, last = [], {}
    for i, rec in enumerate(lines):
        ids, n = rec["hash_ids"], rec["input_length"]
        key = ids[1] if len(ids) > 1 else ids[0]
        parent = last.get(key, -1)
        last[key] = i
        out.append(
            {
                "chat_id": i,
                "parent_chat_id": parent,
                "timestamp": rec["timestamp"] / 1000,
                "input_length": n,
                "output_length": rec["output_length"],
                "type": "text",
                "turn": 1 if parent < 0 else out[parent]["turn"] + 1,
                "hash_ids": [h * SPLIT + k for h in ids for k in range(SPLIT)][: math.ceil(n / 16)],
            }
        )
    return out


def write_jsonl(path, recs) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def max_hit_pct(recs: list[dict], block_size: int) -> float:
    """The prefix rule with an infinite cache, counted plainly: a block seen before is a hit
    worth its tokens (a request's last block holds what remains of the prompt)."""
    seen, hit, total = set(), 0, 0
    for r in recs:
        n = r["input_length"]
        total += n
        for j, h in enumerate(r["hash_ids"]):
            if h in seen:
                hit += min(block_size, max(0, n - j * block_size))
            seen.add(h)
    return 100.0 * hit / total


def test_a_bailian_trace_reads_as_the_same_requests_with_its_conversations(tmp_path):
    moon = mooncake_lines(400)
    bail = as_bailian(moon)
    write_jsonl(tmp_path / "m.jsonl", moon)
    write_jsonl(tmp_path / "b.jsonl", bail)
    m = T.load_trace(tmp_path / "m.jsonl", 512)
    b = T.load_trace(tmp_path / "b.jsonl", 16)  # auto: chat_id and parent_chat_id make it Bailian's
    assert (m.fmt, b.fmt, m.sessions) == ("mooncake", "bailian", None)
    assert b.block_size == 16 and b.n_requests == m.n_requests == 400 and b.n_mismatched == 0
    assert (b.timestamps_ms == m.timestamps_ms).all() and (b.input_len == m.input_len).all()
    # a conversation is its root chat: every request of one has the root's id
    assert b.sessions is not None and len(set(b.sessions.tolist())) == sum(r["parent_chat_id"] < 0 for r in bail)
    assert all(b.sessions[i] == b.sessions[r["parent_chat_id"]] for i, r in enumerate(bail) if r["parent_chat_id"] >= 0)
    # a sample of sessions keeps whole conversations (by chat, not by the second block)
    s = T.session_sample(b, 0.2, seed=1)
    picked = set(s.sessions.tolist())
    assert s.n_requests == sum(x in picked for x in b.sessions.tolist()) and 0 < s.n_requests < 400
    # the independent recount reads the same times and blocks in its own way
    again = recount.read_requests(tmp_path / "b.jsonl")
    assert [t for t, _, _ in again] == b.timestamps_ms.tolist()
    assert sum(len(ids) for _, _, ids in again) == b.n_blocks
    # the same requests carry the same reuse, within what a 512-token block's unseen tail gives
    assert max_hit_pct(bail, 16) == pytest.approx(max_hit_pct(moon, 512), abs=1.0)


BAILIAN = {
    "chat_id": 3,
    "parent_chat_id": -1,
    "timestamp": 1.25,
    "input_length": 40,
    "output_length": 2,
    "type": "text",
    "turn": 1,
    "hash_ids": [7, 8, 9],
}
BAD_BAILIAN = {
    "no-chat": (
        {k: v for k, v in BAILIAN.items() if k != "chat_id"},
        "auto",
        "line 2: no 'chat_id' field; a Bailian line",
    ),
    "parent-below-minus-one": ({**BAILIAN, "parent_chat_id": -2}, "auto", "line 2: field 'parent_chat_id': -2 is out"),
    "time-as-text": ({**BAILIAN, "timestamp": "1.5"}, "auto", "line 2: field 'timestamp': expected seconds"),
    "negative-time": ({**BAILIAN, "timestamp": -0.5}, "auto", "line 2: field 'timestamp': -0.5 is out of range"),
    "mooncake-said-bailian": (
        {k: v for k, v in BAILIAN.items() if k not in ("chat_id", "parent_chat_id")},
        "bailian",
        "line 1: no 'chat_id' field",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_BAILIAN))
def test_a_bad_bailian_line_is_one_error_naming_the_line_and_field(tmp_path, case):
    rec, fmt, expected = BAD_BAILIAN[case]
    first = {**BAILIAN, "timestamp": 0.5} if fmt == "auto" else rec
    write_jsonl(tmp_path / "t.jsonl", [first, rec] if fmt == "auto" else [rec])
    with pytest.raises(BadInput) as e:
        T.load_trace(tmp_path / "t.jsonl", 16, fmt=fmt)
    assert expected in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_bailian_trace_with_the_mooncake_block_size_says_to_set_16(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", [BAILIAN])
    with pytest.raises(BadInput, match="has 16-token blocks, not 512; set block_size to 16"):
        T.load_trace(tmp_path / "t.jsonl", 512)
    with pytest.raises(BadInput, match="trace format 'csv' is not one of auto, mooncake, bailian"):
        T.load_trace(tmp_path / "t.jsonl", 16, fmt="csv")
    res = cli("run", "kv-trace", "--dry-run", "--set", "prefix-cache.trace_format=csv")
    assert_one_line(res, (2,), "trace_format")


@pytest.mark.parametrize("fmt", ["bailian", "sessions"])
def test_a_users_trace_runs_through_the_simulator_the_recount_and_the_ledger(tmp_path, fmt):
    """The whole suite on a user's file of each format beyond Mooncake's (whose own run is
    test_kv_trace_suite's): the case reads its format, the simulator's reuse matches a plain
    count, the independent recount agrees, and C1 gets a verdict."""
    mine = tmp_path / f"{fmt}.jsonl"
    if fmt == "bailian":
        recs = as_bailian(mooncake_lines(300))
        write_jsonl(mine, recs)
        expected = max_hit_pct(recs, 16)
    else:
        sessions_file(mine, n_users=12)
        expected = None  # the recount below is the plain count
    code, out, err = cli(
        "run",
        "kv-trace",
        "--profile",
        "local",
        "--results-dir",
        tmp_path / "results",
        "--set",
        "prefix-cache.policies=[lru, lfu, hybrid, random, opt, leaf-lru]",
        "--set",
        # capacities under the file's distinct blocks, so the curve simulates evictions (the
        # sessions file holds a few thousand tokens)
        "prefix-cache.capacities_tokens=[100000, 3000000, 1000000000]"
        if fmt == "bailian"
        else "prefix-cache.capacities_tokens=[800, 2000, 1000000000]",
        "--set",
        f"prefix-cache.trace={mine}",
        "--set",
        "prefix-cache.block_size=16",
        "--set",
        f"crosscheck.trace={mine}",
        "--set",
        "crosscheck.block_size=16",
        "--set",
        "crosscheck.session_fraction=0.05" if fmt == "bailian" else "crosscheck.session_fraction=0.5",
    )
    assert code == 0, err[-3000:]
    run_dir = next((tmp_path / "results").iterdir())
    recs = json.loads((run_dir / "results.json").read_text())["records"]
    rec = next(r for r in recs if r["case"] == "prefix-cache")
    assert rec["facts"]["trace_format"] == fmt and rec["facts"]["block_size"] == 16
    m = {k: v["value"] for k, v in rec["metrics"].items()}
    if expected is not None:
        assert m["trace.requests"] == 300
        assert m["reuse.max.token_hit_pct"] == pytest.approx(expected, abs=0.01)
    assert m["reuse.max.token_hit_pct"] == pytest.approx(m["reference.reuse.max.token_hit_pct"], abs=1e-6)
    assert m["reuse.max.token_hit_pct"] > 0 and m["curve.opt_violations"] == 0
    cross = next(r for r in recs if r["case"] == "crosscheck")
    assert cross["status"] == "ok" and cross["metrics"]["crosscheck.mismatched_pairs"]["value"] == 0
    c1 = next(c for c in analyze(load_run(run_dir)).claims if c.id == "C1")
    assert c1.outcome.value in ("reproduced", "not reproduced"), c1.outcome
    ref = c1.checks[0].reference  # the recount, which reads the file in its own way
    assert ref is not None and ref.agrees is True, ref and ref.describe()


def sessions_file(path, n_users: int = 6):
    """The serving suite's generated multi-turn sessions (a shared system prompt, each turn
    carrying its history), written as a user's sessions file with token-id prompts."""
    from harness.experiments.serving import sessions

    reqs = sessions.generate(
        sessions.SessionSpec(users=n_users, system_tokens=64, user_tokens=24, answer_tokens=16, seed=3)
    )
    write_jsonl(
        path,
        [
            {"session": r.tag.split("/")[0], "at_s": r.at_s, "prompt": r.prompt, "max_tokens": r.max_tokens}
            for r in reqs
        ],
    )
    return reqs, sessions.shared_prefix_tokens(reqs)


def test_a_sessions_file_reads_as_prefix_blocks_with_its_sessions(tmp_path):
    from harness.experiments.kv_trace.analyses import rates_at
    from harness.mechanisms.kv_blocks.policies import Stream

    reqs, shared = sessions_file(tmp_path / "s.jsonl")
    t = T.load_trace(tmp_path / "s.jsonl", 16)
    assert t.fmt == "sessions" and t.n_requests == len(reqs) and t.n_mismatched == 0
    assert t.sessions is not None and len(set(t.sessions.tolist())) == 6
    assert t.input_len.tolist() == [len(r.prompt) for r in reqs]
    hit = int(rates_at(t, Stream(t), "lru", None).hit_tokens.sum())
    # whole 16-token blocks of the prefix each prompt shares with an earlier one: at most the
    # shared tokens, at most a block less per request
    assert shared - 16 * len(reqs) <= hit <= shared and hit > 0, (hit, shared)
    # the recount names the blocks its own way (SHA-256 of the prefix) and finds the same hits
    again = recount.read_requests(tmp_path / "s.jsonl", block_size=16)
    assert recount.replay(again, 16, [recount.Forever()]) == hit


SESSION_LINE = {"session": "a", "at_s": 1.0, "prompt": "the same question about caches", "max_tokens": 4}
BAD_SESSIONS = {
    "no-at": ({k: v for k, v in SESSION_LINE.items() if k != "at_s"}, "line 2: no 'at_s' field; a sessions line"),
    "prompt-of-floats": ({**SESSION_LINE, "prompt": [1.5, 2.0]}, "line 2: field 'prompt': expected text or a list"),
    "at-as-text": ({**SESSION_LINE, "at_s": "1"}, "line 2: field 'at_s': expected seconds >= 0"),
    "earlier": ({**SESSION_LINE, "at_s": 0.5}, "line 2: field 'at_s': 0.5 is earlier than the line before"),
    "session-list": ({**SESSION_LINE, "session": [1]}, "line 2: field 'session': expected a text or an integer id"),
}


@pytest.mark.parametrize("case", sorted(BAD_SESSIONS))
def test_a_bad_sessions_line_is_one_error_naming_the_line_and_field(tmp_path, case):
    rec, expected = BAD_SESSIONS[case]
    write_jsonl(tmp_path / "t.jsonl", [SESSION_LINE, rec])
    with pytest.raises(BadInput) as e:
        T.load_trace(tmp_path / "t.jsonl", 4)
    assert expected in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_text_prompt_asked_again_hits_every_block():
    t = T.records_trace([SESSION_LINE, {**SESSION_LINE, "at_s": 2.0, "session": 7}], 4)
    first, second = t.blocks[: t.offsets[1]].tolist(), t.blocks[t.offsets[1] :].tolist()
    assert first == second and len(first) == -(-len(SESSION_LINE["prompt"].encode()) // 4)
    assert t.sessions is not None and t.sessions.tolist() == [0, 1]
