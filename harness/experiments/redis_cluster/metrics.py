"""The metrics the redis-cluster drivers report: redis-benchmark's and memtier_benchmark's figures
(each with its control run's as control.*) and the ACL rules' probes (acl.py)."""

from harness.base.metrics_model import MetricDecl as M

# redis-benchmark's test titles: the one-word ones (load_tools.redis_benchmark.SIMPLE_TITLES) and
# those of -t lrange and -t mset, as redis-benchmark 7.0 prints them
TEST = (
    "{PING_INLINE|PING_MBULK|SET|GET|INCR|LPUSH|RPUSH|LPOP|RPOP|SADD|HSET|SPOP|ZADD|ZPOPMIN|XADD"
    "|LPUSH (needed to benchmark LRANGE)|LRANGE_100 (first 100 elements)|LRANGE_300 (first 300 elements)"
    "|LRANGE_500 (first 500 elements)|LRANGE_600 (first 600 elements)|MSET (10 keys)}"
)
# memtier's rows (load_tools.memtier.ROW_KINDS)
KIND = "{Sets|Gets|Totals}"

BENCHMARK = (
    # per test: throughput and latency (redis_benchmark.CSV_COLUMNS), measured run and control
    M(TEST + ".rps", "req/s", "higher"),
    M(TEST + ".avg_ms", "ms", "lower"),
    M(TEST + ".min_ms", "ms", "lower"),
    M(TEST + ".p50_ms", "ms", "lower"),
    M(TEST + ".p95_ms", "ms", "lower"),
    M(TEST + ".p99_ms", "ms", "lower"),
    M(TEST + ".max_ms", "ms", "lower"),
    M("control." + TEST + ".rps", "req/s", "higher"),
    M("control." + TEST + ".avg_ms", "ms", "lower"),
    M("control." + TEST + ".min_ms", "ms", "lower"),
    M("control." + TEST + ".p50_ms", "ms", "lower"),
    M("control." + TEST + ".p95_ms", "ms", "lower"),
    M("control." + TEST + ".p99_ms", "ms", "lower"),
    M("control." + TEST + ".max_ms", "ms", "lower"),
    # primaries that served the run (INFO commandstats); control: every key in one hash slot
    M("cluster.primaries_serving", "primaries", "higher"),
    M("control.primaries_serving", "primaries"),
)

MEMTIER = (
    # per row kind: throughput and latency (the percentiles asked for: p50, p99, p99.9 ...)
    M(KIND + ".ops_per_sec", "ops/s", "higher"),
    M(KIND + ".avg_ms", "ms", "lower"),
    M(KIND + ".p{percentile}_ms", "ms", "lower"),
    M("Gets.{hits|misses}_per_sec", "ops/s"),
    # ... the same in the control run (one client on one thread)
    M("control." + KIND + ".ops_per_sec", "ops/s", "higher"),
    M("control." + KIND + ".avg_ms", "ms", "lower"),
    M("control." + KIND + ".p{percentile}_ms", "ms", "lower"),
    M("control.Gets.{hits|misses}_per_sec", "ops/s"),
    # several load generators at once (memtier_fleet.judge): how many, and their common window
    M("loadgens.count", "load generators"),
    M("loadgens.overlap_share", "share", "higher"),
)

ACL = (
    # per rule (the rules parameter's names): reads of cache keys it must allow
    M("{rule}.reads_allowed", "of 2", "higher"),
    # ... the forbidden probes: refused with NOPERM, or not
    M("{rule}.forbidden_noperm", "of 14", "higher"),
    M("{rule}.forbidden_not_refused", "of 14", "lower"),
    M("{rule}.forbidden_executed", "of 14", "lower"),
    M("{rule}.writes_allowed", "of 4", "lower"),
    M("{rule}.other_keys_allowed", "of 2", "lower"),
    # ... what was tried, and what the owning node itself saw
    M("{rule}.forbidden_sent", "probes"),
    M("{rule}.writes_sent", "probes"),
    M("{rule}.other_keys_sent", "probes"),
    M("{rule}.forbidden_reached", "probes"),
    M("{rule}.denials_logged", "denials"),
)
