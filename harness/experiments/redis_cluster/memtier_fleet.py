"""memtier_benchmark on every load generator of the inventory at once, as one measurement.

Each host of the `loadgen` group runs its own memtier_benchmark over SSH, with its own share
of the keys and a seed of its own per client, and every process waits for one shared start
time before it starts (a few seconds ahead, so that every SSH connection is up by then; the
start time is given to each host in its own clock: its offset from the harness's clock is
measured over SSH first, and its reported window is read back on the harness's clock). Every
host's JSON, HDR logs, stdout and stderr are kept under the run's raw folder, named after
the host.

The run is judged as one load (harness.infra.load_tools.loadgen_merge): the hosts' windows must overlap
for at least `min_overlap_share` of the longest, else the repetition is invalid, with the
numbers; throughput is summed over the common window; percentiles come from the hosts'
merged histograms. Each host's own figures are kept in the `loadgens` series.

One memtier process (command, raw files, parsing) is `run_once`, which the case's run on
one load generator (drivers.py) uses too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

from harness.base.errors import BadInput
from harness.experiments.redis_cluster.series import LOADGENS
from harness.infra.load_tools import loadgen_merge, memtier
from harness.infra.load_tools.loadgen_merge import HostRun
from harness.infra.process import RemoteHost, clock_offset_ms, run_each, run_tool
from harness.infra.redaction import command_line, redact
from harness.model.driver_contract import CaseContext, Metric, Series

START_LEAD_S = 3.0  # the shared start lies this far ahead of the moment the commands are sent
# Run on each load generator before memtier: sleep until the shared start (given in the host's
# own clock), then become memtier (python3 is on every host Ansible manages). A start more than
# a minute away is not waited for.
START_GATE = (
    "import os,sys,time; d=float(sys.argv[1])-time.time(); "
    "time.sleep(d) if 0<d<60 else None; os.execvp(sys.argv[2], sys.argv[2:])"
)
# The first line a stand-in that replays recorded output writes on stderr (infra/lab-sim).
REPLAY_MARK = "memtier_benchmark stand-in"


def key_ranges(key_maximum: int, n: int) -> list[tuple[int, int]]:
    """Keys 1..key_maximum split into n contiguous ranges, one per load generator."""
    if key_maximum < n:
        raise BadInput(
            f"memtier.key_maximum={key_maximum} cannot be split between {n} load generators; give at least {n} keys"
        )
    return [(i * key_maximum // n + 1, (i + 1) * key_maximum // n) for i in range(n)]


def gated(cmd: list[str], start_epoch: float) -> list[str]:
    """`cmd` started at `start_epoch` (seconds since the epoch) by the host's own clock."""
    return ["python3", "-c", START_GATE, f"{start_epoch:.3f}", *cmd]


@dataclass
class FleetRun:
    runs: list[HostRun]
    commands: dict[str, str]
    failure: str  # '' when every host wrote a JSON file
    replayed: list[str]
    clocks: dict[str, dict]  # host -> its clock's offset and the round trip it was read in (ms)


@dataclass
class MemtierOnce:
    parsed: memtier.MemtierResult | None  # None when it failed or wrote no JSON file
    failure: str  # why it failed ('' when it did not)
    shown: str  # its command line, secrets redacted
    stderr: str


def run_once(
    ctx: CaseContext,
    params: dict,
    stem: str,
    host: RemoteHost | None,
    *,
    key_range: tuple[int, int] | None = None,
    start: float | None = None,
    procs: list | None = None,
) -> MemtierOnce:
    """One memtier_benchmark process on `host` (None: here) against the target, its files
    under the run's raw folder named STEM (.cmd, .stdout, .stderr, .json; with a key range,
    one load generator's share, its HDR logs too). With `start` (seconds since the epoch, in
    the host's own clock) it waits for that moment through START_GATE."""
    node, secrets = ctx.target.entry, (ctx.target.password,)
    json_path = ctx.raw_path(f"{stem}.json")
    json_path.unlink(missing_ok=True)  # only this run's own file counts
    cmd = memtier.build_command(
        params,
        node.host,
        node.port,
        ctx.target.kind == "cluster",
        str(json_path),
        ctx.target.password,
        key_range=key_range,
        hdr_prefix=None if key_range is None else str(ctx.raw_dir / stem),
    )
    timeout = params["timeout_s"]
    if start is not None:
        cmd, timeout = gated(cmd, start), timeout + START_LEAD_S
    res = run_tool(cmd, ctx.raw_dir, stem, timeout, host=host, secrets=secrets, processes=procs)
    shown = command_line(cmd, secrets)
    if res.timed_out or res.returncode != 0:
        return MemtierOnce(None, res.failure("memtier_benchmark"), shown, res.stderr)
    if not json_path.exists():
        return MemtierOnce(None, f"memtier_benchmark wrote no JSON file (see {stem}.stderr)", shown, res.stderr)
    text = redact(json_path.read_text(errors="replace"), secrets)  # memtier writes its --authenticate value back
    json_path.write_text(text)
    return MemtierOnce(memtier.parse_files(text, res.stderr), "", shown, res.stderr)


