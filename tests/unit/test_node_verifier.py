"""Issue 42, item 2: a receipt anyone can check, outside Python. ``verifier/node/verify.mjs`` (Node's standard
library only, written from the docs) checks a receipt and a physical attestation signed by the real signing
code: valid as issued; invalid with one byte of content, one key or the signature changed; an old-format
document (signed before RFC 8785) reported as such, never "valid" under the new rule.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.receipt_documents import erasure_receipt, fixture_key, physical_attestation
from verifier.receipts.signing import InvalidReceipt, document_bytes, load_public_key, public_key_pem, verify_bytes

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "verifier" / "node" / "verify.mjs"
LEGACY = ROOT / "tests" / "fixtures" / "receipts"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH: verifier/node/verify.mjs cannot run")


def node(*args: Path | str) -> tuple[int, str]:
    assert NODE is not None
    done = subprocess.run([NODE, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).strip()


@pytest.fixture
def signed(tmp_path: Path) -> dict[str, Path]:
    """A receipt, its attestation and the public key as files, as the CLI exports and prints them."""
    key = fixture_key("node-verifier")
    receipt = erasure_receipt(key)
    paths = {"receipt": tmp_path / "receipt.json", "attestation": tmp_path / "receipt.physical.json"}
    paths["receipt"].write_bytes(document_bytes(receipt))
    paths["attestation"].write_bytes(document_bytes(physical_attestation(key, receipt)))
    paths["key"] = tmp_path / "public.pem"
    paths["key"].write_text(public_key_pem(key.public_key()))
    return paths


def _edit(path: Path, old: str, new: str, tmp_path: Path) -> Path:
    """A copy of ``path`` with the first ``old`` replaced by ``new`` (both the same length: one byte)."""
    text = path.read_text()
    assert old in text
    assert len(old.encode()) == len(new.encode())
    changed = tmp_path / f"changed-{path.name}"
    changed.write_text(text.replace(old, new, 1))
    return changed


def test_a_receipt_and_its_attestation_signed_by_the_real_code_are_valid(signed: dict[str, Path]) -> None:
    code, out = node(signed["receipt"], signed["key"])
    assert (code, out) == (
        0,
        f"valid: erasure-receipt/3 er_0123456789abcdef0123 signed by key {_key_id(signed)} (RFC 8785)",
    )
    code, out = node(signed["attestation"], signed["key"])
    assert code == 0, out
    assert out.startswith("valid: physical-attestation/1 er_0123456789abcdef0123"), out
    code, out = node(signed["attestation"], signed["key"], "--receipt", signed["receipt"])
    assert code == 0, out
    assert out.endswith(f"linked to the receipt {signed['receipt']}"), out


FORGED = "INVALID: signature does not match the document's contents (altered or forged)"


@pytest.mark.parametrize("which", ["receipt", "attestation"])
@pytest.mark.parametrize(
    ("old", "new", "verdict"),
    [
        ('"request_id": "er_0123456789abcdef0123"', '"request_id": "er_0123456789abcdef0124"', FORGED),  # a value
        ('"software": {', '"softwarE": {', FORGED),  # a key
        ("{\n", "{ ", ""),  # whitespace only: the same document, still valid
    ],
)
def test_one_byte_changed_is_invalid_unless_the_json_is_the_same(
    signed: dict[str, Path], which: str, old: str, new: str, verdict: str, tmp_path: Path
) -> None:
    changed = _edit(signed[which], old, new, tmp_path)
    code, out = node(changed, signed["key"])
    if not verdict:
        assert json.loads(changed.read_text()) == json.loads(signed[which].read_text())
        assert code == 0, out
        return
    assert (code, out) == (1, verdict)
    with pytest.raises(InvalidReceipt, match="altered or forged"):  # the Python verifier agrees
        verify_bytes(changed.read_bytes(), load_public_key(signed["key"].read_bytes()))


def test_another_key_is_invalid(signed: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other.pem"
    other.write_text(public_key_pem(fixture_key("another deployment").public_key()))
    for which in ("receipt", "attestation"):
        code, out = node(signed[which], other)
        assert (code, out) == (1, "INVALID: signed with another key (key id does not match this public key)")


def test_a_changed_signature_is_invalid(signed: dict[str, Path], tmp_path: Path) -> None:
    for which in ("receipt", "attestation"):
        document: dict[str, Any] = json.loads(signed[which].read_text())
        raw = bytearray(base64.b64decode(document["signature"]["value"]))
        raw[10] ^= 0x01
        document["signature"]["value"] = base64.b64encode(bytes(raw)).decode()
        changed = tmp_path / f"sig-{which}.json"
        changed.write_bytes(document_bytes(document))
        code, out = node(changed, signed["key"])
        assert (code, out) == (1, FORGED)


def test_an_attestation_about_another_receipt_is_not_linked(signed: dict[str, Path], tmp_path: Path) -> None:
    key = fixture_key("node-verifier")
    other = erasure_receipt(key, window=timedelta(minutes=6))  # another valid receipt
    path = tmp_path / "other-receipt.json"
    path.write_bytes(document_bytes(other))
    assert node(path, signed["key"])[0] == 0
    code, out = node(signed["attestation"], signed["key"], "--receipt", path)
    assert (code, out) == (1, "INVALID: not linked: receipt_sha256 is not the SHA-256 of this receipt's canonical body")


def test_an_old_format_receipt_is_reported_as_such_never_valid() -> None:
    """Signed by the code before RFC 8785 (``tests/fixtures/receipts``): its float ``"window_minutes": 5.0``
    is why a verifier written from the old docs rejected it; this one says it cannot check it, and why."""
    for name in ("legacy_receipt.json", "legacy_attestation.json"):
        code, out = node(LEGACY / name, LEGACY / "legacy_public_key.pem")
        assert code == 2, out
        assert out.startswith("CANNOT CHECK: old format: "), out
        assert "signed before RFC 8785" in out, out


def test_bad_input_exits_2(signed: dict[str, Path], tmp_path: Path) -> None:
    not_json = tmp_path / "not.json"
    not_json.write_text("{receipt")
    rsa_like = tmp_path / "bad.pem"
    rsa_like.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    for args in [
        (not_json, signed["key"]),
        (signed["receipt"], rsa_like),
        (tmp_path / "missing.json", signed["key"]),
        (signed["receipt"],),
    ]:
        code, out = node(*args)
        assert code == 2, (args, out)
        assert out.startswith("CANNOT CHECK: "), (args, out)


def test_duplicate_keys_and_floats_are_invalid(signed: dict[str, Path], tmp_path: Path) -> None:
    text = signed["receipt"].read_text()
    duplicated = tmp_path / "dup.json"
    duplicated.write_text(text.replace('"status": "completed"', '"status": "completed", "status": "completed"', 1))
    assert node(duplicated, signed["key"]) == (1, 'INVALID: duplicate key "status" in a JSON object')
    floated = tmp_path / "float.json"
    floated.write_text(text.replace('"window_seconds": 300', '"window_seconds": 300.0', 1))
    code, out = node(floated, signed["key"])
    assert (code, out) == (1, "INVALID: a non-integer number (300.0): RFC 8785 documents of this signer carry none")


def _key_id(signed: dict[str, Path]) -> str:
    return str(json.loads(signed["receipt"].read_text())["signature"]["key_id"])
