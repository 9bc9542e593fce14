"""Payload encryption for everything the orchestrator sends through Temporal.

Every payload (inputs, results, heartbeat details, memos, failure attributes) is AES-256-GCM encrypted
before it leaves the process, so Temporal's history holds only ciphertext. The clients and workers decode
strictly: a payload that is not ours (plain JSON sent by ``temporal workflow start``, Temporal UI's start or
signal form, a forged ciphertext under our key's id) is refused, so nobody without the payload key can hand a
workflow an input, a signal or an update. It is refused without failing the whole workflow task (which would
strand the workflow for ever, issue 40 item 4): the codec hands on an empty ``binary/refused`` payload, read as
a ``RefusedPayload`` that raises ``PlaintextPayload`` at first use (a workflow input: the task fails with that
reason and no step runs), and the workflow interceptor (``workflows.foreign_payloads``) drops and audits a
signal, and refuses an update, that carries one. The codec endpoints for Temporal UI decode leniently (a clear
payload is shown as it is) and never encode.
Used together with ``DefaultFailureConverterWithEncodedAttributes``, which moves error messages and stack traces into an
encoded (thus encrypted) payload. Operators decode for Temporal UI through ``erasure codec-server``.

Key rotation: every payload names the key that sealed it (``encryption-key-id``: a hash of the key, never the
key). Encoding always uses the current key (``ERASURE_PAYLOAD_KEY``); decoding accepts the current key and
every retired key still listed (``ERASURE_PAYLOAD_OLD_KEYS``), so open workflows whose histories hold
payloads sealed under an old key keep running after a rotation. A payload under a key in neither is refused
with ``UnknownPayloadKey`` naming its key id and the ids known (deploy/README.md, "Rotating the payload key").
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

import temporalio.converter
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    CompositePayloadConverter,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    PayloadCodec,
)

from workflows.contracts.foreign import PlaintextPayload, RefusedPayload

ENCODING = b"binary/encrypted"
#: what a strict decode hands on for a payload it refused: no data, converted to ``RefusedPayload``
REFUSED = b"binary/refused"
__all__ = ["ENCODING", "REFUSED", "EncryptionCodec", "PlaintextPayload", "UnknownPayloadKey", "data_converter"]


class UnknownPayloadKey(ValueError):
    """A payload sealed under a key that is neither the current payload key nor a listed old one."""


class EncryptionCodec(PayloadCodec):
    def __init__(self, key: bytes, old_keys: Iterable[bytes] = (), *, strict: bool = False) -> None:
        self._strict = strict
        self._key_id = self.key_id(key)
        self._ciphers = {self.key_id(k): AESGCM(k) for k in (key, *old_keys)}

    def lenient(self) -> EncryptionCodec:
        """The same keys, decoding clear payloads as they are (for reading a whole history: its search
        attributes and the SDK's patch markers are never encrypted)."""
        copy = EncryptionCodec.__new__(EncryptionCodec)
        copy._strict, copy._key_id, copy._ciphers = False, self._key_id, self._ciphers
        return copy

    @property
    def key_ids(self) -> list[str]:
        """The ids of the keys this codec decodes with, the current one (which it encodes with) first."""
        return list(self._ciphers)

    @staticmethod
    def key_id(key: bytes) -> str:
        return hashlib.sha256(b"erasure-payload-key\x00" + key).hexdigest()[:16]

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        cipher = self._ciphers[self._key_id]
        out = []
        for p in payloads:
            nonce = os.urandom(12)
            out.append(
                Payload(
                    metadata={"encoding": ENCODING, "encryption-key-id": self._key_id.encode()},
                    data=nonce + cipher.encrypt(nonce, p.SerializeToString(), None),
                )
            )
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding", b"") != ENCODING:
                out.append(_REFUSED_PAYLOAD if self._strict else p)
                continue
            key_id = p.metadata.get("encryption-key-id", b"").decode()
            cipher = self._ciphers.get(key_id)
            if cipher is None:
                raise UnknownPayloadKey(
                    f"payload sealed under key id {key_id or '(none)'}, which is neither the current payload key "
                    f"nor one of ERASURE_PAYLOAD_OLD_KEYS (known key ids: {', '.join(self.key_ids)})"
                )
            try:
                out.append(Payload.FromString(cipher.decrypt(p.data[:12], p.data[12:], None)))
            except InvalidTag:  # our key's id on bytes our key did not seal: forged
                if not self._strict:
                    raise
                out.append(_REFUSED_PAYLOAD)
        return out


_REFUSED_PAYLOAD = Payload(metadata={"encoding": REFUSED})


class RefusedPayloadConverter(EncodingPayloadConverter):
    """``binary/refused`` payloads to ``RefusedPayload`` (whatever type was expected), and back."""

    @property
    def encoding(self) -> str:
        return REFUSED.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(metadata={"encoding": REFUSED}) if isinstance(value, RefusedPayload) else None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        return RefusedPayload()


class PayloadConverter(CompositePayloadConverter):
    """The SDK's default converters, and ``RefusedPayloadConverter`` first."""

    def __init__(self) -> None:
        super().__init__(RefusedPayloadConverter(), *DefaultPayloadConverter.default_encoding_payload_converters)


def data_converter(key: bytes, old_keys: Iterable[bytes] = ()) -> temporalio.converter.DataConverter:
    """Encodes under ``key``; decodes payloads sealed under ``key`` or any of ``old_keys`` (a rotation)."""
    return dataclasses.replace(
        temporalio.converter.DataConverter.default,
        payload_codec=EncryptionCodec(key, old_keys, strict=True),
        payload_converter_class=PayloadConverter,
        failure_converter_class=temporalio.converter.DefaultFailureConverterWithEncodedAttributes,
    )
