"""One failover run, whatever the fault: the skeleton the kill and the partition cases share.

A run starts from an empty cluster, picks the victim primary (its slots, its replicas),
starts fixed-rate writers and readers and a watcher of the other nodes' views, applies the
fault at t = 0, lets the traffic run to its scheduled end, waits for the cluster to be whole
again, reads every key back and measures the acknowledged writes lost, the outage per slot
range, PFAIL / FAIL / promotion times and the timeline. A fault (`kill.KillRun`,
`partition.CutRun`) says how it is applied and undone and adds what only it has.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass

import redis
from redis.crc import key_slot

from harness.base.errors import BadInput
from harness.experiments.failover import client, measure
from harness.experiments.failover.series import EVENTS, TIMELINE
from harness.experiments.failover.watch import Watcher, node_id, parse_nodes
from harness.model.driver_contract import CaseContext, Metric

WHAT_FIRST = {
    "pfail": "{noun} to PFAIL in another node's view",
    "fail": "{noun} to FAIL in another node's view",
    "promoted": "{noun} to the replica calling itself primary",
}


@dataclass
class Victim:
    addr: tuple[str, int]
    node_id: str
    slots: set[int]
    replicas: set[str]

    @property
    def address(self) -> str:
        return f"{self.addr[0]}:{self.addr[1]}"


def find_victim(addrs: list[tuple[str, int]], timeout: float, index: int = 0) -> Victim:
    """Primary `index` (by address) of the cluster, its slots and its replicas' addresses."""
    r0 = client.Router(addrs, timeout)
    try:
        primaries = sorted({a for a in r0.slots if a})
        addr = primaries[index % len(primaries)]
        slots = {s for s in range(16384) if r0.slots[s] == addr}
    finally:
        r0.close()
    vid = node_id(*addr)
    c = client.plain_client(*addr, 2.0)
    try:
        rows = parse_nodes(c.execute_command("CLUSTER NODES"))
    finally:
        c.close()
    return Victim(addr, vid, slots, {a for _, a, _, primary in rows if primary == vid})


def config_all(addrs, settings: dict) -> None:
    """CONFIG SET on every node that answers (a node that is down gets its config from its
    redis.conf when it is started again)."""
    for host, port in addrs:
        c = client.plain_client(host, port, 2.0)
        try:
            for k, v in settings.items():
                c.config_set(k, v)
        except redis.RedisError:
            pass
        finally:
            c.close()


def flush_primaries(addrs) -> None:
    for host, port in addrs:
        c = client.plain_client(host, port, 5.0)
        try:
            if c.info("replication").get("role") == "master":
                c.flushall()
        finally:
            c.close()


def check_arms(where: str, p: dict) -> None:
    if not p["variants"] and not p["controls"]:
        raise BadInput(f"{where}: give at least one of variants or controls")


def order(variants: list[str], controls: list[str], repetition: int) -> list[str]:
    """The run order of one repetition: variants and controls alternating (a control between
    two variants), the whole sequence rotated by one per repetition."""
    names: list[str] = []
    for i in range(max(len(variants), len(controls))):
        names += variants[i : i + 1] + controls[i : i + 1]
    if not names:
        return []
    k = (repetition - 1) % len(names)
    return names[k:] + names[:k]


def fault_s(given: float | None, p: dict) -> float:
    """How long the fault lasts: `given` seconds, or by default the node timeout x 1.5 + 3 s."""
    return given if given is not None else p["node_timeout_ms"] / 1000 * 1.5 + 3


def own_port(ctx: CaseContext, p: dict) -> int:
    """The case's own nodes' first port: the suite cluster's first (7000 without one) + port_offset."""
    nodes = ctx.target.nodes
    return (min(n.port for n in nodes) if nodes else 7000) + p["port_offset"]


def fmt(m) -> str:
    """A metric's value for the case's log line ('-': none)."""
    if m is None or m.value is None:
        return "-"
    return f"{m.value:.2f}".rstrip("0").rstrip(".")


def ranges(slots: list[int]) -> str:
    out, i = [], 0
    while i < len(slots):
        j = i
        while j + 1 < len(slots) and slots[j + 1] == slots[j] + 1:
            j += 1
        out.append(f"{slots[i]}-{slots[j]}" if j > i else str(slots[i]))
        i = j + 1
    return ",".join(out)


