"""verdicts.json, the verdict board and the verdict changes between two runs (issue 42):
the file says its format and holds per check what the report shows; the board of the
report agrees with it for every claim; `harness compare` and a report with a baseline list
the claims whose verdict changed, a claim that no longer holds first and as a regression.

The runs are written through the real results writer (tests/stored_runs.py) with a claims
ledger of one claim, so that its verdict is known: p99 1.2 ms is inside the claimed band,
2.0 ms is not."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.base.errors import BadInput
from harness.cli import main
from harness.model.ledger import Claim, ClaimCheck, Control
from harness.publish.outputs import publish
from harness.verdict import verdicts_json as verdicts
from tests import TESTS, stored_runs

V2 = TESTS / "fixtures" / "results-v2" / "run"


def _claims() -> list[dict]:
    check = ClaimCheck(
        "kv",
        "bench",
        "get.p99_ms",
        band=(1.0, 1.4),
        unit="ms",
        better="lower",
        observed="the client's own latency histogram",
        controls=[Control("set.rps", ">", "a second metric the same run must see", value=1, kind="instrument")],
        no_mechanism_off="a test ledger: nothing can be switched off",
    )
    other = ClaimCheck(
        "kv",
        "bench",
        "get.rps",
        op=">=",
        value=1000,
        unit="req/s",
        better="higher",
        observed="the client's count",
        no_instrument="a test ledger",
        no_mechanism_off="a test ledger",
    )
    return [
        Claim("T1", "9.1", "GET P99 is about 1.2 ms. A second sentence the board leaves out.", [check]).to_json(),
        Claim("T2", "9.2", "GET serves at least 1000 req/s.", [other]).to_json(),
    ]


def _run(root: Path, i: int, p99: float) -> Path:
    d = stored_runs.write_run(root, i, {"get.p99_ms": [p99] * 3, "get.rps": [100000.0] * 3, "set.rps": [90000.0] * 3})
    data = json.loads((d / "results.json").read_text())
    data["claims"] = _claims()
    (d / "results.json").write_text(json.dumps(data))
    return d


def test_verdicts_json_says_its_format_and_holds_each_check(tmp_path):
    d = _run(tmp_path, 1, 1.2)
    publish(d)
    doc = json.loads((d / "verdicts.json").read_text())
    assert doc["format"] == "harness-verdicts" and doc["version"] == verdicts.VERSION
    assert doc["run_id"] == d.name and doc["profile"] == "local" and doc["exit_code"] == 0
    (t1,) = [c for c in doc["claims"] if c["id"] == "T1"]
    assert t1["verdict"] == "reproduced" and t1["holds"] is True
    (k,) = t1["checks"]
    assert (k["suite"], k["case"], k["metric"]) == ("kv", "bench", "get.p99_ms")
    assert k["claimed"]["band"] == [1.0, 1.4] and k["claimed"]["better"] == "lower"
    assert k["measured"]["median"] == pytest.approx(1.2) and k["measured"]["values"] == pytest.approx([1.2] * 3)
    ctl = {c["kind"]: c for c in k["controls"]}
    assert ctl["instrument"]["held"] is True and ctl["instrument"]["measured"]["median"] == pytest.approx(90000)
    assert ctl["mechanism_off"]["none"].startswith("a test ledger")
    assert set(k["conditions"]) == {"needed", "measured"} and k["reason"]
    assert [t["verdict"] for t in doc["thresholds"]] == ["pass"]


def _board(html: str) -> dict[str, str]:
    """The verdict board's rows as the page shows them: claim id -> verdict."""
    board = html[html.index('id="verdict-board"') :]
    board = board[: board.index("</table>")]
    rows = re.findall(
        r'<th scope="row"><a href="#claim-([^"]+)">[^<]*</a></th>.*?<span class="v [^"]*">([^<]*)</span>', board
    )
    return dict(rows)


@pytest.mark.parametrize("p99", [1.2, 2.0])
def test_the_board_agrees_with_verdicts_json_for_every_claim(tmp_path, p99):
    d = _run(tmp_path, 1, p99)
    out = publish(d)
    html = out.report.read_text()
    doc = json.loads((d / "verdicts.json").read_text())
    assert _board(html) == {c["id"]: c["verdict"] for c in doc["claims"]}
    assert len(doc["claims"]) == 2
    assert html.index('id="verdict-board"') < html.index('id="claims"') < html.index('id="environment"')
    assert "GET P99 is about 1.2 ms." in _board_text(html) and "A second sentence" not in _board_text(html)
    assert 'id="claim-T1"' in html  # the row's link has its target


def _board_text(html: str) -> str:
    board = html[html.index('id="verdict-board"') :]
    return board[: board.index("</table>")]


def test_the_board_of_a_real_stored_run_agrees_too(tmp_path):
    """A folder written by a real `harness run` (before verdicts.json existed): its verdicts
    are computed from results.json, and the board shows the same."""
    d = tmp_path / "stored"
    shutil.copytree(V2, d)
    doc, source = verdicts.load(d)
    assert source.startswith("computed now from its results.json (it has no verdicts.json")
    out = publish(d)
    assert _board(out.report.read_text()) == {c["id"]: c["verdict"] for c in doc["claims"]}
    assert verdicts.load(d)[1] == str(d / "verdicts.json")


