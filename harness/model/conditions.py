"""Conditions measured, not declared: what a run really ran on, compared with what a claim needs.

A ledger check's `conditions` names facts (`{gpu: A100, redis_hosts: 6, clients: 200}`). Each
is looked up, in this order, in what the case measured (`Record.facts`), in the parameters the
case really ran with (after `--set`), and in what the run measured of its machine and target
(the manifest: GPU models from NVML, CPU cores, which machine each Redis host and the load
generator is, from harness.infra.host_identity). A string the profile declares decides nothing.

How a fact meets a condition:
- hosts are machines, not addresses: `redis_hosts` counts distinct boot ids measured on the
  hosts (six namespaces or aliases of one machine are one host); `loadgen_separate` asks
  whether every load generator's machine is none of them, `loadgens_distinct` whether the
  load generators are as many machines as they are hosts (`loadgens` counts them). A host whose identity was not
  measured (an old results folder, an SSH failure) makes the fact unknown, except where the
  addresses alone settle it (one address for everything is one host);
- a GPU model is matched as a model: `A100` is a word of 'NVIDIA A100-SXM4-80GB', not of
  'NVIDIA RTX A1000 6GB Laptop GPU'; every GPU of the run must be that model;
- numbers are compared as numbers: '20' meets 20, '10 | 20' and '3, 6, 120' do not;
- other text is matched word by word, in order ('nvme' meets 'nvme (nvme0n1)');
- a fact that varied across the repetitions meets nothing and is shown as varied;
- a fact that was not measured is unknown: the check is not comparable, saying so.

Pure functions over a loaded results folder; nothing here runs anything.
"""

from __future__ import annotations

import math
import re
from typing import Any

from harness.infra.host_identity import HERE, UUID_RE, is_loopback

NUMBER_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
WORD_RE = re.compile(r"[0-9a-z]+(?:\.[0-9a-z]+)*")
GPU_KEYS = ("gpu", "l1_device")  # facts matched as GPU models (kv-tiers' l1_device: where L1's tensors live)
NOT_MEASURED_NOTE = "_unknown"  # facts[key + NOT_MEASURED_NOTE]: why a fact is unknown


class Varied(str):
    """A fact that took several values across the repetitions of a case ('a | b'): it meets
    no claim value, and says that it varied."""

    values: tuple = ()

    def __new__(cls, values):
        text = " | ".join("not measured" if v is None else str(v) for v in values)
        obj = super().__new__(cls, text)
        obj.values = tuple(values)
        return obj


def _gpu_fact(manifest) -> str | None:
    """The run's GPU models joined by ', ', 'none' where NVML answered that there is none,
    None where nothing was asked (no NVML package, no entry in the manifest)."""
    gpu = manifest.get("gpu") if isinstance(manifest.get("gpu"), dict) else None
    reason = str(gpu.get("reason", "")) if gpu is not None else ""
    # not asked (no NVML package), or NVML started and then failed: the GPU is unknown, not none
    # (NVML that does not initialise is a machine without NVIDIA's driver: no GPU)
    if gpu is None or reason.startswith(("nvidia-ml-py", "NVML error")):
        return None
    names = [str(g.get("name", "")) for g in gpu.get("gpus") or [] if isinstance(g, dict)]
    return ", ".join(names) if gpu.get("present") and names else "none"


def run_facts(manifest) -> dict[str, Any]:
    """What the run measured of its machine and target, from the manifest."""
    facts: dict[str, Any] = {}
    facts["gpu"] = _gpu_fact(manifest)
    gpu = manifest.get("gpu") if isinstance(manifest.get("gpu"), dict) else {}
    if facts["gpu"] is not None:
        facts["gpu_count"] = len(gpu.get("gpus") or []) if gpu.get("present") else 0
    host = manifest.get("host") if isinstance(manifest.get("host"), dict) else {}
    if isinstance(host.get("cpu_logical"), int):
        facts["cpu_cores"] = host["cpu_logical"]
    storage = manifest.get("storage") if isinstance(manifest.get("storage"), dict) else {}
    if storage.get("kind") and storage.get("kind") != "unknown":
        facts["storage"] = f"{storage['kind']} ({storage.get('device') or 'unknown device'})"
    target = manifest.get("target_nodes") if isinstance(manifest.get("target_nodes"), dict) else {}
    nodes = [n for n in target.get("nodes") or [] if isinstance(n, dict)]
    if nodes:
        facts.update(host_facts(manifest, nodes))
    return facts


# ---- hosts: machines counted by their measured identity ----

def _identities(manifest) -> dict[str, dict]:
    ids = manifest.get("host_identity")
    return {str(k): v for k, v in ids.items() if isinstance(v, dict)} if isinstance(ids, dict) else {}


def _boot_id(entry: dict | None) -> str | None:
    boot = entry.get("boot_id") if isinstance(entry, dict) else None
    return boot if isinstance(boot, str) and UUID_RE.match(boot) else None


