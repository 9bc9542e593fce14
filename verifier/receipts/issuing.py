"""``issue_receipt``: build the PII-free receipt, sign it, store it in Postgres and export it to S3."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from psycopg.types.json import Jsonb
from temporalio import activity

from activities.support import PlatformActivities
from stores.adapters.registry import AdapterConfigError, after_sweep
from stores.platform import Platform
from verifier.receipts.attestation import file_physical
from verifier.receipts.signing import SCHEMA_ID, digest, document_bytes, sign, signing_key
from workflows.contracts.erasure import Activities, ReceiptInput, ReceiptRef

#: the stores a request filed before plans existed ran (its receipt lists them)
LEGACY_STORES = ("artifacts", "sessions", "memory", "logs", "keys")


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


class ReceiptActivities(PlatformActivities):
    def __init__(self, platform: Platform, signing_seed: bytes) -> None:
        super().__init__(platform)
        self._key = signing_key(signing_seed)

    def build_body(self, inp: ReceiptInput) -> dict[str, Any]:
        row = self.platform.requests.get(inp.request_id)
        record = row.record
        completed = datetime.fromisoformat(inp.completed_at)
        stores = list(record.stores if record.stores is not None else LEGACY_STORES)
        physical = self.physical(inp, stores, any((record.found_at_start or {}).values()))
        return {
            "schema": SCHEMA_ID,
            # the plan's stores (requests filed before plans: the five built-in stores they ran)
            "stores": stores,
            "dispositions": self.dispositions(stores, inp, physical["state"]),
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
            "subject_found": any((record.found_at_start or {}).values()),
            # in words: a completed request for an id the platform held nothing for erased nothing
            "outcome": outcome(inp.status, any((record.found_at_start or {}).values())),
            "found_at_start": dict(record.found_at_start or {}),
            "derived_rows_removed": list(record.derived_removed or []),
            "second_sweep": dict(record.second_sweep or {}),
            "verifications": verifications_json(inp.verifications),
            "holds": [
                {"action": h["action"], "at": h["at"]}  # never the free-text reason (it may name people)
                for h in self.platform.requests.hold_history(inp.subject_key, since=row.received_at)
            ],
            "software": {"name": "erasure-orchestrator", "version": software_version()},
            "issued_at": datetime.now(UTC).isoformat(),
        }

    def physical(self, inp: ReceiptInput, stores: list[str], found: bool) -> dict[str, Any]:
        """Where the physical clean-up stands (issue 30): the request's own plan ran it (``in_saga``: filed
        before the platform job existed), nothing was deleted (``not_needed``), or the request is filed with
        the platform's physical job and owed an attestation by ``due_by`` (``pending``).

        Whatever the verdict: a request whose checks failed (``verification_failed``) deleted data all the
        same, and those rows' dead tuples and old volumes are owed the same physical pass (issue 39)."""
        if any(_physical_step(self.platform, name) for name in stores):
            return {"state": "in_saga"}
        if not (found or deleted_anything(inp.steps, stores)):
            return {"state": "not_needed"}
        return file_physical(self.platform.pool, inp.request_id, "erasure", self.platform.config.physical_window)

    def dispositions(self, stores: list[str], inp: ReceiptInput, physical: str = "") -> list[dict[str, Any]]:
        """Per store: what happened to the user's data there (its adapter's ``disposition``), the step's
        counts, what remains where, and where its physical removal stands. A store no adapter of this worker
        declares is listed as deleted."""
        counts = {s.name: dict(s.counts) for s in inp.steps}
        out: list[dict[str, Any]] = []
        for name in stores:
            try:
                declared = getattr(self.platform.adapters.get(name), "disposition", None)
            except AdapterConfigError:
                declared = None
            what, remains = (declared.what, declared.remains) if declared is not None else ("deleted", "")
            entry = {"store": name, "what": what, "remains": remains, "counts": counts.get(name, {})}
            if physical:
                entry["physical"] = physical
            out.append(entry)
        return out

    @activity.defn(name=Activities.RECEIPT)
    def issue_receipt(self, inp: ReceiptInput) -> ReceiptRef:
        document = issue_once(
            self.platform, inp.request_id, inp.subject_key, lambda: sign(self.build_body(inp), self._key)
        )
        return ReceiptRef(inp.request_id, digest(document), receipt_key(inp.request_id))

    def activities(self) -> list[Callable[..., Any]]:
        return [self.issue_receipt]


def deleted_anything(steps: Iterable[Any], stores: Iterable[str]) -> bool:
    """Whether a store step of the plan counted anything (the subject found at the start or not: a late
    writer's rows swept count too); a count that is not a deletion only files a request with the physical
    job that owed nothing, never the reverse."""
    names = set(stores) | {"sweep"}
    return any(v > 0 for s in steps if s.name in names for v in dict(s.counts).values())


def _physical_step(platform: Platform, name: str) -> bool:
    """Whether ``name`` is a physical clean-up step (one an older plan ran inside the saga)."""
    try:
        return after_sweep(platform.adapters.get(name))
    except AdapterConfigError:
        return name in ("vacuum", "compaction")


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
