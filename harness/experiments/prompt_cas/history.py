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


def chain_of(key: str, final: Value | None, seed: Value, by_wid: dict[str, Attempt]) -> list[str | None] | None:
    """The write ids whose effect `final` contains, newest first (the seed excluded); None when
    `final` is foreign: absent, not what its write sent, or its chain never reaches the seed."""
    if final is None:
        return None
    if final.wid == seed.wid:
        return [] if final == seed else None
    a = by_wid.get(final.wid or "")
    if a is None or a.key != key or _sent(a) != final:
        return None
    chain: list[str | None] = []
    seen: set[str | None] = set()
    cur = final.wid
    while cur != seed.wid:
        a = by_wid.get(cur or "")
        if a is None or a.key != key or cur in seen:
            return None  # a parent no write of this pair has, or a loop: not a history any writer made
        seen.add(cur)
        chain.append(cur)
        cur = a.parent
    return chain


def judge_key(
    key: str, attempts: list[Attempt], final: Value | None, seed: Value, by_wid: dict[str, Attempt]
) -> KeyVerdict:
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
        elif a.told == REFUSED and chain is not None and final is not None and a.parent == final.wid:
            v.unjustified_refusals += 1
    return v


def judge_writes(
    attempts: list[Attempt], seeds: dict[str, Value], final: dict[str, Value | None]
) -> dict[str, KeyVerdict]:
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


@dataclass
class Exercise:
    """What the writers' histories say happened to a rule's pairs, whatever the mechanism did:
    the situations in which a CAS matters, counted from what each writer read before sending
    (the write id in the server's reply) and what it was told, never from the vectors or the
    script's own bookkeeping.

    - `acked`: writes told applied (what a lost-update count is out of);
    - `refused`: writes told refused (what a refusal check is out of);
    - `conflicting`: writes that raced another: per value read (a pair's write id), every write
      sent on it but one. Two writes that read the same value conflict, and a compare-and-swap
      may apply at most one of them; without such races no update can be lost;
    - `conflicts_refused`: writes told refused that read the same value as another write sent:
      conflicting writes that reached the CAS and were refused.
    Writes that raised (not known whether they reached the server) count nowhere."""

    acked: int = 0
    refused: int = 0
    conflicting: int = 0
    conflicts_refused: int = 0


def exercise(attempts: list[Attempt], keys) -> Exercise:
    """The writers' histories of the pairs `keys`, counted as in Exercise."""
    keys = set(keys)
    sent = [a for a in attempts if a.key in keys and a.told in (APPLIED, REFUSED)]
    groups: dict[tuple, list[Attempt]] = {}
    for a in sent:
        if a.parent is not None:
            groups.setdefault((a.key, a.parent), []).append(a)
    out = Exercise(acked=sum(a.told == APPLIED for a in sent), refused=sum(a.told == REFUSED for a in sent))
    for group in groups.values():
        if len(group) > 1:
            out.conflicting += len(group) - 1
            out.conflicts_refused += sum(a.told == REFUSED for a in group)
    return out


def reads_of_new_writes(fresh, writes: dict[str, str], replica: bool) -> int:
    """Reads that returned a write made in this run, on replicas (`replica`) or on primaries.
    `fresh` counts, per (key, Value read, on a replica), the reads whose value differed from the
    same reader's previous read of that pair on that side (the server's reply changed between
    two reads; a client-side copy never changes); `writes` maps the write ids the writers sent
    to their pairs. A read of a seed, of a value no writer sent, or of a pair that write was
    not sent to counts nothing."""
    return sum(
        n for (key, v, rep), n in fresh.items() if rep == replica and v is not None and writes.get(v.wid or "") == key
    )
