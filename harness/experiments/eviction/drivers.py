"""Harness drivers of the eviction experiment (suite `eviction`); each case's code is in its own
module, which registers nothing:

eviction-trace          trace_case.py: the real token trace: Zipf fit, head, head share (C19)
eviction-simulate       simulate_case.py (and calibrated_size.py): libCacheSim + hybrid + OPT across
                        cache sizes (C18, simulated)
eviction-crosscheck     crosscheck_case.py: every simulated policy against cache_policies/reference.py on a short trace
eviction-redis          redis_case.py: real redis-server per maxmemory-policy and knob (standalone)
eviction-redis-cluster  redis_case.py: the same replay on the target Redis Cluster (maxmemory per node)

What the cases share (the trace parameters, the trace) is in common.py. Drivers return metrics
and series; the suite's view (harness/experiments/eviction/view.py) builds the tables and charts
and takes the source's numbers from the ledger (C18 figures). Controls: seeded random eviction on
the same trace and sizes (simulate), allkeys-random on the same replay (redis), and the head share
of a uniform trace over the same tokens (trace).
"""

from __future__ import annotations

from harness.experiments.eviction import crosscheck_case, metrics, redis_case, simulate_case, trace_case
from harness.experiments.eviction.common import TRACE_PARAMS, check_trace
from harness.model.driver_contract import CaseContext, Record, register


@register(
    "eviction-trace",
    params=dict(TRACE_PARAMS, **trace_case.TRACE_CASE_PARAMS),
    check=check_trace,
    description="token trace statistics: fitted Zipf exponent, head size and head share (C19)",
    metrics=metrics.TRACE,
)
def run_trace(ctx: CaseContext) -> Record:
    return trace_case.run_trace(ctx)


@register(
    "eviction-simulate",
    params=simulate_case.SIM_PARAMS,
    check=simulate_case.check_sim,
    description="libCacheSim policies, the hybrid and Belady's OPT across cache sizes on a token trace",
    metrics=metrics.SIMULATE,
)
def run_simulate(ctx: CaseContext) -> Record:
    return simulate_case.run_simulate(ctx)


@register(
    "eviction-crosscheck",
    params=crosscheck_case.CROSS_PARAMS,
    check=check_trace,
    description="libCacheSim and the fast hybrid/OPT against the pure-Python references, request by request",
    metrics=metrics.CROSSCHECK,
)
def run_crosscheck(ctx: CaseContext) -> Record:
    return crosscheck_case.run_crosscheck(ctx)


@register(
    "eviction-redis",
    params=redis_case.REDIS_PARAMS,
    check=redis_case.check_redis,
    description="the trace replayed on standalone redis-servers, one per maxmemory-policy/knob",
    metrics=metrics.REDIS,
)
def run_redis(ctx: CaseContext) -> Record:
    return redis_case.run_redis(ctx)


@register(
    "eviction-redis-cluster",
    params=redis_case.CLUSTER_PARAMS,
    needs="cluster",
    check=redis_case.check_redis,
    description="the trace replayed on the target Redis Cluster (maxmemory per primary, INFO summed)",
    metrics=metrics.REDIS_CLUSTER,
)
def run_redis_cluster(ctx: CaseContext) -> Record:
    return redis_case.run_redis_cluster(ctx)
