"""Hostile claim packs and identifiers (issue 63, items 1, 4, 5, 6 and 7): one rule for every
identifier (harness.model.identifiers), applied where a name comes in (`validate`, the pack
loader, the ledger's loader) and where it is read back (results.json, verdicts.json), so
that a run never measures every case and then refuses its own results; a claim id that is
empty, holds a newline or an escape, is 71 characters long, has a superscript digit or 5,000
digits is one line and exit 2 from `validate`, `harness packs` and `run --pack --dry-run`
(never exit 3); a control or reference that measures the checked metric itself is refused;
a pack's parameter error names pack.yaml; verdicts.json escapes every text; a pack name
that is also a folder here is refused with both spellings.

Packs are real folders under tmp_path (the example of docs/packs.md, edited), and the
command line runs as a real process (`python -m harness`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import BadInput
from harness.model import identifiers, ledger, ledger_parse, packs, spec
from harness.model.stored_run import claim_id_problem, load_run, write_manifest, write_results
from harness.verdict import verdicts_json
from harness.verdict.analysis import analyze
from tests import REPO
from tests.system.test_hostile import assert_one_line
from tests.system.test_packs import write_docs_pack

HOSTILE_IDS = {
    "empty": "",
    "a newline": "C1\n",
    "71 characters": "C" * 71,
    "a superscript digit": "C²",
    "5000 digits": "9" * 5000,
    "an escape": "C1\x1b[31m",
}
# the property's edge cases: each accepted by the loader must be read back; the refused must stay refused
ACCEPTED_IDS = ["C1", "c", "0", "C11a", "I23", "a.b_c-d", "Z" * 64, "9" * 64, "C-", "A."]
REFUSED_IDS = [
    *HOSTILE_IDS.values(),
    " C1",
    "C1 ",
    "C 1",
    "-C1",
    ".C1",
    "..",
    "Ĉ1",
    "C٣",
    "C1\u202e",
    "C1\r",
    "C1\x85",
    "Z" * 65,
    "C1/2",
    "<b>",
]
ACCEPTED_METRICS = ["m", "LRANGE_300 (first 300 elements).rps", "reuse.max.token_hit_pct", "a" * 200, "hit²"]
REFUSED_METRICS = ["", "m\n", "m ", " m", "m\x1b[2J", "m\u202e", "m\x85", "m\u2028x", "a" * 201]


def harness(*args, cwd: Path = REPO, prefix: tuple = ("-m", "harness")) -> tuple[int, str, str]:
    """The command line as a real process: (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, *prefix, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def write_pack(folder: Path, claims=None, pack=None) -> Path:
    """docs/packs.md's example pack in `folder`, its claims.yaml and pack.yaml edited by `claims`
    and `pack` (each given the file's data), written back as YAML."""
    write_docs_pack(folder)
    for name, edit in (("claims.yaml", claims), ("pack.yaml", pack)):
        if edit is not None:
            data = yaml.safe_load((folder / name).read_text())
            edit(data)
            (folder / name).write_text(yaml.safe_dump(data, allow_unicode=True, width=10**6))
    return folder


def _claim_id(cid):
    return lambda d: d["claims"][0].update(id=cid)


def _check(**changes):
    return lambda d: d["claims"][0]["checks"][0].update(changes)


# ---- item 1 and 4: a hostile claim id is refused where it comes in, one line, exit 2 --------
@pytest.mark.parametrize("name", list(HOSTILE_IDS))
def test_a_hostile_claim_id_is_one_line_and_exit_2_from_validate_and_run_dry_run(tmp_path, name):
    pack = write_pack(tmp_path / "my-pack", claims=_claim_id(HOSTILE_IDS[name]))
    for cmd in (("validate", pack), ("run", "--pack", pack, "--dry-run")):
        code, out, err = harness(*cmd)
        assert code != 3, (cmd, err[-2000:])  # never "a bug in the harness"
        line = assert_one_line((code, out, err), (2,), "claims[0].id: claim id")
        assert str(pack / "claims.yaml") in line and len(line) < 600, line


@pytest.mark.parametrize("name", ["a superscript digit", "5000 digits", "an escape"])
def test_harness_packs_refuses_a_shipped_pack_with_a_hostile_claim_id_with_exit_2(tmp_path, name):
    """`harness packs` lists the shipped packs: here the packs folder is a tmp_path folder
    holding one pack with the hostile id (the real command line, its packs folder moved)."""
    shipped = tmp_path / "packs"
    write_pack(shipped / "hostile", claims=_claim_id(HOSTILE_IDS[name]), pack=lambda d: d.update(name="hostile"))
    moved = (
        "-c",
        "import sys; from pathlib import Path; from harness.model import packs; "
        "packs.PACKS_DIR = Path(sys.argv[1]); from harness.cli import main; main(sys.argv[2:])",
    )
    for cmd in (("packs",), ("run", "--pack", "hostile", "--dry-run")):
        code, out, err = harness(shipped, *cmd, prefix=moved)
        assert code != 3, (cmd, err[-2000:])
        assert_one_line((code, out, err), (2,), "hostile/claims.yaml: claims[0].id: claim id")


def test_a_claim_ids_order_never_raises():
    for cid in ("C²", "9" * 5000, "C٣", "", "C1\n", "C10", "C2"):
        assert isinstance(identifiers.id_order(cid), tuple)
    assert sorted(["C10", "C2", "C²", "9" * 5000], key=identifiers.id_order)[:2] == ["C2", "C10"]
    assert ledger.Claim("C²", "1", "t", []).order[0] == 10**identifiers.ORDER_DIGITS  # no ASCII digit: last


# ---- item 1: what the loader accepts, the reader reads back -------------------------------
def _ledger(folder: Path, cid: str, metric: str = "reuse.max.token_hit_pct") -> Path:
    """A pack's ledger with claim `cid` whose check names `metric`, in its own folder (the
    ledger cache is keyed by path)."""
    pack = write_pack(folder, claims=lambda d: (_claim_id(cid)(d), _check(metric=metric)(d)))
    return pack / "claims.yaml"


def _loaded(path: Path) -> list[ledger.Claim] | str:
    """The ledger's claims, or the loader's one line refusing it."""
    try:
        return ledger_parse.load_claims_file(path)
    except BadInput as e:
        return str(e)


def _read_back(run_dir: Path, claims: list[ledger.Claim]) -> None:
    """The claims stored as a run stores them, read back by load_run and verdicts.json's schema."""
    run_dir.mkdir()
    write_manifest(run_dir, {"run_id": run_dir.name, "profile": "local", "target": "local", "suites": ["kv-trace"]})
    write_results(run_dir, [], {}, claims)
    run = load_run(run_dir)
    assert [c.id for c in run.claims] == [c.id for c in claims]
    doc = verdicts_json.document(run, analyze(run))
    assert verdicts_json.schema_problem(doc) == ""
    assert [c["id"] for c in doc["claims"]] == [c.id for c in claims]


def _loader_accepts_reader_reads(folder: Path, cid: str, metric: str = "reuse.max.token_hit_pct") -> bool:
    got = _loaded(_ledger(folder, cid, metric))
    if isinstance(got, str):
        assert "\n" not in got and "claims.yaml: claims[0]" in got, got
        return False
    assert [c.id for c in got] == [cid] and claim_id_problem(cid) == "" and identifiers.CLAIM_ID.ok(cid)
    _read_back(folder / "run", got)
    return True


@pytest.mark.parametrize("cid", ACCEPTED_IDS + REFUSED_IDS, ids=ascii)
def test_every_claim_id_the_loader_accepts_is_read_back_and_the_hostile_ones_are_refused(tmp_path, cid):
    assert _loader_accepts_reader_reads(tmp_path / "p", cid) == (cid in ACCEPTED_IDS)
    assert (claim_id_problem(cid) == "") == (cid in ACCEPTED_IDS)  # the reader's rule is the loader's


@pytest.mark.parametrize("metric", ACCEPTED_METRICS + REFUSED_METRICS, ids=ascii)
def test_every_metric_name_the_loader_accepts_is_read_back(tmp_path, metric):
    assert _loader_accepts_reader_reads(tmp_path / "p", "C1", metric) == (metric in ACCEPTED_METRICS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=70)
    | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,70}", fullmatch=True)
)
def test_any_claim_id_the_loader_accepts_the_reader_reads_back(cid):
    with tempfile.TemporaryDirectory() as tmp:
        accepted = _loader_accepts_reader_reads(Path(tmp) / "p", cid)
    assert accepted == identifiers.CLAIM_ID.ok(cid)


