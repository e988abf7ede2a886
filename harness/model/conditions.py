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
- hosts are read twice (issue 52): where the manifest holds each Redis server's run_id, read
  through the harness's own Redis connection and again on its host (redis-cli INFO server over
  SSH, or here for this machine; harness.infra.host_identity), `second_reading` places every
  node on the machine of the host that reported its run_id, sharing no code with the boot-id
  grouping. `redis_hosts` or `loadgen_separate` that the two readings give differently (or
  that the second cannot give) is unknown, with both readings: the check is not comparable.
  A results folder from before the run_ids were recorded is judged by its boot ids alone;
- a GPU model is matched as a model: `A100` is a word of 'NVIDIA A100-SXM4-80GB', not of
  'NVIDIA RTX A1000 6GB Laptop GPU'; every GPU of the run must be that model. It is read a
  second time in a table of known GPU names (harness.model.gpu_names, no code shared with the
  word match): a name the table does not know, or readings that disagree, is not comparable,
  with both readings. A MIG slice does not meet the model ('A100'); only a claim that names
  MIG ('A100 MIG') is met, and only by a slice;
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
from harness.model import gpu_names

NUMBER_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
RUN_ID_RE = re.compile(r"^[0-9a-f]{40}$")  # a Redis server's run_id: 40 random hex digits, drawn at its start
WORD_RE = re.compile(r"[0-9a-z]+(?:\.[0-9a-z]+)*")
GPU_KEYS = ("gpu", "l1_device")  # facts matched as GPU models (kv-tiers' l1_device: where L1's tensors live)
NOT_MEASURED_NOTE = "_unknown"  # facts[key + NOT_MEASURED_NOTE]: why a fact is unknown
DISAGREE_NOTE = "_disagree"  # facts[key + DISAGREE_NOTE]: a fact unknown because its two readings disagree


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
    never = [k[len("addr:") :] for k in keys if isinstance(k, str) and k.startswith("addr:")]
    out = problems[:3]
    if never:
        out.append(
            f"no host identity recorded for {', '.join(never[:6])}{' ...' if len(never) > 6 else ''} "
            f"(a results folder from before hosts were identified)"
        )
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
    if any(isinstance(e.get("servers"), dict) for e in ids.values()):  # measured by both paths
        _cross_check_hosts(facts, second_reading(manifest, nodes, ids))
    return facts


# ---- hosts: the second reading, by each Redis server's own run_id ----


def second_reading(manifest, nodes: list[dict], ids: dict[str, dict]) -> dict[str, Any]:
    """Which machine serves each Redis node, read by a second path that shares no code with
    the boot-id grouping above: the server's run_id, read through the harness's own Redis
    connection (ids[address]['servers'][port]['run_id']), is looked for among the run_ids the
    hosts reported themselves (['on_host'], redis-cli INFO server run on the host over SSH, or
    here for this machine); the node is on the machine (boot id) of the host that reported
    it. {'redis_hosts': n or None, 'loadgen_separate': bool or None, 'why': [...], 'where':
    {node: text}}."""
    reported: dict[str, set] = {}  # run_id -> boot ids of the hosts that reported it
    for entry in ids.values():
        boot = entry.get("boot_id")
        servers = entry["servers"] if isinstance(entry.get("servers"), dict) else {}
        for s in servers.values():
            rid = s.get("on_host") if isinstance(s, dict) else None
            if isinstance(rid, str) and RUN_ID_RE.match(rid) and isinstance(boot, str) and UUID_RE.match(boot):
                reported.setdefault(rid, set()).add(boot)
    machines: dict[str, str | None] = {}
    why: list[str] = []
    where: dict[str, str] = {}
    for n in nodes:
        addr, port = str(n.get("host", "")), str(n.get("port", ""))
        node = f"{addr}:{port}"
        entry = ids.get(addr) or {}
        server = (entry.get("servers") or {}).get(port) if isinstance(entry.get("servers"), dict) else None
        server = server if isinstance(server, dict) else {}
        rid = server.get("run_id")
        if not (isinstance(rid, str) and RUN_ID_RE.match(rid)):
            machines[node] = None
            why.append(
                f"{node}: its run_id was not read through the harness's connection "
                f"({str(server.get('run_id_error') or 'not recorded')[:120]})"
            )
            continue
        boots = reported.get(rid, set())
        on_host = server.get("on_host")
        if len(boots) == 1:
            machines[node] = where[node] = next(iter(boots))
            continue
        machines[node] = None
        if not boots:
            seen = (
                f"run_id {on_host[:12]}..."
                if isinstance(on_host, str) and RUN_ID_RE.match(on_host)
                else str(server.get("on_host_error") or "nothing")[:120]
            )
            why.append(
                f"{node}: its server's run_id {rid[:12]}... (through the harness's connection) was reported "
                f"by no host ({addr} reported {seen})"
            )
        else:
            why.append(f"{node}: its server's run_id {rid[:12]}... was reported by {len(boots)} machines")
    known = [m for m in machines.values() if m is not None]
    out: dict[str, Any] = {"why": why, "where": where}
    out["redis_hosts"] = len(set(known)) if machines and len(known) == len(machines) else None
    lg_boots = _loadgen_boots(manifest, ids)
    if out["redis_hosts"] is None or None in lg_boots:
        out["loadgen_separate"] = None
    else:
        out["loadgen_separate"] = not (set(lg_boots) & set(known))
    return out


