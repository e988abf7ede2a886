"""Server-side statistics around a case: CONFIG RESETSTAT before, INFO after, per node."""

from __future__ import annotations

import json
from pathlib import Path

from harness.infra.target import Target

INFO_SECTIONS = ("server", "stats", "commandstats", "memory", "clients", "replication")
SUMMARY_KEYS = (
    "total_commands_processed",
    "keyspace_hits",
    "keyspace_misses",
    "evicted_keys",
    "expired_keys",
    "used_memory",
    "used_memory_peak",
    "connected_clients",
    "instantaneous_ops_per_sec",
    "rejected_connections",
)


def reset_stats(target: Target) -> list[str]:
    """CONFIG RESETSTAT on every node; returns the nodes that failed, with the reason."""
    import redis

    failed = []
    for node in target.nodes:
        try:
            target.client(node, socket_timeout=5).config_resetstat()
        except redis.RedisError as e:
            failed.append(f"{node.address}: {e}")
    return failed


def collect_info(target: Target, raw_dir: Path) -> dict:
    """INFO of every node written to raw_dir/info-<host>-<port>.json; returns a summary."""
    import redis

    summary = {}
    raw_dir.mkdir(parents=True, exist_ok=True)
    for node in target.nodes:
        try:
            client = target.client(node, socket_timeout=5)
            info = {}
            for section in INFO_SECTIONS:
                info.update(client.info(section))
        except redis.RedisError as e:
            summary[node.address] = {"error": str(e)}
            continue
        (raw_dir / f"info-{node.host}-{node.port}.json").write_text(json.dumps(info, indent=1, default=str))
        s = {k: info[k] for k in SUMMARY_KEYS if k in info}
        s["role"] = node.role
        s["commandstats"] = {
            k[len("cmdstat_") :]: {"calls": v.get("calls"), "usec_per_call": v.get("usec_per_call")}
            for k, v in info.items()
            if k.startswith("cmdstat_") and isinstance(v, dict)
        }
        summary[node.address] = s
    return summary
