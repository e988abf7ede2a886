"""C20 judged on what is observed outside the mechanism (issue 39): the writers' histories
against the final read-back, the readers' pairs against the histories. The mechanism's own
bookkeeping (its vectors, its "applied" replies) is shown as mechanism.* and never judged.

The pure checker first (histories written by hand), then the real cluster with the CAS
script broken the way the issue found: it applies every write and stores the element-wise max
of the stored and the sent vector, so the vectors' own arithmetic finds no lost update."""

from __future__ import annotations

import pytest

from harness.experiments.prompt_cas import drivers as cas
from harness.experiments.prompt_cas import history as h
from harness.experiments.prompt_cas.history import APPLIED, ERROR, REFUSED, Attempt, Value
from harness.model.driver_contract import CaseContext

SEED = Value("seed.0", "p0", "r0")
PARTNER = {"p0": "r0", "p1": "r1", "p2": "r2"}


def w(wid, parent, told=APPLIED, prompt="p1", response="r1", key="k"):
    return Attempt(key, wid, parent, prompt, response, told)


def judged(attempts, final):
    by_wid = {a.wid: a for a in attempts}
    return h.judge_key("k", attempts, final, SEED, by_wid)


def test_a_real_cas_history_loses_nothing_and_refuses_only_conflicts():
    # a -> b; c read the seed after a replaced it (refused: a conflict); d read b and was applied
    hist = [w("a", "seed.0"), w("c", "seed.0", REFUSED), w("b", "a"), w("d", "b", prompt="p2", response="r2")]
    v = judged(hist, Value("d", "p2", "r2"))
    assert (v.chain, v.lost, v.refused_but_applied, v.unjustified_refusals, v.foreign) == (3, 0, 0, 0, False)


def test_writes_applied_over_a_value_their_writer_never_read_are_lost():
    """What an apply-everything script does, whatever it stores in the vectors: two writers read
    the seed, both are told applied; the final value contains only the second."""
    hist = [w("a", "seed.0"), w("b", "seed.0", prompt="p2", response="r2")]
    v = judged(hist, Value("b", "p2", "r2"))
    assert v.lost == 1 and v.chain == 1


def test_a_final_value_no_write_sent_loses_every_acknowledged_write():
    hist = [w("a", "seed.0"), w("b", "a")]
    for final in (
        Value("b", "p1", "r2"),  # a torn pair: b's id, another write's response
        Value("zz", "p1", "r1"),  # an id no writer used
        None,
    ):  # the pair is gone
        v = judged(hist, final)
        assert v.foreign and v.lost == 2 and v.chain == 0, final
    # a chain that never reaches the seed (a parent no write of the pair has) is foreign too
    v = judged([w("a", "ghost"), w("b", "a")], Value("b", "p1", "r1"))
    assert v.foreign and v.lost == 2


def test_refusals_are_judged_against_the_read_back():
    # refused, yet the final value is that write's: refused but applied
    v = judged([w("a", "seed.0", REFUSED)], Value("a", "p1", "r1"))
    assert v.refused_but_applied == 1 and v.lost == 0
    # refused though nothing ever replaced the value it read: no conflict, a CAS had to apply it
    v = judged([w("a", "seed.0", REFUSED), w("b", "seed.0", REFUSED)], SEED)
    assert v.unjustified_refusals == 2 and v.chain == 0
    # an error (not known whether it landed) is neither lost nor a refusal
    v = judged([w("a", "seed.0", ERROR)], SEED)
    assert (v.lost, v.unjustified_refusals, v.refused_but_applied) == (0, 0, 0)


def test_judge_writes_keeps_keys_apart():
    seeds = {"k": SEED, "j": Value("seed.1", "p2", "r2")}
    hist = [w("a", "seed.0"), w("b", "seed.1", key="j")]
    out = h.judge_writes(hist, seeds, {"k": Value("a", "p1", "r1"), "j": Value("seed.1", "p2", "r2")})
    assert out["k"].chain == 1 and out["j"].lost == 1  # b is told applied, j still holds its seed


def test_a_pair_read_is_mixed_against_the_partner_and_the_histories():
    sent = {"a": Value("a", "p1", "r1"), "b": Value("b", "p1", "r1")}
    assert not h.mixed(Value("a", "p1", "r1"), PARTNER, sent)
    assert h.mixed(Value("a", "p1", "r2"), PARTNER, sent)  # not the prompt's partner
    assert h.mixed(Value("c", "p1", "r1"), PARTNER, sent)  # a consistent pair no write of that id sent
    assert h.mixed(Value("b", "p2", "r2"), PARTNER, sent)  # b's id on another write's pair: torn
    assert h.mixed(Value(None, None, None), PARTNER, sent)


