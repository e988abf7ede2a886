"""Signed loading: a file reaches the deserializer only after its SHA-256 matches a manifest
whose Ed25519 signature checks out (real keys, real ONNX files, real ONNX Runtime)."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.base.errors import BadInput
from harness.experiments.engine_hotload.backend_ort import OrtEngine
from harness.experiments.engine_hotload.signing import (
    ModelRefused,
    Verifier,
    generate_keypair,
    sha256_bytes,
    sign_manifest,
    signature_path,
    write_manifest,
)
from harness.mechanisms.onnx_models.export import tiny_onnx


class CountingOrt(OrtEngine):
    deserialized = 0

    def _deserialize(self, data, path):
        CountingOrt.deserialized += 1
        super()._deserialize(data, path)


@pytest.fixture
def signed(tmp_path):
    model = tiny_onnx(tmp_path / "model.onnx")
    manifest = write_manifest([model], tmp_path / "manifest.json")
    keys = tmp_path / "keys"
    keys.mkdir()
    generate_keypair(keys / "signer.pem", tmp_path / "signer.pub.pem")
    generate_keypair(keys / "other.pem", tmp_path / "other.pub.pem")
    sign_manifest(manifest, keys / "signer.pem")
    return {
        "dir": tmp_path,
        "model": model,
        "manifest": manifest,
        "pub": tmp_path / "signer.pub.pem",
        "other": tmp_path / "other.pub.pem",
    }


def _load(path, verifier):
    before = CountingOrt.deserialized
    eng = CountingOrt()
    try:
        eng.load(path, verifier)
    finally:
        reached = CountingOrt.deserialized - before
        eng.close()
    return reached


def test_intact_signed_file_loads(signed):
    v = Verifier(signed["manifest"], signed["pub"])
    assert v.signed
    assert _load(signed["model"], v) == 1


def test_tampered_file_is_refused_before_deserialization(signed):
    tampered = signed["dir"] / "t" / "model.onnx"
    tampered.parent.mkdir()
    data = bytearray(signed["model"].read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered.write_bytes(bytes(data))
    v = Verifier(signed["manifest"], signed["pub"])
    before = CountingOrt.deserialized
    with pytest.raises(ModelRefused, match="tampered with or replaced; not loaded"):
        _load(tampered, v)
    assert CountingOrt.deserialized == before
    # a hash-only manifest refuses it too
    with pytest.raises(ModelRefused, match="SHA-256 of model.onnx"):
        _load(tampered, Verifier(signed["manifest"]))
    assert CountingOrt.deserialized == before


def test_unknown_file_is_refused(signed):
    unknown = signed["dir"] / "unknown.onnx"
    shutil.copy(signed["model"], unknown)
    before = CountingOrt.deserialized
    with pytest.raises(ModelRefused, match="unknown.onnx is not listed in manifest"):
        _load(unknown, Verifier(signed["manifest"], signed["pub"]))
    assert CountingOrt.deserialized == before


def test_unsigned_manifest_is_refused_when_a_key_is_given(signed):
    signature_path(signed["manifest"]).unlink()
    with pytest.raises(ModelRefused, match="is unsigned"):
        Verifier(signed["manifest"], signed["pub"])
    assert _load(signed["model"], Verifier(signed["manifest"])) == 1  # no key: the hash alone is checked


def test_wrong_key_and_edited_manifest_are_refused(signed):
    with pytest.raises(ModelRefused, match="does not match manifest"):
        Verifier(signed["manifest"], signed["other"])
    doc = json.loads(signed["manifest"].read_text())
    doc["files"]["model.onnx"]["sha256"] = sha256_bytes(b"something else")
    signed["manifest"].write_text(json.dumps(doc))
    with pytest.raises(ModelRefused, match="does not match manifest"):
        Verifier(signed["manifest"], signed["pub"])


def test_runtime_recheck_detects_a_change_on_disk(signed):
    v = Verifier(signed["manifest"], signed["pub"])
    assert v.recheck(signed["model"])
    signed["model"].write_bytes(signed["model"].read_bytes() + b"\0")
    assert not v.recheck(signed["model"])


def test_bad_key_path_and_missing_manifest_are_bad_input(signed):
    with pytest.raises(BadInput, match="does not exist"):
        Verifier(signed["dir"] / "nope.json")
    with pytest.raises(BadInput, match="public key"):
        Verifier(signed["manifest"], signed["dir"] / "nope.pem")
    with pytest.raises(BadInput, match="not a PEM public key"):
        Verifier(signed["manifest"], signed["model"])
