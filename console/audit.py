"""The audit trail: every console and CLI action, appended, keyed, hash-chained, anchored outside at every append.

Entry ``n`` stores ``hash = HMAC-SHA256(k, prev_hash | seq | at | actor | action | request_id | detail)``
with ``prev_hash`` the hash of entry ``n-1`` (64 zeros for the first) and ``k`` derived from the service
secret, which the database does not hold: an entry rewritten with SQL cannot be given a matching hash.
(Entries written before keying, ``mac_version`` 1, are plain SHA-256; none may follow a keyed one.)

Nobody shortens it (issue 40): every append writes an immutable anchor for its entry in the receipts bucket
(``console.audit_anchors``), and refuses, with an alert in the log, when the table's last entry is not the
newest anchor: an owner who turned the append-only trigger off and deleted the tail, or everything, is not
covered over by the next entry. ``verify`` walks the chain in order and reports the first entry whose hash
or link does not hold, then checks every anchor against the table (the entry at its number, with its hash)
and reports the first that does not match. Appends are serialised by a transaction advisory lock, so the
chain has no forks, and a trigger refuses ``UPDATE``/``DELETE``/``TRUNCATE`` on the table. Every statement
on the table runs as ``erasure_audit_writer`` (``SET LOCAL ROLE``; migration 0043), which may only read
and insert: not delete, not turn the trigger off. Actors are staff identities and details are ids, counts
and staff-written reasons: no data-subject personal data (the subject appears only as its pseudonymous key).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import structlog
from psycopg import Connection, sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from console.audit_anchors import LEGACY_HEAD, Anchor, AnchorStore
from stores.privacy.identity import derived_key

log = structlog.get_logger("console.audit")

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
    "receipt_downloaded",  # the signed JSON (the API's too), the certificate's PDF, the physical attestation
    "receipt_viewed",  # the receipt's certificate page opened (issue 42: it was logged as a download)
    "token_created",
    "token_revoked",
    "forget_previewed",  # item forgetting (issue 16): a staff member saw what a description resolves to
    "preview_burst",  # one subject previewed more often than the alert threshold in an hour (issue 40)
    "forget_filed",
    "forget_approved",  # a second person approved a staff-filed forget that deletes (issue 27)
    "forget_denied",
    "forget_decision_refused",  # a decision the rules refused (the filer's own, a forget not waiting)
    "decision_refused",  # an erasure's approval, denial or cancellation the rules refused
    "approval_voided",  # a decision recorded for a workflow that then did not take it, deleted (issue 40)
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


class AuditChainBroken(RuntimeError):
    """The audit table's last entry is not the anchored head (entries were removed): appends are refused."""


#: the role every statement on ``audit_log`` runs as (migration 0043): SELECT and INSERT on it, nothing else
WRITER_ROLE = "erasure_audit_writer"


@contextmanager
def _as_writer(conn: Connection[Any]) -> Iterator[Connection[Any]]:
    """``conn`` inside a transaction (its own, or the caller's already open) running as ``WRITER_ROLE``; the
    caller's role comes back after, so a decision written in the same transaction keeps its own."""
    opened = conn.transaction() if conn.info.transaction_status == TransactionStatus.IDLE else nullcontext()
    with opened:
        row = conn.execute("SELECT current_setting('role')").fetchone()
        before = str(row[0]) if row else "none"
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(WRITER_ROLE)))
        try:
            yield conn
        finally:
            if conn.info.transaction_status == TransactionStatus.INTRANS:  # not when failed: it rolls back
                back = sql.SQL("NONE") if before == "none" else sql.Identifier(before)
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(back))


