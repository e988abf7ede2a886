"""A slice of a Mooncake-format trace as engine traffic: token-id prompts built from the hash
ids, and the engine blocks the simulator predicts on.

Scaling (every factor is recorded with the case):
- each hash id becomes a fixed run of `tokens_per_hash` token ids, drawn once from a seeded
  generator keyed by (salt, hash id), so equal hash ids give equal tokens (the trace's 512
  tokens per hash id become `tokens_per_hash`: lengths scale by tokens_per_hash / 512);
- a prompt is cut at `max_prompt_tokens` (the engine's context is small here);
- every prompt ends with `tail_tokens` tokens of its own (unique per request), so that no
  prompt is entirely a repeat (an engine always computes a prompt's last token, which would
  otherwise turn a fully cached last block into a miss the simulator does not see);
- timestamps are rebased to 0 and scaled to span `duration_s`.

The engine caches whole blocks of `engine_block` tokens. An engine block's identity is the hash
id that holds its last token (with that token's position in the hash id's run): by the trace's
rule, equal hash ids mean equal prefixes up to and including that run, so two prompts share an
engine block exactly when these identities agree. A block that holds tail tokens is unique. The
simulator replays those block identities with the engine's block size.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from harness.base.errors import BadInput

from .client import Request

VOCAB_LOW = 1000  # token ids drawn from [VOCAB_LOW, vocab_high): clear of special and byte tokens
MOONCAKE_BLOCK = 512
TAIL_ID_BASE = 1 << 62  # identities of blocks holding a request's own tail (never shared)
MAX_TOKENS_PER_HASH = 1 << 16  # the largest block size an engine reports (harness.infra.serving_engine.metrics)


@dataclass
class Scaled:
    requests: list[Request]
    records: list[dict]  # Mooncake records of engine blocks, for the simulator (block_size = engine_block)
    prompt_tokens: int
    span_s: float
    time_scale: float  # replay seconds per trace second
    length_scale: float  # prompt tokens per trace token


def _run_of(salt: int, hash_id: int, n: int, vocab_high: int) -> list[int]:
    rng = random.Random(f"{salt}:{hash_id}")
    return [rng.randrange(VOCAB_LOW, vocab_high) for _ in range(n)]


def check_block(tokens_per_hash: int, engine_block: int, server: str = "", case: str = "") -> None:
    """BadInput unless `tokens_per_hash` divides `engine_block` or is a multiple of it (else a
    hash id's sharing does not line up with the engine's blocks). `server` (its URL as it may
    be shown) when the block size is that server's own (its /metrics), else it is the case's
    `engine_block` parameter; `case` names the parameters as `--set` takes them. The line says
    whose number the block size is and the nearest tokens_per_hash that fits it: 1 divides
    every block size, so some value of the user's always does."""
    if not (tokens_per_hash % engine_block and engine_block % tokens_per_hash):
        return
    key = f"{case}." if case else ""
    fit = fitting_tokens_per_hash(tokens_per_hash, engine_block)
    fix = (
        f"give --set {key}tokens_per_hash={fit} (the nearest divisor or multiple of {engine_block}; any "
        f"other divisor or multiple fits too)"
    )
    if server:
        raise BadInput(
            f"the serving engine at {server} reports block_size={engine_block} (vllm:cache_config_info "
            f"on its /metrics), and {key}tokens_per_hash={tokens_per_hash} neither divides it nor is a "
            f"multiple of it, so a hash id's sharing would not line up with the engine's blocks; {fix}"
        )
    raise BadInput(
        f"{key}tokens_per_hash={tokens_per_hash} and {key}engine_block={engine_block} (the engine's "
        f"block size; its /metrics does not say one): one must divide the other, else a hash id's "
        f"sharing does not line up with the engine's blocks; {fix}, or give the engine's real block "
        f"size as {key}engine_block"
    )


