"""Receipt issuing's document and storage: the PII-free body (``receipt_body``, no I/O), and the receipt
signed and stored once per request in Postgres and exported to S3 (``issue_once``). The activity that
gathers the body's inputs and issues it is ``activities.receipts``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from psycopg.types.json import Jsonb

from stores.adapters.interface import Disposition
from stores.books.request_record import RequestRecord
from stores.books.requests import ErasureRequestRow
from stores.platform import Platform
from verifier.receipts.signing import SCHEMA_ID, document_bytes
from workflows.contracts.erasure import ReceiptInput


def software_version() -> str:
    try:
        return version("erasure-orchestrator")
    except PackageNotFoundError:
        return "0+unknown"


def receipt_key(request_id: str) -> str:
    return f"receipts/{request_id}.json"


def outcome(status: str, subject_found: bool) -> str:
    """What the receipt says happened, in words a reader needs no manual for."""
    if status == "completed":
        return "erased" if subject_found else "nothing_found: the platform held no data for this id; nothing erased"
    return status


def receipt_stores(record: RequestRecord) -> list[str]:
    """The stores a receipt lists: the request's plan's, which ``begin_request`` records before any step runs.

    A request with no recorded plan never began in a worker of this build (those filed before plans existed
    are run and receipted by the build that filed them): no receipt is issued for it rather than one that
    guesses its stores."""
    if record.stores is None:
        raise ValueError("the request has no recorded plan: no receipt can list its stores")
    return list(record.stores)


def dispositions(
    stores: Iterable[str], declared: Mapping[str, Disposition | None], inp: ReceiptInput, physical: str = ""
) -> list[dict[str, Any]]:
    """Per store: what happened to the user's data there (``declared``: its adapter's ``disposition``, None
    where it has none or no adapter of this worker declares the store: then it is listed as deleted), the
    step's counts, what remains where, and where its physical removal stands."""
    counts = {s.name: dict(s.counts) for s in inp.steps}
    out: list[dict[str, Any]] = []
    for name in stores:
        given = declared.get(name)
        what, remains = (given.what, given.remains) if given is not None else ("deleted", "")
        entry = {"store": name, "what": what, "remains": remains, "counts": counts.get(name, {})}
        if physical:
            entry["physical"] = physical
        out.append(entry)
    return out


def receipt_body(
    inp: ReceiptInput,
    row: ErasureRequestRow,
    disposed: list[dict[str, Any]],
    physical: dict[str, Any],
    holds: Iterable[Mapping[str, Any]],
    issued_at: datetime,
) -> dict[str, Any]:
    """The receipt's body (unsigned, PII-free) from what the issuing activity gathered: the request's row,
    each store's disposition (``dispositions``), where the physical clean-up stands, the holds since the
    request was received."""
    record = row.record
    completed = datetime.fromisoformat(inp.completed_at)
    found = any((record.found_at_start or {}).values())
    return {
        "schema": SCHEMA_ID,
        # the plan's stores (requests filed before plans: the five built-in stores they ran)
        "stores": receipt_stores(record),
        "dispositions": disposed,
        "physical": physical,
        "request_id": inp.request_id,
        "subject_key": inp.subject_key,
        "app_name": inp.app_name,
        "status": inp.status,
        "received_at": row.received_at.isoformat(),
        "started_at": row.started_at.isoformat() if row.started_at else None,
        "completed_at": completed.isoformat(),
        "due_at": row.due_at.isoformat(),
        "due_met": completed <= row.due_at,
        "steps": [{"name": s.name, "state": s.state, "counts": dict(s.counts)} for s in inp.steps],
        "subject_found": found,
        # in words: a completed request for an id the platform held nothing for erased nothing
        "outcome": outcome(inp.status, found),
        "found_at_start": dict(record.found_at_start or {}),
        "derived_rows_removed": list(record.derived_removed or []),
        "second_sweep": dict(record.second_sweep or {}),
        "verifications": verifications_json(inp.verifications),
        # never the free-text reason (it may name people)
        "holds": [{"action": h["action"], "at": h["at"]} for h in holds],
        "software": {"name": "erasure-orchestrator", "version": software_version()},
        "issued_at": issued_at.isoformat(),
    }


def deleted_anything(steps: Iterable[Any], stores: Iterable[str]) -> bool:
    """Whether a store step of the plan counted anything (the subject found at the start or not: a late
    writer's rows swept count too); a count that is not a deletion only files a request with the physical
    job that owed nothing, never the reverse."""
    names = set(stores) | {"sweep"}
    return any(v > 0 for s in steps if s.name in names for v in dict(s.counts).values())


def load_receipt(platform: Platform, request_id: str) -> dict[str, Any] | None:
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT body, signature FROM receipts WHERE request_id = %s", (request_id,)).fetchone()
    if row is None:
        return None
    return {"receipt": row[0], "signature": json.loads(row[1])}


def verifications_json(verifications: Iterable[Any]) -> list[dict[str, Any]]:
    """Verification results (phase, verdict, each check with its counts) as a receipt lists them."""
    return [
        {
            "phase": v.phase,
            "passed": v.passed,
            "checks": [
                {"check": c.check, "passed": c.passed, "counts": dict(c.counts), "detail": c.detail} for c in v.checks
            ],
        }
        for v in verifications
    ]


def issue_once(
    platform: Platform, request_id: str, subject_key: str, signed: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The request's receipt, signed and stored once (a retry re-exports the stored document, never a second
    one), exported to the receipt bucket."""
    existing = load_receipt(platform, request_id)
    document = existing if existing is not None else signed()
    if existing is None:
        with platform.pool.connection() as conn:
            conn.execute(
                "INSERT INTO receipts (request_id, subject_key, body, signature) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (request_id) DO NOTHING",
                (request_id, subject_key, Jsonb(document["receipt"]), json.dumps(document["signature"])),
            )
    platform.s3.put_object(
        Bucket=platform.config.receipt_bucket,
        Key=receipt_key(request_id),
        Body=document_bytes(document),
        ContentType="application/json",
    )
    return document
