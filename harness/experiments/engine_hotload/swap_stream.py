"""What both swap cases (hot_swap_case.py, incompatible_swap_case.py) share: the paced request
stream run around the case's actions, and the facts of what the runtime reported for every
engine a case loaded."""

from __future__ import annotations

from harness.experiments.engine_hotload.fingerprint import Fingerprints
from harness.experiments.engine_hotload.served import Served
from harness.experiments.engine_hotload.workload import RequestStream


def run_stream(served: Served, slot, p: dict, t0: float, actions, prints: Fingerprints | None = None):
    """Run the request stream around `actions()`; returns the stream's records (each with the
    model version its answer is, where `prints` are given)."""

    def call(bucket, i):
        out, version = slot.infer(served.feeds.feeds(slot.engine.io(), bucket, i))
        return version, (prints.which(bucket.name, i, out) if prints is not None else "")

    stream = RequestStream(call, served.buckets, p["threads"], p["interval_ms"], t0).start()
    try:
        actions()
    finally:
        records = stream.stop()
    return records


def reported_facts(reported: list[dict]) -> dict:
    """Facts `engine.<setting>` from what the runtime reported for every engine the case
    loaded (Engine.reported(): read back from the runtime, not the options the harness
    passed); a setting the engines reported differently reads as all its values."""
    out = {}
    for key in dict.fromkeys(k for r in reported for k in r):
        values = list(dict.fromkeys(str(r.get(key)) for r in reported))
        out[f"engine.{key}"] = (
            reported[0][key]
            if len(values) == 1 and isinstance(reported[0].get(key), (str, int, float, bool))
            else " | ".join(values)
        )
    return out
