"""The exercise counters' own instrument: known histories with known counts (pure, no I/O).

C20's checks of an absence are evidence only when their exercise counter (conflicting writes,
conflicts refused, reads of new writes on primaries and on replicas) counts the situation it
names. A counter that counts the wrong thing still clears its minimum: races grouped by pair
instead of by (pair, value read) count every write as a race (hundreds with a single writer),
and reads of new writes with the side filter dropped count primary reads as replica reads.
Their minimum alone cannot tell.

So in every run of the case, the same counting code the rules are judged with (the driver's
`exercise_counts`, over history.exercise and history.reads_of_new_writes) is given small
synthetic histories whose counts are known by construction, and each counter's share of known
histories it gets right is a metric: `instrument.COUNTER_known_pct`, 100 when it gives every
known count. A check's exercise evidence holds only at 100.
"""

from __future__ import annotations

import types
from collections import Counter
from collections.abc import Callable

from harness.experiments.prompt_cas.history import APPLIED, ERROR, REFUSED, Attempt, Value

A, B, OTHER = "pp:{k0}", "pp:{k1}", "pp:{canary}"  # two judged pairs and one that is not (the canary's)
SEEDS = {A: "seed.0", B: "seed.1", OTHER: "seed.c"}
COUNTERS = (
    "conflicting_writes",
    "conflicts_refused",
    "reads_of_new_writes",
    "replica_reads_of_new_writes",
    "acked_writes",
    "refused_writes",
)


def _w(key: str, wid: str, parent: str | None, told: str = APPLIED) -> Attempt:
    return Attempt(key, wid, parent, f"p.{wid}", f"r.{wid}", told)


def _v(wid: str) -> Value:
    return Value(wid, f"p.{wid}", f"r.{wid}")


# (what it is, the writers' histories, the readers' changed replies (key, Value, on a replica) -> n,
#  the counts it must give); every history judges the pairs A and B (OTHER stands for the canary)
KNOWN: tuple[tuple[str, list[Attempt], dict, dict[str, int]], ...] = (
    (
        "a serial chain: each write read its predecessor",
        [_w(A, "a1", SEEDS[A]), _w(A, "a2", "a1"), _w(A, "a3", "a2")],
        {},
        {"conflicting_writes": 0, "conflicts_refused": 0, "acked_writes": 3, "refused_writes": 0},
    ),
    (
        "a serial chain whose last write was refused with no race",
        [_w(A, "a1", SEEDS[A]), _w(A, "a2", "a1", REFUSED)],
        {},
        {"conflicting_writes": 0, "conflicts_refused": 0, "acked_writes": 1, "refused_writes": 1},
    ),
    (
        "two writes on one value read, one refused: exactly one conflicting pair",
        [_w(A, "a1", SEEDS[A]), _w(A, "a2", SEEDS[A], REFUSED)],
        {},
        {"conflicting_writes": 1, "conflicts_refused": 1, "acked_writes": 1, "refused_writes": 1},
    ),
    (
        "three writes on one value (one applied, two refused) and one that raised on it",
        [
            _w(A, "a1", SEEDS[A]),
            _w(A, "a2", SEEDS[A], REFUSED),
            _w(A, "a3", SEEDS[A], REFUSED),
            _w(A, "a4", SEEDS[A], ERROR),
        ],
        {},
        {"conflicting_writes": 2, "conflicts_refused": 2, "acked_writes": 1, "refused_writes": 2},
    ),
    (
        "two pairs whose writes read the same write id: no race across pairs",
        [_w(A, "a1", "x"), _w(B, "b1", "x")],
        {},
        {"conflicting_writes": 0, "conflicts_refused": 0, "acked_writes": 2},
    ),
    (
        "a race on a pair that is not judged (the canary's), a serial write on a judged one",
        [_w(OTHER, "c1", SEEDS[OTHER]), _w(OTHER, "c2", SEEDS[OTHER]), _w(A, "a1", SEEDS[A])],
        {},
        {"conflicting_writes": 0, "conflicts_refused": 0, "acked_writes": 1},
    ),
    (
        "a primary-only read log of new writes",
        [_w(A, "a1", SEEDS[A]), _w(B, "b1", SEEDS[B])],
        {(A, _v("a1"), False): 5, (B, _v("b1"), False): 2},
        {"reads_of_new_writes": 7, "replica_reads_of_new_writes": 0},
    ),
    (
        "a replica-only read log of new writes",
        [_w(A, "a1", SEEDS[A])],
        {(A, _v("a1"), True): 4},
        {"reads_of_new_writes": 0, "replica_reads_of_new_writes": 4},
    ),
    (
        "reads of a seed, an unknown id, another pair's write, a gone pair and the canary's write",
        [_w(A, "a1", SEEDS[A]), _w(OTHER, "c1", SEEDS[OTHER])],
        {
            (A, _v(SEEDS[A]), False): 3,
            (A, _v(SEEDS[A]), True): 3,
            (A, _v("zz"), True): 2,
            (B, _v("a1"), False): 2,
            (B, _v("a1"), True): 2,
            (A, None, True): 1,
            (OTHER, _v("c1"), False): 2,
            (OTHER, _v("c1"), True): 2,
        },
        {"reads_of_new_writes": 0, "replica_reads_of_new_writes": 0},
    ),
    (
        "both sides read new writes",
        [_w(A, "a1", SEEDS[A]), _w(A, "a2", "a1")],
        {(A, _v("a1"), False): 1, (A, _v("a2"), False): 2, (A, _v("a1"), True): 3},
        {"reads_of_new_writes": 3, "replica_reads_of_new_writes": 3},
    ),
)


def outcomes(count: Callable) -> list[tuple[str, str, object, int]]:
    """Run `count(tally, real, back)` (the driver's exercise_counts) on every known history:
    (what the history is, counter, what it counted, the known count) for every count a history
    states. A counting function that raises on a history counts nothing there (an error text)."""
    out = []
    for what, attempts, fresh, expected in KNOWN:
        tally = types.SimpleNamespace(history=list(attempts), fresh=Counter(fresh))
        try:
            got = count(tally, [A, B], {"replicas": {A: [], B: []}})
        except Exception as e:  # noqa: BLE001 - a counter that fails on a known history is wrong on it
            got = dict.fromkeys(expected, f"{type(e).__name__}: {e}")
        out += [(what, k, got.get(k), v) for k, v in expected.items()]
    return out


def known_pct(count: Callable) -> dict[str, float]:
    """counter -> % of the known histories stating its count that it counts right; and
    'exercise_counters': % of all the known counts given right."""
    rows = outcomes(count)
    out = {}
    for name in COUNTERS:
        mine = [got == want for _, k, got, want in rows if k == name]
        out[name] = 100.0 * sum(mine) / len(mine)
    out["exercise_counters"] = 100.0 * sum(got == want for *_, got, want in rows) / len(rows)
    return out


def failures(count: Callable) -> list[str]:
    """The known counts a counter got wrong, as 'counter: history (got X, known Y)'."""
    return [f"{k}: {what} (got {got}, known {want})" for what, k, got, want in outcomes(count) if got != want]
