"""The audit trail: every console and CLI action, appended, hash-chained.

Entry ``n`` stores ``hash = sha256(prev_hash | seq | at | actor | action | request_id | detail)`` with
``prev_hash`` the hash of entry ``n-1`` (64 zeros for the first). Appends are serialised by a transaction
advisory lock, so the chain has no forks. ``verify`` walks the chain in order and reports the first entry
whose hash or link does not hold: an edited, deleted or inserted entry, or a truncated tail against a known
head. Actors are staff identities and details are ids, counts and staff-written reasons: no data-subject
personal data (the subject appears only as its pseudonymous key).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

GENESIS = "0" * 64
_LOCK = 0x6175646974  # pg_advisory_xact_lock key for appends ("audit")
ACTIONS = (
    "filed",
    "approved",
    "denied",
    "cancelled",
    "extended",
    "hold_placed",
    "hold_released",
    "receipt_downloaded",
    "token_created",
    "token_revoked",
    "forget_previewed",  # item forgetting (issue 16): a staff member saw what a description resolves to
    "forget_filed",
    "forget_approved",  # a second person approved a staff-filed forget that deletes (issue 27)
    "forget_denied",
    "forget_decision_refused",  # a decision the rules refused (the filer's own, a forget not waiting)
    "decision_refused",  # an erasure's approval, denial or cancellation the rules refused
)


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    at: datetime
    actor: str
    action: str
    request_id: str | None
    detail: dict[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class ChainCheck:
    ok: bool
    entries: int
    first_bad_seq: int | None = None
    why: str = ""
    head: str = GENESIS


def entry_hash(
    prev_hash: str, seq: int, at: datetime, actor: str, action: str, request_id: str | None, detail: Mapping[str, Any]
) -> str:
    body = json.dumps(
        [prev_hash, seq, at.astimezone(UTC).isoformat(), actor, action, request_id, detail],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(body.encode()).hexdigest()


class AuditLog:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    def append(
        self, actor: str, action: str, request_id: str | None = None, detail: Mapping[str, Any] | None = None
    ) -> AuditEntry:
        if action not in ACTIONS:
            raise ValueError(f"unknown audit action {action!r}")
        detail = dict(detail or {})
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            last = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
            seq, prev = (int(last[0]) + 1, str(last[1])) if last else (1, GENESIS)
            at = datetime.now(UTC)
            digest = entry_hash(prev, seq, at, actor, action, request_id, detail)
            conn.execute(
                "INSERT INTO audit_log (seq, at, actor, action, request_id, detail, prev_hash, hash) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (seq, at, actor, action, request_id, Jsonb(detail), prev, digest),
            )
        return AuditEntry(seq, at, actor, action, request_id, detail, prev, digest)

    def _rows(self, request_id: str | None = None, limit: int | None = None) -> Iterator[AuditEntry]:
        where, params = ("WHERE request_id = %s", [request_id]) if request_id else ("", [])
        tail = " LIMIT %s" if limit else ""
        with self._pool.connection() as conn:
            cur = conn.execute(
                f"SELECT seq, at, actor, action, request_id, detail, prev_hash, hash FROM audit_log {where} "
                f"ORDER BY seq{tail}",
                [*params, *([limit] if limit else [])],
            )
            for r in cur:
                yield AuditEntry(int(r[0]), r[1], r[2], r[3], r[4], dict(r[5]), r[6], r[7])

    def entries(self, request_id: str | None = None, limit: int = 500) -> list[AuditEntry]:
        return list(self._rows(request_id, limit))

    def verify(self, expected_head: str | None = None) -> ChainCheck:
        """Walk the whole chain; ``expected_head`` (a hash noted earlier) also catches a cut-off tail."""
        prev, count, seq_expected = GENESIS, 0, 1
        for e in self._rows():
            if e.seq != seq_expected:
                return ChainCheck(False, count, e.seq, f"entry {seq_expected} is missing", prev)
            if e.prev_hash != prev:
                return ChainCheck(False, count, e.seq, "its link to the entry before does not match", prev)
            if entry_hash(e.prev_hash, e.seq, e.at, e.actor, e.action, e.request_id, e.detail) != e.hash:
                return ChainCheck(False, count, e.seq, "its content does not match its hash", prev)
            prev, count, seq_expected = e.hash, count + 1, e.seq + 1
        if expected_head is not None and expected_head != prev and not self._contains(expected_head):
            return ChainCheck(False, count, None, "the expected head is not in the chain (entries removed)", prev)
        return ChainCheck(True, count, None, "", prev)

    def _contains(self, digest: str) -> bool:
        with self._pool.connection() as conn:
            return conn.execute("SELECT 1 FROM audit_log WHERE hash = %s", (digest,)).fetchone() is not None
