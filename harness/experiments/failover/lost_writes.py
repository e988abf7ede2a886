"""The history checker: which acknowledged writes survived a failover (pure, no I/O).

A history is every write a client sent: its key, its unique value, the client and its
sequence number, when it was sent and answered, and how it ended. After the run every key
is read back from the healed cluster; each acknowledged write is then

- `present`: the key holds its value;
- `overwritten`: the key holds the value of another write that does not precede it (a later
  write of the same client, or any write not answered before this one was sent);
- `lost`: the key is gone, holds the value of a write that precedes it, or a value no
  client wrote.

A write is acknowledged when the server answered OK and, where the client asked for
replica acknowledgements (`WAIT n`), at least that many replicas confirmed it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PRESENT, LOST, OVERWRITTEN = "present", "lost", "overwritten"


@dataclass(frozen=True)
class Write:
    client: str
    seq: int
    key: str
    value: str
    sent: float  # seconds (any common clock)
    done: float
    ok: bool  # the server answered OK
    replicas: int | None = None  # WAIT's answer; None when the client did not ask
    error: str = ""  # the error kind when not ok (timeout, refused, clusterdown, ...)
    group: str = ""  # the slot range (by its first owner) the key belongs to

    def acknowledged(self, need_replicas: int = 0) -> bool:
        if not self.ok:
            return False
        if need_replicas <= 0:
            return True
        return self.replicas is not None and self.replicas >= need_replicas

    def precedes(self, other: "Write") -> bool:
        """Known to happen before `other`: same client with a lower sequence, or answered
        before `other` was sent."""
        if self.client == other.client:
            return self.seq < other.seq
        return self.done < other.sent


@dataclass
class WriteCounts:
    counts: dict[str, int]  # present / lost / overwritten among acknowledged writes
    lost: list[Write]
    acknowledged: int
    unacknowledged_present: int  # failed or unreplicated writes that nevertheless landed
    foreign_values: int  # keys holding a value no write of the history has

    @property
    def lost_pct(self) -> float | None:
        return 100.0 * len(self.lost) / self.acknowledged if self.acknowledged else None


def classify(writes: list[Write], final: dict[str, str | None], need_replicas: int = 0) -> WriteCounts:
    """Classify every acknowledged write against the final contents `final` (key -> value
    or None). A key missing from `final` counts as gone."""
    by_value: dict[tuple[str, str], Write] = {}
    for w in writes:
        by_value[(w.key, w.value)] = w
    counts = {PRESENT: 0, LOST: 0, OVERWRITTEN: 0}
    lost: list[Write] = []
    acked = unacked_present = foreign = 0
    seen_foreign: set[str] = set()
    for w in writes:
        v = final.get(w.key)
        if not w.acknowledged(need_replicas):
            if v == w.value:
                unacked_present += 1
            continue
        acked += 1
        if v == w.value:
            counts[PRESENT] += 1
            continue
        other = by_value.get((w.key, v)) if v is not None else None
        if other is not None and not other.precedes(w):
            counts[OVERWRITTEN] += 1
            continue
        if v is not None and other is None and w.key not in seen_foreign:
            seen_foreign.add(w.key)
            foreign += 1
        counts[LOST] += 1
        lost.append(w)
    return WriteCounts(counts, lost, acked, unacked_present, foreign)


def bins(
    writes: list[Write],
    t0: float,
    start: float,
    end: float,
    width: float = 0.1,
    need_replicas: int = 0,
    groups: list[str] | None = None,
) -> dict[str, list]:
    """Per `width` seconds from `start` to `end` (relative to t0, by send time): writes
    acknowledged, failed (and of those, timed out), and failed per slot-range group;
    columns of equal length."""
    n = max(1, int(math.ceil((end - start) / width - 1e-9)))
    groups = groups if groups is not None else sorted({w.group for w in writes})
    out: dict[str, list] = {
        "t": [round(start + i * width, 3) for i in range(n)],
        "acked": [0] * n,
        "errors": [0] * n,
        "timeouts": [0] * n,
    }
    for g in groups:
        out[f"errors.{g}"] = [0] * n
        out[f"sent.{g}"] = [0] * n
    for w in writes:
        k = int(math.floor((w.sent - t0 - start) / width))
        if not 0 <= k < n:
            continue
        if w.group in groups:
            out[f"sent.{w.group}"][k] += 1
        if w.acknowledged(need_replicas):
            out["acked"][k] += 1
        elif not w.ok:
            out["errors"][k] += 1
            if w.error == "timeout":
                out["timeouts"][k] += 1
            if w.group in groups:
                out[f"errors.{w.group}"][k] += 1
    return out


@dataclass
class Outage:
    first_error: float | None  # seconds after t0 (send time of the first failed write)
    last_error: float | None  # answer time of the last failed write
    recovered: float | None  # first acknowledged write after which none failed (answer time)
    errors: int
    sent: int

    @property
    def window(self) -> float:
        if self.first_error is None or self.last_error is None:
            return 0.0
        return max(0.0, self.last_error - self.first_error)

    @property
    def error_pct(self) -> float | None:
        return 100.0 * self.errors / self.sent if self.sent else None


def outage(writes: list[Write], t0: float, group: str | None = None) -> Outage:
    """The client-side outage of one slot-range group (all writes when None) after t0:
    from the first failed write to the last, and when writes succeeded again for good."""
    ws = sorted((w for w in writes if w.sent >= t0 and (group is None or w.group == group)), key=lambda w: w.sent)
    failed = [w for w in ws if not w.ok]
    first = failed[0].sent - t0 if failed else None
    last = max(w.done for w in failed) - t0 if failed else None
    recovered = None
    if failed:
        last_fail_sent = max(w.sent for w in failed)
        after = [w for w in ws if w.ok and w.sent > last_fail_sent]
        recovered = min(w.done for w in after) - t0 if after else None
    elif ws:
        recovered = 0.0
    return Outage(first, last, recovered, len(failed), len(ws))
