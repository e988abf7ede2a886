"""KV-block traces (Mooncake's format and Alibaba Bailian's): streamed, validated, held as
flat numpy arrays.

Mooncake (FAST'25): one JSON object per line, sorted by time:
  {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [block hash, ...]}
`hash_ids` are the hashes of the prompt's KV blocks of `block_size` tokens (512 in the
Mooncake release); equal ids mean the same prefix up to and including that block.
Bailian (qwen-bailian-usagetraces-anon, ATC'25): the same fields with the timestamp in
seconds (a decimal), 16-token blocks, and a conversation's structure: "chat_id", and
"parent_chat_id" (-1 for a conversation's first request), "turn", "type"; its requests
carry their conversation (`sessions`). `fmt="auto"` reads a file whose first request has
chat_id and parent_chat_id as Bailian's, session and prompt as sessions, else as Mooncake's. Other fields are ignored.
Multi-turn sessions (the serving suite's sessions file): {"session": ID, "at_s": seconds,
"prompt": token ids or text, "max_tokens": N} per line, sorted by at_s; each prompt holds its
own history. Its blocks are hashed here as a prefix cache does: block j's id is a hash of
block j-1's id and block j's tokens, so equal ids mean the same prefix (a text prompt is
blocked by its UTF-8 bytes, not by a model's tokens: give token ids for token-exact figures).
A problem a user can fix is one BadInput line naming the file, the line number and the
field; lengths that disagree with the block count are counted and reported (refused only
when they disagree on most lines: a wrong block_size).

Time and memory (issue 63; tests/suites/kv_trace/test_scaling.py): the file is streamed line
by line, each line checked and dropped; the time grows linearly with the file (a sessions
prompt's block costs its own tokens: the hash of block j-1 stands for the prefix). A trace is
held in 8 bytes a block and 8 a request per column (int64 columns built in array('q') and
handed to numpy without a copy); reading peaks below PEAK_BYTES_PER_BLOCK bytes a block plus
PEAK_BYTES_PER_REQUEST a request (Bailian's map of chats to conversations included) and
the longest line's JSON: a 45 MB Mooncake trace (~4M blocks, ~200k requests) within 120 MB
(a 50 MB one of 3.8M blocks: ~50 MB above the interpreter's own, in half the time of the
Python lists of ints it was read into before, ~210 MB).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.base.errors import BadInput

DEFAULT_TRACE = "data/mooncake/conversation_trace.jsonl"
# The Mooncake FAST'25 conversation trace (data/mooncake/README.md): provenance, not a claim
MOONCAKE_CONVERSATION_SHA256 = "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df"
MAX_LINE_BYTES = 8 << 20  # a 128k-token prompt of 16-token blocks is ~90 KB; 8 MiB is far beyond
MAX_ID = 2**63 - 1
PEAK_BYTES_PER_BLOCK = 20  # load_trace: an int64, the array's growth and the copy while it grows
PEAK_BYTES_PER_REQUEST = 200  # five int64 columns and offsets, a Bailian chat's entry in _Chats.root
MAX_CONTAINERS = 200  # lists and objects on one line, outside its strings (a Mooncake line has 2)
JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # a JSON string, escapes included
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
FORMATS = ("auto", "mooncake", "bailian", "sessions")
SESSION_FIELDS = ("session", "at_s", "prompt", "max_tokens")
BAILIAN_FIELDS = ("chat_id", "parent_chat_id", *FIELDS)
BAILIAN_BLOCK_SIZE = 16  # "Salted SipHash blocks (16 tokens per block)", the release's README
COMMON_BLOCK_SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass
class KVTrace:
    """Requests of a KV-block trace as flat arrays (block j of request i is
    blocks[offsets[i] + j])."""

    name: str
    block_size: int
    timestamps_ms: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    offsets: np.ndarray  # n_requests + 1
    blocks: np.ndarray
    sha256: str = ""
    mismatched_lines: list = field(default_factory=list)  # line numbers where len(hash_ids) != ceil(len/bs)
    n_mismatched: int = 0
    sessions: np.ndarray | None = None  # each request's conversation (a Bailian trace's root chat_id)
    fmt: str = "mooncake"

    def __post_init__(self):
        if self.block_size < 1:
            raise BadInput(f"block_size must be at least 1, got {self.block_size}")
        if len(self.offsets) != len(self.timestamps_ms) + 1 or len(self.timestamps_ms) == 0:
            raise ValueError("a KV trace needs at least one request and n + 1 offsets")

    @property
    def n_requests(self) -> int:
        return len(self.timestamps_ms)

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def lengths(self) -> np.ndarray:
        """Blocks per request."""
        return np.diff(self.offsets)

    @property
    def is_mooncake_conversation(self) -> bool:
        return self.sha256 == MOONCAKE_CONVERSATION_SHA256

    def block_request(self) -> np.ndarray:
        """The request index of every block."""
        return np.repeat(np.arange(self.n_requests), self.lengths)

    def block_times_ms(self) -> np.ndarray:
        return np.repeat(self.timestamps_ms, self.lengths)

    def depths(self) -> np.ndarray:
        """Position of every block inside its request (0 = the first block)."""
        return np.arange(self.n_blocks) - np.repeat(self.offsets[:-1], self.lengths)

    def parents(self) -> np.ndarray:
        """The block before each block in its request (-1 for a first block)."""
        par = np.empty(self.n_blocks, dtype=np.int64)
        if self.n_blocks:
            par[0] = -1
            par[1:] = self.blocks[:-1]
            par[self.offsets[:-1][self.lengths > 0]] = -1
        return par

    def block_tokens(self) -> np.ndarray:
        """Tokens each block holds: block_size, the remainder for a request's last block,
        0 for blocks beyond input_length (a trace whose lengths disagree)."""
        start = self.depths() * self.block_size
        return np.clip(np.repeat(self.input_len, self.lengths) - start, 0, self.block_size)

    def digest(self) -> str:
        """SHA-256 of the block stream and the request boundaries (for derived traces)."""
        h = hashlib.sha256(self.blocks.astype("<i8").tobytes())
        h.update(self.offsets.astype("<i8").tobytes())
        return h.hexdigest()

    def slice(self, start: int, stop: int) -> "KVTrace":
        """Requests start..stop-1 as a trace of their own."""
        stop = min(stop, self.n_requests)
        if not 0 <= start < stop:
            raise BadInput(f"trace slice {start}:{stop} is empty (the trace has {self.n_requests} requests)")
        lo, hi = self.offsets[start], self.offsets[stop]
        return KVTrace(
            f"{self.name}[{start}:{stop}]",
            self.block_size,
            self.timestamps_ms[start:stop],
            self.input_len[start:stop],
            self.output_len[start:stop],
            self.offsets[start : stop + 1] - lo,
            self.blocks[lo:hi],
            self.sha256 if (start, stop) == (0, self.n_requests) else "",
            sessions=None if self.sessions is None else self.sessions[start:stop],
            fmt=self.fmt,
        )


def subset(trace: KVTrace, idx, name: str) -> KVTrace:
    """The requests at the (increasing) positions `idx` as a trace of their own."""
    idx = np.asarray(idx, dtype=np.int64)
    if len(idx) == 0:
        raise BadInput(f"{trace.name}: the selection of requests is empty")
    lens = trace.lengths[idx]
    offsets = np.zeros(len(idx) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    parts = [trace.blocks[trace.offsets[i] : trace.offsets[i + 1]] for i in idx.tolist()]
    blocks = np.concatenate(parts) if parts else trace.blocks[:0]
    return KVTrace(
        name,
        trace.block_size,
        trace.timestamps_ms[idx],
        trace.input_len[idx],
        trace.output_len[idx],
        offsets,
        blocks.astype(np.int64),
        sessions=None if trace.sessions is None else trace.sessions[idx],
        fmt=trace.fmt,
    )


def session_keys(trace: KVTrace) -> np.ndarray:
    """Each request's conversation: the trace's own (Bailian's chat ids, a sessions file's
    names) where it has one, else its session block (its second block, or its only one)."""
    if trace.sessions is not None:
        return trace.sessions
    lens = trace.lengths
    first = trace.offsets[:-1]
    return np.where(
        lens > 1,
        trace.blocks[np.minimum(first + 1, max(trace.n_blocks - 1, 0))],
        np.where(lens > 0, trace.blocks[np.minimum(first, max(trace.n_blocks - 1, 0))], -1),
    )


def session_sample(trace: KVTrace, fraction: float, seed: int) -> KVTrace:
    """Whole conversations, not a time window: the requests whose session block is in a
    seeded random `fraction` of the distinct session blocks. A request's session block is
    its second block (the first block is often a prompt every request shares), or its only
    block. A time window of a few hundred requests holds almost no multi-turn reuse (the
    turns of a conversation are minutes apart); a sample of sessions keeps it. A trace that
    names each request's conversation (Bailian's chat ids) is sampled by it instead."""
    key = session_keys(trace)
    uniq = np.unique(key)
    k = max(1, int(round(fraction * len(uniq))))
    chosen = np.random.default_rng(seed).choice(uniq, size=min(k, len(uniq)), replace=False)
    idx = np.nonzero(np.isin(key, chosen))[0]
    return subset(trace, idx, f"{trace.name} ({100 * fraction:g}% of sessions, seed {seed})")


def _where(path: str, lineno: int, name: str | None = None) -> str:
    return f"{path}: line {lineno}" + (f": field {name!r}" if name else "")


def _shown(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _int_field(path: str, lineno: int, rec: dict, name: str, fields: tuple = FIELDS, low: int = 0) -> int:
    if name not in rec:
        kind = "Bailian" if fields is BAILIAN_FIELDS else "Mooncake"
        raise BadInput(f"{_where(path, lineno)}: no {name!r} field; a {kind} line has {', '.join(fields)}")
    v = rec[name]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadInput(
            f"{_where(path, lineno, name)}: expected a non-negative integer, got "
            f"{type(v).__name__} {_shown(v)}; write the number without quotes"
        )
    if v < low or v > MAX_ID:
        raise BadInput(
            f"{_where(path, lineno, name)}: {_shown(v)} is out of range ({low} to 2^63-1); "
            + ("lengths and times cannot be negative" if low == 0 else "-1 marks a conversation's first request")
        )
    return v


def _seconds_ms(path: str, lineno: int, rec: dict) -> int:
    """A Bailian line's timestamp (seconds since the trace began, a decimal) in whole ms."""
    if "timestamp" not in rec:
        raise BadInput(f"{_where(path, lineno)}: no 'timestamp' field; a Bailian line has {', '.join(BAILIAN_FIELDS)}")
    v = rec["timestamp"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise BadInput(
            f"{_where(path, lineno, 'timestamp')}: expected seconds since the trace began (a number), got "
            f"{type(v).__name__} {_shown(v)}"
        )
    if not 0 <= v <= MAX_ID / 1000 or round(v * 1000) > MAX_ID:  # the bound itself rounds to 2^63 ms
        raise BadInput(f"{_where(path, lineno, 'timestamp')}: {_shown(v)} is out of range; times cannot be negative")
    return int(round(v * 1000))


def _hash_ids(path: str, lineno: int, rec: dict) -> list:
    if "hash_ids" not in rec:
        raise BadInput(f"{_where(path, lineno)}: no 'hash_ids' field; a Mooncake line has {', '.join(FIELDS)}")
    ids = rec["hash_ids"]
    if not isinstance(ids, list):
        raise BadInput(
            f"{_where(path, lineno, 'hash_ids')}: expected a list of block hashes (integers), got "
            f"{type(ids).__name__} {_shown(ids)}"
        )
    for j, h in enumerate(ids):
        if type(h) is not int or not 0 <= h <= MAX_ID:
            raise BadInput(
                f"{_where(path, lineno, 'hash_ids')}: entry {j} is {type(h).__name__} {_shown(h)}; "
                f"every block hash must be an integer from 0 to 2^63-1"
            )
    return ids


def _parse_line(path: str, lineno: int, raw: bytes):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(
            f"{_where(path, lineno)}: not UTF-8 text (byte {e.start}); is this a JSON Lines trace?"
        ) from None
    text = text.strip()
    if not text:
        return None
    if _containers(text) > MAX_CONTAINERS:  # before json, whose parser recurses
        raise BadInput(
            f"{_where(path, lineno)}: more than {MAX_CONTAINERS} JSON lists or objects on one line; "
            f"a Mooncake line is one object with one list (hash_ids)"
        )
    try:
        rec = json.loads(text)
    except (ValueError, RecursionError) as e:
        msg = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
        raise BadInput(
            f"{_where(path, lineno)}: not a JSON object ({msg}); a truncated or corrupted "
            f"line? each line must be one complete JSON object"
        ) from None
    return rec


def _containers(text: str) -> int:
    """The '[' and '{' of a line outside its strings: a prompt's own brackets (code, JSON in a
    text prompt) are text. The strings are taken out only when the plain count is high."""
    n = text.count("[") + text.count("{")
    if n <= MAX_CONTAINERS:
        return n
    bare = JSON_STRING.sub("", text)
    return bare.count("[") + bare.count("{")


def _lines(path: Path, shown: str, digest):
    """(line number, bytes) of every line, refusing lines longer than MAX_LINE_BYTES without
    reading the rest of them."""
    with open(path, "rb") as f:
        lineno = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                raise BadInput(
                    f"{_where(shown, lineno)}: longer than {MAX_LINE_BYTES >> 20} MiB (a hash_ids "
                    f"list of about a million blocks or more, or not a text file); split or fix the line"
                )
            digest.update(raw)
            yield lineno, raw


def load_trace(
    path: str | Path, block_size: int = 512, shown: str | None = None, max_requests: int = 0, fmt: str = "auto"
) -> KVTrace:
    """Read and check a Mooncake- or Bailian-format trace (`fmt`: FORMATS). `shown` is the
    name used in messages; max_requests > 0 reads only the first requests."""
    path = Path(path)
    shown = shown or str(path)
    if path.exists() and not path.is_file():
        raise BadInput(
            f"{shown}: not a regular file (a folder, a device or a FIFO); give a Mooncake-format JSONL trace"
        )
    if not path.is_file():
        raise BadInput(
            f"{shown}: no such file; give a Mooncake-format JSONL trace (relative to the repository or absolute)"
        )
    digest = hashlib.sha256()
    recs = ((n, _parse_line(shown, n, raw)) for n, raw in _lines(path, shown, digest))
    t = _collect(shown, block_size, recs, max_requests, fmt)
    t.name, t.sha256 = path.name, digest.hexdigest() if not max_requests else ""
    return t


def records_trace(records, block_size: int = 512, name: str = "records", fmt: str = "auto") -> KVTrace:
    """A trace from in-memory Mooncake or Bailian records (dicts), checked like a file's
    lines (the record's position, from 1, stands for the line number)."""
    return _collect(name, block_size, enumerate(records, 1), fmt=fmt)


class _Chats:
    """A Bailian trace's conversations: each request's root chat id, from parent_chat_id."""

    def __init__(self, shown: str):
        self.shown = shown
        self.root: dict[int, int] = {}
        self.of_request = array("q")

    def add(self, lineno: int, rec: dict) -> None:
        chat = _int_field(self.shown, lineno, rec, "chat_id", BAILIAN_FIELDS)
        parent = _int_field(self.shown, lineno, rec, "parent_chat_id", BAILIAN_FIELDS, low=-1)
        # a parent not seen before (cut off by a slice of the trace) starts a conversation of its own
        root = self.root.get(parent, parent) if parent >= 0 else chat
        self.root.setdefault(chat, root)
        self.of_request.append(root)


def _format_of(shown: str, fmt: str, rec: dict) -> str:
    if fmt != "auto":
        return fmt
    if "chat_id" in rec and "parent_chat_id" in rec:
        return "bailian"
    return "sessions" if "session" in rec and "prompt" in rec else "mooncake"


def prompt_blocks(tokens, block_size: int) -> list[int]:
    """Prefix hashes of a prompt's blocks (the last one partial): block j's id hashes block
    j-1's id and block j's tokens, 63 bits."""
    ids, prev = [], b""
    for j in range(0, len(tokens), block_size):
        h = hashlib.blake2b(prev + repr(list(tokens[j : j + block_size])).encode(), digest_size=8).digest()
        ids.append(int.from_bytes(h, "big") & MAX_ID)
        prev = h
    return ids


class _Sessions:
    """A sessions file's turns as Mooncake-shaped requests, each with its session."""

    def __init__(self, shown: str, block_size: int):
        self.shown, self.block_size = shown, block_size
        self.number: dict[str, int] = {}
        self.of_request = array("q")

    def request(self, lineno: int, rec: dict) -> dict:
        where = _where(self.shown, lineno)
        for name in ("session", "at_s", "prompt"):
            if name not in rec:
                raise BadInput(f"{where}: no {name!r} field; a sessions line has {', '.join(SESSION_FIELDS)}")
        at, prompt, sid = rec["at_s"], rec["prompt"], rec["session"]
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or not 0 <= at <= 1e12:
            raise BadInput(f"{_where(self.shown, lineno, 'at_s')}: expected seconds >= 0, got {_shown(at)}")
        if isinstance(prompt, str):
            tokens: list | bytes = prompt.encode("utf-8")
        elif isinstance(prompt, list) and all(type(t) is int for t in prompt):
            tokens = prompt
        else:
            raise BadInput(f"{_where(self.shown, lineno, 'prompt')}: expected text or a list of token ids (integers)")
        if not isinstance(sid, (str, int)) or isinstance(sid, bool):
            raise BadInput(f"{_where(self.shown, lineno, 'session')}: expected a text or an integer id")
        out = rec.get("max_tokens", 16)
        self.of_request.append(self.number.setdefault(str(sid), len(self.number)))
        return {
            "timestamp": int(round(at * 1000)),
            "input_length": len(tokens),
            "output_length": out,
            "hash_ids": prompt_blocks(tokens, self.block_size),
        }


def _collect(shown: str, block_size: int, recs, max_requests: int = 0, fmt: str = "auto") -> KVTrace:
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise BadInput(f"block_size must be a positive integer, got {block_size!r}")
    bad_lines: list[int]
    sizes: dict[int, int]
    # 8 bytes a request per column and a block (array('q')), handed to numpy without a copy
    ts, inp, out, lens, flat = (array("q") for _ in range(5))
    bad_lines, n_bad, sizes = [], 0, {}
    prev_ts = None
    chats: _Chats | None = None
    turns: _Sessions | None = None
    if fmt not in FORMATS:
        raise BadInput(f"{shown}: trace format {fmt!r} is not one of {', '.join(FORMATS)}")
    for lineno, rec in recs:
        if rec is None:
            continue
        if not isinstance(rec, dict):
            raise BadInput(
                f"{_where(shown, lineno)}: expected a JSON object with {', '.join(FIELDS)}, got {type(rec).__name__}"
            )
        if not ts:  # the first request decides the format
            fmt = _format_of(shown, fmt, rec)
            chats = _Chats(shown) if fmt == "bailian" else None
            turns = _Sessions(shown, block_size) if fmt == "sessions" else None
            if chats is not None and block_size != BAILIAN_BLOCK_SIZE:
                raise BadInput(
                    f"{shown}: a Bailian-format trace (chat_id, parent_chat_id) has {BAILIAN_BLOCK_SIZE}-token "
                    f"blocks, not {block_size}; set block_size to {BAILIAN_BLOCK_SIZE}"
                )
        if turns is not None:
            rec = turns.request(lineno, rec)
        if chats is not None:
            t = _seconds_ms(shown, lineno, rec)
            chats.add(lineno, rec)
        else:
            t = _int_field(shown, lineno, rec, "timestamp")
        n_in = _int_field(shown, lineno, rec, "input_length")
        n_out = _int_field(shown, lineno, rec, "output_length")
        ids = _hash_ids(shown, lineno, rec)
        if prev_ts is not None and t < prev_ts:
            when = "at_s" if turns is not None else "timestamp"
            raise BadInput(
                f"{_where(shown, lineno, when)}: {rec.get(when, t) if turns is None else t / 1000:g} is earlier "
                f"than the line before; the trace must be sorted by {when} (sort -n by it)"
            )
        prev_ts = t
        if len(ids) != math.ceil(n_in / block_size):
            n_bad += 1
            if len(bad_lines) < 5:
                bad_lines.append(lineno)
            if len(sizes) < 200 and ids:
                for bs in COMMON_BLOCK_SIZES:
                    sizes[bs] = sizes.get(bs, 0) + (len(ids) == math.ceil(n_in / bs))
        ts.append(t)
        inp.append(n_in)
        out.append(n_out)
        lens.append(len(ids))
        flat.extend(ids)
        if max_requests and len(ts) >= max_requests:
            break
    if not ts:
        raise BadInput(
            f"{shown}: no requests (the file is empty or blank); give a Mooncake-format JSONL trace, "
            f"one request per line"
        )
    if not flat:
        raise BadInput(
            f"{shown}: none of its {len(ts)} requests has a KV block (every 'hash_ids' is empty), so "
            f"there is no reuse to measure; give a trace whose requests list their blocks' hashes"
        )
    _refuse_wrong_block_size(shown, block_size, len(ts), n_bad, bad_lines, sizes)
    offsets = np.zeros(len(ts) + 1, dtype=np.int64)
    np.cumsum(_int64(lens), out=offsets[1:])
    of_request = chats.of_request if chats is not None else turns.of_request if turns is not None else None
    return KVTrace(
        shown,
        block_size,
        _int64(ts),
        _int64(inp),
        _int64(out),
        offsets,
        _int64(flat),
        "",
        bad_lines,
        n_bad,
        sessions=None if of_request is None else _int64(of_request)[: len(ts)],
        fmt=fmt,
    )


def _int64(a: array) -> np.ndarray:
    """An array('q') as an int64 numpy array over the same memory (no copy)."""
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, dtype=np.int64)


