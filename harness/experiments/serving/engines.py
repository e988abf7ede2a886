"""The engines a serving case measures, and what their `/metrics` say around a measurement.

`target.engines` holds "cached" and "uncached" when the harness started them (prefix caching
on and off: the mechanism-off arm), or "external" for a server the user points at (measured as
it is: its configuration is unknown, so the off arm is not measured). Reading the engine's
counters is engine-infra's (harness.serving_engine.metrics); a server without vLLM's counters
gives None, and the case reports those metrics as missing."""

from __future__ import annotations

from dataclasses import dataclass

from harness import serving_engine
from harness.errors import EnvironmentProblem
from harness.process import url_for_display
from harness.target import LlmEndpoint, Target

from . import client


class EngineDown(Exception):
    """An engine a case needs does not answer: the case fails with this reason."""


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


def require(ep: LlmEndpoint) -> LlmEndpoint:
    """`ep` when it answers and serves its model, else EngineDown saying what is wrong."""
    why = serving_engine.alive(ep)
    if why:
        raise EngineDown(why)
    return ep


@dataclass
class Counters:
    queries: float | None
    hits: float | None

    @classmethod
    def read(cls, ep: LlmEndpoint) -> "Counters":
        c = serving_engine.prefix_cache_counters(ep)
        return cls(None, None) if c is None else cls(c["queries"], c["hits"])

    def delta(self, later: "Counters") -> "Counters":
        if None in (self.queries, self.hits, later.queries, later.hits):
            return Counters(None, None)
        return Counters(later.queries - self.queries, later.hits - self.hits)


def hit_pct(d: Counters, prompt_tokens: int) -> float | None:
    """Tokens hit over tokens queried (the engine's own prefix-cache hit rate). An engine with
    prefix caching off may count no queries at all: then the hits (0) are over the prompt
    tokens the server reported serving. None when the server has no counters."""
    if d.hits is None:
        return None
    denom = d.queries if d.queries else prompt_tokens
    return 100.0 * d.hits / denom if denom else None


def warm_up(ep: LlmEndpoint, log) -> None:
    """One short request: an engine's first request after start is slow (seconds) and is no
    measurement."""
    res = client.run(ep.base_url, ep.model, [client.Request(0.0, "warm up", 2, "warm-up")], timeout_s=120)
    if res[0].status != "ok":
        raise EngineDown(f"the warm-up request to {url_for_display(ep.base_url)} failed: {res[0].error}")
    log(f"warm-up on {url_for_display(ep.base_url)}: TTFT {res[0].ttft_ms:.0f} ms")
