"""The engine-hotload driver for signed loads (source section 4.4): a SHA-256 manifest with
an Ed25519 signature, verified before any file reaches the deserializer and again at run
time. Control, interleaved: every attempt again with verification off.

Exercise evidence, measured here apart from signing.py: every file that must be refused is
confirmed bad by a second, independent check (hashlib and cryptography called directly:
`fails_independently`), and one intact file is replaced on disk by another model right after
its check passed and before the deserializer runs (time of check against time of use): the
counting engine hashes the file on disk when the deserializer is called, and the loaded
engine's answer tells which model it is."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

from harness.experiments.engine_hotload.backend_ort import OrtEngine
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
from harness.mechanisms.onnx_models.export import tiny_onnx
from harness.model.driver_contract import CaseContext, Metric, Record

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class _Counter:
    """Counts how many times a file reached ONNX Runtime's deserializer, and hashes the file
    on disk at that moment (what a load that read the path again would get)."""

    count = 0
    disk_sha256: str | None = None

    @classmethod
    def engine(cls):

        class Counting(OrtEngine):
            def _deserialize(self, data, path):
                cls.count += 1
                try:
                    cls.disk_sha256 = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                except OSError:
                    cls.disk_sha256 = None
                super()._deserialize(data, path)

        return Counting()


class ChangesAfterCheck:
    """A verifier that replaces the file on disk with another model right after the wrapped
    verifier's check of it passed (before the deserializer runs): time of check against time
    of use. A load that hands the checked bytes to the deserializer still loads the checked
    model; one that reads the path again loads the replacement."""

    def __init__(self, inner: Verifier, replacement: bytes):
        self.inner, self.replacement = inner, replacement
        self.checked_sha256: str | None = None

    def check(self, path: Path, data: bytes) -> str:
        digest = self.inner.check(path, data)
        self.checked_sha256 = digest
        Path(path).write_bytes(self.replacement)
        return digest


def fails_independently(manifest: Path, public_key: Path | None, path: Path) -> bool:
    """Whether the file really fails its signed manifest, checked apart from signing.py
    (hashlib and cryptography called directly): no signature where a key is given, a
    signature that does not verify, the file not listed, or its bytes not the listed SHA-256
    and size. A file that does not exist fails nothing here (it cannot be the bad file)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization

    path, manifest = Path(path), Path(manifest)
    if not path.is_file():
        return False
    raw = manifest.read_bytes()
    if public_key is not None:
        sig = Path(str(manifest) + ".sig")
        if not sig.is_file():
            return True
        try:
            # the signers' keys are Ed25519 (generate_keypair); another kind fails in verify() as before
            key = cast("Ed25519PublicKey", serialization.load_pem_public_key(Path(public_key).read_bytes()))
            key.verify(base64.b64decode(sig.read_text().strip(), validate=True), raw)
        except (InvalidSignature, ValueError):
            return True
    entry = json.loads(raw).get("files", {}).get(path.name)
    if entry is None:
        return True
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest() != entry.get("sha256") or len(data) != entry.get("size")


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
    toctou = work / "toctou" / "tiny.onnx"  # an intact copy, replaced on disk after its check passed
    toctou.parent.mkdir(exist_ok=True)
    shutil.copy(tiny, toctou)
    other_model = tiny_onnx(work / "other-model" / "tiny.onnx", scale=-1.0)  # same IO, other answers
    return {
        "manifest": manifest,
        "unsigned": unsigned,
        "edited": edited,
        "tiny": tiny,
        "tampered": tampered,
        "unknown": unknown,
        "pub": work / "signer.pub.pem",
        "other": work / "other.pub.pem",
        "toctou": toctou,
        "other_model": other_model,
    }


def attempts_plan(served: Served, f: dict[str, Path]) -> list[tuple[str, str, tuple, Path]]:
    """(case, expected, (manifest, public key), file) of every load attempt."""
    return [
        ("signed manifest, MiniLM file intact", "loaded", (f["manifest"], f["pub"]), served.file),
        ("signed manifest, tiny model intact", "loaded", (f["manifest"], f["pub"]), f["tiny"]),
        ("one bit flipped in the file", "refused", (f["manifest"], f["pub"]), f["tampered"]),
        ("file not listed in the manifest", "refused", (f["manifest"], f["pub"]), f["unknown"]),
        ("manifest without signature, key given", "refused", (f["unsigned"], f["pub"]), f["tiny"]),
        ("manifest signed by another key", "refused", (f["manifest"], f["other"]), f["tiny"]),
        ("manifest edited to match the tampered file", "refused", (f["edited"], f["pub"]), f["tampered"]),
    ]


