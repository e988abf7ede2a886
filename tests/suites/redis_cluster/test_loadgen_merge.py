"""Several load generators, one measurement (harness.infra.load_tools.loadgen_merge), on the recorded
real outputs of three memtier processes against one cluster (tests/fixtures/memtier/
multi-loadgen: started together, staggered by 4 s, and one process with their connections)."""

from __future__ import annotations

import random

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from harness.base.errors import BadInput
from harness.base.paths import REPO_ROOT
from harness.experiments.redis_cluster import memtier_fleet
from harness.infra.load_tools import loadgen_merge, memtier
from harness.infra.load_tools.loadgen_merge import HostRun

REC = REPO_ROOT / "tests" / "fixtures" / "memtier" / "multi-loadgen"
QS = (50, 99, 99.9)


def runs(folder: str) -> list[HostRun]:
    out = []
    for i in (1, 2, 3):
        d = REC / folder
        res = memtier.parse_files((d / f"lg{i}.json").read_text(), (d / f"lg{i}.stderr").read_text())
        assert res.valid, res.problems
        out.append(HostRun(f"loadgen-{i}", res))
    return out


def test_the_merged_p99_of_the_three_is_the_histogram_sums_not_any_hosts():
    rs = runs("multi")
    m = loadgen_merge.merged(rs, QS)["Totals"]
    own = [r.result.metrics["Totals.p99_ms"].value for r in rs]
    assert own == [11.967, 12.351, 14.399]  # what each host printed
    assert m.percentiles[99] == pytest.approx(12.863, abs=0.001)
    assert round(m.percentiles[99], 1) == 12.9 and m.percentiles[99] not in own
    assert abs(m.percentiles[99] - sum(own) / 3) > 0.03  # not the mean of the three (12.906)
    assert (
        m.requests
        == sum(
            r.result.histograms and memtier.merge_histograms([r.result.histograms["Totals"]]).get_total_count()
            for r in rs
        )
        == 402351
    )


def test_the_merge_agrees_with_the_hosts_hdr_log_files():
    """memtier's --hdr-file-prefix logs (HistogramLogProcessor format) are a second copy of
    each host's histogram: merged independently, they give the same percentiles."""
    total = HdrHistogram(1, 60_000_000, 3)
    for i in (1, 2, 3):
        reader = HistogramLogReader(str(REC / "multi" / f"lg{i}_FULL_RUN_1.hgrm"), HdrHistogram(1, 60_000_000, 3))
        total.add(reader.get_next_interval_histogram())
    m = loadgen_merge.merged(runs("multi"), QS)["Totals"]
    assert total.get_total_count() == m.requests
    for q in QS:
        # within the histograms' resolution (the JSON's and the logs' histograms are set up differently)
        assert total.get_value_at_percentile(q) / 1000 == pytest.approx(m.percentiles[q], rel=1e-2)


def test_windows_that_start_together_overlap_and_their_rates_sum():
    rs = runs("multi")
    w = loadgen_merge.overlap(rs, 0.9)
    assert w.problem == "" and w.share > 0.99
    rate = loadgen_merge.summed_rate(rs, w)
    own = sum(r.result.metrics["Totals.ops_per_sec"].value for r in rs)  # 57,442 ops/s
    assert rate == pytest.approx(own, rel=0.01)
    # cross-check: the counts of every second, added up by hand over the whole runs
    assert sum(sum(r.section.per_second) for r in rs) / 7.0 == pytest.approx(rate, rel=0.01)


def test_the_staggered_recording_is_refused_with_the_numbers():
    rs = runs("staggered")
    w = loadgen_merge.overlap(rs, 0.9)
    assert w.common_ms == pytest.approx(1977) and w.longest_ms == pytest.approx(7001)
    assert "ran together for 1.98 s of the longest one's 7.00 s (28%, at least 90% needed)" in w.problem
    # what a sum of the three's own ops/s would have claimed: a rate no moment saw
    naive = sum(r.result.metrics["Totals.ops_per_sec"].value for r in rs)
    assert naive > 127_000 and loadgen_merge.summed_rate(rs, w) < naive


