"""Erasure receipts: a versioned, PII-free JSON document signed with Ed25519 over a canonical encoding.

Document layout (schema in ``verifier/receipts/receipt_schema.json``)::

    {"receipt": {...body...}, "signature": {"alg": "Ed25519", "key_id": "...", "value": "<base64>"}}

The signature covers ``canonical(body)``: UTF-8 JSON with sorted keys and no insignificant whitespace.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

SCHEMA_ID = "erasure-receipt/3"
#: item forgetting's receipts (suppress, forget, erase one session): ``activities/forget.py``
FORGET_SCHEMA_ID = "forget-receipt/1"
#: the physical attestation, the receipt's second document (``verifier/receipts/attestation.py``)
ATTESTATION_SCHEMA_ID = "physical-attestation/1"
#: Receipts of every schema this code has issued stay verifiable.
KNOWN_SCHEMAS = ("erasure-receipt/1", "erasure-receipt/2", SCHEMA_ID, FORGET_SCHEMA_ID, ATTESTATION_SCHEMA_ID)
ALGORITHM = "Ed25519"


class InvalidReceipt(Exception):
    """The receipt does not verify; the message says why."""


def canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def signing_key(seed: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def load_public_key(pem: str | bytes) -> Ed25519PublicKey:
    data = pem.encode() if isinstance(pem, str) else pem
    key = serialization.load_pem_public_key(data)
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidReceipt("the public key is not an Ed25519 key")
    return key


def key_id(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def sign(body: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    if body.get("schema") not in (SCHEMA_ID, FORGET_SCHEMA_ID, ATTESTATION_SCHEMA_ID):
        raise ValueError("receipt body must carry a schema id this code issues")
    return {
        "receipt": body,
        "signature": {
            "alg": ALGORITHM,
            "key_id": key_id(key.public_key()),
            "value": base64.b64encode(key.sign(canonical(body))).decode(),
        },
    }


def document_bytes(document: dict[str, Any]) -> bytes:
    """How receipts are written to files and S3 (pretty, stable key order)."""
    return (json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def digest(document: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(document["receipt"])).hexdigest()


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON object hook: a key given twice would let a reader show one value while the signature covers
    another (``json.loads`` silently keeps the last)."""
    seen: dict[str, Any] = {}
    for name, value in pairs:
        if name in seen:
            raise InvalidReceipt(f"duplicate key {name!r} in a JSON object")
        seen[name] = value
    return seen


def verify_bytes(data: bytes, key: Ed25519PublicKey) -> dict[str, Any]:
    """Parse and verify a receipt file; returns the body or raises ``InvalidReceipt`` with the reason."""
    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=_refuse_duplicates)
    except (UnicodeDecodeError, ValueError):
        raise InvalidReceipt("not a JSON document") from None
    return verify(document, key)


def verify(document: Any, key: Ed25519PublicKey) -> dict[str, Any]:
    if not isinstance(document, dict) or set(document) != {"receipt", "signature"}:
        raise InvalidReceipt("not a receipt document (expected exactly 'receipt' and 'signature')")
    body, sig = document["receipt"], document["signature"]
    if not isinstance(body, dict) or body.get("schema") not in KNOWN_SCHEMAS:
        raise InvalidReceipt(f"unknown receipt schema (expected one of {', '.join(KNOWN_SCHEMAS)})")
    if not isinstance(sig, dict) or sig.get("alg") != ALGORITHM:
        raise InvalidReceipt("unsupported signature algorithm")
    if sig.get("key_id") != key_id(key):
        raise InvalidReceipt("signed with another key (key id does not match this public key)")
    value = str(sig.get("value", ""))
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        raise InvalidReceipt("signature is not valid base64") from None
    if base64.b64encode(raw).decode() != value:  # refuse non-canonical encodings of the same signature
        raise InvalidReceipt("signature is not canonical base64")
    try:
        key.verify(raw, canonical(body))
    except InvalidSignature:
        raise InvalidReceipt("signature does not match the receipt contents (altered or forged)") from None
    return body