def _probe_feeds():
    import numpy as np

    ids = np.arange(1, 17, dtype=np.int64).reshape(1, 16)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}


def answer_of(path: Path):
    """The answer of the model in `path` to the probe, from an engine of its own (no verifier)."""
    eng = OrtEngine()
    try:
        eng.load(path)
        return _first(eng.infer(_probe_feeds()))
    finally:
        eng.close()


def _first(out: dict):
    return next(iter(out.values()))


def load_attempt(what: str, expected: str, verifier_args: tuple | None, path: Path, toctou: dict | None = None) -> dict:
    """One load; verifier_args None = verification off (the control). toctou: {"replacement":
    bytes, "answers": {"checked": array, "replacement": array}}: the file is replaced on disk
    after its check passed (ChangesAfterCheck) and the loaded engine's answer to a probe says
    which model it is ("loaded" only when it answers as the checked file)."""
    import numpy as np

    before = _Counter.count
    _Counter.disk_sha256 = None
    eng = _Counter.engine()
    changed_after_check = False
    try:
        verifier: Verifier | ChangesAfterCheck | None
        verifier = Verifier(*verifier_args) if verifier_args else None
        if toctou is not None and verifier is not None:
            verifier = ChangesAfterCheck(verifier, toctou["replacement"])
        eng.load(path, verifier)
        outcome, msg = "loaded", f"loaded {path.name}"
        if toctou is not None:
            checked = getattr(verifier, "checked_sha256", None)
            changed_after_check = (
                checked is not None and _Counter.disk_sha256 is not None and _Counter.disk_sha256 != checked
            )
            eng.create_contexts()
            got = _first(eng.infer(_probe_feeds()))
            if np.allclose(got, toctou["answers"]["replacement"]) and not np.allclose(
                got, toctou["answers"]["checked"]
            ):
                outcome, msg = "loaded the changed file", f"{path.name} answers as the file written after its check"
            elif not np.allclose(got, toctou["answers"]["checked"]):
                outcome, msg = "load error", f"{path.name} answers as neither the checked nor the changed file"
    except ModelRefused as e:
        outcome, msg = "refused", str(e)
    except Exception as e:  # the deserializer itself choked on the file: it was reached, not refused
        outcome, msg = "load error", f"{type(e).__name__}: {e}"[:300]
    finally:
        eng.close()
    args = verifier_args or ()  # read below only when verifier_args is given
    return {
        "case": what,
        "verification": "on" if verifier_args else "off (control)",
        "expected": expected,
        "outcome": outcome,
        "message": msg,
        "deserialized": _Counter.count - before,
        "timings": dict(eng.timings),
        "changed_after_check": changed_after_check,
        "confirmed_bad": bool(verifier_args)
        and expected == "refused"
        and fails_independently(args[0], args[1] if len(args) > 1 else None, path),
    }


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
    on = [a for a in attempts if a["verification"] == "on"]
    out["refusal_cases"] = sum(a["expected"] == "refused" for a in on)
    out["load_attempts"] = len(on)
    out["bad_files_confirmed"] = sum(bool(a.get("confirmed_bad")) for a in on)
    out["toctou.changed_after_check"] = sum(bool(a.get("changed_after_check")) for a in on)
    return out


