"""The tombstone ledger: the user-level fence, permanent session tombstones, and erasure records.

Keys and hashes only: subject keys, app names, request ids and times. A session tombstone names its session
by a keyed hash (``session_digest``, what every check and match uses) and keeps the session id only sealed
(AES-GCM under the ``session-seal`` key, the subject key as associated data) for the sweeps, which look up
ADK rows by (app, session id) after the raw user id is gone. Never a session id in clear.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg_pool import ConnectionPool

from stores.infra.errors import CiphertextInvalid
from stores.privacy.identity import derived_key, session_digest


@dataclass(frozen=True)
class LedgerEntry:
    request_id: str
    subject_key: str
    app_name: str
    erased_at: datetime
    keys_shredded_at: datetime | None


def fence_lock_key(subject_key: str) -> str:
    """Name of the subject's fence lock (a Postgres advisory lock on ``hashtextextended(name, 0)``): the
    fence is written under it exclusively, fenced memory writes insert under it shared."""
    return f"memory-fence:{subject_key}"


def seal_session_id(secret: bytes, subject_key: str, session_id: str) -> bytes:
    nonce = os.urandom(12)
    return nonce + AESGCM(derived_key(secret, "session-seal")).encrypt(
        nonce, session_id.encode("utf-8"), subject_key.encode()
    )


def open_session_id(secret: bytes, subject_key: str, sealed: bytes) -> str:
    try:
        return (
            AESGCM(derived_key(secret, "session-seal"))
            .decrypt(sealed[:12], sealed[12:], subject_key.encode())
            .decode("utf-8")
        )
    except InvalidTag:
        raise CiphertextInvalid("a sealed session id failed authentication") from None


class TombstoneLedger:
    def __init__(self, pool: ConnectionPool, secret: bytes) -> None:
        self._pool = pool
        self._secret = secret

    # ----- user-level fence -----------------------------------------------------------------------

    def fence_user(self, subject_key: str, app_name: str, request_id: str) -> bool:
        """Write the user tombstone; returns whether it was new (idempotent)."""
        with self._pool.connection() as conn, conn.transaction():  # a write holding the lock lands first
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (fence_lock_key(subject_key),))
            cur = conn.execute(
                "INSERT INTO user_tombstones (subject_key, app_name, request_id) VALUES (%s, %s, %s) "
                "ON CONFLICT (subject_key) DO NOTHING",
                (subject_key, app_name, request_id),
            )
            return cur.rowcount == 1

    def lift_user(self, subject_key: str) -> bool:
        with self._pool.connection() as conn:
            return conn.execute("DELETE FROM user_tombstones WHERE subject_key = %s", (subject_key,)).rowcount == 1

    def user_fenced(self, subject_key: str) -> bool:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT 1 FROM user_tombstones WHERE subject_key = %s", (subject_key,)).fetchone()
        return row is not None

    # ----- session tombstones ---------------------------------------------------------------------

    def mark_sessions(self, app_name: str, session_ids: Iterable[str], subject_key: str, request_id: str) -> int:
        rows = [
            (
                app_name,
                session_digest(self._secret, subject_key, sid),
                seal_session_id(self._secret, subject_key, sid),
                subject_key,
                request_id,
            )
            for sid in session_ids
        ]
        if not rows:
            return 0
        with self._pool.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO session_tombstones (app_name, session_digest, session_sealed, subject_key, request_id) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (subject_key, session_digest) DO NOTHING",
                rows,
            )
            return max(cur.rowcount, 0)

    def session_erased(self, subject_key: str, session_id: str) -> bool:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM session_tombstones WHERE subject_key = %s AND session_digest = %s",
                (subject_key, session_digest(self._secret, subject_key, session_id)),
            ).fetchone()
        return row is not None

    def sessions_of(self, subject_key: str) -> list[str]:
        """The subject's tombstoned session ids, opened in memory (for the sweeps' ADK lookups)."""
        return sorted(open_session_id(self._secret, subject_key, blob) for blob in self.sealed_sessions_of(subject_key))

    def sealed_sessions_of(self, subject_key: str) -> list[bytes]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT session_sealed FROM session_tombstones WHERE subject_key = %s ORDER BY session_digest",
                (subject_key,),
            ).fetchall()
        return [bytes(r[0]) for r in rows]

    def session_digests_of(self, subject_key: str) -> list[str]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT session_digest FROM session_tombstones WHERE subject_key = %s ORDER BY session_digest",
                (subject_key,),
            ).fetchall()
        return [r[0] for r in rows]

    def rekey_legacy(self) -> int:
        """Tombstones written before migration 0008 named the session in clear: hash and seal them (idempotent;
        ``erasure migrate`` and ``erasure stack up`` run it). Returns rows re-keyed."""
        with self._pool.connection() as conn, conn.transaction():
            rows = conn.execute(
                "SELECT subject_key, session_id FROM session_tombstones WHERE session_digest IS NULL FOR UPDATE"
            ).fetchall()
            for subject, sid in rows:
                conn.execute(
                    "UPDATE session_tombstones SET session_digest = %s, session_sealed = %s, session_id = NULL "
                    "WHERE subject_key = %s AND session_id = %s",
                    (
                        session_digest(self._secret, subject, sid),
                        seal_session_id(self._secret, subject, sid),
                        subject,
                        sid,
                    ),
                )
        return len(rows)

    # ----- erasure ledger -------------------------------------------------------------------------

    def record_erasure(
        self,
        request_id: str,
        subject_key: str,
        app_name: str,
        erased_at: datetime,
        keys_shredded_at: datetime | None,
    ) -> None:
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO erasure_ledger (request_id, subject_key, app_name, erased_at, keys_shredded_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (request_id) DO UPDATE SET "
                "erased_at = EXCLUDED.erased_at, keys_shredded_at = EXCLUDED.keys_shredded_at",
                (request_id, subject_key, app_name, erased_at, keys_shredded_at),
            )

    def erased_since(self, since: datetime, after_request_id: str = "", limit: int = 500) -> list[LedgerEntry]:
        """Ledger entries erased at or after ``since``, paged by request id."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT request_id, subject_key, app_name, erased_at, keys_shredded_at FROM erasure_ledger "
                "WHERE erased_at >= %s AND request_id > %s ORDER BY request_id LIMIT %s",
                (since, after_request_id, limit),
            ).fetchall()
        return [LedgerEntry(*r) for r in rows]

    def entry(self, request_id: str) -> LedgerEntry | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT request_id, subject_key, app_name, erased_at, keys_shredded_at FROM erasure_ledger "
                "WHERE request_id = %s",
                (request_id,),
            ).fetchone()
        return LedgerEntry(*row) if row else None

    def latest_erasure(self, subject_key: str) -> LedgerEntry | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT request_id, subject_key, app_name, erased_at, keys_shredded_at FROM erasure_ledger "
                "WHERE subject_key = %s ORDER BY erased_at DESC LIMIT 1",
                (subject_key,),
            ).fetchone()
        return LedgerEntry(*row) if row else None
