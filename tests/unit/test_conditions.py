"""Conditions read off the machines (issue 39, point 7), on stored results folders.

The ledger's six-host checks (C12, C13: `redis_hosts: 6, loadgen_separate: true`) and its
A100 checks (`gpu: A100`) are judged on results folders whose manifests say what a run
measured: six hosts that are one machine (the same boot id, as the lab in a box's network
namespaces or /etc/hosts aliases give) keep the six-host checks `not comparable here`, six
machines do not; an RTX A1000 keeps the A100 checks not comparable, an A100-SXM4 does not.
Numbers are compared as numbers, a fact that varied across repetitions meets nothing, and
what was not measured is unknown.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.infra.host_identity import HERE
from harness.model import conditions
from harness.model.ledger import Claim
from harness.model.spec import SuiteRun
from harness.model.stored_run import Metric, Record, load_run, write_manifest, write_results
from harness.verdict.analysis import Outcome, analyze
from tests import REPO

CLAIMS_YAML = REPO / "harness" / "experiments" / "claims.yaml"
KEPT = ("suite", "case", "metric", "op", "value", "unit", "band", "band_reason", "better", "conditions")


def boot(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-{i:012x}"


def ident(i: int, **extra) -> dict:
    return {"boot_id": boot(i), "machine_id": f"{i:032x}", "hostname": f"host-{i}", "via": "ssh", **extra}


def ledger_checks(wanted) -> dict[str, list[dict]]:
    """The real ledger's checks whose conditions name `wanted` keys, by claim id: read from
    harness/experiments/claims.yaml as it stands (only what the comparison needs)."""
    raw = yaml.safe_load(CLAIMS_YAML.read_text())
    out: dict[str, list[dict]] = {}
    for claim in raw["claims"]:
        for chk in claim.get("checks") or []:
            if set(wanted) & set(chk.get("conditions") or {}):
                out.setdefault(claim["id"], []).append({k: chk[k] for k in KEPT if k in chk})
    return out


SIX_HOST = {cid: checks for cid, checks in ledger_checks(["redis_hosts"]).items()}
A100 = {
    cid: [c for c in checks if c["conditions"].get("gpu") == "A100"] for cid, checks in ledger_checks(["gpu"]).items()
}
A100 = {cid: checks for cid, checks in A100.items() if checks}


def stored_run(tmp_path: Path, manifest: dict, checks: dict[str, list[dict]]) -> Path:
    """A results folder holding `manifest`, the ledger's `checks` and one repetition of each
    checked case, run with the parameters the check's conditions name (so that only what the
    manifest says can make it not comparable)."""
    run_dir = tmp_path / "20260101-000000-run001"
    (run_dir / "raw").mkdir(parents=True)
    write_manifest(run_dir, {"run_id": run_dir.name, "profile": "lab", "target": "inventory.yml", **manifest})
    records, suites, claims = [], {}, []
    # kv-tiers' l1_device is the name the device reports (torch.cuda.get_device_name): the run's GPU
    gpus = [g["name"] for g in (manifest.get("gpu") or {}).get("gpus") or []]
    for cid, chks in checks.items():
        claims.append(Claim.from_json({"id": cid, "section": "1", "text": "t", "checks": chks}))
        for chk in chks:
            params = {
                k: v
                for k, v in chk["conditions"].items()
                if k not in ("redis_hosts", "loadgen_separate", "gpu", "l1_device")
            }
            facts = {"l1_device": ", ".join(dict.fromkeys(gpus)) or "cpu"} if "l1_device" in chk["conditions"] else {}
            records.append(
                Record(
                    suite=chk["suite"],
                    case=chk["case"],
                    repetition=1,
                    metrics={chk["metric"]: Metric(1.0, "")},
                    params=params,
                    facts=facts,
                )
            )
            suites.setdefault(chk["suite"], set()).add(chk["case"])
    runs = {
        s: SuiteRun.from_json(s, {"cases": [{"name": c, "driver": "d"} for c in sorted(cases)]})
        for s, cases in suites.items()
    }
    write_results(run_dir, records, runs, claims)
    return run_dir


def verdicts(run_dir: Path) -> list:
    a = analyze(load_run(run_dir))
    return [cv for c in a.claims for cv in c.checks]


SIX_NODES = {
    "nodes": [{"host": f"10.0.0.{i}", "port": 6379, "role": "primary" if i <= 3 else "replica"} for i in range(1, 7)]
}


def test_the_ledger_has_the_checks_these_tests_judge():
    assert {"C12", "C13"} <= set(SIX_HOST), sorted(SIX_HOST)
    assert all(
        c["conditions"]["redis_hosts"] == 6 and c["conditions"]["loadgen_separate"] is True
        for cid in ("C12", "C13")
        for c in SIX_HOST[cid]
    )
    assert sum(len(v) for v in A100.values()) >= 4, A100


def test_six_hosts_that_are_one_machine_are_one_host(tmp_path):
    """Six addresses (namespaces or aliases) that answered with one boot id, the load
    generator too: the six-host checks are not comparable, and say it is one machine."""
    one = ident(7)
    man = {
        "target_nodes": SIX_NODES,
        "loadgen": {"address": "10.0.0.9"},
        "host_identity": {HERE: ident(1), **{f"10.0.0.{i}": one for i in (1, 2, 3, 4, 5, 6, 9)}},
    }
    got = verdicts(stored_run(tmp_path, man, SIX_HOST))
    assert len(got) >= 3
    for cv in got:
        assert cv.outcome is Outcome.NOT_COMPARABLE, (cv.check.metric, cv.reason)
        assert "redis_hosts: measured 1 (10.0.0.1 = 10.0.0.2 = 10.0.0.3" in cv.reason, cv.reason
        assert "loadgen_separate: measured no" in cv.reason, cv.reason


def test_six_namespaces_of_the_harness_machine_are_this_machine(tmp_path):
    here = ident(1)
    man = {
        "target_nodes": {"nodes": [{"host": f"127.77.0.1{i}", "port": 6379} for i in range(1, 7)]},
        "loadgen": {"address": "127.77.0.17"},
        "host_identity": {HERE: here, **{f"127.77.0.1{i}": {**here, "hostname": f"ls-h{i}"} for i in range(1, 8)}},
    }
    for cv in verdicts(stored_run(tmp_path, man, SIX_HOST)):
        assert cv.outcome is Outcome.NOT_COMPARABLE
        assert "redis_hosts: measured 1 (this machine, as 127.77.0.11, 127.77.0.12" in cv.reason, cv.reason
        assert "loadgen_separate: measured no (load generator on this machine, as 127.77.0.17)" in cv.reason


def test_six_machines_and_a_separate_load_generator_are_comparable(tmp_path):
    man = {
        "target_nodes": SIX_NODES,
        "loadgen": {"address": "10.0.0.9"},
        "host_identity": {HERE: ident(1), **{f"10.0.0.{i}": ident(10 + i) for i in (1, 2, 3, 4, 5, 6, 9)}},
    }
    got = verdicts(stored_run(tmp_path, man, SIX_HOST))
    assert got and all(cv.outcome is not Outcome.NOT_COMPARABLE for cv in got), [cv.reason for cv in got]
    assert all(cv.facts["redis_hosts"] == 6 and cv.facts["loadgen_separate"] is True for cv in got)


def test_two_aliases_of_one_machine_among_six_addresses_make_five_hosts(tmp_path):
    ids = {f"10.0.0.{i}": ident(10 + i) for i in (1, 2, 3, 4, 5, 9)}
    ids["10.0.0.6"] = ids["10.0.0.5"]  # an /etc/hosts alias: the same kernel
    man = {"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}, "host_identity": {HERE: ident(1), **ids}}
    for cv in verdicts(stored_run(tmp_path, man, SIX_HOST)):
        assert cv.outcome is Outcome.NOT_COMPARABLE and "redis_hosts: measured 5" in cv.reason, cv.reason
        assert "10.0.0.5 = 10.0.0.6" in cv.reason and "loadgen_separate" not in cv.reason


def test_a_load_generator_on_a_redis_host_is_not_separate(tmp_path):
    ids = {f"10.0.0.{i}": ident(10 + i) for i in range(1, 7)}
    ids["10.0.0.9"] = ids["10.0.0.3"]
    man = {"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}, "host_identity": {HERE: ident(1), **ids}}
    for cv in verdicts(stored_run(tmp_path, man, SIX_HOST)):
        assert cv.outcome is Outcome.NOT_COMPARABLE
        assert "loadgen_separate: measured no (load generator on 10.0.0.9), claim yes" in cv.reason, cv.reason


def test_a_host_not_measured_makes_the_six_host_checks_not_comparable(tmp_path):
    ids = {f"10.0.0.{i}": ident(10 + i) for i in (1, 2, 3, 4, 5, 6, 9)}
    ids["10.0.0.4"] = {"error": "ssh exit 255: Connection timed out", "via": "ssh redis-4"}
    man = {"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}, "host_identity": {HERE: ident(1), **ids}}
    for cv in verdicts(stored_run(tmp_path, man, SIX_HOST)):
        assert cv.outcome is Outcome.NOT_COMPARABLE
        assert "redis_hosts: not measured (10.0.0.4: ssh exit 255: Connection timed out), claim 6" in cv.reason
        assert "loadgen_separate: not measured" in cv.reason


def test_an_old_results_folder_without_identities_counts_no_addresses(tmp_path):
    """Six address strings without identities: unknown, not six; loopback is this machine."""
    man = {"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}}
    for cv in verdicts(stored_run(tmp_path, man, SIX_HOST)):
        assert cv.outcome is Outcome.NOT_COMPARABLE
        assert "redis_hosts: not measured (no host identity recorded for 10.0.0.1, 10.0.0.2" in cv.reason, cv.reason
    local = {"target_nodes": {"nodes": [{"host": "127.0.0.1", "port": 7000 + i} for i in range(6)]}}
    facts = conditions.run_facts(local)
    assert (facts["redis_hosts"], facts["loadgen_separate"]) == (1, False)
    one_box = {
        "target_nodes": {"nodes": [{"host": "gpu-box", "port": 7000 + i} for i in range(6)]},
        "loadgen": {"address": "gpu-box"},
    }  # one address for everything is one host
    facts = conditions.run_facts(one_box)
    assert (facts["redis_hosts"], facts["loadgen_separate"], facts["redis_host_names"]) == (1, False, "gpu-box")


@pytest.mark.parametrize(
    "gpus,comparable",
    [
        (["NVIDIA RTX A1000 6GB Laptop GPU"], False),
        (["NVIDIA A100-SXM4-80GB"], True),
        (["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"], True),
        (["NVIDIA A100 80GB PCIe"], True),
        (["NVIDIA A10"], False),
        (["NVIDIA A100-SXM4-80GB", "NVIDIA RTX A1000 6GB Laptop GPU"], False),  # which one ran it is not known
    ],
)
def test_the_a100_checks_need_an_a100(tmp_path, gpus, comparable):
    man = {"gpu": {"present": True, "gpus": [{"index": i, "name": n} for i, n in enumerate(gpus)]}}
    got = verdicts(stored_run(tmp_path, man, A100))
    assert got
    for cv in got:
        assert (cv.outcome is not Outcome.NOT_COMPARABLE) is comparable, (gpus, cv.reason)
        if not comparable:
            assert f"gpu: measured {', '.join(gpus)}, claim A100" in cv.reason


def test_no_gpu_and_gpu_not_measured_are_not_comparable(tmp_path):
    cv = verdicts(stored_run(tmp_path, {"gpu": {"present": False, "reason": "NVML found no devices"}}, A100))[0]
    assert cv.outcome is Outcome.NOT_COMPARABLE and "gpu: measured none, claim A100" in cv.reason
    unasked = {"gpu": {"present": False, "reason": "nvidia-ml-py (pynvml) is not installed"}}
    assert conditions.differ({"gpu": "A100"}, conditions.run_facts(unasked)) == ["gpu: not measured, claim A100"]
    assert conditions.differ({"gpu": "A100"}, conditions.run_facts({})) == ["gpu: not measured, claim A100"]


@pytest.mark.parametrize(
    "need,name,ok",
    [
        ("A100", "NVIDIA A100-PCIE-40GB", True),
        ("A100", "NVIDIA A100X", False),  # the converged card is another product name: claim it by name
        ("A100 80GB", "NVIDIA A100-SXM4-80GB", True),
        ("A100 80GB", "NVIDIA A100-PCIE-40GB", False),
        ("A100-SXM4", "NVIDIA A100 80GB PCIe", False),
        ("H100", "NVIDIA H100 80GB HBM3", True),
        ("H100", "NVIDIA H100 NVL", True),
        ("H100", "NVIDIA H200", False),
        ("H20", "NVIDIA H200", False),
        ("H200", "NVIDIA H200", True),
        ("L4", "NVIDIA L4", True),
        ("L4", "NVIDIA L40S", False),
        ("A10", "NVIDIA A10G", False),
        ("V100", "Tesla V100-SXM2-16GB", True),
        ("RTX 4090", "NVIDIA GeForce RTX 4090", True),
    ],
)
def test_gpu_models_are_matched_as_models(need, name, ok):
    assert conditions.matches("gpu", need, name) is ok


@pytest.mark.parametrize(
    "need,have,ok",
    [
        (20, "10 | 20", False),
        (20, "3, 6, 120", False),
        ("20", "3, 6, 120", False),
        (20, "120", False),
        (20, "20", True),
        ("20", 20, True),
        (20, 20.0, True),
        (15, 15, True),
        (15, 14, False),
        (6, True, False),
        (True, 1, False),
        (True, True, True),
        ("nvme", "nvme (nvme0n1)", True),
        ("ssd", "nvme (nvme0n1)", False),
        ("gpu", "process_rss", False),
    ],
)
def test_numbers_are_compared_as_numbers(need, have, ok):
    assert conditions.matches("cluster_primaries", need, have) is ok


def test_a_fact_that_varied_across_repetitions_meets_nothing():
    recs = [Record(suite="s", case="c", repetition=i, facts={"cluster_primaries": n}) for i, n in ((1, 10), (2, 20))]
    facts = conditions.case_facts(recs, {})
    assert isinstance(facts["cluster_primaries"], conditions.Varied)
    assert conditions.differ({"cluster_primaries": 20}, facts) == [
        "cluster_primaries: measured 10 | 20 (varied across repetitions), claim 20"
    ]
    assert conditions.differ({"cluster_primaries": "10 | 20"}, facts)  # not even its own text
    # measured in one repetition only: varied too, never the one value
    recs = [
        Record(suite="s", case="c", repetition=1, facts={"cluster_primaries": 20}),
        Record(suite="s", case="c", repetition=2, params={"x": 1}),
    ]
    assert conditions.differ({"cluster_primaries": 20}, conditions.case_facts(recs, {})) == [
        "cluster_primaries: measured 20 | not measured (varied across repetitions), claim 20"
    ]
    # the same in every repetition: the one value; a measured fact over the configured one
    recs = [Record(suite="s", case="c", repetition=i, params={"clients": 50}, facts={"clients": 200}) for i in (1, 2)]
    assert conditions.case_facts(recs, {})["clients"] == 200


def test_a_fact_not_measured_is_unknown():
    assert conditions.differ({"cold_node_share_pct": 15}, {}) == ["cold_node_share_pct: not measured, claim 15"]
    assert conditions.differ({"cluster_primaries": 20}, {"cluster_primaries": None}) == [
        "cluster_primaries: not measured, claim 20"
    ]


def test_a_mig_slice_is_not_the_gpu_model_and_l1_is_matched_where_it_lives():
    """Red team (issue 39): a MIG slice of an A100 read as an A100; kv-tiers' L1 judged by the
    machine's GPU while its tensors lived in host memory."""
    from harness.model.conditions import differ, gpu_matches

    assert not gpu_matches("A100", "NVIDIA A100-SXM4-40GB MIG 1g.5gb")
    assert gpu_matches("A100 MIG", "NVIDIA A100-SXM4-40GB MIG 1g.5gb")
    need = {"gpu": "A100", "l1_device": "A100"}
    assert differ(need, {"gpu": "NVIDIA A100-SXM4-80GB", "l1_device": "cpu"}) == ["l1_device: measured cpu, claim A100"]
    assert differ(need, {"gpu": "NVIDIA A100-SXM4-80GB", "l1_device": "NVIDIA A100-SXM4-80GB"}) == []


