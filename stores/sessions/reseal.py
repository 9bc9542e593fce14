"""Re-seal google-adk's session rows written before sealing: plain content sealed in place, page by page.

One page is up to ``limit`` rows of one table in primary-key order (keyset pagination on the primary key's
index: ``events`` by (id, app, user, session), ``sessions`` by (app, user, id), ``user_states`` by (app,
user)). Each row whose content is still plain is sealed exactly as ``SealedSessionService`` would have
written it (``stores.sessions.sealing``): ``events.event_data`` whole, the plain values of ``sessions.state`` and
``user_states.state`` (values already sealed are left alone). Timestamps are not touched: google-adk's
stale-session check reads ``update_time``, and a re-seal is no user write.

Re-filing: a row under a raw user id (google-adk's plain service, or this service before rows were filed
under the subject key) is moved under the user's subject key, its content opened (plain, or sealed bound to
the raw id) and sealed again bound to the key, so no raw id stays in any live row. A session moves whole, in
one transaction: the session row under the key, then each of its events (``UPDATE`` of the primary key; the
foreign key now finds the new session), then the old session row. A ``user_states`` row is merged into the
key's row; a raw row holding a key the key's row holds with another value is left as it is and counted
(merging would drop one of the two values). After the move the rows read as ``SealedSessionService``
rows; their old tuples go with the next VACUUM.

Holds protect owners: a row of a subject under a legal hold is neither rewritten nor moved (counted
``held``), read through the gate (``stores.ledgers.owner_holds.held_subjects``: the owner's hold lock taken
shared, then the hold) in the transaction that would change it, so a hold being placed while a page runs is
waited for and seen. A re-seal only preserves (the content is the same once opened), yet a held owner's rows
stay byte-identical: nothing depends on sealing them now (no key retires on it), and the re-seal, idempotent,
seals them on its next run after the release.

Idempotent: a sealed row is left alone, so a page done twice changes nothing the second time. Each
``UPDATE`` only applies while the row still holds what the page read; a row changed meanwhile (the
sealed service rewrote it, sealed) is counted and left alone. A row whose app or user id no subject key
can be made of cannot be sealed under anyone's key: counted, left as it is.

The cursor leaves this module as an opaque token that holds the last row's ids sealed under that row's
user's data key (with the subject key, which is no personal data), so Temporal history, which keeps the
token, never holds a raw id readable after the user's erasure: a token whose key was shredded reads as
"start the table again", which the idempotent pages make safe. (A row whose ids make no subject key gets
its token sealed under a key derived from the service secret.) This is a one-off migration over whole
tables, paged by the primary key, never an erasure step: cost follows the tables' size by design.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg import Connection
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from stores.infra.errors import CiphertextInvalid, DataKeyShredded, InvalidIdentifier
from stores.ledgers.owner_holds import held_subjects
from stores.privacy.identity import derived_key, is_subject_key
from stores.privacy.keys import DataKeyStore
from stores.sessions.sealing import RowSealer, event_is_sealed, state_is_sealed

TABLES = ("events", "sessions", "user_states")
#: primary-key columns in the order of each table's primary-key index, then the content column
_PRIMARY_KEY = {
    "events": ("id", "app_name", "user_id", "session_id"),
    "sessions": ("app_name", "user_id", "id"),
    "user_states": ("app_name", "user_id"),
}
_CONTENT = {"events": "event_data", "sessions": "state", "user_states": "state"}
_CURSOR_VERSION = "rc1"


@dataclass(frozen=True)
class PageOutcome:
    rows: int = 0  # rows read
    sealed_rows: int = 0  # rows this page sealed
    already_sealed: int = 0  # rows that held no plain content
    changed_meanwhile: int = 0  # rows rewritten between the read and the update: left alone
    unsealable: int = 0  # rows whose ids make no subject key: left alone
    refiled: int = 0  # rows moved from the raw user id to the subject key
    held: int = 0  # rows of a subject under a legal hold: left exactly as they are
    conflicting: int = 0  # raw user state whose keys the key's row holds with other values: left, counted
    last: tuple[str, ...] | None = None  # the last row's primary key (None: the table has no more rows)


def _table(table: str) -> str:
    if table not in _PRIMARY_KEY:
        raise ValueError(f"not a google-adk session table: {table!r}")
    return table


class AdkResealer:
    def __init__(self, pool: ConnectionPool, keys: DataKeyStore, subject_secret: bytes) -> None:
        self._pool = pool
        self._keys = keys
        self._secret = subject_secret

    def page(self, table: str, after: tuple[str, ...] | None, limit: int) -> PageOutcome:
        """Seal the plain rows among the next ``limit`` rows of ``table`` after the primary key ``after``."""
        pk = _PRIMARY_KEY[_table(table)]
        cols = ", ".join(pk)
        where = f"WHERE ({cols}) > ({', '.join(['%s'] * len(pk))}) " if after else ""
        query = f"SELECT {cols}, {_CONTENT[table]} FROM {table} {where}ORDER BY {cols} LIMIT %s"
        rows = RowSealer(self._keys, self._secret)
        with self._pool.connection() as conn:
            found = conn.execute(query, (*(after or ()), limit)).fetchall()
        counts = dict.fromkeys(
            ("sealed_rows", "already_sealed", "changed_meanwhile", "unsealable", "refiled", "held", "conflicting"), 0
        )
        for row in found:
            counts[self._seal_row(rows, table, tuple(str(v) for v in row[:-1]), row[-1])] += 1
        last = tuple(str(v) for v in found[-1][:-1]) if found else None
        return PageOutcome(rows=len(found), last=last, **counts)

    def _seal_row(self, rows: RowSealer, table: str, key: tuple[str, ...], content: Any) -> str:
        """Seal one row's plain content; which count it goes to."""
        ids = dict(zip(_PRIMARY_KEY[table], key, strict=True))
        app, user = ids["app_name"], ids["user_id"]
        if not is_subject_key(user):
            return self._refile(rows, table, ids)
        try:
            if table == "events":
                if not isinstance(content, dict) or event_is_sealed(content):
                    return "already_sealed"
                sealed: dict[str, Any] = rows.seal_event(app, user, ids["session_id"], ids["id"], content)
            else:
                if not isinstance(content, dict) or state_is_sealed(content):
                    return "already_sealed"
                sealed = rows.seal_state(app, user, ids.get("id"), content, keep_sealed=True)
        except InvalidIdentifier:
            return "unsealable"
        column = _CONTENT[table]
        match = " AND ".join(f"{c} = %s" for c in _PRIMARY_KEY[table])
        with self._pool.connection() as conn, conn.transaction():
            if held_subjects(conn, [user]):  # holds protect owners: a held subject's rows are not rewritten
                return "held"
            updated = conn.execute(
                f"UPDATE {table} SET {column} = %s WHERE {match} AND {column} = %s",
                (Jsonb(sealed), *key, Jsonb(content)),
            ).rowcount
        return "sealed_rows" if updated else "changed_meanwhile"

    # ----- re-filing: from the raw user id to the subject key --------------------------------------

    def _refile(self, rows: RowSealer, table: str, ids: dict[str, str]) -> str:
        """Move one raw-filed row (an event: its whole session) under the subject key; which count."""
        app, user = ids["app_name"], ids["user_id"]
        try:
            sk = rows.subject_key(app, user)
        except InvalidIdentifier:
            return "unsealable"
        try:
            with self._pool.connection() as conn, conn.transaction():
                if held_subjects(conn, [sk]):
                    return "held"
                if table == "user_states":
                    moved = self._refile_user_state(conn, rows, app, user, sk)
                    if moved is None:
                        return "conflicting"
                else:
                    session_id = ids["session_id"] if table == "events" else ids["id"]
                    moved = self._refile_session(conn, rows, app, user, sk, session_id)
        except (DataKeyShredded, CiphertextInvalid):
            return "unsealable"  # content no key opens (an erased user's late row): rolled back, left alone
        return "refiled" if moved else "changed_meanwhile"

    @staticmethod
    def _refile_session(conn: Connection[Any], rows: RowSealer, app: str, user: str, sk: str, sid: str) -> bool:
        found = conn.execute(
            "SELECT state FROM sessions WHERE app_name = %s AND user_id = %s AND id = %s FOR UPDATE",
            (app, user, sid),
        ).fetchone()
        if found is None:
            return False  # moved already (by an earlier row of this page) or deleted meanwhile
        state = rows.seal_state(app, sk, sid, rows.open_state(app, user, sid, found[0] or {}))
        made = conn.execute(
            "INSERT INTO sessions (app_name, user_id, id, state, create_time, update_time) "
            "SELECT app_name, %s, id, %s, create_time, update_time FROM sessions "
            "WHERE app_name = %s AND user_id = %s AND id = %s ON CONFLICT DO NOTHING",
            (sk, Jsonb(state), app, user, sid),
        ).rowcount
        if not made:
            return False  # the key already files a session of this id: left for an operator (counted)
        for event_id, data in conn.execute(
            "SELECT id, event_data FROM events WHERE app_name = %s AND user_id = %s AND session_id = %s",
            (app, user, sid),
        ).fetchall():
            sealed = rows.seal_event(app, sk, sid, event_id, rows.open_event(app, user, sid, event_id, data or {}))
            conn.execute(
                "UPDATE events SET user_id = %s, event_data = %s "
                "WHERE id = %s AND app_name = %s AND user_id = %s AND session_id = %s",
                (sk, Jsonb(sealed), event_id, app, user, sid),
            )
        conn.execute("DELETE FROM sessions WHERE app_name = %s AND user_id = %s AND id = %s", (app, user, sid))
        return True

    @staticmethod
    def _refile_user_state(conn: Connection[Any], rows: RowSealer, app: str, user: str, sk: str) -> bool | None:
        """Move the raw row's values into the key's row; ``None`` (nothing moved) when the key's row holds a
        key of it with another value: merging would drop one of the two, so both stay for an operator."""
        found = conn.execute(
            "SELECT state, update_time FROM user_states WHERE app_name = %s AND user_id = %s FOR UPDATE",
            (app, user),
        ).fetchone()
        if found is None:
            return False
        plain = rows.open_state(app, user, None, found[0] or {})
        existing = conn.execute(
            "SELECT state FROM user_states WHERE app_name = %s AND user_id = %s FOR UPDATE", (app, sk)
        ).fetchone()
        if existing is not None:
            theirs = rows.open_state(app, sk, None, existing[0] or {})
            if any(k in theirs and theirs[k] != v for k, v in plain.items()):
                return None
        conn.execute("DELETE FROM user_states WHERE app_name = %s AND user_id = %s", (app, user))
        state = rows.seal_state(app, sk, None, plain)
        conn.execute(
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (app_name, user_id) DO UPDATE SET state = EXCLUDED.state || user_states.state",
            (app, sk, Jsonb(state), found[1]),
        )
        return True

    # ----- the cursor, sealed under the last row's user's key ------------------------------------

    def cursor_token(self, table: str, last: tuple[str, ...] | None) -> str:
        """An opaque token for the primary key ``last`` of ``table`` ('' for the table's start)."""
        if last is None:
            return ""
        ids = dict(zip(_PRIMARY_KEY[_table(table)], last, strict=True))
        plain = json.dumps(list(last), ensure_ascii=False).encode("utf-8")
        rows = RowSealer(self._keys, self._secret)
        try:
            sk = rows.subject_key(ids["app_name"], ids["user_id"])
        except InvalidIdentifier:
            nonce = os.urandom(12)
            blob = nonce + AESGCM(self._service_key()).encrypt(nonce, plain, self._context(table, "service"))
            return f"{_CURSOR_VERSION}.service.{base64.urlsafe_b64encode(blob).decode('ascii')}"
        sealed = rows.seal_bytes(ids["app_name"], ids["user_id"], plain, self._context(table, sk))
        return f"{_CURSOR_VERSION}.{sk}.{sealed}"

    def cursor_of(self, table: str, token: str) -> tuple[str, ...] | None:
        """The primary key a token names; ``None`` for the table's start, or when the token's key was shredded
        (the table is done again from its start, which changes nothing already sealed)."""
        if not token:
            return None
        version, owner, sealed = [*token.split(".", 2), "", ""][:3]
        if version != _CURSOR_VERSION or not sealed:
            raise CiphertextInvalid("not a re-seal cursor")
        try:
            if owner == "service":
                blob = base64.urlsafe_b64decode(sealed.encode("ascii"))
                plain = AESGCM(self._service_key()).decrypt(blob[:12], blob[12:], self._context(table, "service"))
            else:
                plain = RowSealer(self._keys, self._secret).open_bytes(sealed, self._context(table, owner))
        except DataKeyShredded:
            return None
        except (InvalidTag, binascii.Error, ValueError):
            raise CiphertextInvalid("a re-seal cursor failed authentication") from None
        last = tuple(str(v) for v in json.loads(plain))
        if len(last) != len(_PRIMARY_KEY[_table(table)]):
            raise CiphertextInvalid("a re-seal cursor of another table")
        return last

    def _service_key(self) -> bytes:
        return derived_key(self._secret, "reseal-cursor")

    @staticmethod
    def _context(table: str, owner: str) -> bytes:
        return json.dumps(["reseal-cursor/v1", table, owner]).encode("utf-8")
