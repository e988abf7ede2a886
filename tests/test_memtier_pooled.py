"""Pooled tail percentiles: memtier's HDR histograms (recorded real output in
tests/fixtures/memtier) decoded, merged across repetitions, and shown in the report beside
the median of per-run percentiles."""

import json
import shutil
from pathlib import Path

import pytest

from harness.analysis import analyze
from harness.report.pooled import pooled_rows
from harness.report.render import render_html
from harness.results import load_run
from harness.tools.memtier import merge_histograms, parse_files, pooled_percentiles
from tests.stored_runs import write_run

FIX = Path(__file__).parent / "fixtures" / "memtier"


def hist(name, section, kind="Totals"):
    res = parse_files((FIX / name).read_text())
    return res.sections[section].histograms[kind]


def test_a_decoded_histogram_gives_memtiers_own_percentiles():
    res = parse_files((FIX / "cluster_ratio1-1.json").read_text())
    pooled, n = pooled_percentiles([res.histograms["Totals"]], (50, 99, 99.9))
    assert pooled == {50: 2.143, 99: 9.599, 99.9: 17.407}  # memtier printed p50 2.143, p99 9.599, p99.9 17.407
    assert n == 298605
    assert {k: res.metrics[f"Totals.{k}_ms"].value for k in ("p50", "p99", "p99.9")} == \
        {"p50": 2.143, "p99": 9.599, "p99.9": 17.407}


def test_merging_pools_every_request():
    big, small = hist("cluster_ratio1-1.json", "ALL STATS"), hist("cluster_ratio1-10_runcount2.json", "BEST RUN RESULTS")
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


def test_the_report_shows_pooled_beside_the_median_of_runs(tmp_path):
    d = write_run(tmp_path, 1, {"Totals.p99_ms": [9.599, 4.191]}, case="memtier")
    run = load_run(d)
    for rec, fixture in zip(run.records, ("cluster_ratio1-1.json", "cluster_ratio1-10_runcount2.json")):
        rel = f"raw/kv/memtier/rep{rec.repetition}/memtier.json"
        (d / rel).parent.mkdir(parents=True)
        data = json.loads((FIX / fixture).read_text())
        if "ALL STATS" not in data:  # one run's section, as a --run-count=1 file has it
            data = {"ALL STATS": data["BEST RUN RESULTS"]}
        (d / rel).write_text(json.dumps(data))
        rec.raw_files.append(rel)
    rows = pooled_rows(run, "kv", "memtier")["memtier.json"]
    totals = rows[0]
    assert totals[:3] == ["Totals", 2, 338605]
    assert totals[4] == (pytest.approx(6.895), 4.191, 9.599)  # P99: median (min-max) of the two runs
    assert 8.5 < totals[7] < 9.599  # P99 pooled
    html = render_html(run, analyze(run))
    assert "latency percentiles, pooled over repetitions" in html and "P99 pooled (ms)" in html
    shutil.rmtree(d)
