"""The engines a serving case measures, and what their `/metrics` say around a measurement.

`target.engines` holds "cached" and "uncached" when the harness started them (prefix caching
on and off: the mechanism-off arm), or "external" for a server the user points at (measured as
it is: its configuration is unknown, so the off arm is not measured). Reading the engine's
counters is engine-infra's (harness.infra.serving_engine.metrics); a server without vLLM's counters
gives None, and the case reports those metrics as missing."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, cast

from harness.base.errors import EnvironmentProblem
from harness.infra import serving_engine
from harness.infra.serving_engine.metrics import HITS, QUERIES
from harness.infra.target import LlmEndpoint, Target
from harness.infra.url_redaction import url_for_display
from harness.model.driver_contract import CaseContext, Record

from . import client

# Token counters above 2**53 are no longer exact in a float: deltas of them count nothing.
EXACT = float(2**53)
# The least share of the served prompt tokens an engine caching prefixes must count as queried.
MIN_QUERIED = 0.5


class EngineDown(Exception):
    """An engine a case needs does not answer: the case fails with this reason."""


def fails_when_down(run: Callable[[CaseContext], Record]) -> Callable[[CaseContext], Record]:
    """A case's `run` whose EngineDown is the case's failure, with the engine's reason."""

    @functools.wraps(run)
    def checked(ctx: CaseContext) -> Record:
        try:
            return run(ctx)
        except EngineDown as e:
            return Record("failed", str(e))

    return checked


def pick(target: Target, raw_dir=None) -> tuple[LlmEndpoint, LlmEndpoint | None]:
    """(the prefix-caching-on engine, the off engine or None); the user's server ("external")
    stands for the on engine, and a run with it has no off engine. EngineDown when there is
    no on engine or it does not answer."""
    try:
        on = serving_engine.require_engine(target, "cached", raw_dir)
    except EnvironmentProblem as e:
        raise EngineDown(str(e)) from None
    off = target.engines.get("uncached")
    if off is not None:
        require(off)
    return on, off


def pick_warm(target: Target, raw_dir, log) -> tuple[LlmEndpoint, LlmEndpoint | None]:
    """pick(), then one warm-up request to each engine (its first request is no measurement);
    EngineDown when one does not answer."""
    on, off = pick(target, raw_dir)
    for ep in (on, off):
        if ep is not None:
            warm_up(ep, log)
    return on, off


def pick_off(target: Target, raw_dir=None) -> LlmEndpoint:
    """The engine with prefix caching off where the run has one, else the on engine (pick());
    EngineDown when it does not answer."""
    return require(target.engines.get("uncached") or pick(target, raw_dir)[0])


def require(ep: LlmEndpoint) -> LlmEndpoint:
    """`ep` when it answers and serves its model, else EngineDown saying what is wrong."""
    why = serving_engine.alive(ep)
    if why:
        raise EngineDown(why)
    return ep


@dataclass
class Counters:
    """vLLM's prefix-cache counters (tokens queried, tokens hit) as read, or their deltas
    over a measurement; `problem` says why the deltas are no measurement ("" when they are)."""

    queries: float | None
    hits: float | None
    created: float | None = None  # when the engine (re)created its counters, where it says
    problem: str = ""

    @classmethod
    def read(cls, ep: LlmEndpoint) -> "Counters":
        c = serving_engine.prefix_cache_counters(ep)
        return cls(None, None) if c is None else cls(c["queries"], c["hits"], c.get("created"))

    def delta(self, later: "Counters", served: int = 0, caching_on: bool = False) -> "Counters":
        """later - self; with `problem` set when the two reads cannot be one measurement, or
        (`caching_on`: the engine caches prefixes) when the engine queried its cache for far
        fewer tokens than the `served` prompt tokens it reported between the reads."""
        if self.queries is None or self.hits is None or later.queries is None or later.hits is None:
            return Counters(None, None)
        d = Counters(later.queries - self.queries, later.hits - self.hits)
        d.problem = counter_problem(self, later, d) or (unmoved(d, served) if caching_on else "")
        return d


