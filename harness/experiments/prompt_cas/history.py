"""What each writer was told, checked against what is read back (pure, no I/O).

C20's judged numbers must not come from the mechanism under test: its version vectors, its
counters and its "applied" replies are what a broken CAS would get wrong (a script that
applies every write and stores the element-wise max of the vectors keeps the vectors'
arithmetic consistent and reports no lost update). So every write carries a unique write id,
and its writer records what it read just before (the parent: the write id the pair held),
what it sent and what it was told (applied, refused, error). After the rule each pair is read
back once; its final write id, followed through the writers' recorded parents, gives the
pair's chain back to its seed: the writes whose effect the final value contains (each was
read by the writer of the next one). Then, per pair,

- a write told `applied` and not on the chain is **lost**: an acknowledged update the final
  value does not contain (it was overwritten by a write whose writer never read it);
- a write told `refused` that is on the chain was **refused but applied**;
- a write told `refused` whose parent is the pair's final value was refused with **no
  conflict**: nothing replaced the value it read, so a compare-and-swap had to apply it;
- a final value that no write (or the seed) sent as a whole, or whose chain does not lead to
  the seed, is **foreign**: every acknowledged write of that pair counts as lost.

A pair read by a reader is **mixed** when its response is not its prompt's partner, or when
its (prompt, response) is not what the writer of its write id sent (a torn pair of two
writes, or a value no write sent).
"""

from __future__ import annotations

from dataclasses import dataclass

APPLIED, REFUSED, ERROR = "applied", "refused", "error"


@dataclass(frozen=True)
class Value:
    """A pair as written or read: its write id, prompt and response (None where absent)."""

    wid: str | None
    prompt: str | None
    response: str | None


@dataclass(frozen=True)
class Attempt:
    """One write as its writer saw it."""

    key: str
    wid: str  # unique, sent with the write
    parent: str | None  # the write id the writer read just before sending (None: none read)
    prompt: str
    response: str
    told: str  # APPLIED | REFUSED | ERROR (an exception: not known whether it landed)


@dataclass
class KeyVerdict:
    """One pair's writes judged against its final value."""

    chain: int = 0  # writes whose effect the final value contains (told anything)
    lost: int = 0
    refused_but_applied: int = 0
    unjustified_refusals: int = 0
    foreign: bool = False


def _sent(a: Attempt) -> Value:
    return Value(a.wid, a.prompt, a.response)


def chain_of(key: str, final: Value | None, seed: Value, by_wid: dict[str, Attempt]) -> list[str] | None:
    """The write ids whose effect `final` contains, newest first (the seed excluded); None when
    `final` is foreign: absent, not what its write sent, or its chain never reaches the seed."""
    if final is None:
        return None
    if final.wid == seed.wid:
        return [] if final == seed else None
    a = by_wid.get(final.wid or "")
    if a is None or a.key != key or _sent(a) != final:
        return None
    chain, seen, cur = [], set(), final.wid
    while cur != seed.wid:
        a = by_wid.get(cur or "")
        if a is None or a.key != key or cur in seen:
            return None  # a parent no write of this pair has, or a loop: not a history any writer made
        seen.add(cur)
        chain.append(cur)
        cur = a.parent
    return chain


def judge_key(key: str, attempts: list[Attempt], final: Value | None, seed: Value,
              by_wid: dict[str, Attempt]) -> KeyVerdict:
    """Judge one pair's `attempts` (all of this key) against its final value."""
    chain = chain_of(key, final, seed, by_wid)
    v = KeyVerdict(foreign=chain is None)
    on = set(chain or ())
    v.chain = len(on)
    for a in attempts:
        if a.told == APPLIED and a.wid not in on:
            v.lost += 1
        elif a.told == REFUSED and a.wid in on:
            v.refused_but_applied += 1
        elif a.told == REFUSED and chain is not None and a.parent == final.wid:
            v.unjustified_refusals += 1
    return v


def judge_writes(attempts: list[Attempt], seeds: dict[str, Value],
                 final: dict[str, Value | None]) -> dict[str, KeyVerdict]:
    """Every pair of `seeds` judged: key -> its verdict. A key missing from `final` is gone."""
    by_wid = {a.wid: a for a in attempts}
    per_key: dict[str, list[Attempt]] = {k: [] for k in seeds}
    for a in attempts:
        per_key.setdefault(a.key, []).append(a)
    return {k: judge_key(k, per_key[k], final.get(k), seeds[k], by_wid) for k in seeds}


def mixed(v: Value, partner: dict[str, str], sent: dict[str, Value]) -> bool:
    """A pair as read is mixed: its response is not its prompt's partner, or it is not what the
    write (or seed) of its write id sent. `sent`: write id -> the value that write sent."""
    if v.prompt is None or partner.get(v.prompt) != v.response:
        return True
    return sent.get(v.wid or "") != v