def test_compare_lists_the_claims_whose_verdict_changed(tmp_path, capsys):
    old, new = _run(tmp_path, 1, 1.2), _run(tmp_path, 2, 2.0)
    for d in (old, new):
        publish(d)
    with pytest.raises(SystemExit) as e:
        main(["compare", str(old), str(new), "--allow-mismatch"])
    out = capsys.readouterr().out
    assert e.value.code == 1, out  # T1 held and no longer does
    assert "1 claim(s) changed verdict:" in out
    assert "T1: reproduced -> not reproduced (regressed) [kv/bench get.p99_ms: reproduced -> not reproduced]" in out
    assert "T2" not in out.split("claim(s) changed verdict:")[1].split("\n\n")[0]
    with pytest.raises(SystemExit):
        main(["compare", str(old), str(new), "--allow-mismatch", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert [(c["id"], c["before"], c["after"], c["kind"]) for c in doc["verdict_changes"]] == [
        ("T1", "reproduced", "not reproduced", "regressed")
    ]
    assert all(str(d / "verdicts.json") in " ".join(doc["verdicts_from"]) for d in (old,))
    with pytest.raises(SystemExit) as e:  # the other way round: recovered, no regression of a verdict
        main(["compare", str(new), str(old), "--allow-mismatch"])
    assert "T1: not reproduced -> reproduced (recovered)" in capsys.readouterr().out


def test_compare_of_runs_with_the_same_verdicts_says_so(tmp_path, capsys):
    old, new = _run(tmp_path, 1, 1.2), _run(tmp_path, 2, 1.21)
    with pytest.raises(SystemExit) as e:
        main(["compare", str(old), str(new), "--allow-mismatch"])
    out = capsys.readouterr().out
    assert "no claim's verdict changed" in out and e.value.code == 0, out
    assert "computed now from its results.json" in out  # neither folder had a verdicts.json yet


def test_a_report_with_a_baseline_shows_what_changed_first(tmp_path):
    old, new = _run(tmp_path, 1, 1.2), _run(tmp_path, 2, 2.0)
    publish(old)
    with pytest.raises(SystemExit) as e:  # `harness report RUN --baseline OLD`, as the README shows it
        main(["report", str(new), "--baseline", str(old)])
    assert e.value.code == 0
    html = (new / "report.html").read_text()
    top = html[html.index('id="changes"') : html.index('id="verdict-board"')]  # one line above the board
    assert "1 claim(s) changed verdict (regressed: T1); 1 metric(s) regressed." in re.sub("<[^>]+>", "", top)
    board = _board_text(html)
    assert board.index('href="#claim-T1"') < board.index('href="#claim-T2"')
    assert "regressed, was reproduced" in board  # the changed claim first, with its old verdict
    changes = html[html.index('id="changes-detail"') : html.index('id="claims"')]
    assert re.search(
        r'href="#claim-T1">T1</a></th><td><span class="v v-reproduced">reproduced</span></td>'
        r'<td><span class="v v-not-reproduced">not reproduced</span></td><td>regressed</td>',
        changes,
    )
    assert "get.p99_ms" in changes  # the metric that regressed


def test_an_edited_verdicts_json_is_not_trusted(tmp_path):
    """A verdicts.json of another format: the verdicts are computed again; a damaged one is
    one line naming it (issue 53: never a traceback, never read as it is)."""
    d = _run(tmp_path, 1, 1.2)
    publish(d)
    (d / "verdicts.json").write_text('{"format": "harness-verdicts", "version": 99, "claims": []}')
    doc, source = verdicts.load(d)
    assert "not version 1" in source and [c["id"] for c in doc["claims"]] == ["T1", "T2"]
    (d / "verdicts.json").write_text("{")
    with pytest.raises(BadInput, match="verdicts.json is damaged"):
        verdicts.load(d)


def test_a_claim_not_run_on_one_side_is_new_or_unjudged_never_a_regression():
    def doc(verdict, holds):
        return {"claims": [{"id": "C1", "verdict": verdict, "holds": holds, "checks": []}]}

    assert verdicts.changes(doc("not run", False), doc("reproduced", True))[0]["kind"] == verdicts.NEW
    assert verdicts.changes(doc("reproduced", True), doc("not run", False))[0]["kind"] == verdicts.UNJUDGED
    assert verdicts.changes(doc("reproduced", True), doc("inconclusive", False))[0]["kind"] == verdicts.REGRESSED
    assert verdicts.changes(doc("reproduced", True), {"claims": []})[0]["kind"] == verdicts.UNJUDGED
    assert verdicts.changes(doc("reproduced", True), doc("reproduced", True)) == []


def test_compare_says_when_the_ledger_that_judged_the_runs_differs(tmp_path, capsys):
    old, new = _run(tmp_path, 1, 1.2), _run(tmp_path, 2, 2.0)
    publish(old)
    data = json.loads((new / "results.json").read_text())
    data["claims"][0]["checks"][0]["band"] = [1.0, 2.5]  # the ledger changed: 2.0 ms is now inside
    (new / "results.json").write_text(json.dumps(data))
    publish(new)
    a, b = (json.loads((d / "verdicts.json").read_text())["ledger_sha256"] for d in (old, new))
    assert len(a) == 64 and a != b
    with pytest.raises(SystemExit):
        main(["compare", str(old), str(new), "--allow-mismatch"])
    out = capsys.readouterr().out
    assert "verdicts: the two runs were judged by different ledgers" in out
    assert "no claim's verdict changed" in out  # T1 reproduced on both sides, by different bands
    with pytest.raises(SystemExit):
        main(["compare", str(old), str(_run(tmp_path, 3, 1.2)), "--allow-mismatch"])
    assert "different ledgers" not in capsys.readouterr().out  # the same ledger: no such line