APPLY_EVERY_WRITE = cas.CAS_LUA.replace(
    "  if not (le and not eq) then return 0 end\n  new = ARGV[2]\n",
    "  local m = {}\n  for i = 1, #c do m[i] = math.max(s[i], c[i]) end\n  new = table.concat(m, ',')\n",
)


@pytest.fixture(scope="module")
def apply_every_write_run(cluster, tmp_path_factory):
    assert APPLY_EVERY_WRITE != cas.CAS_LUA
    params = {k: p.default for k, p in cas.PARAMS.items()}
    params.update(seconds=0.8, writers=4, readers=2, keys=2, modes=list(cas.MODES), min_reads_per_reader=20)
    mp = pytest.MonkeyPatch()
    mp.setattr(cas, "CAS_LUA", APPLY_EVERY_WRITE)
    try:
        out = cas.run(
            CaseContext(
                "prompt-cas", "cas", 1, "local", params, tmp_path_factory.mktemp("max"), cluster, log=lambda m: None
            )
        )
    finally:
        mp.undo()
    assert out.status == "ok", out.reason
    return out


def test_a_cas_that_applies_every_write_loses_updates_the_read_back_sees(apply_every_write_run):
    """The issue's broken mechanism: its own vectors say nothing was lost (shown as
    mechanism.*), the writers' histories against the read-back find the lost updates, and the
    writers were told 'applied' for every write."""
    m = {k: v.value for k, v in apply_every_write_run.metrics.items()}
    assert m["mechanism.incremented.told_applied_pct"] == 100
    assert m["mechanism.incremented.vv_lost_updates"] == 0  # the bookkeeping the old ledger judged
    assert m["incremented.lost_updates"] > 0
    assert m["incremented.applied_pct"] < 100  # only the writes on the final chains are found applied
    assert m["incremented.unjustified_refusals"] == 0 and m["incremented.canary_lost_updates"] == 1


def test_the_ledger_does_not_call_a_cas_that_applies_every_write_reproduced(apply_every_write_run, tmp_path):
    """Judged by harness.verdict.analysis on that run: the lost-updates check is not reproduced (its
    instruments saw, its mechanism-off control held), and so is C20 as a whole; before issue 39
    the same mutant made every C20 check pass."""
    from tests.suites.prompt_cas.test_prompt_cas import _c20

    got = _c20(apply_every_write_run, tmp_path)
    lost = got["incremented.lost_updates"]
    assert lost.outcome.value == "not reproduced", lost.reason
    assert "did not hold" not in lost.reason  # the canary and the plain arm were seen: not a blind zero


def test_no_judged_metric_of_c20_is_the_mechanisms_own():
    """Every C20 check names its observation, and neither it nor a control judges a
    mechanism.* metric (the vectors and the script's replies)."""
    from harness.base.paths import SUITES_DIR
    from harness.model.yaml_fields import load_yaml

    claims = load_yaml(SUITES_DIR / "claims.yaml", "claims ledger")["claims"]
    checks = next(c for c in claims if c["id"] == "C20")["checks"]
    assert checks
    for chk in checks:
        assert chk.get("observed", "").strip(), chk["metric"]
        controls = [
            c
            for kind in ("instrument", "mechanism_off", "stand_in")
            for c in (chk.get(kind) if isinstance(chk.get(kind), list) else [chk.get(kind)] if chk.get(kind) else [])
        ]
        named = [chk["metric"]] + [c["metric"] for c in controls] + [c["than"] for c in controls if "than" in c]
        assert not [n for n in named if n.startswith("mechanism.")], chk["metric"]
        assert controls or chk.get("no_instrument"), chk["metric"]


# ---- exercise evidence (issue 52): the situations C20's zeros are about, counted outside the CAS ----


