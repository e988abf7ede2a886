"""Multi-turn sessions as engine traffic: a seeded generator, and the user's own sessions from
a JSONL file.

**Generated** (`generate`): users arrive as a Poisson process at `users_per_s`. Every prompt
starts with one system prompt shared by all users (`system_tokens`). A user's turn k sends
the system prompt, the whole history so far (each earlier turn's user tokens and the
answer's tokens, `answer_tokens` standing in for what the model said) and the new turn's
`user_tokens`: the history grows each turn, so every turn after the first shares a prefix
with the one before it, and every prompt shares the system prompt. Between a turn's send and
the next one's lies the user's think time (exponential, mean `think_s`); turns per user are
drawn uniformly from `turns`. A prompt over `max_prompt_tokens` keeps the system prompt and
drops the history's oldest tokens, as a chat application does. Token ids are drawn from a seeded generator, so the same
parameters and seed give the same traffic; the parameters are recorded with the run.

**The user's sessions** (`from_jsonl`): one JSON object per line, {"session": ID, "at_s":
seconds, "prompt": text or token ids, "max_tokens": N}; the prompt is sent as it is (it
should hold its own history), at its time.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.base.errors import BadInput
from harness.base.files import read_bounded

from .client import Request

VOCAB_LOW = 1000
MAX_FILE_BYTES = 256 << 20


@dataclass(frozen=True)
class SessionSpec:
    users: int = 8
    users_per_s: float = 0.5
    turns: tuple[int, int] = (2, 5)
    system_tokens: int = 256
    user_tokens: int = 48
    answer_tokens: int = 32
    think_s: float = 2.0
    output_tokens: int = 8
    max_prompt_tokens: int = 2048
    vocab_high: int = 49152
    seed: int = 0

    def record(self) -> dict:
        return asdict(self)


def _tokens(rng: random.Random, n: int, high: int) -> list[int]:
    return [rng.randrange(VOCAB_LOW, high) for _ in range(n)]


def generate(spec: SessionSpec) -> list[Request]:
    """Every turn of every user, in send order; tag 'session-U/turn-K'."""
    rng = random.Random(spec.seed)
    system = _tokens(rng, spec.system_tokens, spec.vocab_high)
    out: list[Request] = []
    arrival = 0.0
    for u in range(spec.users):
        arrival += rng.expovariate(spec.users_per_s) if u else 0.0
        history: list[int] = []
        at = arrival
        for k in range(rng.randint(*spec.turns)):
            history += _tokens(rng, spec.user_tokens, spec.vocab_high)
            room = max(0, spec.max_prompt_tokens - len(system))  # a long history loses its oldest turns
            prompt = system + (history[-room:] if room else [])
            out.append(Request(at, prompt, spec.output_tokens, f"session-{u}/turn-{k}"))
            history += _tokens(rng, spec.answer_tokens, spec.vocab_high)
            at += rng.expovariate(1 / spec.think_s) if spec.think_s > 0 else 0.0
    return sorted(out, key=lambda r: r.at_s)


def shared_prefix_tokens(requests: list[Request]) -> int:
    """Prompt tokens that repeat the start of an earlier prompt (what a prefix cache can
    reuse at most, ignoring evictions and block rounding)."""
    seen: list[list[int]] = []
    total = 0
    for r in requests:
        p = list(r.prompt) if not isinstance(r.prompt, str) else []
        best = 0
        for q in seen:
            n = 0
            for a, b in zip(p, q):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        total += best
        seen.append(p)
    return total


def from_jsonl(path: Path, default_max_tokens: int = 16) -> list[Request]:
    """The user's sessions; BadInput on a line that is not one (its number, what is wrong, the fix)."""
    raw = read_bounded(path, MAX_FILE_BYTES, "a sessions file", "give a JSONL file of {session, at_s, prompt}")
    out = []
    for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            at, prompt = float(d["at_s"]), d["prompt"]
            tokens = int(d.get("max_tokens", default_max_tokens))
        except (ValueError, KeyError, TypeError) as e:
            raise BadInput(
                f"{path} line {n}: not a session turn ({type(e).__name__}: {str(e)[:80]}); each line is "
                f'{{"session": ID, "at_s": seconds, "prompt": text or token ids, "max_tokens": N}}'
            ) from None
        if not (isinstance(prompt, str) or (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt))):
            raise BadInput(f"{path} line {n}: prompt must be text or a list of token ids")
        if at < 0 or tokens < 1:
            raise BadInput(f"{path} line {n}: at_s must be >= 0 and max_tokens >= 1")
        out.append(Request(at, prompt, tokens, f"session-{d.get('session', '?')}"))
    if not out:
        raise BadInput(f"{path}: no session turns in it; give one JSON object per line")
    return sorted(out, key=lambda r: r.at_s)