def test_a_run_of_a_pack_with_an_edge_id_and_escapes_reads_its_own_results(tmp_path):
    """The longest id the rule allows and a claim whose texts hold an escape: the run writes its
    report, JUnit file and verdicts.json, verdicts.json shows every escape as text (item 7),
    and `harness report` reads the folder again."""
    cid = "Z" * 63 + "9"
    esc = "\x1b[31m"

    def claims(d):
        claim, check = d["claims"][0], d["claims"][0]["checks"][0]
        claim.update(id=cid, text=f"A prefix cache reuses{esc} more than 30%.", section=f"2{esc}")
        check.update(observed=f"replayed{esc} request by request")
        check["instrument"]["text"] = f"copies{esc} must hit"
        check["reference"]["text"] = f"the recount{esc}"

    pack = write_pack(tmp_path / "my-pack", claims=claims)
    code, out, err = harness("run", "--pack", pack, "--results-dir", tmp_path / "results")
    assert code == 0, err[-3000:]
    (run_dir,) = (tmp_path / "results").iterdir()
    assert all((run_dir / f).is_file() for f in ("report.html", "junit.xml", "verdicts.json")), list(run_dir.iterdir())
    doc = json.loads((run_dir / "verdicts.json").read_text())
    (claim,) = doc["claims"]
    assert claim["id"] == cid and claim["verdict"] == "reproduced", claim
    texts = json.dumps(doc, ensure_ascii=False)
    assert "\x1b" not in texts and texts.count("\\\\x1b[31m") >= 5, texts
    assert claim["text"] == "A prefix cache reuses\\x1b[31m more than 30%."
    code, out, err = harness("report", run_dir)
    assert code == 0, err[-3000:]


