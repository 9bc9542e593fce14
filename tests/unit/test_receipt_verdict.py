"""``erasure receipt verify`` on receipts whose signature is valid: what they prove (issue 28, item 13); on a
physical attestation, and its link to its receipt (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.receipts.signing import (
    ATTESTATION_SCHEMA_ID,
    FORGET_SCHEMA_ID,
    SCHEMA_ID,
    digest,
    document_bytes,
    public_key_pem,
    sign,
    signing_key,
)
from workers.cli import main
from workers.cli.receipts import receipt_verdict

KEY = signing_key(b"k" * 32)


def _verify(tmp_path: Path, body: dict[str, object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    receipt, pem = tmp_path / "receipt.json", tmp_path / "key.pem"
    schema = FORGET_SCHEMA_ID if str(body["request_id"]).startswith("fr_") else SCHEMA_ID
    receipt.write_bytes(document_bytes(sign({"schema": schema, **body}, KEY)))
    pem.write_text(public_key_pem(KEY.public_key()))
    code = main(["receipt", "verify", str(receipt), "--public-key", str(pem)])
    return code, capsys.readouterr().out


def test_a_suppression_is_never_a_completed_erasure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = {"request_id": "fr_1", "subject_key": "sk_x", "strength": "suppress", "status": "completed"}
    code, out = _verify(tmp_path, body, capsys)
    assert code == 1  # it was "valid (completed)" with exit 0
    assert "nothing deleted" in out


def test_an_erasure_and_a_nothing_found_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _verify(tmp_path, {"request_id": "er_1", "status": "completed", "outcome": "erased"}, capsys)
    assert (code, "(completed)" in out) == (0, True)
    body = {"request_id": "er_2", "status": "completed", "outcome": "nothing_found: ..."}
    code, out = _verify(tmp_path, body, capsys)
    assert code == 0
    assert "nothing found" in out
    code, out = _verify(tmp_path, {"request_id": "er_3", "status": "verification_failed"}, capsys)
    assert code == 1
    assert "not completed" in out


# ----- the physical attestation (issue 30): verified like a receipt, and linked to its receipt ------------


def _attestation(receipt: dict[str, object], **changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "schema": ATTESTATION_SCHEMA_ID,
        "request_id": receipt["request_id"],
        "kind": "erasure",
        "receipt_sha256": digest(sign(receipt, KEY)),
        "run": {"id": "physical-cleanup-2026-12-06T01:00:00Z", "started_at": "2026-12-06T01:00:01+00:00"},
        "deleted_by": "2026-12-06T00:59:00+00:00",
        "due_at": "2026-12-07T00:59:00+00:00",
        "attested_at": "2026-12-06T01:00:09+00:00",
        "within_window": True,
        "run_after_last_deletion": True,
        "stores": [
            {"store": "compaction", "covered": True, "note": "", "evidence": {}},
            {"store": "vacuum", "covered": True, "note": "", "evidence": {}},
        ],
        "key_unwrappable_by": "2027-03-12T00:59:00+00:00",
        "software": {"name": "erasure-orchestrator", "version": "test"},
    }
    return {**body, **changes}


RECEIPT = {"schema": SCHEMA_ID, "request_id": "er_1", "status": "completed", "outcome": "erased"}


def _verify_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], attestation: dict[str, object], *extra: str
) -> tuple[int, str]:
    file, pem = tmp_path / "er_1.physical.json", tmp_path / "key.pem"
    file.write_bytes(document_bytes(sign(attestation, KEY)))
    pem.write_text(public_key_pem(KEY.public_key()))
    code = main(["receipt", "verify", str(file), "--public-key", str(pem), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_an_attestation_covering_every_store_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _verify_files(tmp_path, capsys, _attestation(RECEIPT))
    assert code == 0  # it was "not completed" with exit 1: an attestation carries no status
    assert "valid: er_1 (physical attestation: every store covered, run physical-cleanup-" in out
    done, what = receipt_verdict(_attestation(RECEIPT, within_window=False))
    assert done
    assert "late: after its window" in what


def test_an_attestation_that_does_not_cover_every_store_proves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores = [{"store": "vacuum", "covered": True}, {"store": "compaction", "covered": False}]
    code, out = _verify_files(tmp_path, capsys, _attestation(RECEIPT, stores=stores))
    assert code == 1
    assert "not covered: compaction" in out
    assert receipt_verdict(_attestation(RECEIPT, stores=[]))[0] is False  # names no store: fails closed
    assert receipt_verdict(_attestation(RECEIPT, run_after_last_deletion=False))[0] is False


def test_receipt_checks_the_attestation_is_linked_to_that_receipt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receipt = tmp_path / "er_1.json"
    receipt.write_bytes(document_bytes(sign(RECEIPT, KEY)))
    code, out = _verify_files(tmp_path, capsys, _attestation(RECEIPT), "--receipt", str(receipt))
    assert code == 0
    assert f"linked to the receipt {receipt}" in out

    other = tmp_path / "other.json"  # another receipt of the same request (one byte of it changed)
    other.write_bytes(document_bytes(sign({**RECEIPT, "outcome": "erased "}, KEY)))
    code, out = _verify_files(tmp_path, capsys, _attestation(RECEIPT), "--receipt", str(other))
    assert code == 4  # the signature or the link does not verify
    assert "NOT LINKED" in out
    assert "receipt_sha256" in out

    elsewhere = tmp_path / "er_2.json"  # a receipt of another request
    elsewhere.write_bytes(document_bytes(sign({**RECEIPT, "request_id": "er_2"}, KEY)))
    code, out = _verify_files(tmp_path, capsys, _attestation(RECEIPT), "--receipt", str(elsewhere))
    assert code == 4  # the signature or the link does not verify
    assert "the attestation is for request er_1, the receipt for er_2" in out

    forged = tmp_path / "forged.json"  # the receipt's signature must hold too
    document = sign(RECEIPT, KEY)
    forged.write_bytes(document_bytes({**document, "signature": {**document["signature"], "value": "AAAA"}}))
    code, out = _verify_files(tmp_path, capsys, _attestation(RECEIPT), "--receipt", str(forged))
    assert code == 4  # the signature or the link does not verify
    assert "INVALID: the receipt" in out


def test_receipt_goes_with_an_attestation_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    receipt = tmp_path / "er_1.json"
    receipt.write_bytes(document_bytes(sign(RECEIPT, KEY)))
    code, out = _verify_files(tmp_path, capsys, RECEIPT, "--receipt", str(receipt))
    assert code == 2
    assert "--receipt goes with a physical attestation" in out