def counter_problem(before: Counters, after: Counters, d: Counters) -> str:
    """Why the deltas `d` of two reads of the engine's counters are no measurement, or "".
    Counters only grow and hits are a part of queries: a delta below zero (the engine
    restarted or reset them), hits growing faster than queries, or a changed creation time
    (a restart between the reads, even if the counters grew back past the first read)."""
    values = (before.queries, before.hits, after.queries, after.hits)
    reads = (
        f"queries {before.queries:g} -> {after.queries:g}, hits {before.hits:g} -> {after.hits:g}"
        if all(isinstance(v, (int, float)) for v in values)
        else ""
    )
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        return "the engine's prefix-cache counters are not finite numbers"
    nums = cast("tuple[float, float, float, float]", values)  # all numbers: checked just above
    after_queries, after_hits = nums[2], nums[3]
    # d is delta()'s difference of these two reads: numbers too
    d_queries, d_hits = cast(float, d.queries), cast(float, d.hits)
    if min(nums) < 0:
        return f"the engine's prefix-cache counters are below zero ({reads})"
    if not all(float(v).is_integer() and v <= EXACT for v in nums):
        return (
            f"the engine's prefix-cache counters are not whole numbers of tokens ({reads}): token "
            f"counters count one by one, no hit rate can come from them"
        )
    if before.created != after.created:  # changed, or said in one read only: not the same counters
        return (
            f"the engine's prefix-cache counters were re-created during the measurement (the engine "
            f"restarted; {reads}, created {_when(before.created)} -> {_when(after.created)}); rerun the case"
        )
    if d_queries < 0 or d_hits < 0:
        return (
            f"the engine's prefix-cache counters went backwards during the measurement ({reads}): the "
            f"engine restarted or reset them; rerun the case"
        )
    if d_hits > d_queries or after_hits > after_queries:
        return (
            f"the engine counted more prefix-cache hits than queries ({HITS} over {QUERIES}: {reads}), "
            f"a hit rate above 100%: its counters are inconsistent, no hit rate can come from them"
        )
    return ""


def unmoved(d: Counters, served: int) -> str:
    """Why an engine that caches prefixes did not measure the prompt tokens it served, or "":
    vLLM queries its prefix cache for every prompt token of every request, so `served` tokens
    reported by the server with the queries counter grown by less than half of them (frozen
    counters, say) are no hit rate, not a hit rate of 0%."""
    if served > 0 and d.queries is not None and d.queries < MIN_QUERIED * served:
        return (
            f"the engine counted {d.queries:g} queried tokens while serving {served} prompt tokens with "
            f"prefix caching on: its prefix-cache counters do not follow what it serves, no hit rate "
            f"can come from them"
        )
    return ""


def _when(created: float | None) -> str:
    return "not said" if created is None else f"{created:g}"


def hit_pct(d: Counters, prompt_tokens: int) -> float | None:
    """Tokens hit over tokens queried (the engine's own prefix-cache hit rate). An engine with
    prefix caching off may count no queries at all: then the hits (0) are over the prompt
    tokens the server reported serving. None when the server has no counters, or when the
    deltas are no measurement (`d.problem`: the metric is invalid, with that reason)."""
    if d.hits is None or d.problem:
        return None
    denom = d.queries if d.queries else prompt_tokens
    if not denom:
        return None
    pct = 100.0 * d.hits / denom
    return pct if math.isfinite(pct) and 0.0 <= pct <= 100.0 else None


def warm_up(ep: LlmEndpoint, log) -> None:
    """One short request: an engine's first request after start is slow (seconds) and is no
    measurement."""
    res = client.run(ep.base_url, ep.model, [client.Request(0.0, "warm up", 2, "warm-up")], timeout_s=120)
    if res[0].status != "ok":
        raise EngineDown(f"the warm-up request to {url_for_display(ep.base_url)} failed: {res[0].error}")
    log(f"warm-up on {url_for_display(ep.base_url)}: TTFT {res[0].ttft_ms:.0f} ms")