def test_a_second_straddling_the_window_counts_in_proportion():
    rs = runs("multi")
    r = rs[0]
    s = r.section
    half = loadgen_merge.ops_in_window(r, s.start_ms + 500, s.start_ms + 1000)
    assert half == pytest.approx(s.per_second[0] / 2)
    assert loadgen_merge.ops_in_window(r, s.start_ms, s.finish_ms) == pytest.approx(sum(s.per_second))


def _encoded(values_us: list[int]) -> str:
    h = HdrHistogram(1, 60_000_000, 3)
    for v in values_us:
        h.record_value(v)
    return h.encode().decode()


def test_hosts_with_different_distributions_pool_requests_not_percentiles():
    """Three hosts, three shapes (fast and many, slow and few, a long tail): the merged
    percentile is the percentile of every request, checked against a sort of the raw values,
    and it is none of the mean, median or max of the hosts' own percentiles."""
    rng = random.Random(7)
    hosts = [
        [rng.randint(100, 400) for _ in range(90_000)],  # fast, many requests
        [rng.randint(5_000, 9_000) for _ in range(3_000)],  # slow, few
        [int(rng.paretovariate(1.5) * 300) for _ in range(20_000)],
    ]  # a long tail
    res = []
    for i, vals in enumerate(hosts):
        r = memtier.MemtierResult(
            {"ALL STATS": memtier.Section("ALL STATS", {}, 1000.0, histograms={"Totals": _encoded(vals)})},
            "ALL STATS",
            [],
            {},
        )
        res.append(HostRun(f"lg{i}", r))
    m = loadgen_merge.merged(res, QS)["Totals"]
    every = sorted(v for vals in hosts for v in vals)
    for q in QS:
        exact = every[min(len(every) - 1, int(q / 100 * len(every)))] / 1000
        assert m.percentiles[q] == pytest.approx(exact, rel=0.01), q
    own99 = [memtier.pooled_percentiles([r.result.histograms["Totals"]], (99,))[0][99] for r in res]
    for wrong in (sum(own99) / 3, sorted(own99)[1], max(own99)):
        assert abs(m.percentiles[99] - wrong) / wrong > 0.1, (m.percentiles[99], own99)


def test_a_host_without_a_histogram_leaves_that_kind_out():
    rs = runs("multi")
    broken = memtier.MemtierResult(rs[2].result.sections, rs[2].result.chosen, [], rs[2].result.metrics)
    broken.sections["ALL STATS"].histograms.pop("Gets")
    out = loadgen_merge.merged([rs[0], rs[1], HostRun("lg3", broken)], QS)
    assert "Gets" not in out and "Totals" in out


# ---- the memtier case's judgement of several load generators (memtier_fleet.judge) ----


def test_the_case_judges_the_three_as_one_load():
    metrics, series, problems = memtier_fleet.judge(runs("multi"), [50, 99, 99.9], 0.9)
    assert problems == []
    assert metrics["Totals.p99_ms"].value == pytest.approx(12.863, abs=0.001)
    assert "merged HDR histograms of 3 load generators (402351 requests)" in metrics["Totals.p99_ms"].note
    assert metrics["Totals.ops_per_sec"].value == pytest.approx(57_442, rel=0.01)
    assert metrics["loadgens.count"].value == 3 and metrics["loadgens.overlap_share"].value > 0.99
    hosts = series["loadgens"].columns
    assert hosts["load_generator"] == ["loadgen-1", "loadgen-2", "loadgen-3"]
    assert hosts["p99_ms"] == [11.967, 12.351, 14.399]  # each host's own, kept beside the merged
    assert hosts["start_s"] == [0.017, 0.0, 0.014]
    hist = series["histograms"].columns
    assert hist["kind"][0] == "Totals" and hist["requests"][0] == 402351  # the merged one, for pooling


def test_the_case_refuses_the_staggered_recording():
    metrics, series, problems = memtier_fleet.judge(runs("staggered"), [50, 99, 99.9], 0.9)
    assert len(problems) == 1 and "ran together for 1.98 s of the longest one's 7.00 s (28%" in problems[0]
    assert "Totals.ops_per_sec" not in metrics and "Totals.p99_ms" not in metrics and series == {}
    assert metrics["loadgens.overlap_share"].value == pytest.approx(0.2824, abs=0.001)


