"""Model and engine files are loaded only after their SHA-256 matches a manifest, and,
when a public key is given, only after the manifest's Ed25519 signature checks out.

Formats
- Manifest (JSON, UTF-8): {"schema": "harness-engine-manifest/1", "algorithm": "sha256",
  "files": {"<file name>": {"sha256": "<64 hex>", "size": <bytes>}}}. Files are keyed by
  their base name; the manifest lives next to them.
- Signature: `<manifest>.sig` holding the base64 of the raw 64-byte Ed25519 signature
  over the manifest's exact bytes.
- Keys: PEM; private key PKCS#8, public key SubjectPublicKeyInfo (what
  `cryptography` writes and `openssl genpkey -algorithm ed25519` makes).

The check runs on the bytes that were read, and the same bytes are handed to the
deserializer, so a file swapped between the check and the load cannot slip through.
`Verifier.recheck(path)` hashes the file on disk again at run time (C21's "again at run
time").
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from harness.base.errors import BadInput
from harness.base.files import loads_json

SCHEMA = "harness-engine-manifest/1"


class ModelRefused(BadInput):
    """A file failed verification and was not loaded (the user's file or manifest: exit 2)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_manifest(files: list[Path]) -> bytes:
    entries = {}
    for f in files:
        f = Path(f)
        data = f.read_bytes()
        if f.name in entries:
            raise BadInput(f"two files named {f.name} in one manifest; rename one")
        entries[f.name] = {"sha256": sha256_bytes(data), "size": len(data)}
    doc = {"schema": SCHEMA, "algorithm": "sha256", "files": dict(sorted(entries.items()))}
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def write_manifest(files: list[Path], manifest_path: Path) -> Path:
    manifest_path = Path(manifest_path)
    manifest_path.write_bytes(build_manifest(files))
    return manifest_path


def generate_keypair(private_path: Path, public_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    Path(private_path).write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    Path(private_path).chmod(0o600)
    Path(public_path).write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def signature_path(manifest_path: Path) -> Path:
    return Path(str(manifest_path) + ".sig")


def sign_manifest(manifest_path: Path, private_key_path: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = serialization.load_pem_private_key(Path(private_key_path).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(f"{private_key_path} is not an Ed25519 private key")
    sig = key.sign(Path(manifest_path).read_bytes())
    out = signature_path(manifest_path)
    out.write_text(base64.b64encode(sig).decode() + "\n")
    return out


def _load_public_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except FileNotFoundError:
        raise BadInput(f"public key {path} does not exist; give the path of an Ed25519 public key (PEM)") from None
    except ValueError as e:
        raise BadInput(f"{path} is not a PEM public key: {e}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(f"{path} holds a {type(key).__name__}, not an Ed25519 public key")
    return key


class Verifier:
    """Holds a checked manifest (and its checked signature) in memory; checks files against it."""

    def __init__(self, manifest_path: Path, public_key_path: Path | None = None):
        from cryptography.exceptions import InvalidSignature

        self.manifest_path = Path(manifest_path)
        try:
            raw = self.manifest_path.read_bytes()
        except FileNotFoundError:
            raise BadInput(
                f"manifest {manifest_path} does not exist; write one with "
                "harness.experiments.engine_hotload.signing.write_manifest"
            ) from None
        self.signed = False
        if public_key_path is not None:
            key = _load_public_key(Path(public_key_path))
            sig_file = signature_path(self.manifest_path)
            if not sig_file.exists():
                raise ModelRefused(
                    f"refused: manifest {self.manifest_path.name} is unsigned (no {sig_file.name}) "
                    f"and a public key was given; sign it or drop the key"
                )
            try:
                sig = base64.b64decode(sig_file.read_text().strip(), validate=True)
                key.verify(sig, raw)
            except (InvalidSignature, ValueError):
                raise ModelRefused(
                    f"refused: the signature {sig_file.name} does not match manifest "
                    f"{self.manifest_path.name} under key {Path(public_key_path).name} "
                    "(manifest changed after signing, or signed with another key)"
                ) from None
            self.signed = True
        try:
            doc = loads_json(raw.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ModelRefused(f"refused: manifest {self.manifest_path} is not valid JSON ({e})") from None
        if (
            not isinstance(doc, dict)
            or doc.get("schema") != SCHEMA
            or doc.get("algorithm") != "sha256"
            or not isinstance(doc.get("files"), dict)
        ):
            raise ModelRefused(f"refused: {self.manifest_path} is not a {SCHEMA} manifest with sha256 entries")
        self.files: dict[str, dict] = doc["files"]

    def expected(self, path: Path) -> dict:
        entry = self.files.get(Path(path).name)
        if entry is None:
            raise ModelRefused(
                f"refused: {Path(path).name} is not listed in manifest {self.manifest_path.name} "
                f"(an unknown file is never loaded; listed: {', '.join(sorted(self.files)) or 'none'})"
            )
        return entry

    def check(self, path: Path, data: bytes) -> str:
        """Raise ModelRefused unless `data` (the bytes read from `path`) match the manifest."""
        entry = self.expected(path)
        digest = sha256_bytes(data)
        if len(data) != entry.get("size", len(data)) or digest != entry.get("sha256"):
            raise ModelRefused(
                f"refused: SHA-256 of {Path(path).name} is {digest[:16]}... ({len(data)} bytes), "
                f"manifest {self.manifest_path.name} says {str(entry.get('sha256'))[:16]}... "
                f"({entry.get('size')} bytes): the file was tampered with or replaced; not loaded"
            )
        return digest

    def recheck(self, path: Path) -> bool:
        """Hash the file on disk again (run-time verification); False when it changed."""
        try:
            self.check(path, Path(path).read_bytes())
        except (ModelRefused, OSError):
            return False
        return True
