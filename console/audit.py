"""The audit trail: every console and CLI action, appended, keyed, hash-chained, its head anchored outside.

Entry ``n`` stores ``hash = HMAC-SHA256(k, prev_hash | seq | at | actor | action | request_id | detail)``
with ``prev_hash`` the hash of entry ``n-1`` (64 zeros for the first) and ``k`` derived from the service
secret, which the database does not hold: an entry rewritten with SQL cannot be given a matching hash.
(Entries written before keying, ``mac_version`` 1, are plain SHA-256; none may follow a keyed one.) After
every append the new head (its seq and hash, keyed too) is written to the receipts bucket
(``audit/head.json``), outside the database: cutting entries off the tail, or rewriting the whole chain
unkeyed, no longer matches it. Appends are serialised by a transaction advisory lock, so the chain has no
forks, and a trigger refuses ``UPDATE``/``DELETE`` on the table. ``verify`` walks the chain in order and
reports the first entry whose hash or link does not hold, then checks the anchored head. Actors are staff
identities and details are ids, counts and staff-written reasons: no data-subject personal data (the subject
appears only as its pseudonymous key).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from stores.privacy.identity import derived_key

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
    "preview_burst",  # one subject previewed more often than the alert threshold in an hour (issue 40)
    "forget_filed",
    "forget_approved",  # a second person approved a staff-filed forget that deletes (issue 27)
    "forget_denied",
    "forget_decision_refused",  # a decision the rules refused (the filer's own, a forget not waiting)
    "decision_refused",  # an erasure's approval, denial or cancellation the rules refused
    "access_refused",  # a signed-in caller refused a route their roles do not allow (issue 27)
    "history_viewed",  # a workflow's history read through the console's Temporal UI proxy
    "payloads_decoded",  # Temporal payloads decoded through the console's codec endpoint
    "audit_exported",  # the audit log downloaded as CSV
)


@dataclass(frozen=True)
class AuditQuery:
    """The audit page's and API's filters, all optional; newest first."""

    request_id: str | None = None
    action: str | None = None
    actor: str | None = None  # a part of the actor, any case (staff identities, never a data subject's)
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 500


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
    mac_version: int = 2


@dataclass(frozen=True)
class ChainCheck:
    ok: bool
    entries: int
    first_bad_seq: int | None = None
    why: str = ""
    head: str = GENESIS


def entry_hash(
    prev_hash: str,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    request_id: str | None,
    detail: Mapping[str, Any],
    key: bytes | None = None,
) -> str:
    """The entry's hash: keyed (HMAC-SHA256) with ``key``, plain SHA-256 for entries written before keying."""
    body = json.dumps(
        [prev_hash, seq, at.astimezone(UTC).isoformat(), actor, action, request_id, detail],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    ).encode()
    if key is None:
        return hashlib.sha256(body).hexdigest()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


class HeadAnchor:
    """The chain's head kept outside the database: a keyed checkpoint object in the receipts bucket."""

    OBJECT = "audit/head.json"

    def __init__(self, s3: Any, bucket: str, key: bytes) -> None:
        self._s3 = s3
        self._bucket = bucket
        self._key = key

    def _mac(self, seq: int, digest: str) -> str:
        return hmac.new(self._key, f"audit-head|{seq}|{digest}".encode(), hashlib.sha256).hexdigest()

    def write(self, seq: int, digest: str) -> None:
        body = json.dumps({"seq": seq, "hash": digest, "mac": self._mac(seq, digest)}).encode()
        self._s3.put_object(Bucket=self._bucket, Key=self.OBJECT, Body=body, ContentType="application/json")

    def read(self) -> tuple[int, str] | None:
        """(seq, hash) of the anchored head; ``None`` when none was ever written; ``ValueError`` when the
        object does not verify."""
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=self.OBJECT)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None
        doc = json.loads(body)
        seq, digest = int(doc["seq"]), str(doc["hash"])
        if not hmac.compare_digest(str(doc.get("mac", "")), self._mac(seq, digest)):
            raise ValueError("the anchored head's MAC does not verify")
        return seq, digest