def _machine_of(address: str, ids: dict[str, dict], here: str | None) -> tuple[str | None, str]:
    """(the key of the machine at `address`, or None when unknown; why it is not known). The
    key is its boot id; loopback without a measurement is this machine (HERE when its own
    boot id is unknown); an address never measured is keyed by itself ('addr:...'), for the
    one case where the addresses alone settle it. The reason is '' or the address's error."""
    entry = ids.get(address)
    if entry is not None:
        boot = _boot_id(entry)
        if boot:
            return boot, ""
        return None, f"{address}: {str(entry.get('error') or 'no boot id recorded')[:200]}"
    if is_loopback(address):
        return here or HERE, ""
    return "addr:" + address, ""


def _unknown_why(keys: list, problems: list[str]) -> str:
    """Why hosts are unknown: their errors, the addresses never identified, this machine."""
    never = [k[len("addr:"):] for k in keys if isinstance(k, str) and k.startswith("addr:")]
    out = problems[:3]
    if never:
        out.append(f"no host identity recorded for {', '.join(never[:6])}{' ...' if len(never) > 6 else ''} "
                   f"(a results folder from before hosts were identified)")
    if HERE in keys and len(set(keys)) > 1:
        out.append("this machine's own identity was not measured")
    return "; ".join(out)


def host_facts(manifest, nodes: list[dict]) -> dict[str, Any]:
    """redis_hosts (distinct machines), redis_primaries, loadgen_separate and the labels that
    say which machines they are; None (unknown) where an identity is missing."""
    ids = _identities(manifest)
    here = _boot_id(ids.get(HERE))
    facts: dict[str, Any] = {"redis_primaries": sum(n.get("role") == "primary" for n in nodes)}
    groups: dict[str | None, list[str]] = {}
    problems: list[str] = []
    for addr in dict.fromkeys(str(n.get("host", "")) for n in nodes):
        key, why = _machine_of(addr, ids, here)
        groups.setdefault(key, []).append(addr)
        problems += [why] if why else []
    all_measured = all(_measured(k) for k in groups)
    if all_measured or (len(groups) == 1 and None not in groups):  # one address for every node is one host
        facts["redis_hosts"] = len(groups)
    else:
        facts["redis_hosts"] = None
        facts["redis_hosts" + NOT_MEASURED_NOTE] = _unknown_why(list(groups), problems)
    facts["redis_host_names"] = "; ".join(_label(k, addrs, here) for k, addrs in groups.items())
    facts.update(loadgen_facts(manifest, ids, here, groups, problems))
    return facts


def _loadgen_addresses(manifest) -> list[str]:
    """The load generators' addresses (the first, then `others`); [''] for this machine."""
    loadgen = manifest.get("loadgen") if isinstance(manifest.get("loadgen"), dict) else {}
    first = str(loadgen.get("address") or "")
    others = [str(o.get("address") or "") for o in loadgen.get("others") or [] if isinstance(o, dict)]
    return [first, *(a for a in others if a)] if first else [""]


def loadgen_facts(manifest, ids: dict, here: str | None, groups: dict, problems: list[str]) -> dict[str, Any]:
    """loadgens (how many), loadgen_separate (every one is none of the Redis machines),
    loadgens_distinct (each is a machine of its own) and the label of where they ran."""
    addrs = _loadgen_addresses(manifest)
    keys, whys = [], []
    for addr in addrs:
        key, why = _machine_of(addr, ids, here) if addr else (here or HERE, "")
        keys.append(key)
        whys += [why] if why else []
    all_measured = all(_measured(k) for k in groups)
    facts: dict[str, Any] = {"loadgens": len(addrs)}
    by_machine: dict[str | None, list[str]] = {}
    for k, a in zip(keys, addrs):
        by_machine.setdefault(k, []).extend([a] if a else [])
    facts["loadgen_host"] = "; ".join(_label(k, a, here) for k, a in by_machine.items())
    if any(k is not None and k in groups for k in keys):
        facts["loadgen_separate"] = False  # the same machine (or the same address) as a Redis host
    elif all(_measured(k) for k in keys) and all_measured:
        facts["loadgen_separate"] = True
    else:
        facts["loadgen_separate"] = None
        facts["loadgen_separate" + NOT_MEASURED_NOTE] = _unknown_why([*keys, *groups], whys + problems)
    known = [k for k in keys if k is not None]
    if len(keys) == 1:
        facts["loadgens_distinct"] = True  # one load generator is one machine
    elif len(set(known)) < len(known):
        facts["loadgens_distinct"] = False  # two of them are one machine (or one address)
    elif all(_measured(k) for k in keys):
        facts["loadgens_distinct"] = True
    else:
        facts["loadgens_distinct"] = None
        facts["loadgens_distinct" + NOT_MEASURED_NOTE] = _unknown_why(keys, whys)
    return facts