def test_the_case_pools_hosts_with_different_distributions():
    """Through the case's own judgement: hosts whose latencies differ by 100x give the P99 of
    every request, not a mean, median or max of the hosts' P99s."""
    rng = random.Random(11)
    shapes = [
        [rng.randint(100, 400) for _ in range(50_000)],
        [rng.randint(20_000, 40_000) for _ in range(1_000)],
        [rng.randint(1_000, 3_000) for _ in range(10_000)],
    ]
    base = runs("multi")
    fed = []
    for r, vals in zip(base, shapes):
        s = r.section
        sec = memtier.Section(
            s.name, s.rows, s.duration_ms, [], {"Totals": _encoded(vals)}, s.start_ms, s.finish_ms, s.per_second
        )
        fed.append(HostRun(r.host, memtier.MemtierResult({s.name: sec}, s.name, [], r.result.metrics)))
    metrics, _, problems = memtier_fleet.judge(fed, [99], 0.9)
    assert problems == []
    every = sorted(v for vals in shapes for v in vals)
    exact = every[int(0.99 * len(every))] / 1000
    got = metrics["Totals.p99_ms"].value
    assert got == pytest.approx(exact, rel=0.01)
    own = sorted(memtier.pooled_percentiles([_encoded(v)], (99,))[0][99] for v in shapes)
    for wrong in (sum(own) / 3, own[1], own[2]):
        assert abs(got - wrong) / wrong > 0.1, (got, own)


def test_key_ranges_split_the_keys_without_gaps():
    assert memtier_fleet.key_ranges(300_000, 3) == [(1, 100_000), (100_001, 200_000), (200_001, 300_000)]
    parts = memtier_fleet.key_ranges(100, 7)
    assert parts[0][0] == 1 and parts[-1][1] == 100
    assert all(b[0] == a[1] + 1 for a, b in zip(parts, parts[1:]))


def _shifted(r: HostRun, by_ms: float, offset_ms: float) -> HostRun:
    """The same run as reported by a host whose clock is `by_ms` ahead, with `offset_ms` measured."""
    s = r.section
    sec = memtier.Section(
        s.name, s.rows, s.duration_ms, s.problems, s.histograms, s.start_ms + by_ms, s.finish_ms + by_ms, s.per_second
    )
    return HostRun(r.host, memtier.MemtierResult({s.name: sec}, s.name, r.result.problems, r.result.metrics), offset_ms)


def test_a_hosts_clock_offset_is_taken_off_its_window():
    """A host whose clock runs 30 s ahead reports its window 30 s late: with its measured offset
    taken off, the three still ran together; without it, the check would refuse them."""
    rs = runs("multi")
    ahead = [rs[0], rs[1], _shifted(rs[2], 30_000, 30_000)]
    assert loadgen_merge.overlap(ahead, 0.9).problem == ""
    unmeasured = [rs[0], rs[1], _shifted(rs[2], 30_000, 0.0)]
    assert "ran together for 0.00 s" in loadgen_merge.overlap(unmeasured, 0.9).problem


def test_histograms_of_different_ranges_merge_into_a_wide_one():
    narrow = HdrHistogram(1, 1000, 2)
    narrow.record_value(500)
    wide = HdrHistogram(1, 60_000_000, 3)
    wide.record_value(50_000)
    merged = memtier.merge_histograms([narrow.encode().decode(), wide.encode().decode()])
    assert merged.get_total_count() == 2 and merged.get_max_value() >= 49_900


def test_a_damaged_histogram_makes_the_repetition_invalid_not_a_crash():
    rs = runs("multi")
    s = rs[1].section
    bad = memtier.Section(
        s.name,
        s.rows,
        s.duration_ms,
        [],
        {**s.histograms, "Totals": "HISTFAAAnotahistogram"},
        s.start_ms,
        s.finish_ms,
        s.per_second,
    )
    broken = HostRun(rs[1].host, memtier.MemtierResult({s.name: bad}, s.name, [], rs[1].result.metrics))
    _, _, problems = memtier_fleet.judge([rs[0], broken, rs[2]], [99], 0.9)
    assert problems and "cannot be merged" in problems[0]