def _refuse_wrong_block_size(shown: str, block_size: int, n: int, n_bad: int, bad_lines: list, sizes: dict) -> None:
    if n_bad * 2 <= n:
        return
    guess = max(sizes, key=sizes.__getitem__) if sizes and max(sizes.values()) else None
    hint = f"; the lines fit a block size of {guess}" if guess and guess != block_size else ""
    raise BadInput(
        f"{shown}: line {bad_lines[0]}: field 'hash_ids': {n_bad} of {n} requests have a block count "
        f"other than ceil(input_length / {block_size}); set block_size to the trace's block size{hint}"
    )


def unique_blocks(trace: KVTrace) -> KVTrace:
    """The trace with its sharing removed: every block of every request gets an id of its
    own (no two requests, and no two blocks, share one), same lengths and times."""
    return KVTrace(
        f"{trace.name} (sharing removed)",
        trace.block_size,
        trace.timestamps_ms,
        trace.input_len,
        trace.output_len,
        trace.offsets,
        np.arange(trace.n_blocks, dtype=np.int64),
    )


def duplicated(trace: KVTrace) -> KVTrace:
    """Every request followed at once by an exact copy of itself (same time, same blocks):
    the copy's blocks were all used a moment before, so a cache that can hold one request
    hits every block of every copy (a reuse known to be there)."""
    return subset(trace, np.repeat(np.arange(trace.n_requests), 2), f"{trace.name} (each request twice)")


def replayed(trace: KVTrace) -> KVTrace:
    """The whole trace followed by a second pass of itself (times shifted past the first
    pass's end): every block of the second pass was used before, at any distance up to
    the whole trace, so an infinite cache hits all of them (a long-range reuse known to be
    there; the duplicated trace shows only the reuse of the request just before)."""
    t = subset(trace, np.concatenate([np.arange(trace.n_requests)] * 2), f"{trace.name} (replayed twice)")
    shift = int(trace.timestamps_ms[-1] - trace.timestamps_ms[0]) + 1
    t.timestamps_ms[trace.n_requests :] += shift
    return t
