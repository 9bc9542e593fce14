"""Log lines sealed per line under the data keys of the users they name, so shredding makes old copies unreadable.

A line that names a user keeps in clear only what finds and routes it, none of it personal: ``ts``,
``level``, ``app``, ``subject`` (the owner's subject key), ``mentions`` (subject keys), ``session``
(``session_ref``) and ``lid`` (a random line id). Its personal fields (``user_id`` and ``msg``, the free
text) are one JSON object sealed in ``sealed`` (base64 of envelope ciphertexts, ``stores.privacy.crypto``).

Keys: the line is sealed under the data key of *every* subject it names, in turn: the owner first, then each
mentioned subject (sorted). Shredding any one of them makes every copy of the line unreadable (an old segment
version, a compacted-later object on disk, a bucket backup), just as a purge for any one of them removes the
line. Reading needs all of them.

Associated data: ``erasure/log-line/v1``, the canonical JSON of the clear fields (everything but ``sealed``),
and the subject of the layer. It binds the ciphertext to this line's identity (time, app, owner, mentions,
session, line id), never to a segment, so a line re-shipped elsewhere still opens, and a ciphertext moved to
another line, or a line whose clear fields were altered (another owner, a dropped mention), does not.

Lines naming nobody (no valid ``user_id``, no mention) stay plain as before: no user's key could make them
unreadable, and no erasure removes them.

Lifting a layer (``LineSealer.release``): a line whose writer is under a legal hold is kept by a purge of a
subject it mentions (``stores.logs.archive``), and that subject's key is shredded next. The layers are
separable because the purge runs before the shred: the line is opened with every key, ``released`` (clear,
subject keys) gains the erased subject, and the personal fields are sealed again under the layers that are
left (the writer's, the other mentioned subjects'), the line id kept. ``released`` is part of the associated
data, so dropping it or adding to it makes the line unopenable; the mention stays in clear, so a purge after
the hold ends still finds and removes the line. A line whose layer cannot be lifted any more (the subject's
key is already gone) is kept as it is: unreadable, and said so.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stores.infra.errors import CiphertextInvalid, DataKeyShredded, StoreError
from stores.privacy.crypto import DataKey, key_id_of, open_sealed, seal

if TYPE_CHECKING:
    from stores.privacy.keys import DataKeyStore

#: The owner's subject key (clear, PII-free).
SUBJECT = "subject"
#: base64 of the sealed JSON of the personal fields.
SEALED = "sealed"
#: A random id per line, part of the associated data (two lines never share a ciphertext's binding).
LINE_ID = "lid"
#: Set on a record whose sealed fields could not be opened (a shredded key or a damaged ciphertext).
UNREADABLE = "unreadable"
#: Mentioned subjects whose layer was lifted (erased while the line's writer was under a legal hold).
RELEASED = "released"
_AAD_LABEL = b"erasure/log-line/v1\x00"
_SUBJECT_KEY = re.compile(r"sk_[0-9a-f]{40}")


class SealingUnavailable(StoreError):
    """A line names a user but the log archive was built without a data key store: refused, never shipped plain."""


def is_subject_key(value: object) -> bool:
    return isinstance(value, str) and _SUBJECT_KEY.fullmatch(value) is not None


def line_aad(header: Mapping[str, Any]) -> bytes:
    """The associated data of a line: its clear fields (``sealed`` left out), canonical JSON."""
    clear = {k: v for k, v in header.items() if k != SEALED}
    return _AAD_LABEL + json.dumps(clear, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def sealed_for(header: Mapping[str, Any]) -> list[str]:
    """The subjects a line is sealed under, innermost first: the owner, then the mentions not the owner and
    not ``released``.

    ``ValueError`` for clear fields no shipper writes (then the line cannot be opened)."""
    owner, mentions, released = header.get(SUBJECT), header.get("mentions", []), header.get(RELEASED, [])
    if owner is not None and not is_subject_key(owner):
        raise ValueError("subject is not a subject key")
    if not isinstance(mentions, list) or not all(is_subject_key(m) for m in mentions):
        raise ValueError("mentions are not subject keys")
    if not isinstance(released, list) or not set(released) <= set(mentions) - {owner}:
        raise ValueError("released are not mentions of the line")
    order = [owner] if isinstance(owner, str) else []
    order += sorted({m for m in mentions if m != owner and m not in released})
    if not order:
        raise ValueError("a sealed line names no subject")
    return order


class LineSealer:
    """Seals and opens lines with one data key store; keys are fetched once per subject (or key id) per use."""

    def __init__(self, keys: DataKeyStore) -> None:
        self._keys = keys
        self._current: dict[str, DataKey] = {}
        self._by_id: dict[uuid.UUID, DataKey | None] = {}

    def seal(self, header: Mapping[str, Any], personal: Mapping[str, Any]) -> dict[str, Any]:
        """``header`` with a fresh line id and ``personal`` sealed under each named subject's current key."""
        return self._sealed({**header, LINE_ID: secrets.token_hex(8)}, personal)

    def release(self, record: Mapping[str, Any], subject: str) -> dict[str, Any] | None:
        """The sealed line with ``subject``'s layer lifted (see the module docstring): opened with every key,
        ``subject`` added to ``released`` and sealed again under the layers left; the record itself when it
        is not sealed under ``subject``; ``None`` when it cannot be opened (a layer's key already shredded, a
        damaged ciphertext) or no layer would be left: then it stays as it is, unreadable once shredded."""
        header = {k: v for k, v in record.items() if k != SEALED}
        try:
            layers = sealed_for(header)
        except ValueError:
            return None
        if subject not in layers:
            return dict(record)
        if len(layers) == 1:
            return None
        try:
            personal = self._open(header, record.get(SEALED))
        except (DataKeyShredded, CiphertextInvalid, ValueError, UnicodeDecodeError, RecursionError):
            return None
        released = sorted({*header.get(RELEASED, []), subject})
        return self._sealed({**header, RELEASED: released}, personal)

    def _sealed(self, header: Mapping[str, Any], personal: Mapping[str, Any]) -> dict[str, Any]:
        """``header`` (its line id set) with ``personal`` sealed under each of its layers' current key."""
        record: dict[str, Any] = dict(header)
        aad = line_aad(record)
        blob = json.dumps(dict(personal), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        for subject in sealed_for(record):
            if subject not in self._current:
                self._current[subject] = self._keys.current(subject)
            blob = seal(self._current[subject], blob, aad + subject.encode("ascii"))
        record[SEALED] = base64.b64encode(blob).decode("ascii")
        return record

    def open(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The record with its personal fields back and ``sealed`` dropped; when they cannot be opened (a
        shredded key, a damaged ciphertext, odd clear fields), the clear fields with ``unreadable: true``."""
        header = {k: v for k, v in record.items() if k != SEALED}
        try:
            personal = self._open(header, record.get(SEALED))
        except (DataKeyShredded, CiphertextInvalid, ValueError, UnicodeDecodeError, RecursionError):
            return {**header, UNREADABLE: True}
        return {**header, **personal}

    def _open(self, header: Mapping[str, Any], sealed: object) -> dict[str, Any]:
        if not isinstance(sealed, str):
            raise ValueError("sealed is not a string")
        try:
            blob = base64.b64decode(sealed, validate=True)
        except binascii.Error:
            raise ValueError("sealed is not base64") from None
        aad = line_aad(header)
        for subject in reversed(sealed_for(header)):
            blob = open_sealed(self._key(key_id_of(blob)), blob, aad + subject.encode("ascii"))
        personal = json.loads(blob.decode("utf-8"))
        if not isinstance(personal, dict) or set(personal) & set(header):
            raise ValueError("sealed fields are not an object of personal fields")
        return personal

    def _key(self, key_id: uuid.UUID) -> DataKey:
        if key_id not in self._by_id:
            try:
                self._by_id[key_id] = self._keys.get(key_id)
            except DataKeyShredded:
                self._by_id[key_id] = None
        key = self._by_id[key_id]
        if key is None:
            raise DataKeyShredded("the data key of this log line has been destroyed")
        return key
