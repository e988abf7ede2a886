"""The engine-hotload driver for signed loads (source section 4.4): a SHA-256 manifest with
an Ed25519 signature, verified before any file reaches the deserializer and again at run
time. Control, interleaved: every attempt again with verification off."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from harness.experiments.engine_hotload.backend_ort import OrtEngine
from harness.experiments.engine_hotload.export import tiny_onnx
from harness.experiments.engine_hotload.series import LOAD_ATTEMPTS
from harness.experiments.engine_hotload.served import Served
from harness.experiments.engine_hotload.signing import (
    ModelRefused,
    Verifier,
    generate_keypair,
    sha256_bytes,
    sign_manifest,
    write_manifest,
)
from harness.model.driver_contract import CaseContext, CaseOutcome, Metric


class _Counter:
    """Counts how many times a file reached ONNX Runtime's deserializer."""

    count = 0

    @classmethod
    def engine(cls):

        class Counting(OrtEngine):
            def _deserialize(self, data, path):
                cls.count += 1
                super()._deserialize(data, path)

        return Counting()


def _fixtures(served: Served, work: Path, keys: Path) -> dict[str, Path]:
    """Manifests, keys, signatures and files for every attempt (private keys under `keys`)."""

    (work / "tampered").mkdir(parents=True, exist_ok=True)
    tiny = tiny_onnx(work / "tiny.onnx")
    manifest = write_manifest([served.file, tiny], work / "manifest.json")
    generate_keypair(keys / "signer.pem", work / "signer.pub.pem")
    generate_keypair(keys / "other.pem", work / "other.pub.pem")
    sign_manifest(manifest, keys / "signer.pem")
    unsigned = work / "unsigned" / "manifest.json"
    unsigned.parent.mkdir(exist_ok=True)
    shutil.copy(manifest, unsigned)
    tampered = work / "tampered" / "tiny.onnx"
    data = bytearray(tiny.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit flipped
    tampered.write_bytes(bytes(data))
    edited = work / "edited" / "manifest.json"
    edited.parent.mkdir(exist_ok=True)
    doc = json.loads(manifest.read_text())
    doc["files"]["tiny.onnx"]["sha256"] = sha256_bytes(bytes(data))  # an attacker edits the manifest too
    edited.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    shutil.copy(manifest.with_name("manifest.json.sig"), edited.with_name("manifest.json.sig"))
    unknown = work / "unknown.onnx"
    shutil.copy(tiny, unknown)
    return {"manifest": manifest, "unsigned": unsigned, "edited": edited, "tiny": tiny, "tampered": tampered,
            "unknown": unknown, "pub": work / "signer.pub.pem", "other": work / "other.pub.pem"}


def attempts_plan(served: Served, f: dict[str, Path]) -> list[tuple[str, str, tuple, Path]]:
    """(case, expected, (manifest, public key), file) of every load attempt."""
    return [("signed manifest, MiniLM file intact", "loaded", (f["manifest"], f["pub"]), served.file),
            ("signed manifest, tiny model intact", "loaded", (f["manifest"], f["pub"]), f["tiny"]),
            ("one bit flipped in the file", "refused", (f["manifest"], f["pub"]), f["tampered"]),
            ("file not listed in the manifest", "refused", (f["manifest"], f["pub"]), f["unknown"]),
            ("manifest without signature, key given", "refused", (f["unsigned"], f["pub"]), f["tiny"]),
            ("manifest signed by another key", "refused", (f["manifest"], f["other"]), f["tiny"]),
            ("manifest edited to match the tampered file", "refused", (f["edited"], f["pub"]), f["tampered"])]


def load_attempt(what: str, expected: str, verifier_args: tuple | None, path: Path) -> dict:
    """One load; verifier_args None = verification off (the control)."""

    before = _Counter.count
    eng = _Counter.engine()
    try:
        eng.load(path, Verifier(*verifier_args) if verifier_args else None)
        outcome, msg = "loaded", f"loaded {path.name}"
    except ModelRefused as e:
        outcome, msg = "refused", str(e)
    except Exception as e:  # the deserializer itself choked on the file: it was reached, not refused
        outcome, msg = "load error", f"{type(e).__name__}: {e}"[:300]
    finally:
        eng.close()
    return {"case": what, "verification": "on" if verifier_args else "off (control)", "expected": expected,
            "outcome": outcome, "message": msg, "deserialized": _Counter.count - before, "timings": dict(eng.timings)}


def summarize(attempts: list[dict]) -> dict[str, float]:
    """Counts over attempts with verification on and, as control.*, off."""
    out = {}
    for prefix, mode in (("", "on"), ("control.", "off (control)")):
        mine = [a for a in attempts if a["verification"] == mode]
        refusals = [a for a in mine if a["expected"] == "refused"]
        out[prefix + "refused"] = sum(a["outcome"] == "refused" for a in refusals)
        out[prefix + "wrong_verdicts"] = sum(a["outcome"] != a["expected"] for a in mine)
        out[prefix + "deserialized_refused"] = sum(a["deserialized"] for a in refusals)
        out[prefix + "deserialized_intact"] = sum(a["deserialized"] for a in mine if a["expected"] == "loaded")
    out["refusal_cases"] = sum(a["expected"] == "refused" for a in attempts if a["verification"] == "on")
    return out


def signed_load(ctx: CaseContext) -> CaseOutcome:
    if ctx.params["backend"] != "ort":
        return CaseOutcome("skipped", "the signature check is backend-independent (it runs on the file's bytes "
                                      "before deserialization); it is measured with backend ort")

    served = Served(ctx)
    work = ctx.raw_dir / "signing"
    with tempfile.TemporaryDirectory() as keys:  # private keys never reach the results folder
        f = _fixtures(served, work, Path(keys))
    attempts = []
    for what, expected, vargs, path in attempts_plan(served, f):
        attempts.append(load_attempt(what, expected, vargs, path))
        attempts.append(load_attempt(what, expected, None, path))  # the control, interleaved
        ctx.log(f"{what}: {attempts[-2]['outcome']} (verification off: {attempts[-1]['outcome']})")
    # run-time re-verification: a copy changes on disk after a verified load; control: a copy that does not
    v = Verifier(f["manifest"], f["pub"])
    rt = work / "runtime"
    rt.mkdir(exist_ok=True)
    changed, same = rt / "tiny.onnx", rt / "unchanged" / "tiny.onnx"
    same.parent.mkdir(exist_ok=True)
    shutil.copy(f["tiny"], changed)
    shutil.copy(f["tiny"], same)
    ok_before = v.recheck(changed) and v.recheck(same)
    changed.write_bytes(f["tampered"].read_bytes())
    detects = ok_before and not v.recheck(changed)
    false_alarm = not v.recheck(same)
    t = time.perf_counter()
    v.recheck(served.file)
    recheck_ms = (time.perf_counter() - t) * 1e3
    (ctx.raw_path("attempts.json")).write_text(json.dumps(attempts, indent=2))
    counts = summarize(attempts)
    big = attempts[0]["timings"]
    m = {k: Metric(v, "files", "lower" if "wrong" in k or "deserialized" in k else None) for k, v in counts.items()}
    m["refused"] = Metric(counts["refused"], "files", "higher")
    m["deserialized_refused"] = Metric(counts["deserialized_refused"], "files", "lower",
                                       "refused files that reached the deserializer (must be 0)")
    m["deserialized_intact"] = Metric(counts["deserialized_intact"], "files", None,
                                      "intact signed files seen reaching the deserializer (the counter's instrument: "
                                      "it must see these)")
    m["verify_ms"] = Metric(big.get("verify_ms", 0.0), "ms", "lower", "SHA-256 of the MiniLM ONNX file (~91 MB)")
    m["verify_over_deserialize"] = Metric(big.get("verify_ms", 0.0) / max(big.get("deserialize_ms", 1e-9), 1e-9),
                                          "x", "lower")
    m["runtime_recheck_ms"] = Metric(recheck_ms, "ms", "lower")
    m["runtime_recheck_detects_change"] = Metric(1.0 if detects else 0.0, "bool", "higher")
    m["control.runtime_recheck_detects_change"] = Metric(1.0 if false_alarm else 0.0, "bool", None,
                                                         "the same recheck of an unchanged copy (must be 0)")
    series = {LOAD_ATTEMPTS.name: LOAD_ATTEMPTS.make({c.name: [a[c.name] for a in attempts]
                                                     for c in LOAD_ATTEMPTS.columns})}
    return CaseOutcome("ok", metrics=m, series=series)