def _measured(key: str | None) -> bool:
    """A machine key that is a boot id read on the host (not an address, not HERE unread)."""
    return key is not None and bool(UUID_RE.match(key))


def _label(key: str | None, addrs: list[str], here: str | None) -> str:
    """'this machine', 'this machine, as 127.77.0.11, 127.77.0.12', 'redis-1 = redis-1b'."""
    shown = [a for a in addrs if a and not (is_loopback(a) and not a.startswith("127.77."))]
    if key is not None and (key == HERE or key == here):
        return "this machine" + (f", as {', '.join(shown[:8])}{' ...' if len(shown) > 8 else ''}" if shown else "")
    if not shown:
        return "this machine"
    return " = ".join(shown[:8]) + (" ..." if len(shown) > 8 else "")


# ---- case facts and the comparison ----

def case_facts(records: list, run: dict[str, Any]) -> dict[str, Any]:
    """The facts of one case: its records' facts over its params over the run's facts. A
    fact that differs between repetitions (or is missing from some) is a Varied value: it
    meets no claim value."""
    out = dict(run)
    per_record = []
    for r in records:
        values = {k: v for k, v in (r.params or {}).items() if isinstance(v, (str, int, float, bool))}
        values.update({k: v for k, v in (r.facts or {}).items() if isinstance(v, (str, int, float, bool))})
        per_record.append(values)
    for k in dict.fromkeys(k for values in per_record for k in values):
        seen = [values.get(k) for values in per_record]
        distinct = list(dict.fromkeys(seen))
        out[k] = distinct[0] if len(distinct) == 1 else Varied(distinct)
    return out


def as_number(value: Any) -> float | None:
    """A finite number, or a string that is one whole number ('20', '1.5e3'); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and NUMBER_RE.fullmatch(value.strip()):
        number = float(value.strip())
        return number if math.isfinite(number) else None
    return None


def words(text: Any) -> list[str]:
    return WORD_RE.findall(str(text).lower())


def _in_order(need: list[str], have: list[str]) -> bool:
    """Every word of `need` is a whole word of `have`, in the same order."""
    it = iter(have)
    return bool(need) and all(any(w == h for h in it) for w in need)


def gpu_matches(need: Any, have: Any) -> bool:
    """Every GPU of the run ('NVIDIA A100-SXM4-80GB, NVIDIA A100-SXM4-80GB') is the claimed
    model: its words (split at spaces and '-') hold the claim's words in order, each one
    whole. 'A100' meets 'NVIDIA A100 80GB PCIe', not 'NVIDIA RTX A1000 6GB Laptop GPU',
    'NVIDIA A10', 'NVIDIA A100X' or a MIG slice of an A100; 'A100 80GB' meets
    'NVIDIA A100-SXM4-80GB'."""
    need_words = words(need)
    names = [n for n in str(have).split(",") if n.strip()]
    # a MIG slice ('NVIDIA A100-SXM4-40GB MIG 1g.5gb') is a part of the GPU, not the model: it
    # meets only a claim that names MIG
    return bool(names) and all(_in_order(need_words, words(n)) and ("mig" not in words(n) or "mig" in need_words)
                               for n in names)


def matches(key: str, need: Any, have: Any) -> bool:
    """Whether the measured `have` meets the claim's `need` (see the module's rules)."""
    if have is None or isinstance(have, Varied):
        return False
    if isinstance(need, bool) or isinstance(have, bool):
        return isinstance(need, bool) and isinstance(have, bool) and need == have
    if as_number(need) is not None:
        return as_number(have) is not None and as_number(have) == as_number(need)
    if key in GPU_KEYS:
        return gpu_matches(need, have)
    return _in_order(words(need), words(have))


def _show(key: str, have: Any, facts: dict) -> str:
    if isinstance(have, bool):
        text = "yes" if have else "no"
    else:
        text = str(have)
    if isinstance(have, Varied):
        text += " (varied across repetitions)"
    if key == "redis_hosts" and facts.get("redis_host_names"):
        text += f" ({facts['redis_host_names']})"
    if key in ("loadgen_separate", "loadgens_distinct") and facts.get("loadgen_host"):
        many = facts.get("loadgens", 1) != 1
        text += f" (load generator{'s' if many else ''} on {facts['loadgen_host']})"
    return text


def differ(needed: dict, facts: dict) -> list[str]:
    """The claim's conditions the run did not meet, as 'name: measured X, claim Y', or
    'name: not measured (why), claim Y' where the run could not measure it."""
    out = []
    for key, need in needed.items():
        have = facts.get(key)
        if matches(key, need, have):
            continue
        claim = ("yes" if need else "no") if isinstance(need, bool) else need
        if have is None:
            why = facts.get(key + NOT_MEASURED_NOTE)
            out.append(f"{key}: not measured{f' ({why})' if why else ''}, claim {claim}")
        else:
            out.append(f"{key}: measured {_show(key, have, facts)}, claim {claim}")
    return out
