"""The verifier side's reading of session tombstones (shared by the checks that follow erased sessions).

Written apart from the ledger's own code: it shares only the tombstone format (keyed digest, sealed id).
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg_pool import ConnectionPool

from stores.ledgers.tombstones import open_session_id
from stores.privacy.identity import session_digest


def erased_session_ids(pool: ConnectionPool, secret: bytes, subject: str, digests: Sequence[str]) -> list[str]:
    """The session ids behind these digests, opened from the subject's tombstones (an id whose opened
    value does not hash back to its digest is not trusted)."""
    wanted = set(digests)
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT session_digest, session_sealed FROM session_tombstones WHERE subject_key = %s", (subject,)
        ).fetchall()
    ids = []
    for digest, sealed in rows:
        if digest in wanted and sealed is not None:
            sid = open_session_id(secret, subject, bytes(sealed))
            if session_digest(secret, subject, sid) == digest:
                ids.append(sid)
    return sorted(ids)


def tombstoned_sessions(pool: ConnectionPool, subject: str) -> set[str]:
    """The keyed digests of the subject's session tombstones."""
    with pool.connection() as conn:
        rows = conn.execute("SELECT session_digest FROM session_tombstones WHERE subject_key = %s", (subject,))
        return {r[0] for r in rows.fetchall()}
