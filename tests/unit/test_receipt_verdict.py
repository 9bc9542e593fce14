"""``erasure receipt verify`` on receipts whose signature is valid: what they prove (issue 28, item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier.receipts.signing import FORGET_SCHEMA_ID, SCHEMA_ID, document_bytes, public_key_pem, sign, signing_key
from workers.cli import main

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