class FaultRun:
    """One variant or control under one fault. Subclasses set the class attributes and the
    hooks; `run()` is the same for every fault."""

    noun = "fault"  # "kill", "cut": the metric notes say "<noun> to PFAIL", ...
    groups: dict[str, str] = {}  # slot-range group label -> metric name part; the first is the victim's
    lead_s = 0.3  # the traffic starts this long after the run is set up
    views_timeout = 2.0
    whole_note = "3 primaries + 3 replicas, links up, after the run"

    def __init__(
        self,
        ctx: CaseContext,
        variant: str,
        p: dict,
        addrs: list[tuple[str, int]],
        faulty: bool,
        fault_s: float,
        after_s: float = 0.0,
        need_replicas: int = 0,
        victim_index: int = 0,
    ):
        self.ctx, self.variant, self.p, self.addrs = ctx, variant, p, list(addrs)
        self.faulty, self.fault_s, self.after_s, self.need = faulty, fault_s, after_s, need_replicas
        self.victim_index = victim_index
        self.timeout = p["client_timeout_ms"] / 1000
        self.hist = client.History()
        self.metrics: dict[str, Metric] = {}
        self.details: dict = {}

    # ---- hooks ---------------------------------------------------------------------------
    def describe(self) -> dict:
        """The run's details known before the traffic."""
        return {}

    def threads(self, router, group_of) -> list[threading.Thread]:
        raise NotImplementedError

    def before_traffic(self) -> None:
        """Anything that must run beside the traffic and start before it."""

    def inject(self) -> None:
        """Apply the fault (t = 0 is taken just before)."""

    def while_faulty(self) -> None:
        """Between the fault and the end of the traffic (a partition heals here)."""

    def after_traffic(self) -> None:
        """The traffic threads have ended."""

    def cleanup(self) -> None:
        """Always, whatever went wrong during the traffic."""

    def wait_whole(self) -> bool:
        raise NotImplementedError

    def after_whole(self) -> None:
        """The cluster was waited for (whole or not); before the keys are read back."""

    def extra_writes(self) -> list:
        return []

    def extra_metrics(self, final: dict) -> dict[str, Metric]:
        return {}

    # ---- the skeleton --------------------------------------------------------------------
    def run(self) -> tuple[dict, dict, dict]:
        """Returns (metrics, series, details)."""
        flush_primaries(self.addrs)
        if self.variant == "min-replicas":
            config_all(self.addrs, {"min-replicas-to-write": 1, "min-replicas-max-lag": self.p["min_replicas_max_lag"]})
        self.victim = find_victim(self.addrs, self.timeout, self.victim_index)
        self.details = self.describe()
        start = time.monotonic() + self.lead_s
        self.t_fault = start + self.p["warm_s"]
        self.end = self.t_fault + self.fault_s + self.after_s
        try:
            self._traffic(start)
        finally:
            self.cleanup()
        self.after_traffic()
        healthy = self.wait_whole()
        self.metrics[f"{self.variant}.healthy_after"] = Metric(1 if healthy else 0, "bool", "higher", self.whole_note)
        agree = healthy and client.views_agree(self.addrs, self.views_timeout)
        self.metrics[f"{self.variant}.slot_views_agree"] = Metric(
            1 if agree else 0, "bool", "higher", "every node reports the same slot map after the heal"
        )
        self.after_whole()
        if self.variant == "min-replicas":
            config_all(self.addrs, {"min-replicas-to-write": 0, "min-replicas-max-lag": 10})
        return self._measure()

    def _group_of(self, key: str) -> str:
        victim_group, other = list(self.groups)[:2]
        return victim_group if key_slot(key.encode()) in self.victim.slots else other

    def _traffic(self, start: float) -> None:
        self.prefix = f"fo:{self.variant}:{self.ctx.repetition}"
        self.start = start

        def router():
            return client.Router(self.addrs, self.timeout)

        threads = self.threads(router, self._group_of)
        self.before_traffic()
        self.watcher = Watcher(self.addrs, self.victim.node_id, self.victim.replicas)
        self.watcher.start()
        try:
            for t in threads:
                t.start()
            time.sleep(max(0.0, self.t_fault - time.monotonic()))
            self.t_fault = time.monotonic()  # t = 0: the fault is applied now
            if self.faulty:
                self.inject()
            self.while_faulty()
            for t in threads:
                t.join()
            self.after_traffic_threads()
        finally:
            self.watcher.stop()

    def after_traffic_threads(self) -> None:
        """The traffic threads have joined; the watcher still runs."""

    def _measure(self) -> tuple[dict, dict, dict]:
        v, m = self.variant, self.metrics
        all_writes = self.hist.writes + self.extra_writes()
        reader = client.Router(self.addrs, self.timeout)
        try:
            final = client.read_back(reader, [w.key for w in all_writes])
        finally:
            reader.close()
        m.update(measure.loss_metrics(v, all_writes, final, self.need))
        m.update(self.extra_metrics(final))
        m.update(measure.outage_metrics(v, all_writes, self.t_fault, self.end, self.groups))
        for what, note in WHAT_FIRST.items():
            t = self.watcher.first.get(what)
            m[f"{v}.{what}_s"] = Metric(
                None if t is None or not self.faulty else t - self.t_fault, "s", "lower", note.format(noun=self.noun)
            )
        m[f"{v}.writes"] = Metric(len(all_writes), "writes")
        m[f"{v}.late_pct"] = Metric(
            100.0 * self.hist.late / len(self.hist.writes) if self.hist.writes else None,
            "%",
            "lower",
            "writes sent more than 50 ms after their scheduled time",
        )
        m[f"{v}.reads_missing"] = Metric(
            sum(1 for _, _, w in self.hist.reads if w == "missing"),
            "reads",
            "lower",
            "reads of an acknowledged key that found nothing",
        )
        series = {
            f"{v}.{TIMELINE.name}": measure.timeline(
                all_writes,
                self.hist.reads,
                self.t_fault,
                -self.p["warm_s"],
                self.fault_s + self.after_s,
                list(self.groups),
                self.need,
            ),
            f"{v}.{EVENTS.name}": measure.events_series(self.watcher.events, self.t_fault),
        }
        self.hist.writes = all_writes
        measure.write_history(self.ctx.raw_path(f"{v}.writes.csv"), self.hist, self.t_fault)
        self.details["watch_polls"] = self.watcher.polls
        self.details["error_kinds"] = dict(Counter(w.error for w in all_writes if not w.ok))
        return m, series, self.details
