"""Issue 42, item 2: signed documents in a published canonical form, float-free by construction.

Every document is signed over its body's RFC 8785 (JCS) form, which the body names (``canonicalization``);
``sign`` refuses what another language would write differently (a float, NaN, an infinity, an integer past
I-JSON's range) with the field's path; the documents the real code issues carry none (the physical window
is whole seconds); documents signed before RFC 8785 (``tests/fixtures/receipts``, made by the signing code
of commit b0cb42e) still verify, under the legacy rule, and stay linked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import rfc8785

from tests.receipt_documents import erasure_receipt, fixture_key, physical_attestation
from verifier.receipts.attestation import link_problem
from verifier.receipts.signing import (
    SCHEMA_ID,
    InvalidReceipt,
    UnsignableDocument,
    canonical,
    digest,
    document_bytes,
    load_public_key,
    sign,
    verify,
    verify_bytes,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "verifier" / "receipts" / "receipt_schema.json").read_text())
LEGACY = ROOT / "tests" / "fixtures" / "receipts"


def _numbers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [n for item in value.values() for n in _numbers(item)]
    if isinstance(value, list):
        return [n for item in value for n in _numbers(item)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def test_documents_name_rfc8785_and_are_signed_over_it() -> None:
    key = fixture_key()
    receipt = erasure_receipt(key)
    attestation = physical_attestation(key, receipt)
    for document in (receipt, attestation):
        body = document["receipt"]
        assert body["canonicalization"] == "RFC8785"
        assert canonical(body) == rfc8785.dumps(body)
        key.public_key().verify(base64.b64decode(document["signature"]["value"]), rfc8785.dumps(body))
    jsonschema.validate(receipt, SCHEMA)
    jsonschema.validate(attestation["receipt"], {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/physical_attestation"})
    assert attestation["receipt"]["receipt_sha256"] == hashlib.sha256(rfc8785.dumps(receipt["receipt"])).hexdigest()


@pytest.mark.parametrize("window", [timedelta(minutes=5), timedelta(minutes=0.5), timedelta(hours=24)])
def test_the_documents_the_code_issues_carry_no_float(window: timedelta) -> None:
    key = fixture_key()
    receipt = erasure_receipt(key, window)
    floats = [n for d in (receipt, physical_attestation(key, receipt)) for n in _numbers(d) if not isinstance(n, int)]
    assert floats == []
    physical = receipt["receipt"]["physical"]
    assert physical["window_seconds"] == int(window.total_seconds())
    assert "window_minutes" not in physical


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (5.0, "receipt.physical.window_minutes is a non-integer number"),
        (math.nan, "receipt.physical.window_minutes is a non-integer number"),
        (math.inf, "receipt.physical.window_minutes is a non-integer number"),
        (2**53, "receipt.physical.window_minutes is an integer outside I-JSON's range"),
        ([1, 2.5], "receipt.physical.window_minutes[1] is a non-integer number"),
    ],
)
def test_a_document_another_language_would_write_differently_is_refused_at_signing(value: Any, where: str) -> None:
    body: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "request_id": "er_1",
        "physical": {"state": "pending", "window_minutes": value},
    }
    with pytest.raises(UnsignableDocument, match="^" + re.escape(where)) as refused:
        sign(body, fixture_key())
    assert "2.5" not in str(refused.value)
    assert "5.0" not in str(refused.value)
    assert body["physical"]["window_minutes"] is value
    assert "canonicalization" not in body


def test_a_lone_surrogate_or_another_rule_is_refused_at_signing() -> None:
    with pytest.raises(UnsignableDocument, match="not canonicalizable"):
        sign({"schema": SCHEMA_ID, "detail": "\ud800"}, fixture_key())
    with pytest.raises(UnsignableDocument, match="RFC8785 documents only"):
        sign({"schema": SCHEMA_ID, "canonicalization": "legacy"}, fixture_key())


@pytest.mark.parametrize("name", ["legacy_receipt.json", "legacy_attestation.json"])
def test_documents_signed_before_rfc8785_still_verify_under_the_legacy_rule(name: str) -> None:
    key = load_public_key((LEGACY / "legacy_public_key.pem").read_bytes())
    data = (LEGACY / name).read_bytes()
    body = verify_bytes(data, key)
    assert "canonicalization" not in body
    if name == "legacy_receipt.json":
        # the float Python writes "5.0" and JavaScript (and RFC 8785) "5": why the old rule could not stay
        assert b'"window_minutes":5.0}' in canonical(body)
        assert b'"window_minutes":5}' in rfc8785.dumps(body)
    altered = json.loads(data)
    altered["receipt"]["request_id"] = "er_0123456789abcdef0124"
    with pytest.raises(InvalidReceipt, match="altered or forged"):
        verify(altered, key)


def test_a_legacy_attestation_stays_linked_to_its_legacy_receipt() -> None:
    receipt = json.loads((LEGACY / "legacy_receipt.json").read_text())
    attestation = json.loads((LEGACY / "legacy_attestation.json").read_text())
    assert attestation["receipt"]["receipt_sha256"] == digest(receipt)
    assert link_problem(attestation["receipt"], receipt["receipt"]) == ""


def test_the_rule_cannot_be_switched_on_a_signed_document() -> None:
    """Dropping the field (the legacy rule) or naming another rule changes the signed bytes: never valid."""
    key = fixture_key()
    document = erasure_receipt(key)
    dropped = json.loads(document_bytes(document))
    del dropped["receipt"]["canonicalization"]
    with pytest.raises(InvalidReceipt, match="altered or forged"):
        verify(dropped, key.public_key())
    renamed = json.loads(document_bytes(document))
    renamed["receipt"]["canonicalization"] = "RFC8785-bis"
    with pytest.raises(InvalidReceipt, match="unknown canonicalization"):
        verify(renamed, key.public_key())
    floated = json.loads(document_bytes(document))
    floated["receipt"]["physical"]["window_seconds"] = 300.0
    with pytest.raises(InvalidReceipt, match=r"receipt\.physical\.window_seconds is a non-integer number"):
        verify(floated, key.public_key())
