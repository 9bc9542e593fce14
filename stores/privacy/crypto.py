"""Envelope ciphertexts: AES-256-GCM under a per-user data key, the key id carried in the blob.

Layout: ``b"EK1" | key_id (16 bytes) | nonce (12 bytes) | ciphertext+tag``. The header is bound as
associated data, so swapping the key id or the version fails authentication.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from stores.infra.errors import CiphertextInvalid

MAGIC = b"EK1"
_HEADER = len(MAGIC) + 16 + 12


@dataclass(frozen=True)
class DataKey:
    key_id: uuid.UUID
    material: bytes = field(repr=False)  # 32 bytes, plaintext; never logged, never persisted unwrapped
    #: values derived from the material (a vector rotation), kept exactly as long as this key object: the key
    #: cache's entry holds both, so none outlives the key's expiry from the cache or its shredding
    derived: dict[object, object] = field(default_factory=dict, compare=False, repr=False)


def seal(key: DataKey, plaintext: bytes, context: bytes = b"") -> bytes:
    nonce = os.urandom(12)
    header = MAGIC + key.key_id.bytes + nonce
    return header + AESGCM(key.material).encrypt(nonce, plaintext, header + context)


def key_id_of(blob: bytes) -> uuid.UUID:
    if len(blob) < _HEADER + 16 or not blob.startswith(MAGIC):
        raise CiphertextInvalid("not an envelope ciphertext")
    return uuid.UUID(bytes=blob[len(MAGIC) : len(MAGIC) + 16])


def open_sealed(key: DataKey, blob: bytes, context: bytes = b"") -> bytes:
    if key_id_of(blob) != key.key_id:
        raise CiphertextInvalid("ciphertext belongs to another data key")
    return open_with(AESGCM(key.material), blob, context)


def open_with(cipher: AESGCM, blob: bytes, context: bytes = b"") -> bytes:
    """Open ``blob`` with a cipher already built from its data key (the caller matched the key id)."""
    header, body = blob[:_HEADER], blob[_HEADER:]
    try:
        return cipher.decrypt(header[-12:], body, header + context)
    except InvalidTag:
        raise CiphertextInvalid("ciphertext failed authentication") from None