def _one_host(
    ctx: CaseContext,
    params: dict,
    name: str,
    host: RemoteHost,
    keys: tuple[int, int],
    start: float,
    offset_ms: float,
    procs: list,
) -> tuple[HostRun | None, str, str, str]:
    """(the host's parsed run or None, why it failed, its command line, its stand-in line)."""
    # the stem is never another run's name (a host may be called "control")
    once = run_once(
        ctx, params, f"{name}-on-{host.name}", host, key_range=keys, start=start + offset_ms / 1000, procs=procs
    )
    replay = next((line for line in once.stderr.splitlines() if line.startswith(REPLAY_MARK)), "")
    if once.parsed is None:
        return None, f"{host.name}: {once.failure}", once.shown, replay
    return HostRun(host.name, once.parsed, offset_ms), "", once.shown, replay


def run_fleet(ctx: CaseContext, params: dict, name: str) -> FleetRun:
    """memtier on every load generator at once, from one shared start time (each host's
    clock offset measured first and allowed for). An interrupt kills every SSH session at
    once instead of waiting for them."""
    hosts = [h for h in ctx.target.load_generators if h is not None]
    ranges = key_ranges(params["key_maximum"], len(hosts))
    clocks = {
        h.name: dict(zip(("offset_ms", "round_trip_ms"), map(lambda v: round(v, 1), clock_offset_ms(h)))) for h in hosts
    }
    start = time.time() + START_LEAD_S
    done = run_each(
        [partial(_one_host, ctx, params, name, h, k, start, clocks[h.name]["offset_ms"]) for h, k in zip(hosts, ranges)]
    )
    commands = {f"{name} on {h.name}": shown for h, (_, _, shown, _) in zip(hosts, done)}
    failures = [why for _, why, _, _ in done if why]
    return FleetRun(
        [r for r, _, _, _ in done if r is not None],
        commands,
        "; ".join(failures),
        [f"{h.name}: {line}" for h, (_, _, _, line) in zip(hosts, done) if line],
        clocks,
    )


def judge(runs: list[HostRun], qs, min_share: float) -> tuple[dict[str, Metric], dict[str, Series], list[str]]:
    """Metrics, series and problems of one fleet run: per-host validity, the overlap, the
    throughput summed over the common window, the merged percentiles."""
    problems = [f"{r.host}: " + "; ".join(r.result.problems) for r in runs if not r.result.valid]
    if problems:
        return {}, {}, problems
    problems = loadgen_merge.window_problems(runs)
    if problems:
        return {}, {}, problems
    try:
        return _judged(runs, qs, min_share)
    except (ValueError, IndexError) as e:  # a histogram that does not decode or add: no merged percentile
        return {}, {}, [f"the load generators' histograms cannot be merged: {e}"]


def _judged(runs: list[HostRun], qs, min_share: float) -> tuple[dict[str, Metric], dict[str, Series], list[str]]:
    window = loadgen_merge.overlap(runs, min_share)
    n = len(runs)
    metrics = {
        "loadgens.count": Metric(n, "load generators", None),
        "loadgens.overlap_share": Metric(
            round(window.share, 4), "share", "higher", "the common window over the longest load generator's window"
        ),
    }
    if window.problem:
        return metrics, {}, [window.problem]
    metrics["Totals.ops_per_sec"] = Metric(
        loadgen_merge.summed_rate(runs, window),
        "ops/s",
        "higher",
        f"every load generator's operations in their common window "
        f"({window.common_ms / 1000:.2f} s), summed ({n} load generators)",
    )
    merged = loadgen_merge.merged(runs, qs)
    for kind, m in merged.items():
        for q, v in m.percentiles.items():
            metrics[f"{kind}.{memtier.percentile_name(f'p{q:g}')}_ms"] = Metric(
                v, "ms", "lower", f"from the merged HDR histograms of {n} load generators ({m.requests} requests)"
            )
    cols = loadgen_merge.host_rows(runs, qs, min(r.start_ms for r in runs))
    series = {LOADGENS.name: LOADGENS.make(cols)}
    hdr = memtier.histogram_columns()
    memtier.histogram_rows(hdr, "measured", {k: m.histogram for k, m in merged.items()})
    series.update(memtier.histogram_series(hdr))
    return metrics, series, []