def test_races_are_counted_from_what_the_writers_read_whatever_the_cas_replied():
    """Two writes that read the same value raced (a CAS may apply one); a write that read its
    predecessor did not. Counted from the parents in the writers' histories: the replies only
    split the races into refused or not, and an error (not known to have been sent) counts
    nowhere."""
    serial = [w("a", "seed.0"), w("b", "a"), w("c", "b", REFUSED)]  # one after another: no race
    ex = h.exercise(serial, ["k"])
    assert (ex.acked, ex.refused, ex.conflicting, ex.conflicts_refused) == (2, 1, 0, 0)
    raced = [w("a", "seed.0"), w("b", "seed.0", REFUSED), w("c", "seed.0"), w("d", "a", ERROR), w("e", "a", REFUSED)]
    ex = h.exercise(raced, ["k"])
    assert (ex.acked, ex.refused, ex.conflicting, ex.conflicts_refused) == (2, 2, 2, 1)
    # a CAS that applies every write still raced: the count does not depend on its replies
    assert h.exercise([w("a", "seed.0"), w("b", "seed.0")], ["k"]).conflicting == 1
    assert h.exercise(raced, ["j"]) == h.Exercise()  # another pair's writes (the canary's) count nowhere


def test_reads_of_new_writes_count_only_changed_replies_holding_a_write_of_the_run():
    from collections import Counter

    a = Value("a", "p1", "r1")
    fresh = Counter(
        {
            ("k", SEED, False): 1,
            ("k", a, False): 3,
            ("k", a, True): 2,
            ("k", None, False): 1,
            ("k", Value("zz", "p1", "r1"), False): 1,
        }
    )
    assert h.reads_of_new_writes(fresh, {"a": "k"}, replica=False) == 3  # the seed, a gone pair, an unknown id: none
    assert h.reads_of_new_writes(fresh, {"a": "k"}, replica=True) == 2
    assert h.reads_of_new_writes(fresh, {}, replica=False) == 0  # no write made in the run
    assert h.reads_of_new_writes(fresh, {"a": "j"}, replica=False) == 0  # a write sent to another pair


class _FakeServer:
    """A node whose HGETALL replies come from `reply(i)` (i: the read's number); ROLE: a replica."""

    address = ("fake", 1)

    def __init__(self, reply):
        self.reply, self.i = reply, 0

    def execute_command(self, *args):
        return [b"slave"] if args[0] == "ROLE" else b"OK"

    def hgetall(self, key):
        self.i += 1
        return self.reply(self.i)

    def close(self):
        pass


def _fresh_reads(reply) -> tuple[int, int, int]:
    """One reader against a fake node, for 0.05 s: (reads of new writes on primaries, on replicas,
    reads on primaries), judged against the write ids w.* of the run."""
    import types

    server = _FakeServer(reply)
    target = types.SimpleNamespace(client=lambda node: server)

    class Everywhere(dict):
        def __getitem__(self, slot):
            return server, [server]

    tally = cas.Tally()
    tally.open_gate(1, 0.05)
    cas._reader(target, 0, ["pp:{k0}"], Everywhere(), tally)
    writes = {f"w.{i}": "pp:{k0}" for i in range(server.i + 1)}  # the canary's reads count nowhere
    reads = sum(c for (key, _, rep), c in tally.seen.items() if key != cas.CANARY and not rep)
    return (
        h.reads_of_new_writes(tally.fresh, writes, replica=False),
        h.reads_of_new_writes(tally.fresh, writes, replica=True),
        reads,
    )


def test_the_reader_counts_a_read_of_a_new_write_only_when_the_servers_reply_changed():
    """The counter the mix-up checks' exercise evidence reads: a server whose every reply is a new
    write gives one per read; one that always replies the same write (or a reader-side copy) gives
    one per side, the first read; one that holds the seed gives none."""

    def pair(wid):
        return {b"prompt": b"p1", b"response": b"r1", b"wid": wid.encode(), b"vv": b"1"}

    new, replica_new, reads = _fresh_reads(lambda i: pair(f"w.{i}"))
    assert reads > 10 and new == reads and replica_new > 10
    assert _fresh_reads(lambda i: pair("w.1"))[:2] == (1, 1)
    assert _fresh_reads(lambda i: pair("seed.0"))[:2] == (0, 0)


# ---- the exercise counters' own instrument (issue 52): known histories, known counts ----


def test_the_counters_give_their_known_counts_on_the_known_histories():
    """The counting code the rules are judged with (exercise_counts over history.exercise and
    history.reads_of_new_writes) on the instrument's known histories: every known count."""
    from harness.experiments.prompt_cas import known

    assert known.failures(cas.exercise_counts) == []
    assert set(known.known_pct(cas.exercise_counts).values()) == {100.0}
    m = cas.known_metrics()
    assert m["instrument.exercise_counters_known_pct"].value == 100
    for c in ("conflicting_writes", "conflicts_refused", "reads_of_new_writes", "replica_reads_of_new_writes"):
        assert m[f"instrument.{c}_known_pct"].value == 100, c


