"""The semantic-cache view on a stored results folder (a real local run, two repetitions,
kept in tests/fixtures/semantic/run with its server details left out and no raw/): it presents the
aggregate of every repetition and takes claimed numbers from the ledger's figures."""

from harness.experiments import views
from harness.experiments.views import Chart, Table
from harness.model.stored_run import load_run
from harness.verdict.analysis import analyze
from tests import TESTS

RUN = TESTS / "fixtures" / "semantic" / "run"


def _blocks():
    run = load_run(RUN)
    return run, views.build(run, analyze(run), "semantic-cache")


def _table(blocks, start):
    return next(b for b in blocks if isinstance(b, Table) and b.title.startswith(start))


def test_the_view_builds_every_case_from_the_aggregate_of_all_repetitions():
    run, blocks = _blocks()
    assert len({r.repetition for r in run.records}) == 2
    assert {b.case for b in blocks} == {"semantic", "embed-perf", "ttft", "memory", "entity-keys"}
    schemes = _table(blocks, "Key schemes on the test split")
    lsh = next(r for r in schemes.rows if r[0] == "lsh (Redis, banded)")
    assert any(isinstance(c, tuple) and c[1] <= c[0] <= c[2] for c in lsh)  # median (min-max) of two seeds
    assert any(isinstance(b, Chart) and b.title.startswith("LSH through Redis") for b in blocks)


def test_claimed_numbers_come_from_the_ledger():
    run, blocks = _blocks()
    ttft = _table(blocks, "Time to first token per mode")
    assert [r[1] for r in ttft.rows[:2]] == [428, 211]  # C3's figures
    hit = _table(blocks, "The source's section 1 hit rates")
    assert [r[1] for r in hit.rows[:2]] == [31.2, 67.8]
    for c in run.claims:  # without the ledger's figures the view shows "-", never a number of its own
        c.figures = {}
    blocks = views.build(run, analyze(run), "semantic-cache")
    assert [r[1] for r in _table(blocks, "Time to first token per mode").rows[:2]] == ["-", "-"]


def test_batching_table_shows_each_arm_and_the_control():
    _, blocks = _blocks()
    t = _table(blocks, "Added latency of batching")
    arms = [r[0] for r in t.rows]
    assert set(arms) == {
        "static_batch_token_key",
        "dynamic_batch_token_key",
        "dynamic_batch_entity_key",
        "control.no_batching",
        "control.static_batch_entity_key",
        "instrument.fixed_wait",
    }
    row = {r[0]: r for r in t.rows}
    assert row["dynamic_batch_entity_key"][1] == 2.3 and row["static_batch_token_key"][1] == 18
    assert "dynamic minus static" in t.note and "not measured" not in t.note


def test_the_instruments_and_the_computed_numbers_are_shown_as_such():
    _, blocks = _blocks()
    ttft = _table(blocks, "Time to first token per mode")
    rows = {r[0]: r for r in ttft.rows}
    oracle, semantic = rows["oracle_cache (instrument)"], rows["semantic_cache"]
    assert oracle[5] == 100 and semantic[4] is not None  # every oracle request hit; the floor is there
    assert "computed" in ttft.columns[4] and "computed, not measured" in ttft.note
    loss = _table(blocks, "C7: correct hits a static threshold loses")
    assert "computed" in loss.columns[0] and loss.rows[0][2] == 100  # the strict static threshold loses all
    mem = next(b for b in blocks if isinstance(b, Table) and b.title.startswith("Memory peak per serving mode"))
    assert "instrument (a known extra allocation of 256 MiB)" in mem.note