def _loadgen_boots(manifest, ids: dict[str, dict]) -> list[str | None]:
    """The boot id of each load generator's machine (None where it was not measured)."""
    loadgen = manifest.get("loadgen") if isinstance(manifest.get("loadgen"), dict) else {}
    lg_addrs = [str(loadgen.get("address") or "")]
    lg_addrs += [str(o.get("address") or "") for o in loadgen.get("others") or [] if isinstance(o, dict)]
    lg_boots = []
    for a in lg_addrs:
        entry = ids.get(a) if a else ids.get(HERE)
        if entry is None and a and is_loopback(a) and not a.startswith("127.77."):
            entry = ids.get(HERE)
        boot = entry.get("boot_id") if isinstance(entry, dict) else None
        lg_boots.append(boot if isinstance(boot, str) and UUID_RE.match(boot) else None)
    return lg_boots


def _cross_check_hosts(facts: dict[str, Any], second: dict[str, Any]) -> None:
    """Where the boot-id reading knows redis_hosts or loadgen_separate and the run_id reading
    says otherwise (or cannot say), the fact is unknown, with both readings."""
    for key in ("redis_hosts", "loadgen_separate"):
        first, other = facts.get(key), second.get(key)
        if first is None or (other is not None and other == first):
            continue
        show = {True: "yes", False: "no", None: "unknown"}
        one = show.get(first, first) if isinstance(first, bool) else first
        two = show.get(other, other) if isinstance(other, bool) or other is None else other
        names = f" ({facts['redis_host_names']})" if key == "redis_hosts" and facts.get("redis_host_names") else ""
        detail = "; ".join(second["why"][:3]) + (" ..." if len(second["why"]) > 3 else "")
        facts[key + DISAGREE_NOTE] = (
            f"by the boot id read on each host: {one}{names}; by where each Redis server's run_id, read through "
            f"the harness's connection, was reported on a host: {two}" + (f" ({detail})" if detail else "")
        )
        facts[key] = None


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
    return bool(names) and all(
        _in_order(need_words, words(n)) and ("mig" not in words(n) or "mig" in need_words) for n in names
    )


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


def gpu_cross_check(key: str, need: Any, have: Any) -> str | None:
    """The second reading of a GPU condition (harness.model.gpu_names: a table of the names
    NVML reports, sharing no code with gpu_matches). None where both readings say the run's
    GPUs are the claimed model; else why the condition is not met, with both readings: the
    table does not know a name or the claim's model, or the two readings disagree (a slip in
    either one is caught by the other). A run both readings reject keeps the plain
    'measured X, claim Y'."""
    by_words = matches(key, need, have)
    by_table = gpu_names.meets(need, have) if isinstance(have, str) and not isinstance(have, Varied) else False
    if by_words and by_table is True:
        return None
    if not by_words and by_table is not True:
        return ""  # not met, and no reading says it is: the plain message
    claim_read = gpu_names.read_claim(str(need))
    table = (
        "the table of known GPU names does not know the claim's model"
        if claim_read is None
        else f"the table of known GPU names reads {gpu_names.describe(have)}: "
        f"{'meets' if by_table else 'does not meet' if by_table is False else 'not known'} {need}"
    )
    return (
        f"{key}: measured {have}, claim {need}: the two readings disagree (word match: "
        f"{'meets' if by_words else 'does not meet'} {need}; {table})"
    )


def differ(needed: dict, facts: dict) -> list[str]:
    """The claim's conditions the run did not meet, as 'name: measured X, claim Y', or
    'name: not measured (why), claim Y' where the run could not measure it. A GPU model is
    read twice (gpu_cross_check) and a host count was measured by two paths (host_facts): a
    disagreement is a condition not met, with both readings."""
    out = []
    for key, need in needed.items():
        have = facts.get(key)
        if key in GPU_KEYS and not isinstance(need, bool) and as_number(need) is None and have is not None:
            why = gpu_cross_check(key, need, have)
            if why:
                out.append(why)
                continue
            if why is None:
                continue
        elif matches(key, need, have):
            continue
        claim = ("yes" if need else "no") if isinstance(need, bool) else need
        if have is None and facts.get(key + DISAGREE_NOTE):
            out.append(f"{key}: the two readings disagree ({facts[key + DISAGREE_NOTE]}), claim {claim}")
        elif have is None:
            why = facts.get(key + NOT_MEASURED_NOTE)
            out.append(f"{key}: not measured{f' ({why})' if why else ''}, claim {claim}")
        else:
            out.append(f"{key}: measured {_show(key, have, facts)}, claim {claim}")
    return out
