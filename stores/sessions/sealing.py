"""The sealed form of google-adk's session rows: what is sealed, how it is recognised, what it is bound to.

google-adk's ``DatabaseSessionService`` keeps a user's words in three tables. Each piece of content is sealed
under the user's data key (``DataKeyStore``, subject key of (app, user)) before it reaches the database, so
shredding the key makes every older copy unreadable: dead tuples, WAL, replicas and backups.

The ``user`` bound is the row's ``user_id`` column as stored: ``SealedSessionService`` files rows under the
subject key (no raw id in any data file); rows google-adk's plain service wrote hold the raw id.

=================  ==========================================  ===========================================
table.column       sealed form                                 associated data (binds it to its row)
=================  ==========================================  ===========================================
events.event_data  ``{"sealed": "v1", "ct": "<base64>"}``:      app, user, session id, event id
                   the whole event dump (content, actions,
                   state delta, metadata) as one ciphertext
sessions.state     each *value* ``"sealed:v1:<base64>"``        app, user, session id, state key
user_states.state  each *value* ``"sealed:v1:<base64>"``        app, user, state key
=================  ==========================================  ===========================================

State keys stay readable: google-adk splits state by key prefix and merges deltas key by key, and item
forgetting removes ``user:`` keys by name. Ids, timestamps and invocation ids stay readable too (every
column google-adk queries). ``app_states`` is app-wide, not any user's, and stays plain.

A ciphertext is the envelope of ``stores.privacy.crypto`` (its key id inside), so it names its data key; the
associated data makes a ciphertext moved to another row, user or key fail authentication. Rows written
before sealing (plain JSON) still read: a value is opened only when it has the sealed form. A plain string
value that happens to start with ``sealed:v1:`` would be taken for a ciphertext and fail to open (fail
closed, never misread).

Reading a value whose key was shredded raises ``DataKeyShredded``; a tampered or moved one
``CiphertextInvalid`` (see ``stores.sessions.sealed_service`` for what the session service does with them).

This module imports no google-adk: the worker (re-seal, canary capture) and the forget preview use it too.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping
from typing import Any

from stores.infra.errors import CiphertextInvalid, DataKeyShredded
from stores.privacy.crypto import DataKey, key_id_of, open_sealed, seal
from stores.privacy.identity import subject_of_stored
from stores.privacy.keys import DataKeyStore

EVENT_VERSION = "v1"
STATE_PREFIX = "sealed:v1:"
_LABEL = "adk-seal/v1"


def event_is_sealed(value: object) -> bool:
    """Whether an ``events.event_data`` value has the sealed form (an event dump never has only these keys)."""
    return (
        isinstance(value, dict)
        and set(value) == {"sealed", "ct"}
        and value["sealed"] == EVENT_VERSION
        and isinstance(value["ct"], str)
    )


def state_value_is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(STATE_PREFIX)


def state_is_sealed(state: Mapping[str, Any] | None) -> bool:
    """Whether every value of a state dict is sealed (an empty state holds nothing to seal)."""
    return all(state_value_is_sealed(v) for v in (state or {}).values())


def _context(*parts: str) -> bytes:
    """Associated data: a JSON array, so no two different tuples of parts give the same bytes."""
    return json.dumps([_LABEL, *parts], ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def event_context(app_name: str, user_id: str, session_id: str, event_id: str) -> bytes:
    return _context("events.event_data", app_name, user_id, session_id, event_id)


def state_context(app_name: str, user_id: str, session_id: str | None, key: str) -> bytes:
    """A session state value (``session_id`` given) or a user state value (``None``)."""
    if session_id is None:
        return _context("user_states.state", app_name, user_id, key)
    return _context("sessions.state", app_name, user_id, session_id, key)


def _b64(blob: bytes) -> str:
    return base64.b64encode(blob).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise CiphertextInvalid("a sealed session value is not base64") from None


def _dumps(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class RowSealer:
    """Seals and opens ADK row content for one unit of work (a flush, a load, a page of the re-seal).

    Data keys are looked up once per subject (writing) and once per key id (reading) for the unit's life,
    so a flush of many values costs one key lookup. Keep a unit short: a key shredded meanwhile is only
    noticed by the next unit. The ``DataKeyStore`` is synchronous (Postgres, KMS).
    """

    def __init__(self, keys: DataKeyStore, subject_secret: bytes) -> None:
        self._keys = keys
        self._secret = subject_secret
        self._writing: dict[tuple[str, str], DataKey] = {}
        self._reading: dict[uuid.UUID, DataKey] = {}

    def subject_key(self, app_name: str, user_id: str) -> str:
        """The subject key of a row's ``user_id``: the column's value when the row is filed under a subject key
        (``SealedSessionService``), else the raw id's key (``InvalidIdentifier`` for ids no erasure could
        ever name)."""
        return subject_of_stored(self._secret, app_name, user_id)

    def _key_for(self, app_name: str, user_id: str) -> DataKey:
        hit = self._writing.get((app_name, user_id))
        if hit is None:
            hit = self._keys.current(self.subject_key(app_name, user_id))
            self._writing[(app_name, user_id)] = hit
        return hit

    def _key_of(self, blob: bytes) -> DataKey:
        key_id = key_id_of(blob)
        hit = self._reading.get(key_id)
        if hit is None:
            hit = self._keys.get(key_id)  # DataKeyShredded once the subject's keys are gone
            self._reading[key_id] = hit
        return hit

    def seal_bytes(self, app_name: str, user_id: str, plaintext: bytes, context: bytes) -> str:
        return _b64(seal(self._key_for(app_name, user_id), plaintext, context))

    def open_bytes(self, sealed: str, context: bytes) -> bytes:
        blob = _unb64(sealed)
        return open_sealed(self._key_of(blob), blob, context)

    # ----- events.event_data ---------------------------------------------------------------------

    def seal_event(
        self, app_name: str, user_id: str, session_id: str, event_id: str, data: Mapping[str, Any]
    ) -> dict[str, str]:
        context = event_context(app_name, user_id, session_id, event_id)
        return {"sealed": EVENT_VERSION, "ct": self.seal_bytes(app_name, user_id, _dumps(data), context)}

    def open_event(
        self, app_name: str, user_id: str, session_id: str, event_id: str, stored: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The plain event dump (a legacy plain one as it is)."""
        if not event_is_sealed(stored):
            return dict(stored)
        plain = self.open_bytes(str(stored["ct"]), event_context(app_name, user_id, session_id, event_id))
        opened = json.loads(plain)
        if not isinstance(opened, dict):
            raise CiphertextInvalid("a sealed event does not hold an event")
        return opened

    # ----- sessions.state, user_states.state -----------------------------------------------------

    def seal_state_value(self, app_name: str, user_id: str, session_id: str | None, key: str, value: Any) -> str:
        context = state_context(app_name, user_id, session_id, key)
        return STATE_PREFIX + self.seal_bytes(app_name, user_id, _dumps(value), context)

    def open_state_value(self, app_name: str, user_id: str, session_id: str | None, key: str, value: Any) -> Any:
        """The plain value (a legacy plain one as it is)."""
        if not state_value_is_sealed(value):
            return value
        context = state_context(app_name, user_id, session_id, key)
        return json.loads(self.open_bytes(value[len(STATE_PREFIX) :], context))

    def seal_state(
        self,
        app_name: str,
        user_id: str,
        session_id: str | None,
        state: Mapping[str, Any],
        *,
        keep_sealed: bool = False,
    ) -> dict[str, Any]:
        """Every value sealed. ``keep_sealed``: values already in sealed form are left as they are (the
        re-seal of stored rows); without it every value is taken as plain (the session service, whose
        in-memory values are always plain)."""
        return {
            k: v
            if keep_sealed and state_value_is_sealed(v)
            else self.seal_state_value(app_name, user_id, session_id, k, v)
            for k, v in state.items()
        }

    def open_state(
        self, app_name: str, user_id: str, session_id: str | None, state: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {k: self.open_state_value(app_name, user_id, session_id, k, v) for k, v in state.items()}

    def open_state_readable(
        self, app_name: str, user_id: str, session_id: str | None, state: Mapping[str, Any]
    ) -> tuple[dict[str, Any], int]:
        """The values that open, and how many did not (shredded key, tampered or moved): for readers that
        report rather than fail, like a forget preview."""
        opened: dict[str, Any] = {}
        for k, v in state.items():
            try:
                opened[k] = self.open_state_value(app_name, user_id, session_id, k, v)
            except (DataKeyShredded, CiphertextInvalid):
                continue
        return opened, len(state) - len(opened)