# ---- item 5: a control or reference that measures the checked metric itself -----------------
def _with_dep(d):
    ref = d["claims"][0]["checks"][0]["reference"]
    ref["independent_of"].append(ref["module"])


VACUOUS = {
    "reference is the checked metric": (
        lambda d: d["claims"][0]["checks"][0]["reference"].update(metric="reuse.max.token_hit_pct"),
        "checks[0].reference.metric",
    ),
    "instrument is the checked metric": (
        lambda d: d["claims"][0]["checks"][0]["instrument"].update(metric="reuse.max.token_hit_pct"),
        "checks[0].instrument.metric",
    ),
    "mechanism off is the checked metric": (
        lambda d: d["claims"][0]["checks"][0]["mechanism_off"].update(metric="reuse.max.token_hit_pct"),
        "checks[0].mechanism_off.metric",
    ),
    "independent of its own module": (_with_dep, "checks[0].reference.independent_of"),
    "independent of its own package": (
        lambda d: d["claims"][0]["checks"][0]["reference"]["independent_of"].append("harness.experiments.kv_trace"),
        "checks[0].reference.independent_of",
    ),
}


@pytest.mark.parametrize("name", list(VACUOUS))
def test_a_vacuous_reference_or_control_is_refused_by_validate(tmp_path, name):
    edit, field = VACUOUS[name]
    pack = write_pack(tmp_path / "my-pack", claims=edit)
    line = assert_one_line(harness("validate", pack), (2,), f"claims.yaml: claims[0].{field}")
    assert str(pack / "claims.yaml") in line


def test_the_shipped_ledgers_have_no_vacuous_check():
    code, out, err = harness("validate")
    assert code == 0, err[-2000:]
    assert "claims.yaml: ok" in out and "pack mooncake" in out