class AuditLog:
    def __init__(self, pool: ConnectionPool, key: bytes, anchor: AnchorStore | None = None) -> None:
        self._pool = pool
        self._key = key
        self._anchor = anchor

    @classmethod
    def of(cls, platform: Any) -> AuditLog:
        """The platform's audit log: keyed from the service secret, anchored in the receipts bucket."""
        key = derived_key(platform.config.subject_secret, "audit-log")
        return cls(platform.pool, key, AnchorStore(platform.s3, platform.config.receipt_bucket, key))

    @contextmanager
    def _reading(self) -> Iterator[Connection[Any]]:
        with self._pool.connection() as conn, _as_writer(conn):
            yield conn

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
        committed together), else in a transaction of its own. ``AuditChainBroken`` when the table's last
        entry is not the anchored head."""
        if action not in ACTIONS:
            raise ValueError(f"unknown audit action {action!r}")
        if conn is not None:
            with _as_writer(conn):
                return self._append(conn, actor, action, request_id, dict(detail or {}))
        with self._pool.connection() as own, _as_writer(own):
            return self._append(own, actor, action, request_id, dict(detail or {}))

    def _append(
        self, conn: Connection[Any], actor: str, action: str, request_id: str | None, detail: dict[str, Any]
    ) -> AuditEntry:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        last = conn.execute("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
        last_seq, prev = (int(last[0]), str(last[1])) if last else (0, GENESIS)
        if self._anchor is not None:
            self._check_head(conn, self._anchor, last_seq, prev, action)
        seq, at = last_seq + 1, datetime.now(UTC)
        digest = entry_hash(prev, seq, at, actor, action, request_id, detail, self._key)
        row = conn.execute(
            "INSERT INTO audit_log (seq, at, actor, action, request_id, detail, prev_hash, hash, mac_version) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 2) RETURNING pg_current_xact_id()::text",
            (seq, at, actor, action, request_id, Jsonb(detail), prev, digest),
        ).fetchone()
        if self._anchor is not None and row is not None:  # inside the lock: anchors are written in chain order
            self._anchor.write(seq, int(row[0]), digest, prev)
        return AuditEntry(seq, at, actor, action, request_id, detail, prev, digest)

    def _check_head(self, conn: Connection[Any], anchors: AnchorStore, last_seq: int, last: str, action: str) -> None:
        """Refuse (and alert) unless the table's last entry is the newest anchor. Anchors past it are allowed
        only when the transaction that wrote them aborted (recorded void, so it stays explained)."""
        found = anchors.listing(last_seq)
        voids: set[tuple[int, int]] | None = None  # read only when some anchor does not match (rare)
        reached, removed = last_seq == 0, None
        for a in found:
            if a.valid and a.seq == last_seq and hmac.compare_digest(a.hash, last):
                reached = True
                continue
            voids = anchors.voids(last_seq) if voids is None else voids
            if a.valid and (a.seq, a.txid) in voids:
                continue
            if a.valid and _xact_status(conn, a.txid) == "aborted":
                anchors.void(a)
            elif removed is None:
                removed = a
        if reached and removed is None:
            return
        if removed is None and not anchors.any() and self._legacy_head(anchors) == (last_seq, last):
            return  # anchored by the single head object of before: its first per-append anchor comes now
        newest = max((a.seq for a in found if a.valid), default=None)
        log.error(
            "audit_append_refused",
            table_last_seq=last_seq,
            anchored_seq=newest,
            invalid_anchor=bool(removed and not removed.valid),
            action=action,
        )
        why = f"entry {newest}" if newest is not None else "no anchor for it"
        raise AuditChainBroken(
            f"the audit log's last entry ({last_seq}) is not the anchored head ({why}): entries were removed "
            "or an anchor is not valid; appends are refused until the table is restored (erasure audit verify)"
        )

    @staticmethod
    def _legacy_head(anchors: AnchorStore) -> tuple[int, str] | None:
        try:
            return anchors.legacy_head()
        except (ValueError, KeyError):
            return None  # not valid: it anchors nothing, and the append is refused

    def _rows(self, request_id: str | None = None, limit: int | None = None) -> Iterator[AuditEntry]:
        where, params = ("WHERE request_id = %s", [request_id]) if request_id else ("", [])
        tail = " LIMIT %s" if limit else ""
        with self._reading() as conn:
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
        with self._reading() as conn:
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
        """Walk the whole chain (keyed entries checked with the key), then every anchor outside the database;
        ``expected_head`` (a hash noted earlier) also catches a cut-off tail."""
        prev, count, seq_expected, keyed = GENESIS, 0, 1, False
        hashes: dict[int, str] = {}
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
            hashes[e.seq] = e.hash
            prev, count, seq_expected = e.hash, count + 1, e.seq + 1
        if expected_head is not None and expected_head != prev and expected_head not in hashes.values():
            return ChainCheck(False, count, None, "the expected head is not in the chain (entries removed)", prev)
        if self._anchor is None:
            return ChainCheck(True, count, None, "", prev)
        why, bad = self._against_anchors(self._anchor, hashes)
        return ChainCheck(not why, count, bad, why, prev)

    def _against_anchors(self, anchors: AnchorStore, hashes: Mapping[int, str]) -> tuple[str, int | None]:
        """The first anchor the table does not match, as (why, seq); ("", None) when every one matches."""
        try:
            legacy = anchors.legacy_head()
        except (ValueError, KeyError) as exc:
            return f"the anchored head is not valid ({exc})", None
        found = anchors.listing()
        if legacy is not None:
            found.append(Anchor(legacy[0], 0, legacy[1], LEGACY_HEAD))
        voids = anchors.voids() if found else set()
        for a in sorted(found):
            if not a.valid:
                return f"the anchor object {a.name} is not valid (its name or MAC does not hold)", None
            held = hashes.get(a.seq)
            if held is not None and hmac.compare_digest(held, a.hash):
                continue
            if (a.seq, a.txid) in voids or (a.txid and self._unfinished(a.txid)):
                continue  # an append rolled back after its anchor, or one under way
            if held is None:
                last = max(hashes, default=0)
                return f"entry {a.seq} is missing: the chain ends at entry {last} (entries removed)", a.seq
            return f"entry {a.seq} does not match its anchor outside the database (rewritten)", a.seq
        return "", None

    def _unfinished(self, txid: int) -> bool:
        """Whether the transaction never committed (aborted, or still under way): its entry never existed."""
        with self._reading() as conn:
            return _xact_status(conn, txid) in ("aborted", "in progress")


def _xact_status(conn: Connection[Any], txid: int) -> str | None:
    """``committed``, ``aborted``, ``in progress``, or ``None`` when Postgres does not know (too old, or from
    after this database's past: restored from a backup). In a savepoint: the caller's transaction goes on."""
    try:
        with conn.transaction():
            row = conn.execute("SELECT pg_xact_status(%s::text::xid8)", (str(txid),)).fetchone()
    except psycopg.errors.InvalidParameterValue:  # "transaction ID ... is in the future"
        return None
    return str(row[0]) if row and row[0] is not None else None


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
