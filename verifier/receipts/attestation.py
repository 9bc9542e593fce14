"""The physical attestation: the receipt's second signed document (issue 30).

A request's receipt says ``physical: pending`` with the deadline the platform's window gives it; when the
physical clean-up job's run that covers the request ends, it signs this attestation: the same request id,
the SHA-256 of the receipt document, the run (its id and when it started, after the request's last
deletion), each physical store's own evidence (Postgres's vacuum counters, SeaweedFS's compaction
revisions, before and after), each store's statement of what its pass did to the bytes and which copies
remain where until when (``statements``, ``stores.physical.statements``: "sealed, key shredded, space freed"
is never "bytes overwritten") and, for an erasure, by when every copy of the shredded data key is wrapped
only under KMS keys that refuse use (the key-epoch policy's bound). Signed like a receipt (the same key,
the same document shape, ``erasure receipt verify`` checks it); stored in ``physical_attestations`` and
exported beside the receipt. Request ids, store names, counters and times: nothing personal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from stores.adapters.interface import Coverage
from stores.books import physical_pending
from stores.books.physical_pending import Kind, Pending, PhysicalStatus
from stores.physical.statements import StoreStatement
from verifier.receipts.signing import ATTESTATION_SCHEMA_ID, digest, document_bytes


def attestation_key(request_id: str) -> str:
    return f"receipts/{request_id}.physical.json"


def file_physical(pool: ConnectionPool, request_id: str, kind: Kind, window: timedelta) -> dict[str, Any]:
    """File a finished request with the platform's physical job; the receipt's ``physical`` entry saying
    so: pending, the deadline, the window in whole seconds (signed documents carry no float: receipts signed
    before RFC 8785 carried ``window_minutes``, a float) and where the attestation will be."""
    due = physical_pending.file_pending(pool, request_id, kind, window)
    return {
        "state": "pending",
        "due_by": due.isoformat(),
        "window_seconds": round(window.total_seconds()),
        "attestation": attestation_key(request_id),
    }


def attestation_body(
    pending: Pending,
    receipt_sha256: str,
    run_id: str,
    run_started_at: datetime,
    coverage: dict[str, Coverage],
    attested_at: datetime,
    key_unwrappable_by: datetime | None,
    software: dict[str, str],
    keys_table: dict[str, str] | None = None,
    statements: Sequence[StoreStatement] = (),
) -> dict[str, Any]:
    return {
        "schema": ATTESTATION_SCHEMA_ID,
        "request_id": pending.request_id,
        "kind": pending.kind,
        "receipt_sha256": receipt_sha256,
        "run": {"id": run_id, "started_at": run_started_at.isoformat()},
        "deleted_by": pending.deleted_by.isoformat(),
        "due_at": pending.due_at.isoformat(),
        "attested_at": attested_at.isoformat(),
        "within_window": attested_at <= pending.due_at,
        # the store's own evidence that the run came after the request's last deletion
        "run_after_last_deletion": run_started_at > pending.deleted_by,
        "stores": [
            {"store": name, "covered": c.covered, "note": c.note, "evidence": c.evidence}
            for name, c in sorted(coverage.items())
        ],
        "key_unwrappable_by": key_unwrappable_by.isoformat() if key_unwrappable_by else None,
        # the keys table rewritten and the WAL switched after the shred (vacuum_full / switch_wal / checkpoint)
        "keys_table": dict(keys_table or {}),
        # per store, in exact words: what the pass did to the bytes, which copies remain where until when
        "statements": [s.as_dict() for s in sorted(statements, key=lambda s: s.store)],
        "software": software,
    }


def store_attestation(pool: ConnectionPool, run_id: str, document: dict[str, Any]) -> dict[str, Any]:
    """Store the signed attestation once (a retry keeps the first); the stored document."""
    body = document["receipt"]
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO physical_attestations (request_id, run_id, body, signature) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (request_id) DO NOTHING",
            (body["request_id"], run_id, Jsonb(body), json.dumps(document["signature"])),
        )
    stored = load_attestation(pool, body["request_id"])
    assert stored is not None
    return stored


def load_attestation(pool: ConnectionPool, request_id: str) -> dict[str, Any] | None:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT body, signature FROM physical_attestations WHERE request_id = %s", (request_id,)
        ).fetchone()
    if row is None:
        return None
    return {"receipt": row[0], "signature": json.loads(row[1])}


def attestation_bytes(document: dict[str, Any]) -> bytes:
    return document_bytes(document)


def link_problem(attestation: dict[str, Any], receipt: dict[str, Any]) -> str:
    """Why an attestation's body is not about the receipt whose body is ``receipt`` ("" when it is): the same
    request id, and the SHA-256 of the receipt (``signing.digest``, over its canonical body)."""
    if attestation.get("request_id") != receipt.get("request_id"):
        return (
            f"the attestation is for request {attestation.get('request_id')}, "
            f"the receipt for {receipt.get('request_id')}"
        )
    if attestation.get("receipt_sha256") != digest({"receipt": receipt}):
        return "the attestation's receipt_sha256 is not the SHA-256 of this receipt (another or an altered receipt)"
    return ""


@dataclass(frozen=True)
class PhysicalView:
    """Where a request's physical clean-up stands, as ``erasure receipt show`` and the console say it.

    ``state``: ``pending`` (owed an attestation by ``due_by``), ``done`` (attested at ``attested_at`` by the
    job's run ``run_id``), ``in_saga`` (the request's own plan ran vacuum and compaction), ``not_needed``
    (nothing deleted, a suppression) or ``unrecorded`` (a receipt issued before the physical job existed).
    """

    state: str
    due_by: str | None = None
    attested_at: str | None = None
    run_id: str | None = None
    within_window: bool | None = None
    overdue: bool = False  # pending and past ``due_by``

    def line(self) -> str:
        if self.state == "pending":
            return f"pending (due by {self.due_by}{', OVERDUE' if self.overdue else ''})"
        if self.state == "done":
            window = {True: "yes", False: "no", None: "unknown"}[self.within_window]
            return f"done at {self.attested_at} by run {self.run_id} (within window {window})"
        return {"in_saga": "in saga", "not_needed": "not needed"}.get(
            self.state, "not recorded (the receipt predates the physical job)"
        )


def describe_physical(
    status: PhysicalStatus | None,
    attestation: dict[str, Any] | None,
    receipt: dict[str, Any] | None,
    now: datetime | None = None,
) -> PhysicalView:
    """The view from the physical books' row (``status``), the signed attestation's body and the receipt's
    body (each ``None`` when there is none): the books say pending or done; a request they never held says
    what its receipt's ``physical`` entry says."""
    if status is not None:
        due = status.due_at.isoformat()
        if status.state == "done" and status.attested_at is not None:
            within = attestation.get("within_window") if attestation is not None else None
            if not isinstance(within, bool):
                within = status.attested_at <= status.due_at
            return PhysicalView("done", due, status.attested_at.isoformat(), status.run_id, within)
        return PhysicalView("pending", due, overdue=status.due_at < (now or datetime.now(UTC)))
    entry = (receipt or {}).get("physical")
    state = entry.get("state") if isinstance(entry, dict) else None
    if state in ("in_saga", "not_needed"):
        return PhysicalView(str(state))
    if state == "pending" and isinstance(entry, dict):  # filed, but the books hold no row (restored books)
        return PhysicalView("pending", str(entry.get("due_by")))
    return PhysicalView("unrecorded")


def read_physical(pool: ConnectionPool, request_id: str, receipt: dict[str, Any] | None) -> PhysicalView:
    """``describe_physical`` of the request, read from the books and the stored attestation."""
    status = physical_pending.status(pool, request_id)
    attestation = load_attestation(pool, request_id) if status is not None and status.state == "done" else None
    return describe_physical(status, attestation["receipt"] if attestation else None, receipt)