# ---- issue 52: conditions cross-checked ----

from harness.model import gpu_names  # noqa: E402
from harness.verdict import analysis  # noqa: E402
from tests.mutations import conditions_forged as FORGED  # noqa: E402

# (claim, name NVML reports, whether it is that model): both readings must give the answer
GPU_TABLE = [
    ("A100", "NVIDIA A100-SXM4-80GB", True),
    ("A100", "NVIDIA A100-SXM4-40GB", True),
    ("A100", "NVIDIA A100 80GB PCIe", True),
    ("A100", "NVIDIA A100-PCIE-40GB", True),
    ("A100", "NVIDIA RTX A1000 6GB Laptop GPU", False),
    ("A100", "NVIDIA RTX A1000", False),
    ("A100", "NVIDIA A10", False),
    ("A100", "NVIDIA A10G", False),
    ("A100", "NVIDIA A800-SXM4-80GB", False),
    ("A100", "NVIDIA A100X", False),
    ("A100", "NVIDIA H100 80GB HBM3", False),
    ("A100", "NVIDIA H200", False),
    ("A100", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", False),  # a slice is not the model
    ("A100", "NVIDIA A100-SXM4-80GB MIG 3g.40gb", False),
    ("A100 MIG", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", True),
    ("A100 MIG", "NVIDIA A100-SXM4-80GB", False),  # a MIG claim needs a slice
    ("A100 80GB", "NVIDIA A100-SXM4-80GB", True),
    ("A100 80GB", "NVIDIA A100-SXM4-40GB", False),
    ("A100-SXM4", "NVIDIA A100-SXM4-40GB", True),
    ("A100-SXM4", "NVIDIA A100 80GB PCIe", False),
    ("A10", "NVIDIA A10", True),
    ("A10", "NVIDIA A100-SXM4-80GB", False),
    ("H100", "NVIDIA H100 80GB HBM3", True),
    ("H100", "NVIDIA H100 NVL", True),
    ("H100", "NVIDIA H200", False),
    ("H100", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", False),
    ("A800", "NVIDIA A800-SXM4-80GB", True),
]


@pytest.mark.parametrize("need,name,ok", GPU_TABLE)
def test_a100_and_its_neighbours_in_both_readings(need, name, ok):
    """The table of known GPU names and the word match read each name alike (the A1000 row:
    the word match says yes, the table says the model is the RTX A1000, so the condition is
    not met either way: a disagreement is never a match)."""
    assert conditions.gpu_matches(need, name) is ok, "word match"
    assert gpu_names.meets(need, name) is ok, "table"
    assert (conditions.differ({"gpu": need}, {"gpu": name}) == []) is ok


def test_the_table_does_not_know_a_name_and_nothing_is_guessed():
    # a name the word match accepts but no card reports: not comparable, with both readings
    got = conditions.differ({"gpu": "A100"}, {"gpu": "NVIDIA A100 Laptop GPU"})
    assert got == [
        "gpu: measured NVIDIA A100 Laptop GPU, claim A100: the two readings disagree (word match: meets "
        "A100; the table of known GPU names reads NVIDIA A100 Laptop GPU: not a name the table of known "
        "GPUs holds: not known A100)"
    ], got
    assert gpu_names.meets("B100", "NVIDIA B200") is None  # a claim's model the table does not know
    assert conditions.differ({"gpu": "Z9"}, {"gpu": "NVIDIA Z9"})  # unknown to both: not comparable
    assert gpu_names.lookup("NVIDIA A10 MIG 1g.5gb") is None  # the A10 has no MIG
    # 'A1000' is a word of the laptop GPU's name, but no family of the table (it is the RTX A1000)
    assert gpu_names.meets("A1000", "NVIDIA RTX A1000 6GB Laptop GPU") is None
    assert (
        "the two readings disagree"
        in conditions.differ({"gpu": "A1000"}, {"gpu": "NVIDIA RTX A1000 6GB Laptop GPU"})[0]
    )


def _prefix_slip(need, have):
    """gpu_matches with a one-line slip: each claim word matched as a prefix of a name word
    ('A100' meets 'A1000'), as a hurried edit of _in_order would make it."""
    need_words = conditions.words(need)
    return all(
        all(any(h.startswith(w) for h in conditions.words(n)) for w in need_words)
        for n in str(have).split(",")
        if n.strip()
    )


def _substring_slip(need, have):
    return str(need).lower() in str(have).lower()  # 'a100' in 'nvidia a100-sxm4-40gb mig 1g.5gb'


@pytest.mark.parametrize("slip", [_prefix_slip, _substring_slip])
@pytest.mark.parametrize(
    "name", ["NVIDIA RTX A1000 6GB Laptop GPU", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA A100X"]
)
def test_a_wrong_gpu_matches_is_caught_by_the_table(monkeypatch, slip, name, tmp_path):
    """Companion of the table test: with gpu_matches slipped, the word reading calls the
    laptop GPU (or a MIG slice) an A100; the table does not, so the A100 checks stay not
    comparable and say that the readings disagree."""
    assert not conditions.differ({"gpu": "A100"}, {"gpu": "NVIDIA A100-SXM4-80GB"})
    monkeypatch.setattr(conditions, "gpu_matches", slip)
    assert conditions.gpu_matches("A100", name), "the slip must make the word reading accept it"
    (got,) = conditions.differ({"gpu": "A100"}, {"gpu": name})
    assert got.startswith(
        f"gpu: measured {name}, claim A100: the two readings disagree (word match: meets A100; "
        f"the table of known GPU names reads {name}: "
    ), got
    man = {"gpu": {"present": True, "gpus": [{"index": 0, "name": name}]}}
    for cv in verdicts(stored_run(tmp_path, man, A100)):
        assert cv.outcome is Outcome.NOT_COMPARABLE and "the two readings disagree" in cv.reason, cv.reason


def test_a_forged_gpu_name_in_a_stored_manifest_is_not_comparable(tmp_path):
    """Conditions forged in a stored manifest: a laptop's GPU renamed to read as an A100 by
    its words ('NVIDIA A100 6GB Laptop GPU') is no name a card reports."""
    man = {"gpu": {"present": True, "gpus": [{"index": 0, "name": "NVIDIA A100 6GB Laptop GPU"}]}}
    got = verdicts(stored_run(tmp_path, man, A100))
    assert got
    for cv in got:
        assert cv.outcome is Outcome.NOT_COMPARABLE, cv.reason
        assert "not a name the table of known GPUs holds" in cv.reason and "word match: meets A100" in cv.reason


def run_id(i: int) -> str:
    return f"{i:040x}"


def with_servers(ids: dict, on_host: dict, through: dict) -> dict:
    """Host identities with each address's `servers` (as harness.infra.host_identity records
    them): `on_host` {address: {port: run_id}} as each host reported, `through` {address:port:
    run_id} as the harness's connection read."""
    out = {k: dict(v) for k, v in ids.items()}
    for addr, ports in on_host.items():
        out[addr]["servers"] = {str(p): {"on_host": r} for p, r in ports.items()}
    for node, rid in through.items():
        addr, port = node.rsplit(":", 1)
        out[addr].setdefault("servers", {}).setdefault(port, {})["run_id"] = rid
    return out


def six_machines() -> dict:
    ids = {HERE: ident(1), **{f"10.0.0.{i}": ident(10 + i) for i in (1, 2, 3, 4, 5, 6, 9)}}
    return with_servers(
        ids,
        {f"10.0.0.{i}": {6379: run_id(i)} for i in range(1, 7)},
        {f"10.0.0.{i}:6379": run_id(i) for i in range(1, 7)},
    )


def test_six_machines_read_by_both_paths_are_comparable(tmp_path):
    man = {"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}, "host_identity": six_machines()}
    facts = conditions.run_facts(man)
    assert (facts["redis_hosts"], facts["loadgen_separate"]) == (6, True), facts
    got = verdicts(stored_run(tmp_path, man, SIX_HOST))
    assert got and all(cv.outcome is not Outcome.NOT_COMPARABLE for cv in got), [cv.reason for cv in got]


def test_a_host_whose_ssh_reaches_another_machine_is_not_comparable(tmp_path):
    """The inventory's SSH data for 10.0.0.4 reaches a machine whose Redis is not the one the
    harness talks to at 10.0.0.4:6379: its boot id counts a sixth machine, but the server's
    run_id was reported by no host. Both readings are shown."""
    ids = six_machines()
    ids["10.0.0.4"]["servers"]["6379"]["on_host"] = run_id(44)
    man = {"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}, "host_identity": ids}
    for cv in verdicts(stored_run(tmp_path, man, SIX_HOST)):
        assert cv.outcome is Outcome.NOT_COMPARABLE
        assert (
            "redis_hosts: the two readings disagree (by the boot id read on each host: 6 (10.0.0.1; 10.0.0.2; "
            in cv.reason
        ), cv.reason
        assert "was reported on a host: unknown (10.0.0.4:6379: its server's run_id 000000000000... " in cv.reason
        assert "reported by no host (10.0.0.4 reported run_id 000000000000...)" in cv.reason
        assert "loadgen_separate: the two readings disagree (by the boot id read on each host: yes" in cv.reason


def one_machine_six_ports(boots: list[int]) -> dict:
    """Six aliases of one machine, a server on each of six ports; every alias's SSH session
    reports all six servers (they listen on that machine). `boots`: the boot id each entry
    records (a forged manifest gives them six)."""
    nodes = {
        "nodes": [
            {"host": f"10.0.0.{i}", "port": 6378 + i, "role": "primary" if i <= 3 else "replica"} for i in range(1, 7)
        ]
    }
    ids = {HERE: ident(1), "10.0.0.9": ident(19), **{f"10.0.0.{i}": ident(b) for i, b in zip(range(1, 7), boots)}}
    every = {6378 + j: run_id(j) for j in range(1, 7)}
    ids = with_servers(
        ids, {f"10.0.0.{i}": every for i in range(1, 7)}, {f"10.0.0.{i}:{6378 + i}": run_id(i) for i in range(1, 7)}
    )
    return {"target_nodes": nodes, "loadgen": {"address": "10.0.0.9"}, "host_identity": ids}


def test_a_forged_identity_in_a_stored_manifest_is_not_comparable(tmp_path):
    """Conditions forged in a stored manifest: six aliases of one machine whose boot ids were
    edited to six. Every server's run_id was reported by all six 'machines': the second
    reading cannot place them, so the six-host checks are not comparable, with both readings."""
    honest = one_machine_six_ports([7] * 6)
    facts = conditions.run_facts(honest)
    assert (facts["redis_hosts"], facts["loadgen_separate"]) == (1, True)
    forged = one_machine_six_ports([11, 12, 13, 14, 15, 16])
    facts = conditions.run_facts(forged)
    assert facts["redis_hosts"] is None and "by the boot id read on each host: 6" in facts["redis_hosts_disagree"]
    assert (
        "10.0.0.1:6379: its server's run_id 000000000000... was reported by 6 machines" in facts["redis_hosts_disagree"]
    )
    for cv in verdicts(stored_run(tmp_path, forged, SIX_HOST)):
        assert cv.outcome is Outcome.NOT_COMPARABLE and "redis_hosts: the two readings disagree" in cv.reason


@pytest.mark.parametrize("m", FORGED.MUTATIONS, ids=lambda m: m.name)
def test_a_slip_in_the_matching_code_is_caught_by_the_second_reading(m, monkeypatch, tmp_path):
    """Companion of the cross-check (tests/mutations/conditions_forged.py): each one-line
    slip of harness.model.conditions lets a wrong GPU or one machine through on its own
    (shown first, with the second reading's records removed); with them, the checks the
    slip would let through stay not comparable, saying that the two readings disagree."""
    mutant = FORGED.mutant_module(m)
    monkeypatch.setattr(analysis, "conditions", mutant)
    if m.lets_through == "gpu":
        name = "NVIDIA A100-SXM4-40GB MIG 1g.5gb" if "mig" in m.name else "NVIDIA RTX A1000 6GB Laptop GPU"
        assert mutant.matches("gpu", "A100", name), "the slip alone lets it through"
        man = {"gpu": {"present": True, "gpus": [{"index": 0, "name": name}]}}
        checks = A100
    else:
        if "loadgen" in m.name:  # six machines, the load generator on the first of them
            ids = six_machines()
            ids["10.0.0.9"] = {k: v for k, v in ids["10.0.0.1"].items() if k != "servers"}
            man = {"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}, "host_identity": ids}
        else:  # six aliases of one machine
            man = one_machine_six_ports([7] * 6)
        plain = {
            **man,
            "host_identity": {
                k: {kk: vv for kk, vv in v.items() if kk != "servers"} for k, v in man["host_identity"].items()
            },
        }
        slipped = mutant.run_facts(plain)
        assert (slipped["redis_hosts"], slipped["loadgen_separate"]) == (6, True), "the slip alone lets it through"
        honest = conditions.run_facts(plain)
        assert (honest["redis_hosts"], honest["loadgen_separate"]) != (6, True)
        checks = SIX_HOST
    got = verdicts(stored_run(tmp_path, man, checks))
    assert got
    for cv in got:
        assert cv.outcome is Outcome.NOT_COMPARABLE and "the two readings disagree" in cv.reason, (m.name, cv.reason)


def test_a_run_id_not_read_through_the_connection_leaves_the_hosts_unknown():
    ids = six_machines()
    del ids["10.0.0.2"]["servers"]["6379"]["run_id"]
    ids["10.0.0.2"]["servers"]["6379"]["run_id_error"] = "ConnectionError: refused"
    facts = conditions.run_facts({"target_nodes": SIX_NODES, "loadgen": {"address": "10.0.0.9"}, "host_identity": ids})
    assert facts["redis_hosts"] is None
    assert (
        "10.0.0.2:6379: its run_id was not read through the harness's connection (ConnectionError: refused)"
        in facts["redis_hosts_disagree"]
    )
    assert conditions.differ({"redis_hosts": 6}, facts)[0].startswith("redis_hosts: the two readings disagree (")
