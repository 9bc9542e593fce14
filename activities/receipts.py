"""``issue_receipt``: gather the receipt's inputs (the request's row, each store's disposition, the physical
clean-up's state, the holds), build the PII-free body (``verifier.receipts.issuing``), sign it
(``verifier.receipts.signing``), store it in Postgres and export it to S3, once per request."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from activities.support import PlatformActivities
from stores.adapters.interface import Disposition
from stores.adapters.registry import AdapterConfigError, after_sweep
from stores.platform import Platform
from verifier.receipts.attestation import file_physical
from verifier.receipts.issuing import (
    deleted_anything,
    dispositions,
    issue_once,
    receipt_body,
    receipt_key,
    receipt_stores,
)
from verifier.receipts.signing import digest, sign, signing_key
from workflows.contracts.erasure import Activities, ReceiptInput, ReceiptRef


class ReceiptActivities(PlatformActivities):
    def __init__(self, platform: Platform, signing_seed: bytes) -> None:
        super().__init__(platform)
        self._key = signing_key(signing_seed)

    def build_body(self, inp: ReceiptInput) -> dict[str, Any]:
        row = self.platform.requests.get(inp.request_id)
        stores = receipt_stores(row.record)
        physical = self.physical(inp, stores, any((row.record.found_at_start or {}).values()))
        return receipt_body(
            inp,
            row,
            self.dispositions(stores, inp, physical["state"]),
            physical,
            self.platform.requests.hold_history(inp.subject_key, since=row.received_at),
            datetime.now(UTC),
        )

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
        """Each store's entry (``verifier.receipts.issuing.dispositions``) with what its adapter on this worker
        declares (a store no adapter declares is listed as deleted)."""
        declared: dict[str, Disposition | None] = {}
        for name in stores:
            try:
                declared[name] = getattr(self.platform.adapters.get(name), "disposition", None)
            except AdapterConfigError:
                declared[name] = None
        return dispositions(stores, declared, inp, physical)

    @activity.defn(name=Activities.RECEIPT)
    def issue_receipt(self, inp: ReceiptInput) -> ReceiptRef:
        document = issue_once(
            self.platform, inp.request_id, inp.subject_key, lambda: sign(self.build_body(inp), self._key)
        )
        return ReceiptRef(inp.request_id, digest(document), receipt_key(inp.request_id))

    def activities(self) -> list[Callable[..., Any]]:
        return [self.issue_receipt]


def _physical_step(platform: Platform, name: str) -> bool:
    """Whether ``name`` is a physical clean-up step (one an older plan ran inside the saga)."""
    try:
        return after_sweep(platform.adapters.get(name))
    except AdapterConfigError:
        return name in ("vacuum", "compaction")