class AuditLog:
    def __init__(self, pool: ConnectionPool, key: bytes, anchor: HeadAnchor | None = None) -> None:
        self._pool = pool
        self._key = key
        self._anchor = anchor

    @classmethod
    def of(cls, platform: Any) -> AuditLog:
        """The platform's audit log: keyed from the service secret, anchored in the receipts bucket."""
        key = derived_key(platform.config.subject_secret, "audit-log")
        return cls(platform.pool, key, HeadAnchor(platform.s3, platform.config.receipt_bucket, key))

    def append(
        self,
        actor: str,
        action: str,
        request_id: str | None = None,
        detail: Mapping[str, Any] | None = None,
        *,
        conn: Connection[Any] | None = None,
    ) -> AuditEntry:
        """Append an entry; with ``conn``, inside that connection's open transaction (a decision and its entry
        committed together), else in a transaction of its own."""
        if action not in ACTIONS:
            raise ValueError(f"unknown audit action {action!r}")
        if conn is not None:
            return self._append(conn, actor, action, request_id, dict(detail or {}))
        with self._pool.connection() as own, own.transaction():
            return self._append(own, actor, action, request_id, dict(detail or {}))

    def _append(
        self, conn: Connection[Any], actor: str, action: str, request_id: str | None, detail: dict[str, Any]
    ) -> AuditEntry:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        last = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev = (int(last[0]) + 1, str(last[1])) if last else (1, GENESIS)
        at = datetime.now(UTC)
        digest = entry_hash(prev, seq, at, actor, action, request_id, detail, self._key)
        conn.execute(
            "INSERT INTO audit_log (seq, at, actor, action, request_id, detail, prev_hash, hash, mac_version) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 2)",
            (seq, at, actor, action, request_id, Jsonb(detail), prev, digest),
        )
        if self._anchor is not None:  # inside the lock: anchors are written in chain order
            self._anchor.write(seq, digest)
        return AuditEntry(seq, at, actor, action, request_id, detail, prev, digest)

    def _rows(self, request_id: str | None = None, limit: int | None = None) -> Iterator[AuditEntry]:
        where, params = ("WHERE request_id = %s", [request_id]) if request_id else ("", [])
        tail = " LIMIT %s" if limit else ""
        with self._pool.connection() as conn:
            cur = conn.execute(
                f"SELECT seq, at, actor, action, request_id, detail, prev_hash, hash, mac_version FROM audit_log "
                f"{where} ORDER BY seq{tail}",
                [*params, *([limit] if limit else [])],
            )
            for r in cur:
                yield AuditEntry(int(r[0]), r[1], r[2], r[3], r[4], dict(r[5]), r[6], r[7], int(r[8]))

    def entries(self, request_id: str | None = None, limit: int = 500) -> list[AuditEntry]:
        return list(self._rows(request_id, limit))

    def search(self, query: AuditQuery) -> list[AuditEntry]:
        """Entries matching every filter given, newest first (indexed by request, action and time)."""
        escaped = query.actor.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") if query.actor else None
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT seq, at, actor, action, request_id, detail, prev_hash, hash, mac_version FROM audit_log "
                "WHERE (%(rid)s::text IS NULL OR request_id = %(rid)s) "
                "AND (%(action)s::text IS NULL OR action = %(action)s) "
                "AND (%(actor)s::text IS NULL OR actor ILIKE '%%' || %(actor)s || '%%') "
                "AND (%(since)s::timestamptz IS NULL OR at >= %(since)s) "
                "AND (%(until)s::timestamptz IS NULL OR at < %(until)s) "
                "ORDER BY seq DESC LIMIT %(limit)s",
                {
                    "rid": query.request_id or None,
                    "action": query.action or None,
                    "actor": escaped,
                    "since": query.since,
                    "until": query.until,
                    "limit": query.limit,
                },
            ).fetchall()
        return [AuditEntry(int(r[0]), r[1], r[2], r[3], r[4], dict(r[5]), r[6], r[7], int(r[8])) for r in rows]

    def verify(self, expected_head: str | None = None) -> ChainCheck:
        """Walk the whole chain (keyed entries checked with the key), then the head anchored outside the
        database; ``expected_head`` (a hash noted earlier) also catches a cut-off tail."""
        prev, count, seq_expected, keyed = GENESIS, 0, 1, False
        for e in self._rows():
            if e.seq != seq_expected:
                return ChainCheck(False, count, e.seq, f"entry {seq_expected} is missing", prev)
            if e.prev_hash != prev:
                return ChainCheck(False, count, e.seq, "its link to the entry before does not match", prev)
            if keyed and e.mac_version != 2:
                return ChainCheck(False, count, e.seq, "an unkeyed entry after keyed ones (a downgrade)", prev)
            keyed = keyed or e.mac_version == 2
            key = self._key if e.mac_version == 2 else None
            if entry_hash(e.prev_hash, e.seq, e.at, e.actor, e.action, e.request_id, e.detail, key) != e.hash:
                return ChainCheck(False, count, e.seq, "its content does not match its hash", prev)
            prev, count, seq_expected = e.hash, count + 1, e.seq + 1
        if expected_head is not None and expected_head != prev and not self._contains(expected_head):
            return ChainCheck(False, count, None, "the expected head is not in the chain (entries removed)", prev)
        if self._anchor is not None:
            try:
                anchored = self._anchor.read()
            except (ValueError, KeyError) as exc:
                return ChainCheck(False, count, None, f"the anchored head is not valid ({exc})", prev)
            if anchored is not None:
                seq, digest = anchored
                if seq >= seq_expected:
                    why = f"the chain ends at entry {seq_expected - 1}; the anchor outside the database names {seq}"
                    return ChainCheck(False, count, None, why + " (entries removed)", prev)
                if not self._hash_at(seq, digest):
                    return ChainCheck(False, count, seq, "the entry the anchor names was rewritten", prev)
        return ChainCheck(True, count, None, "", prev)

    def _hash_at(self, seq: int, digest: str) -> bool:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT hash FROM audit_log WHERE seq = %s", (seq,)).fetchone()
        return row is not None and hmac.compare_digest(str(row[0]), digest)

    def _contains(self, digest: str) -> bool:
        with self._pool.connection() as conn:
            return conn.execute("SELECT 1 FROM audit_log WHERE hash = %s", (digest,)).fetchone() is not None


CSV_COLUMNS = ("seq", "at", "actor", "action", "request_id", "detail", "hash")


def as_csv(entries: Iterable[AuditEntry]) -> str:
    """The entries as CSV (one row each, the detail as JSON, the chain hash to check a copy against). Cells
    that a spreadsheet would run as a formula are prefixed with ``'``."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for e in entries:
        cells = [
            e.seq,
            e.at.isoformat(),
            e.actor,
            e.action,
            e.request_id or "",
            json.dumps(e.detail, sort_keys=True),
            e.hash,
        ]
        writer.writerow([_inert(str(c)) for c in cells])
    return out.getvalue()


def _inert(cell: str) -> str:
    return "'" + cell if cell[:1] in ("=", "+", "-", "@", "\t", "\r") else cell
