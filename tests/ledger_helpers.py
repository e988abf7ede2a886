"""Judge the ledger's real checks on chosen metrics, on this machine or on a measured lab.

`LAB` is what a run on the source's lab measures (six Redis hosts, a separate load generator,
an A100, NVMe storage): the manifest facts harness.model.conditions reads. Tests use it to show that
a check becomes comparable when the run measured the claim's conditions, and only then.
"""

from __future__ import annotations

from pathlib import Path

from harness.model import ledger_parse, spec
from harness.model.stored_run import Metric, Record, RunData
from harness.run.runner import reference_imports
from harness.verdict.analysis import analyze

# what `make reproduce` measures here: the loopback cluster, no GPU, a VM's disk, 2 cores
HERE = {
    "gpu": {"present": False, "reason": "no GPU"},
    "host": {"cpu_logical": 2},
    "storage": {"kind": "virtual", "device": "vda"},
    "target_nodes": {
        "nodes": [{"host": "127.0.0.1", "port": 7000 + i, "role": "primary" if i < 3 else "replica"} for i in range(6)]
    },
}
LAB = {
    "gpu": {"present": True, "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}]},
    "host": {"cpu_logical": 64},
    "storage": {"kind": "nvme", "device": "nvme0n1"},
    "target_nodes": {
        "nodes": [{"host": f"redis-{i}", "port": 6379, "role": "primary" if i <= 3 else "replica"} for i in range(1, 7)]
    },
    "loadgen": {"address": "loadgen-1"},
    # seven measured machines: six Redis hosts and the load generator, each its own kernel
    "host_identity": {
        name: {"boot_id": f"{i:08x}-0000-4000-8000-{i:012x}", "machine_id": f"{i:032x}", "via": f"ssh {name}"}
        for i, name in enumerate([*(f"redis-{j}" for j in range(1, 7)), "loadgen-1", "this machine"], 1)
    },
}


def ledger(pack: str = "seed"):
    """The suites and the claims of a shipped pack (the seed's ledger by default)."""
    from harness.model import packs

    suites = spec.load_all_suites()
    return suites, (ledger_parse.load_claims(suites=suites) if pack == "seed" else packs.load(pack).claims(suites))


def as_a_run(claims, suite: str, case: str, params: dict | None, manifest: dict | None) -> tuple[dict, dict]:
    """(params, manifest) as a run of this checkout gives them: the stand-ins' strengths the
    ledger fixes (the runner's params) under the given ones, and the record of what each
    reference module imports (the manifest's references) unless the manifest has one."""
    fixed = {k: v for k, (v, _) in ledger_parse.fixed_params(claims).get((suite, case), {}).items()}
    man = dict(HERE if manifest is None else manifest)
    man.setdefault("references", reference_imports(claims, {suite}))
    return {**fixed, **(params or {})}, man


def verdicts(
    claim_id: str,
    case: str,
    metrics: dict,
    profile: str = "local",
    suite: str = "engine-hotload",
    manifest: dict | None = None,
    facts: dict | None = None,
    params: dict | None = None,
    pack: str = "seed",
):
    """The ledger's real checks of `claim_id` on `case` (of a shipped pack's ledger: the seed's
    by default), judged on a run with these metrics, this manifest (HERE by default) and these
    case facts and params."""
    suites, claims = ledger(pack)
    srun = suites[suite].as_run(profile, 1, {c.name: {} for c in suites[suite].cases})
    params, man = as_a_run(claims, suite, case, params, manifest)
    rec = Record(
        suite=suite,
        case=case,
        repetition=1,
        metrics={k: Metric(v, "") for k, v in metrics.items()},
        params=params,
        facts=dict(facts or {}),
    )
    run = RunData(Path("."), man, [rec], {suite: srun}, claims)
    claim = next(c for c in analyze(run).claims if c.id == claim_id)
    return {cv.check.metric: cv for cv in claim.checks if cv.check.case == case and cv.check.suite == suite}