# ---- item 6: a pack's parameter error names pack.yaml --------------------------------------
@pytest.mark.parametrize(
    "value,needle",
    [(0.01, "must be at least 0.1"), (-5, "must be at least 0.1"), ("many", "expected"), (10**400, "too large")],
    ids=["below", "negative", "text", "huge"],
)
def test_an_out_of_range_pack_parameter_names_pack_yaml_and_the_field(tmp_path, value, needle):
    pack = write_pack(
        tmp_path / "my-pack", pack=lambda d: d["params"]["kv-trace"]["prefix-cache"].update(gpu_memory_gib=value)
    )
    for cmd in (("validate", pack), ("run", "--pack", pack, "--dry-run")):
        line = assert_one_line(
            harness(*cmd), (2,), f"{pack / 'pack.yaml'}: params.kv-trace.prefix-cache.gpu_memory_gib"
        )
        assert needle in line and "suite.yaml" not in line, line


def test_an_unknown_pack_parameter_names_pack_yaml(tmp_path):
    pack = write_pack(tmp_path / "my-pack", pack=lambda d: d["params"]["kv-trace"]["prefix-cache"].update(gpu_memory=4))
    line = assert_one_line(harness("validate", pack), (2,), f"{pack / 'pack.yaml'}: params.kv-trace.prefix-cache")
    assert "'gpu_memory'" in line and "suite.yaml" not in line


# ---- item 7: names by full-match rules; a name that is also a folder here ------------------
@pytest.mark.parametrize("name", ["my-pack\n", "my-pack ", "My-pack", "my_pack", "m" * 42, "mÿ-pack"])
def test_a_pack_name_outside_the_rule_is_refused(tmp_path, name):
    pack = write_pack(tmp_path / "my-pack", pack=lambda d: d.update(name=name))
    assert_one_line(harness("validate", pack), (2,), "pack.yaml: field 'name': pack name")


def test_a_shipped_pack_name_with_a_newline_is_one_line_naming_the_name(tmp_path):
    line = assert_one_line(harness("run", "--pack", "mooncake\n", "--dry-run", cwd=tmp_path), (2,), "give mooncake")
    assert "no spaces or newlines" in line


def test_a_pack_name_that_is_also_a_folder_here_is_refused_with_both_choices(tmp_path):
    write_pack(tmp_path / "mooncake")
    shipped = packs.PACKS_DIR / "mooncake"
    for cmd in (("run", "--pack", "mooncake", "--dry-run"), ("validate", "mooncake")):
        line = assert_one_line(harness(*cmd, cwd=tmp_path), (2,), "both a shipped claim pack and a folder here")
        assert "give ./mooncake for the folder" in line and f"or {shipped} for the shipped pack" in line, line
    code, out, err = harness("run", "--pack", "./mooncake", "--dry-run", cwd=tmp_path)
    assert code == 0 and "claim pack my-pack" in out, err[-2000:]
    code, out, err = harness("run", "--pack", shipped, "--dry-run", cwd=tmp_path)
    assert code == 0 and "claim pack mooncake" in out, err[-2000:]
    code, out, err = harness("packs", cwd=tmp_path)  # the list is of the shipped packs, whatever is here
    assert code == 0 and "\nmooncake " in out, err[-2000:]
    code, out, err = harness("validate", cwd=tmp_path)  # and so is what a plain validate checks
    assert code == 0 and "packs/mooncake/pack.yaml: ok (pack mooncake" in out, err[-2000:]


def test_names_with_a_trailing_newline_are_refused_by_the_suite_loader(tmp_path):
    base = yaml.safe_load((spec.SUITES_DIR / "kv_trace" / "suite.yaml").read_text())
    for edit, needle in (
        (lambda d: d.update(name="kv-trace2\n"), "suite name"),
        (lambda d: d["cases"][0].update(name=d["cases"][0]["name"] + "\n"), "case name"),
        (lambda d: d["claim"].update(ids=["C1\n"]), "claim.ids[0]: claim id"),
    ):
        data = json.loads(json.dumps(base))
        edit(data)
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(data, allow_unicode=True))
        with pytest.raises(BadInput, match=re.escape(needle)) as e:
            spec.load_suite_file(path)
        assert "\n" not in str(e.value)
