"""Requests/s per eviction policy on a 1M-request token trace (pytest-benchmark).

Runs only with `make bench` (or pytest --benchmark-enable); the normal test run skips it
because the project's pytest options disable benchmarks.
"""

from __future__ import annotations

import pytest

from harness.mechanisms.cache_policies import sim as simulate
from harness.mechanisms.cache_policies import traces

N_REQUESTS = 1_000_000


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    trace = traces.real_trace(N_REQUESTS, 1)
    nxt = traces.next_access(trace.ids)
    path = simulate.write_oracle_general(tmp_path_factory.mktemp("ev") / "trace.oracleGeneral.bin", trace.ids, nxt)
    cap = simulate.capacities(trace.n_distinct, [0.05])[0]
    return trace, nxt, path, cap


def _skip_unless_enabled(benchmark):
    if benchmark.disabled:
        pytest.skip("benchmarks are disabled in the normal test run; run `make bench` (--benchmark-enable)")


@pytest.mark.parametrize("policy", list(simulate.LIB_POLICIES))
def test_libcachesim_requests_per_second(benchmark, big_trace, policy):
    _skip_unless_enabled(benchmark)
    trace, _, path, cap = big_trace
    miss, _ = benchmark.pedantic(simulate.lib_process_trace, args=(policy, path, cap), rounds=3, iterations=1)
    benchmark.extra_info["requests"] = len(trace)
    benchmark.extra_info["requests_per_s"] = len(trace) / benchmark.stats.stats.median
    assert 0 < miss < 1


@pytest.mark.parametrize("policy", list(simulate.PY_POLICIES))
def test_python_policies_requests_per_second(benchmark, big_trace, policy):
    _skip_unless_enabled(benchmark)
    trace, nxt, _, cap = big_trace
    hits = benchmark.pedantic(simulate.policy_hits, args=(policy, trace.ids, nxt, cap), rounds=1, iterations=1)
    benchmark.extra_info["requests"] = len(trace)
    benchmark.extra_info["requests_per_s"] = len(trace) / benchmark.stats.stats.median
    assert 0 < hits.mean() < 1
