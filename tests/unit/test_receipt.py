from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from verifier.receipts.signing import (
    SCHEMA_ID,
    InvalidReceipt,
    document_bytes,
    load_public_key,
    public_key_pem,
    sign,
    signing_key,
    verify,
    verify_bytes,
)

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "verifier" / "receipts" / "receipt_schema.json").read_text())


def body() -> dict[str, Any]:
    check = {"check": "sessions", "passed": True, "counts": {"sessions": 0}, "detail": "nothing left"}
    return {
        "schema": SCHEMA_ID,
        "stores": ["artifacts", "sessions", "memory", "logs", "keys", "vector_cache"],
        "request_id": "er_0123456789abcdef0123",
        "subject_key": "sk_" + "ab" * 20,
        "app_name": "support",
        "status": "completed",
        "received_at": "2026-11-30T09:00:00+00:00",
        "started_at": "2026-11-30T09:00:01+00:00",
        "completed_at": "2026-11-30T09:01:00+00:00",
        "due_at": "2026-12-30T09:00:00+00:00",
        "due_met": True,
        "subject_found": True,
        "found_at_start": {"sessions": 3, "memory_rows": 37},
        "steps": [{"name": "memory", "state": "done", "counts": {"rows": 37, "derived_rows": 1}}],
        "derived_rows_removed": ["6f1c1b6e-9a57-4a3c-8a59-6b9e1d7c2f10"],
        "second_sweep": {"memory_rows": 0},
        "verifications": [{"phase": "final", "passed": True, "checks": [check]}],
        "holds": [{"action": "placed", "at": "2026-11-30T09:00:00+00:00"}],
        "software": {"name": "erasure-orchestrator", "version": "0.1.0"},
        "issued_at": "2026-11-30T09:01:01+00:00",
    }


def test_a_valid_receipt_verifies_and_matches_the_schema() -> None:
    key = signing_key(os.urandom(32))
    document = sign(body(), key)
    jsonschema.validate(document, SCHEMA)
    assert verify_bytes(document_bytes(document), key.public_key()) == {**body(), "canonicalization": "RFC8785"}
    pem = public_key_pem(key.public_key())
    assert verify(document, load_public_key(pem))["request_id"] == "er_0123456789abcdef0123"


def test_changing_any_byte_fails_with_a_reason() -> None:
    key = signing_key(os.urandom(32))
    data = document_bytes(sign(body(), key))
    failures = 0
    for i in range(len(data)):
        tampered = bytearray(data)
        tampered[i] = (tampered[i] + 1) % 256
        try:
            verify_bytes(bytes(tampered), key.public_key())
        except InvalidReceipt:
            failures += 1
            continue
        # the only edits that can still verify are those that leave the JSON meaning unchanged
        assert json.loads(bytes(tampered)) == json.loads(data), f"byte {i} changed the content yet verified"
    assert failures >= len(data) * 0.9


def test_another_key_fails() -> None:
    document = sign(body(), signing_key(os.urandom(32)))
    with pytest.raises(InvalidReceipt, match="another key"):
        verify(document, signing_key(os.urandom(32)).public_key())


def test_reordered_or_reformatted_receipts_still_verify() -> None:
    key = signing_key(os.urandom(32))
    document = sign(body(), key)
    compact = json.dumps(document, separators=(",", ":")).encode()
    assert verify_bytes(compact, key.public_key())["status"] == "completed"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d["receipt"].update(status="completed!"), "altered or forged"),
        (lambda d: d["receipt"].update(schema="erasure-receipt/0"), "unknown receipt schema"),
        (lambda d: d["signature"].update(alg="RS256"), "algorithm"),
        (lambda d: d["signature"].update(value="%%%"), "base64"),
        (lambda d: d.pop("signature"), "not a receipt document"),
    ],
)
def test_tampering_reasons(mutate: Any, reason: str) -> None:
    key = signing_key(os.urandom(32))
    document = sign(body(), key)
    mutate(document)
    with pytest.raises(InvalidReceipt, match=reason):
        verify(document, key.public_key())


def test_not_json_is_a_clear_reason() -> None:
    with pytest.raises(InvalidReceipt, match="not a JSON document"):
        verify_bytes(b"\xff\x00", signing_key(os.urandom(32)).public_key())


# ----- issue 12, item 12: duplicate keys and the exit code of `erasure receipt verify` ----------------------


def test_duplicate_json_keys_are_refused() -> None:
    """A second "status" key would make a JSON reader show one value while the signature covers the other."""
    key = signing_key(os.urandom(32))
    signed = sign({**body(), "status": "verification_failed"}, key)
    data = document_bytes(signed).decode()
    # the signed value stays (json.loads keeps the last duplicate); a naive viewer may show the first one
    forged = data.replace(
        '"status": "verification_failed"', '"status": "completed",\n    "status": "verification_failed"'
    )
    assert forged != data
    with pytest.raises(InvalidReceipt, match="duplicate key"):
        verify_bytes(forged.encode(), key.public_key())


def _cli_verify(tmp_path: Path, document: dict[str, Any], key: Any, *extra: str) -> int:
    from workers.cli import main

    receipt = tmp_path / "receipt.json"
    receipt.write_bytes(document_bytes(document))
    pem = tmp_path / "public.pem"
    pem.write_text(public_key_pem(key.public_key()))
    return main(["receipt", "verify", str(receipt), "--public-key", str(pem), *extra])


def test_cli_verify_exits_non_zero_for_a_valid_but_failed_receipt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ERASURE_STATE_DIR", str(tmp_path / "state"))
    key = signing_key(os.urandom(32))
    assert _cli_verify(tmp_path, sign(body(), key), key) == 0
    assert "valid" in capsys.readouterr().out
    failed = sign({**body(), "status": "verification_failed"}, key)
    assert _cli_verify(tmp_path, failed, key) == 1
    out = capsys.readouterr().out
    assert "signature valid" in out
    assert "verification_failed" in out
    assert "not completed" in out
    # a flag accepts any valid signature, whatever the status, and says so
    assert _cli_verify(tmp_path, failed, key, "--any-status") == 0
    assert "verification_failed" in capsys.readouterr().out
