"""Speed of the prefix-cache simulator (pytest-benchmark; issue 22, issue 45).

- Block lookups/s per policy on the whole Mooncake conversation trace (288,500 lookups) at a
  3M-token cache, prefix rule included, on both engines side by side: the compiled loops
  (numba) must reach 5M lookups/s for every policy and 20M/s for LRU; the pure-Python engine
  (libCacheSim's policies called once per lookup, and this package's Python loops) is
  measured beside them, its rate and the speed-up go to extra_info.
- The suite's full capacity sweep of that trace (every default policy at every default
  capacity: 81 simulated points, 23.4M lookups) in at most 2 s.
- LRU at one capacity on a synthetic 10M-request Mooncake-shaped trace (about 240M lookups,
  synth.py, held in memory) in under 15 s, the dense id mapping and the prefix rule included.

Runs only with `make bench` (or pytest --benchmark-enable); the normal test run skips it.
"""

from __future__ import annotations

import time

import pytest

from harness.base.paths import REPO_ROOT
from harness.experiments.kv_trace import analyses, drivers, synth
from harness.mechanisms.kv_blocks import policies, prefix
from harness.mechanisms.kv_blocks.trace import load_trace

CAPACITY_BLOCKS = 3_000_000 // 512
EVERY_POLICY = 5_000_000  # block lookups/s of the compiled loops (issue 45)
LRU = 20_000_000
SWEEP_S = 2.0
BIG_REQUESTS, BIG_S = 10_000_000, 15.0


@pytest.fixture(scope="module")
def stream():
    t = load_trace(REPO_ROOT / "data/mooncake/conversation_trace.jsonl", 512)
    s = policies.Stream(t)
    _ = s.ids, s.times, s.parents, s.depths, s.next_use  # built once, not timed
    policies.prepare(s)
    return s


def _skip_unless_enabled(benchmark):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")


def _simulate(s, name, engine):
    return prefix.rates(s.trace, policies.block_hits(s, name, CAPACITY_BLOCKS, engine=engine))


def _rate(s, name, engine, rounds):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        r = _simulate(s, name, engine)
        best = min(best, time.perf_counter() - t0)
    return s.trace.n_blocks / best, r


@pytest.mark.parametrize("name", list(policies.ALL_POLICIES))
def test_block_lookups_per_second(benchmark, stream, name):
    _skip_unless_enabled(benchmark)
    r = benchmark.pedantic(_simulate, args=(stream, name, "compiled"), rounds=5, iterations=1)
    rate = stream.trace.n_blocks / benchmark.stats.stats.median
    py_rate, py = _rate(stream, name, "python", 1)  # side by side, same session
    benchmark.extra_info.update(
        {
            "block_lookups": stream.trace.n_blocks,
            "lookups_per_s": rate,
            "python_lookups_per_s": py_rate,
            "speedup": rate / py_rate,
            "engine": policies.engine_description("compiled"),
        }
    )
    assert r.token == py.token and 0 < r.token < 0.3737  # the same hits; below the trace's maximum (37.36%)
    assert rate >= (LRU if name == "lru" else EVERY_POLICY), f"{name}: {rate / 1e6:.1f}M lookups/s"


def test_the_full_capacity_sweep(benchmark, stream):
    _skip_unless_enabled(benchmark)
    t = stream.trace
    rows, rps = benchmark.pedantic(
        analyses.curve,
        args=(t, stream, drivers.DEFAULT_CAPACITIES, drivers.DEFAULT_POLICIES),
        kwargs={"log": lambda m: None},
        rounds=3,
        iterations=1,
    )
    simulated = sum(r["simulated"] for r in rows)
    benchmark.extra_info.update(
        {
            "simulated_points": simulated,
            "block_lookups": simulated * t.n_blocks,
            "lookups_per_s": {k: round(v) for k, v in rps.items()},
        }
    )
    assert simulated == 81
    assert benchmark.stats.stats.median <= SWEEP_S


@pytest.fixture(scope="module")
def big():
    t0 = time.perf_counter()
    t = synth.synthetic_trace(BIG_REQUESTS, seed=0)
    return t, time.perf_counter() - t0


def _lru_on(t):
    s = policies.Stream(t)  # the dense mapping is timed too
    return prefix.rates(t, policies.block_hits(s, "lru", 1_000_000))


def test_lru_on_a_10m_request_trace(benchmark, big):
    _skip_unless_enabled(benchmark)
    t, made_s = big
    r = benchmark.pedantic(_lru_on, args=(t,), rounds=1, iterations=1)
    took = benchmark.stats.stats.median
    benchmark.extra_info.update(
        {
            "requests": t.n_requests,
            "block_lookups": t.n_blocks,
            "generated_in_s": made_s,
            "lookups_per_s": t.n_blocks / took,
            "token_hit_pct": 100 * r.token,
        }
    )
    assert t.n_requests == BIG_REQUESTS and 200e6 < t.n_blocks < 280e6
    assert 0 < r.token < 1 and took < BIG_S
