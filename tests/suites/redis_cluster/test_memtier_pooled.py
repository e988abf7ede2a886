"""Pooled tail percentiles: memtier's HDR histograms (recorded real output in
tests/fixtures/memtier) decoded, merged across repetitions, and shown in the report beside
the median of per-run percentiles."""

import pytest

from harness.infra.load_tools.memtier import (
    histogram_columns,
    histogram_rows,
    histogram_series,
    merge_histograms,
    parse_files,
    pooled_percentiles,
)
from harness.model.stored_run import Record, RunData
from harness.verdict.analysis import analyze
from tests import TESTS

FIX = TESTS / "fixtures" / "memtier"


def hist(name, section, kind="Totals"):
    res = parse_files((FIX / name).read_text())
    return res.sections[section].histograms[kind]


def test_a_decoded_histogram_gives_memtiers_own_percentiles():
    res = parse_files((FIX / "cluster_ratio1-1.json").read_text())
    pooled, n = pooled_percentiles([res.histograms["Totals"]], (50, 99, 99.9))
    assert pooled == {50: 2.143, 99: 9.599, 99.9: 17.407}  # memtier printed p50 2.143, p99 9.599, p99.9 17.407
    assert n == 298605
    assert {k: res.metrics[f"Totals.{k}_ms"].value for k in ("p50", "p99", "p99.9")} == {
        "p50": 2.143,
        "p99": 9.599,
        "p99.9": 17.407,
    }


def test_merging_pools_every_request():
    big, small = (
        hist("cluster_ratio1-1.json", "ALL STATS"),
        hist("cluster_ratio1-10_runcount2.json", "BEST RUN RESULTS"),
    )
    same, n2 = pooled_percentiles([big, big], (99,))
    assert same == {99: 9.599} and n2 == 2 * 298605  # a histogram merged with itself keeps its percentiles
    pooled, n = pooled_percentiles([big, small], (50, 99))
    assert n == 298605 + 40000
    # the pooled P99 weighs each request once: it sits near the big run's 9.599 ms, far from
    # the median of the two runs' P99s ((9.599 + 4.191) / 2 = 6.9 ms)
    assert 8.5 < pooled[99] < 9.599 and abs(pooled[99] - 9.599) < abs(pooled[99] - 6.895)
    assert 0.495 < pooled[50] < 2.143


def test_the_aggregated_section_has_an_empty_histogram_and_damage_is_refused():
    res = parse_files((FIX / "cluster_ratio1-10_runcount2.json").read_text())
    assert res.chosen.startswith("AGGREGATED")
    assert pooled_percentiles([res.histograms["Totals"]]) == ({}, 0)  # memtier does not merge them itself
    with pytest.raises(ValueError, match="does not decode"):
        merge_histograms(["HISTFAAAnot-a-histogram"])


def _record(rep: int, fixture: str):
    """A memtier repetition as the driver keeps it: its per-kind histograms in the
    `histograms` series (recorded real output)."""
    res = parse_files((FIX / fixture).read_text())
    sec = res.sections["ALL STATS" if "ALL STATS" in res.sections else "BEST RUN RESULTS"]
    cols = histogram_columns()
    histogram_rows(cols, "measured", sec.histograms)
    return Record(suite="redis-cluster", case="memtier", repetition=rep, series=histogram_series(cols))


def test_the_driver_keeps_each_runs_histograms_with_memtiers_own_percentiles():
    rec = _record(1, "cluster_ratio1-1.json")
    s = rec.series["histograms"]
    i = s.column("kind").index("Totals")
    assert (s.column("requests")[i], s.column("p50_ms")[i], s.column("p99_ms")[i], s.column("p99.9_ms")[i]) == (
        298605,
        2.143,
        9.599,
        17.407,
    )  # what memtier printed for the run
    assert s.column("histogram")[i].startswith("HIST")
    empty = histogram_columns()
    histogram_rows(empty, "measured", {"Totals": "HISTFAAAnot-a-histogram"})  # damaged: no row, no series
    assert histogram_series(empty) == {}


def test_the_view_shows_pooled_beside_the_median_of_runs(tmp_path):
    from harness.experiments.views import build
    from harness.model.spec import Case, SuiteClaim, SuiteRun

    recs = [_record(1, "cluster_ratio1-1.json"), _record(2, "cluster_ratio1-10_runcount2.json")]
    suite = SuiteRun(
        "redis-cluster",
        "",
        SuiteClaim("2.4", "t"),
        "cluster",
        "local",
        "",
        2,
        [Case("memtier", "redis-cluster-memtier")],
        [],
    )
    run = RunData(tmp_path, {}, recs, {"redis-cluster": suite}, [])
    tables = [
        b for b in build(run, analyze(run), "redis-cluster") if "pooled over repetitions" in getattr(b, "title", "")
    ]
    assert [t.title for t in tables] == ["memtier (measured): latency percentiles, pooled over repetitions"]
    assert "P99 pooled (ms)" in tables[0].columns
    totals = next(r for r in tables[0].rows if r[0] == "Totals")
    assert totals[:3] == ["Totals", 2, 338605]
    assert totals[4] == (pytest.approx(6.895), 4.191, 9.599)  # P99: median (min-max) of the two runs
    assert 8.5 < totals[7] < 9.599  # P99 pooled: near the big run's, far from the median of runs
    from harness.publish.render import render_html

    for rec, fixture in zip(recs, ("cluster_ratio1-1.json", "cluster_ratio1-10_runcount2.json")):
        raw = tmp_path / "raw" / f"rep{rec.repetition}" / "memtier.json"  # memtier's own file, kept
        raw.parent.mkdir(parents=True)
        raw.write_text((FIX / fixture).read_text())
        rec.raw_files.append(str(raw.relative_to(tmp_path)))
    html = render_html(run, analyze(run))  # the view's table, once: the renderer parses no raw files
    assert html.count("latency percentiles, pooled over repetitions") == 1


def test_a_folder_from_before_the_histograms_series_gets_it_when_loaded(tmp_path):
    """A memtier repetition stored without the `histograms` series (written before issue 20)
    gets it from the raw memtier JSON it kept, at load time; the report then pools it."""
    from harness.model.spec import Case, SuiteClaim, SuiteRun
    from harness.model.stored_run import load_run, write_manifest, write_results
    from harness.publish.render import render_html

    recs = []
    for rep, fixture in ((1, "cluster_ratio1-1.json"), (2, "cluster_ratio1-10_runcount2.json")):
        raw = tmp_path / "raw" / "redis-cluster" / "memtier" / f"rep{rep}" / "memtier.json"
        raw.parent.mkdir(parents=True)
        raw.write_text((FIX / fixture).read_text())
        recs.append(
            Record(
                suite="redis-cluster",
                case="memtier",
                repetition=rep,
                raw_files=[str(raw.relative_to(tmp_path)), "../outside/memtier-control.json"],
            )
        )
    suite = SuiteRun(
        "redis-cluster",
        "",
        SuiteClaim("2.4", "t"),
        "cluster",
        "local",
        "",
        2,
        [Case("memtier", "redis-cluster-memtier")],
        [],
    )
    write_manifest(tmp_path, {})
    write_results(tmp_path, recs, {"redis-cluster": suite})
    run = load_run(tmp_path)
    s = run.records[0].series["histograms"]
    assert set(s.column("run")) == {"measured"} and s.column("requests")[s.column("kind").index("Totals")] == 298605
    html = render_html(run, analyze(run))
    assert html.count("memtier (measured): latency percentiles, pooled over repetitions") == 1