def test_known_histories_by_hand():
    """The histories' counts, stated directly against history.py: a serial chain has no race,
    two writes on one value read are exactly one conflicting pair, a primary-only read log has no
    replica read of a new write (and the other way round)."""
    from collections import Counter

    chain = [w("a", "seed.0"), w("b", "a"), w("c", "b")]
    assert h.exercise(chain, ["k"]).conflicting == 0
    assert h.exercise(chain + [w("d", "c", REFUSED)], ["k"]).conflicts_refused == 0  # refused, no race
    two = [w("a", "seed.0"), w("b", "seed.0", REFUSED)]
    assert (h.exercise(two, ["k"]).conflicting, h.exercise(two, ["k"]).conflicts_refused) == (1, 1)
    across = [w("a", "x"), w("b", "x", key="j")]  # two pairs whose writes read the same id: no race
    assert h.exercise(across, ["k", "j"]).conflicting == 0
    primary_only = Counter({("k", Value("a", "p1", "r1"), False): 5})
    assert h.reads_of_new_writes(primary_only, {"a": "k"}, replica=True) == 0
    assert h.reads_of_new_writes(primary_only, {"a": "k"}, replica=False) == 5
    replica_only = Counter({("k", Value("a", "p1", "r1"), True): 4})
    assert h.reads_of_new_writes(replica_only, {"a": "k"}, replica=False) == 0


@pytest.mark.parametrize(
    "old, new, counter",
    [
        # the red team's bugs: races grouped by pair alone, the side filter dropped; and races grouped by value alone
        (
            "groups.setdefault((a.key, a.parent), []).append(a)",
            "groups.setdefault((a.key,), []).append(a)",
            "conflicting_writes",
        ),
        (
            "groups.setdefault((a.key, a.parent), []).append(a)",
            "groups.setdefault((a.key,), []).append(a)",
            "conflicts_refused",
        ),
        (
            "groups.setdefault((a.key, a.parent), []).append(a)",
            "groups.setdefault((a.parent,), []).append(a)",
            "conflicting_writes",
        ),
        ("if rep == replica and v is not None", "if v is not None", "replica_reads_of_new_writes"),
        ("if rep == replica and v is not None", "if v is not None", "reads_of_new_writes"),
        ('writes.get(v.wid or "") == key\n', "v.wid in writes\n", "reads_of_new_writes"),
    ],
)
def test_a_counter_that_counts_the_wrong_thing_fails_its_known_histories(monkeypatch, old, new, counter):
    """Each counter's instrument sees a counting bug that still clears the counter's minimum in a
    run: the counter's known_pct falls below 100, and so the ledger's exercise evidence fails."""
    import inspect

    from harness.experiments.prompt_cas import known

    src = inspect.getsource(h)
    assert old in src
    mutated = {}
    exec(compile(src.replace(old, new), h.__file__, "exec"), mutated)  # noqa: S102 - the module's own text
    for name in ("exercise", "reads_of_new_writes"):
        monkeypatch.setattr(h, name, mutated[name])
    assert known.known_pct(cas.exercise_counts)[counter] < 100
    assert cas.known_metrics()["instrument.exercise_counters_known_pct"].value < 100


def test_a_counter_below_its_known_counts_makes_the_c20_absences_inconclusive():
    """The ledger: a check of an absence holds its exercise evidence only when its counter's
    instrument reads 100 (its known counts), whatever the counter gave in the run."""
    from harness.model.ledger_parse import load_claims

    c20 = next(c for c in load_claims() if c.id == "C20")
    counters = {
        "incremented.mixups_read": "reads_of_new_writes",
        "incremented.replica_mixups_read": "replica_reads_of_new_writes",
        "incremented.lost_updates": "conflicting_writes",
        "incremented.refused_but_applied": "conflicts_refused",
        "incremented.unjustified_refusals": "conflicting_writes",
    }
    for k in c20.checks:
        if k.judges_an_absence:
            named = {(e.metric, e.op, e.value) for e in k.exercises}
            assert (f"instrument.{counters[k.metric]}_known_pct", ">=", 100) in named, k.metric
