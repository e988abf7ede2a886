"""The simulate case's numbers at the calibrated size besides the policies' own: the size
itself (where exact LRU first reaches the source's LRU figure; the redis cases use it too), the
pure-Python references' numbers there (computed by reference.calibrated_rates), and the stand-ins
with their known-sequence instruments (standin.py) and the fact standin_capacity_ratio."""

from __future__ import annotations

from harness.mechanisms.cache_policies import reference, traces
from harness.mechanisms.cache_policies import sim as simulate
from harness.model.driver_contract import CaseContext, Metric

from . import standin
from .common import percent


def calibrated_capacity(ids, hit_pct: float | None, start: int = 0) -> int | None:
    """The cache size (objects) at which exact LRU reaches `hit_pct` on these requests (from
    `start` on): the source gives no cache size, so its own LRU figure fixes the size at which
    its other figures are judged. None when not asked or not reachable."""

    if hit_pct is None:
        return None
    return simulate.lru_capacity_for(simulate.lru_stack_distances(ids), hit_pct, start)


def standin_metrics(p: dict, ids, tail, cap: int, pre: str, why: str) -> dict[str, Metric]:
    """The stand-ins of C18's checks and their own instruments: the LRU-K stand-in of the hybrid
    at the calibrated size (K = standin_lruk_k), and each stand-in (plain LRU, that LRU-K) on a
    short sequence whose hits and misses are known by construction (standin.py): the share of
    its requests whose outcome is the known one must be 100%."""
    k = p["standin_lruk_k"]
    hits, ran_at = standin.lruk_standin_run(ids, max(1, int(round(cap * p["standin_capacity_ratio"]))), k)
    hr, lt = traces.hit_rates(hits, tail)
    note = f"the hybrid's stand-in: LRU-{k} eviction without its LFU admission (libCacheSim LRUK), " + why
    known = (
        "; the stand-in's instrument: every request of a sequence whose outcome under it is known by "
        f"construction (a cache of {standin.KNOWN_CAPACITY}; harness/experiments/eviction/standin.py)"
    )
    return {
        f"{pre}.calibrated.standin.lruk.hit_rate_pct": percent(hr, note),
        f"{pre}.calibrated.standin.lruk.long_tail_pct": percent(lt, note),
        f"{pre}.calibrated.standin.lruk.capacity_objects": Metric(
            ran_at,
            "tokens",
            None,
            "the size the stand-in LRU-K ran at, as its libCacheSim cache reports it after the replay (cache_size); "
            f"the calibrated size is {cap}: their ratio is the case's fact standin_capacity_ratio, which the ledger "
            "fixes at 1 (its known-sequence instrument runs at a size of its own, so it cannot see this)",
        ),
        f"{pre}.standin.lru.known_sequence_agree_pct": Metric(
            standin.lru_instrument(),
            "% of requests",
            None,
            "plain LRU (the stand-in, the same simulator call as the calibrated sweep's) on a 66-request sequence: "
            "a loop that fits (hits), a loop one key too large (LRU misses all), a hot key between fresh keys "
            "(hits)" + known,
        ),
        f"{pre}.standin.lruk.known_sequence_agree_pct": Metric(
            standin.lruk_instrument(k),
            "% of requests",
            None,
            f"LRU-{k} (the stand-in) on hot keys requested {k} times, a scan of once-requested keys, the hot keys "
            "again (LRU-K keeps them, plain LRU would not)" + known,
        ),
    }


REFERENCE_POLICIES = ("lru", "lfu", "hybrid")  # the policies of the source's figures (C18)


def reference_metrics(ctx: CaseContext, p: dict, ids, nxt, tail, cap: int, policies: list[str], pre: str) -> dict:
    """The same policies at the calibrated size, simulated again by the pure-Python references
    on the same trace: an independent count of the hits the ledger judges, so a simulator that
    forgets or miscounts shows up as a mismatch (as the crosscheck case does on a short trace).
    Every number is computed by reference.calibrated_rates (the module the ledger names as the
    reference, whose imports each run checks); this only stores them as the reference.* metrics.
    `reference_at_calibrated` false skips them."""

    if not p["reference_at_calibrated"]:
        return {}
    m: dict[str, Metric] = {}
    for x, r in reference.calibrated_rates(policies, ids, nxt, tail, cap, p["hybrid_k"]).items():
        note = f"the pure-Python reference ({r['reference']}) on the same trace and size"
        m[f"reference.{pre}.calibrated.{x}.hit_rate_pct"] = percent(r["hit_rate_pct"], note)
        m[f"reference.{pre}.calibrated.{x}.long_tail_pct"] = percent(r["long_tail_pct"], note)
        ctx.log(
            f"reference {x} at {cap}: hit rate {r['hit_rate_pct']:.2f}%, tail {r['long_tail_pct']:.2f}% "
            f"({r['seconds']:.1f} s)"
        )
    return m


def standin_facts(m: dict[str, Metric], pre: str) -> dict:
    """standin_capacity_ratio: the size the LRU-K stand-in ran at (its cache's own report) over
    the calibrated size, rounded to 4 places; the ledger's stand-in params fix it at 1, so a
    stand-in run smaller (weaker) than the hybrid it stands in for is inconclusive. Absent when
    nothing was calibrated (no stand-in ran)."""
    ran, cal = m.get(f"{pre}.calibrated.standin.lruk.capacity_objects"), m.get(f"{pre}.calibrated.capacity_objects")
    if ran is None or ran.value is None or cal is None or not cal.value:
        return {}
    return {"standin_capacity_ratio": round(ran.value / cal.value, 4)}