def _runtime_recheck(served, f: dict, work: Path) -> tuple[bool, bool, float]:
    """(a changed copy detected, an unchanged copy flagged, ms to recheck the served file)."""
    # run-time re-verification: a copy changes on disk after a verified load; control: a copy that does not
    v = Verifier(f["manifest"], f["pub"])
    rt = work / "runtime"
    rt.mkdir(exist_ok=True)
    changed, same = rt / "tiny.onnx", rt / "unchanged" / "tiny.onnx"
    same.parent.mkdir(exist_ok=True)
    shutil.copy(f["tiny"], changed)
    shutil.copy(f["tiny"], same)
    ok_before = v.recheck(changed) and v.recheck(same)
    flipped = bytearray(f["tiny"].read_bytes())
    flipped[len(flipped) // 2] ^= 0x01  # the harness's own change: one bit flipped on disk after the verified load
    changed.write_bytes(bytes(flipped))
    detects = ok_before and not v.recheck(changed)
    false_alarm = not v.recheck(same)
    t = time.perf_counter()
    v.recheck(served.file)
    recheck_ms = (time.perf_counter() - t) * 1e3
    return detects, false_alarm, recheck_ms


def signed_load(ctx: CaseContext) -> Record:
    if ctx.params["backend"] != "ort":
        return Record(
            "skipped",
            "the signature check is backend-independent (it runs on the file's bytes "
            "before deserialization); it is measured with backend ort",
        )

    served = Served(ctx)
    work = ctx.raw_dir / "signing"
    with tempfile.TemporaryDirectory() as keys:  # private keys never reach the results folder
        f = _fixtures(served, work, Path(keys))
    attempts = []
    for what, expected, vargs, path in attempts_plan(served, f):
        attempts.append(load_attempt(what, expected, vargs, path))
        attempts.append(load_attempt(what, expected, None, path))  # the control, interleaved
        ctx.log(f"{what}: {attempts[-2]['outcome']} (verification off: {attempts[-1]['outcome']})")
    # time of check against time of use: an intact file replaced by another model after its check passed
    toctou = {
        "replacement": f["other_model"].read_bytes(),
        "answers": {"checked": answer_of(f["tiny"]), "replacement": answer_of(f["other_model"])},
    }
    attempts.append(
        load_attempt(
            "file replaced by another model after its check passed",
            "loaded",
            (f["manifest"], f["pub"]),
            f["toctou"],
            toctou,
        )
    )
    ctx.log(
        f"file replaced after its check: {attempts[-1]['outcome']} "
        f"(changed on disk at the deserializer: {attempts[-1]['changed_after_check']})"
    )
    detects, false_alarm, recheck_ms = _runtime_recheck(served, f, work)
    (ctx.raw_path("attempts.json")).write_text(json.dumps(attempts, indent=2))
    counts = summarize(attempts)
    big = attempts[0]["timings"]
    m = {k: Metric(v, "files", "lower" if "wrong" in k or "deserialized" in k else None) for k, v in counts.items()}
    m["load_attempts"] = Metric(
        counts["load_attempts"], "files", None, "load attempts with verification on (what wrong_verdicts is out of)"
    )
    m["bad_files_confirmed"] = Metric(
        counts["bad_files_confirmed"],
        "files",
        None,
        "files that must be refused and really fail their signed manifest, confirmed "
        "by a second check apart from signing.py (hashlib, cryptography)",
    )
    m["toctou.changed_after_check"] = Metric(
        counts["toctou.changed_after_check"],
        "files",
        None,
        "loads whose file on disk, hashed when the deserializer was called, "
        "was no longer the one whose check had passed",
    )
    m["refused"] = Metric(counts["refused"], "files", "higher")
    m["deserialized_refused"] = Metric(
        counts["deserialized_refused"], "files", "lower", "refused files that reached the deserializer (must be 0)"
    )
    m["deserialized_intact"] = Metric(
        counts["deserialized_intact"],
        "files",
        None,
        "intact signed files seen reaching the deserializer (the counter's instrument: it must see these)",
    )
    m["verify_ms"] = Metric(big.get("verify_ms", 0.0), "ms", "lower", "SHA-256 of the MiniLM ONNX file (~91 MB)")
    m["verify_over_deserialize"] = Metric(
        big.get("verify_ms", 0.0) / max(big.get("deserialize_ms", 1e-9), 1e-9), "x", "lower"
    )
    m["runtime_recheck_ms"] = Metric(recheck_ms, "ms", "lower")
    m["runtime_recheck_detects_change"] = Metric(1.0 if detects else 0.0, "bool", "higher")
    m["control.runtime_recheck_detects_change"] = Metric(
        1.0 if false_alarm else 0.0, "bool", None, "the same recheck of an unchanged copy (must be 0)"
    )
    series = {
        LOAD_ATTEMPTS.name: LOAD_ATTEMPTS.make({c.name: [a[c.name] for a in attempts] for c in LOAD_ATTEMPTS.columns})
    }
    return Record("ok", metrics=m, series=series)
