"""Erasure receipts: a versioned, PII-free JSON document signed with Ed25519 over a canonical encoding.

Document layout (schema in ``verifier/receipts/receipt_schema.json``)::

    {"receipt": {...body...}, "signature": {"alg": "Ed25519", "key_id": "...", "value": "<base64>"}}

The signature covers ``canonical(body)``, by the rule the body names in its own ``canonicalization`` field:
``RFC8785`` (the JSON Canonicalization Scheme: a published rule every language can follow) for every
document signed since issue 42. Those are float-free by construction: ``sign`` refuses a float, a NaN, an
infinity or an integer outside I-JSON's range (a float's text differs between languages: Python writes
``5.0`` where JavaScript writes ``5``), so a verifier needs no number formatting of its own
(``verifier/node/verify.mjs`` is one, on Node's standard library). A body without the field was signed
before, under the legacy rule (Python's sorted-key ``json.dumps``), and stays verifiable under it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import rfc8785
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
#: the body's ``canonicalization`` field: how the signed bytes are made from it (RFC 8785, JCS)
CANONICALIZATION = "RFC8785"
#: I-JSON's integers (RFC 7493): what every JSON reader holds exactly, a JavaScript number included
_LARGEST = 2**53 - 1


class InvalidReceipt(Exception):
    """The receipt does not verify; the message says why."""


class UnsignableDocument(ValueError):
    """A body ``sign`` refuses: one that a verifier in another language could not rebuild byte for byte."""


def canonical(body: dict[str, Any]) -> bytes:
    """The bytes the body's signature covers: RFC 8785 for a body naming it, the legacy rule for one signed
    before the field existed; ``InvalidReceipt`` for a body no rule covers (another rule, a float in an
    RFC 8785 body, a string that is not Unicode text)."""
    if "canonicalization" not in body:
        return _legacy_canonical(body)
    rule = body["canonicalization"]
    if rule != CANONICALIZATION:
        raise InvalidReceipt(f"unknown canonicalization {rule!r} (expected {CANONICALIZATION})")
    problem = _not_portable(body, "receipt")
    if problem:
        raise InvalidReceipt(f"{problem}: an {CANONICALIZATION} document of this signer carries none")
    try:
        return rfc8785.dumps(body)
    except rfc8785.CanonicalizationError as exc:
        raise InvalidReceipt(f"not canonicalizable under {CANONICALIZATION}: {exc}") from None


def _legacy_canonical(body: dict[str, Any]) -> bytes:
    """Documents signed before RFC 8785: sorted-key UTF-8 JSON without whitespace, as Python writes it (its
    floats' text, ``5.0``, is Python's own: why the rule was replaced)."""
    try:
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError):
        raise InvalidReceipt("not a JSON document the legacy rule can encode") from None


def _not_portable(value: Any, where: str) -> str:
    """Where ``value`` holds what another language would write differently or not hold exactly ("" when
    nowhere): a float (NaN and infinities included), an integer past I-JSON's range, a key that is not a
    string, anything that is not JSON. Names the path only, never the value."""
    if value is None or isinstance(value, (bool, str)):
        return ""
    if isinstance(value, int):
        return "" if -_LARGEST <= value <= _LARGEST else f"{where} is an integer outside I-JSON's range"
    if isinstance(value, float):
        return f"{where} is a non-integer number (a float)"
    if isinstance(value, (list, tuple)):
        return next((p for n, item in enumerate(value) if (p := _not_portable(item, f"{where}[{n}]"))), "")
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                return f"{where} has a key that is not a string"
            if problem := _not_portable(item, f"{where}.{name}"):
                return problem
        return ""
    return f"{where} is a {type(value).__name__}, not JSON"


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
    """The signed document: the body, naming its canonicalization (RFC 8785), and the signature over it.
    ``UnsignableDocument`` (naming the field, never its value) for a body another language could not
    rebuild byte for byte: a float, a NaN or infinity, an integer past I-JSON's range, a non-string key."""
    if body.get("schema") not in (SCHEMA_ID, FORGET_SCHEMA_ID, ATTESTATION_SCHEMA_ID):
        raise UnsignableDocument("receipt body must carry a schema id this code issues")
    if body.get("canonicalization", CANONICALIZATION) != CANONICALIZATION:
        raise UnsignableDocument(f"this code signs {CANONICALIZATION} documents only")
    body = {**body, "canonicalization": CANONICALIZATION}
    problem = _not_portable(body, "receipt")
    if problem:
        raise UnsignableDocument(f"{problem}: signed documents are float-free (an integer, or a string)")
    try:
        signed = rfc8785.dumps(body)
    except rfc8785.CanonicalizationError as exc:  # a string that is not Unicode text (a lone surrogate)
        raise UnsignableDocument(f"not canonicalizable under {CANONICALIZATION}: {exc}") from None
    return {
        "receipt": body,
        "signature": {
            "alg": ALGORITHM,
            "key_id": key_id(key.public_key()),
            "value": base64.b64encode(key.sign(signed)).decode(),
        },
    }


def document_bytes(document: dict[str, Any]) -> bytes:
    """How receipts are written to files and S3 (pretty, stable key order)."""
    return (json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def digest(document: dict[str, Any]) -> str:
    """The SHA-256 of the document's canonical body, by the rule it names (an attestation's
    ``receipt_sha256``)."""
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