def fitting_tokens_per_hash(tokens_per_hash: int, engine_block: int) -> int:
    """The value nearest `tokens_per_hash` that divides `engine_block` or is a multiple of it
    (the smaller of two as near), at most MAX_TOKENS_PER_HASH: 1 at worst. Divisors are looked
    for up to 2**16 only, so the time is bounded whatever the numbers."""
    fits = {
        engine_block * max(1, tokens_per_hash // engine_block),
        engine_block * (tokens_per_hash // engine_block + 1),
    }
    for d in range(1, min(math.isqrt(engine_block), 1 << 16) + 1):
        if engine_block % d == 0:
            fits.update((d, engine_block // d))
    return min((v for v in fits if v <= MAX_TOKENS_PER_HASH), key=lambda v: (abs(v - tokens_per_hash), v))


def block_ids(
    hash_ids: list[int], n_prompt: int, n_tail: int, tokens_per_hash: int, engine_block: int, request_index: int
) -> list[int]:
    """The identities of a prompt's engine blocks (see the module's docstring)."""
    out = []
    n_blocks = -(-n_prompt // engine_block)
    for k in range(n_blocks):
        last = min((k + 1) * engine_block, n_prompt) - 1
        if last >= n_prompt - n_tail:
            out.append(TAIL_ID_BASE + request_index * 4096 + k)
        else:
            h = hash_ids[last // tokens_per_hash]
            out.append(int(h) * tokens_per_hash + last % tokens_per_hash)
    return out


def scale(
    records: list[dict],
    *,
    tokens_per_hash: int,
    engine_block: int,
    max_prompt_tokens: int,
    tail_tokens: int,
    duration_s: float,
    output_tokens: int,
    salt: int,
    vocab_high: int,
    tag: str = "",
) -> Scaled:
    """Prompts and schedule of `records` (Mooncake dicts) scaled for the engine."""
    check_block(tokens_per_hash, engine_block)
    if not records:
        raise BadInput("the trace slice is empty; choose more requests or another session sample")
    t0 = records[0]["timestamp"]
    span_ms = max(1, records[-1]["timestamp"] - t0)
    time_scale = duration_s / (span_ms / 1000) if len(records) > 1 else 1.0
    reqs, sim, total = [], [], 0
    for i, rec in enumerate(records):
        ids = list(rec["hash_ids"])
        body = min(
            -(-rec["input_length"] * tokens_per_hash // MOONCAKE_BLOCK),
            len(ids) * tokens_per_hash,
            max_prompt_tokens - tail_tokens,
        )
        tokens: list[int] = []
        for h in ids[: -(-body // tokens_per_hash)]:
            tokens.extend(_run_of(salt, h, tokens_per_hash, vocab_high))
        tokens = tokens[:body] + random.Random(f"{salt}:tail:{i}").choices(range(VOCAB_LOW, vocab_high), k=tail_tokens)
        at = (rec["timestamp"] - t0) / 1000 * time_scale
        reqs.append(Request(at, tokens, output_tokens, tag))
        sim.append(
            {
                "timestamp": int(rec["timestamp"]),
                "input_length": len(tokens),
                "output_length": output_tokens,
                "hash_ids": block_ids(ids, len(tokens), tail_tokens, tokens_per_hash, engine_block, i),
            }
        )
        total += len(tokens)
    in_total = sum(min(r["input_length"], len(r["hash_ids"]) * MOONCAKE_BLOCK) for r in records)
    return Scaled(reqs, sim, total, reqs[-1].at_s, time_scale, total / max(1, in_total))


def repeated_prefix(
    n: int,
    prefix_tokens: int,
    tail_tokens: int,
    gap_s: float,
    output_tokens: int,
    salt: int,
    vocab_high: int,
    tag: str = "instrument",
) -> list[Request]:
    """The instrument: one long prefix asked `n` times, each with a tail of its own."""
    prefix = _run_of(salt, -1, prefix_tokens, vocab_high)
    return [
        Request(
            i * gap_s,
            prefix + random.Random(f"{salt}:itail:{i}").choices(range(VOCAB_LOW, vocab_high), k=tail_tokens),
            output_tokens,
            tag,
        )
        for i in range(n)
    ]