def test_per_second_counts_that_do_not_fit_the_runtime_are_refused():
    rs = runs("multi")
    s = rs[0].section
    odd = memtier.Section(
        s.name, s.rows, s.duration_ms, [], s.histograms, s.start_ms, s.finish_ms, s.per_second + [5, 5, 5]
    )
    odd_run = HostRun(rs[0].host, memtier.MemtierResult({s.name: odd}, s.name, [], rs[0].result.metrics))
    assert "counted 10 seconds in a run of 7.0 s" in loadgen_merge.window_problems([odd_run])[0]
    assert loadgen_merge.window_problems(rs) == [] and loadgen_merge.window_problems(runs("staggered")) == []


def test_too_few_keys_for_the_load_generators_is_bad_input():
    with pytest.raises(BadInput, match="key_maximum=2 cannot be split between 3"):
        memtier_fleet.key_ranges(2, 3)


def test_the_fleet_runs_one_memtier_per_host_from_one_start_in_each_hosts_clock(tmp_path, monkeypatch):
    """run_fleet over two hosts with the SSH side stood in (run_tool, the clock offsets): each
    host's files are memtier-on-HOST.*, its command waits for the shared start in its own clock
    (START_GATE, the start plus its offset) with the gate's lead added to its timeout, and a
    host that fails is named in the failure."""
    from types import SimpleNamespace as NS

    from harness.experiments.redis_cluster import drivers
    from harness.infra.process import ToolRun

    calls = []

    def run_tool(cmd, raw_dir, name, timeout, env=None, *, host=None, secrets=(), processes=None):
        calls.append((cmd, name, timeout, host.name))
        for ext in ("cmd", "stdout", "stderr"):
            (raw_dir / f"{name}.{ext}").write_text("")
        if host.name == "lg-1":
            out = next(a.split("=", 1)[1] for a in cmd if a.startswith("--json-out-file="))
            (tmp_path / "raw" / out.rsplit("/", 1)[1]).write_text((REC / "multi" / "lg1.json").read_text())
        return ToolRun(cmd, 0 if host.name == "lg-1" else 1, "", f"{memtier_fleet.REPLAY_MARK} x\nboom", 0.1, False, [])

    monkeypatch.setattr(memtier_fleet, "run_tool", run_tool)
    monkeypatch.setattr(memtier_fleet, "clock_offset_ms", lambda h: (250.0 if h.name == "lg-1" else -40.0, 1.0))
    (tmp_path / "raw").mkdir()
    target = NS(
        entry=NS(host="10.0.0.1", port=7000),
        password="pw",
        kind="cluster",
        load_generators=[NS(name="lg-1"), NS(name="lg-2")],
    )
    ctx = NS(target=target, raw_dir=tmp_path / "raw", raw_path=lambda n: tmp_path / "raw" / n)
    params = {k: v.default for k, v in drivers.MEMTIER_PARAMS.items()}
    sent = memtier_fleet.time.time()
    got = memtier_fleet.run_fleet(ctx, params, "memtier")
    assert [(c[1], c[3], c[2]) for c in calls] == [
        ("memtier-on-lg-1", "lg-1", params["timeout_s"] + 3.0),
        ("memtier-on-lg-2", "lg-2", params["timeout_s"] + 3.0),
    ]
    starts = [float(c[0][3]) for c in calls]  # the shared start in each host's clock
    assert starts[0] - starts[1] == pytest.approx(0.29, abs=0.002)
    assert -0.01 < starts[0] - 0.25 - memtier_fleet.START_LEAD_S - sent < 1  # the lead after the offsets are read
    assert calls[0][0][:3] == ["python3", "-c", memtier_fleet.START_GATE] and calls[0][0][4] == "memtier_benchmark"
    assert f"--hdr-file-prefix={tmp_path / 'raw' / 'memtier-on-lg-1'}" in calls[0][0]
    assert "--key-minimum=1" in calls[0][0] and f"--key-minimum={params['key_maximum'] // 2 + 1}" in calls[1][0]
    assert [(r.host, r.offset_ms) for r in got.runs] == [("lg-1", 250.0)]
    assert got.failure.startswith("lg-2: memtier_benchmark exited with code 1: ")
    assert set(got.commands) == {"memtier on lg-1", "memtier on lg-2"} and "pw" not in str(got.commands)
    assert got.replayed == [f"lg-1: {memtier_fleet.REPLAY_MARK} x", f"lg-2: {memtier_fleet.REPLAY_MARK} x"]
    assert (tmp_path / "raw" / "memtier-on-lg-1.json").exists()
