"""Conditions measured, not declared: what a run really ran on, compared with what a claim needs.

A ledger check's `conditions` names facts (`{gpu: A100, redis_hosts: 6, clients: 200}`). Each
is looked up, in this order, in what the case measured (`Record.facts`), in the parameters the
case really ran with (after `--set`), and in what the run measured of its machine and target
(the manifest: GPU model and count from NVML, CPU cores, the hosts that served Redis, where the
load generator ran). A string the profile declares decides nothing.

Pure functions over a loaded results folder; nothing here runs anything.
"""

from __future__ import annotations

import ipaddress
from typing import Any

LOOPBACK_NAMES = ("localhost", "")


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback and not host.startswith("127.77.")
    except ValueError:
        return False


def _harness_host(host: str) -> str:
    """Loopback addresses (other than the lab in a box's 127.77.0.0/24) are the harness host."""
    return "this machine" if _is_loopback(host) else host


def run_facts(manifest: dict) -> dict[str, Any]:
    """What the run measured of its machine and target, from the manifest."""
    facts: dict[str, Any] = {}
    gpu = manifest.get("gpu") if isinstance(manifest.get("gpu"), dict) else {}
    names = [str(g.get("name", "")) for g in gpu.get("gpus") or [] if isinstance(g, dict)]
    facts["gpu"] = ", ".join(names) if gpu.get("present") and names else "none"
    facts["gpu_count"] = len(names) if gpu.get("present") else 0
    host = manifest.get("host") if isinstance(manifest.get("host"), dict) else {}
    if isinstance(host.get("cpu_logical"), int):
        facts["cpu_cores"] = host["cpu_logical"]
    storage = manifest.get("storage") if isinstance(manifest.get("storage"), dict) else {}
    if storage.get("kind"):
        facts["storage"] = f"{storage['kind']} ({storage.get('device') or 'unknown device'})"
    target = manifest.get("target_nodes") if isinstance(manifest.get("target_nodes"), dict) else {}
    nodes = [n for n in target.get("nodes") or [] if isinstance(n, dict)]
    if nodes:
        hosts = sorted({_harness_host(str(n.get("host", ""))) for n in nodes})
        facts["redis_hosts"] = len(hosts)
        facts["redis_host_names"] = ", ".join(hosts)
        facts["redis_primaries"] = sum(n.get("role") == "primary" for n in nodes)
        loadgen = manifest.get("loadgen") if isinstance(manifest.get("loadgen"), dict) else {}
        where = _harness_host(str(loadgen.get("address", ""))) if loadgen.get("address") else "this machine"
        facts["loadgen_host"] = where
        facts["loadgen_separate"] = where not in hosts
    return facts


def case_facts(records: list, run: dict[str, Any]) -> dict[str, Any]:
    """The facts of one case: its records' facts over its params over the run's facts.
    A fact that differs between repetitions is kept as 'a | b' (it matches no claim value)."""
    out = dict(run)
    merged: dict[str, list] = {}
    for r in records:
        for source in (r.params, r.facts):
            for k, v in (source or {}).items():
                if isinstance(v, (str, int, float, bool)):
                    merged.setdefault(k, [])
                    if v not in merged[k]:
                        merged[k].append(v)
    for k, vals in merged.items():
        out[k] = vals[0] if len(vals) == 1 else " | ".join(map(str, vals))
    return out


def _matches(need: Any, have: Any) -> bool:
    if isinstance(need, bool) or isinstance(have, bool):
        return isinstance(need, bool) and isinstance(have, bool) and need == have
    if isinstance(need, (int, float)):
        return isinstance(have, (int, float)) and float(have) == float(need)
    return str(need).strip().lower() in str(have).strip().lower()


def _show(key: str, have: Any, facts: dict) -> str:
    if have is None:
        return "not measured"
    if isinstance(have, bool):
        text = "yes" if have else "no"
    else:
        text = str(have)
    if key == "redis_hosts" and facts.get("redis_host_names"):
        text += f" ({facts['redis_host_names']})"
    if key == "loadgen_separate" and facts.get("loadgen_host"):
        text += f" (load generator on {facts['loadgen_host']})"
    return text


def differ(needed: dict, facts: dict) -> list[str]:
    """The claim's conditions the run did not meet, as 'name: measured X, claim Y'."""
    out = []
    for key, need in needed.items():
        have = facts.get(key)
        if have is None or not _matches(need, have):
            claim = ("yes" if need else "no") if isinstance(need, bool) else need
            out.append(f"{key}: measured {_show(key, have, facts)}, claim {claim}")
    return out
