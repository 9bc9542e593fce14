"""Signed documents made by the real issuing code, without a stack: an erasure receipt (``receipt_body``,
``dispositions``, ``file_physical``) and its physical attestation (``attestation_body`` with the physical
stores' real statements), for tests that check them outside the issuing activities (the Node verifier's,
the float scan's). The physical books are a one-row fake: ``file_physical`` only reads the due time back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from stores.adapters.interface import Coverage, Disposition
from stores.books.physical_pending import Pending
from stores.books.request_record import RequestRecord
from stores.books.requests import ErasureRequestRow
from stores.physical.statements import keys_statement
from verifier.receipts.attestation import attestation_body, file_physical
from verifier.receipts.issuing import dispositions, receipt_body
from verifier.receipts.signing import digest, sign, signing_key
from workflows.contracts.erasure import CheckResult, ReceiptInput, StepProgress, VerifyResult

T0 = datetime(2031, 3, 1, 12, 0, tzinfo=UTC)
REQUEST_ID = "er_0123456789abcdef0123"
STORES = ["artifacts", "sessions", "memory", "logs", "keys"]


def fixture_key(name: str = "receipt-documents") -> Ed25519PrivateKey:
    """A deterministic test key (never a deployment's)."""
    return signing_key(hashlib.sha256(name.encode()).digest())


class _Conn:
    def __init__(self, due: datetime) -> None:
        self._due = due

    def execute(self, _sql: str, _params: Any = None) -> _Conn:
        return self

    def fetchone(self) -> tuple[datetime]:
        return (self._due,)


class _Books:
    """The physical books as ``file_physical`` uses them: it files the request and reads its due time."""

    def __init__(self, due: datetime) -> None:
        self._due = due

    @contextmanager
    def connection(self) -> Iterator[_Conn]:
        yield _Conn(self._due)


def receipt_input() -> ReceiptInput:
    steps = [
        StepProgress("artifacts", "done", {"objects": 24, "delete_requests": 1}),
        StepProgress("sessions", "done", {"sessions": 8, "events": 96, "user_states": 1}),
        StepProgress("memory", "done", {"rows": 37, "derived_rows": 2}),
        StepProgress("logs", "done", {"lines": 36, "segments": 6, "malformed_lines": 0}),
        StepProgress("keys", "done", {"key_versions": 1}),
    ]
    checks = [
        CheckResult("sessions", True, {"sessions": 0, "events": 0}, "nothing left"),
        CheckResult("memory", True, {"rows": 0}, "no row, no copy — canaries matched nothing"),
        CheckResult("keys", True, {"wrapped_keys": 0}, "sample no longer decrypts"),
    ]
    return ReceiptInput(
        REQUEST_ID,
        "sk_" + "ab" * 20,
        "support",
        "completed",
        (T0 + timedelta(minutes=3)).isoformat(),
        steps,
        [VerifyResult("final", True, checks)],
    )


def erasure_receipt(key: Ed25519PrivateKey, window: timedelta = timedelta(minutes=5)) -> dict[str, Any]:
    """A completed erasure's signed receipt, pending its physical clean-up within ``window``."""
    inp = receipt_input()
    record = RequestRecord(
        stores=STORES,
        found_at_start={"sessions": 8, "memory_rows": 37},
        derived_removed=["6f1c1b6e-9a57-4a3c-8a59-6b9e1d7c2f10"],
        second_sweep={"memory_rows": 0, "sessions": 0},
    )
    row = ErasureRequestRow(
        REQUEST_ID,
        inp.subject_key,
        inp.app_name,
        "completed",
        T0,
        T0 + timedelta(days=30),
        started_at=T0 + timedelta(seconds=1),
        record=record,
    )
    due = T0 + timedelta(minutes=3) + window
    physical = file_physical(_Books(due), REQUEST_ID, "erasure", window)  # type: ignore[arg-type]
    declared = {"keys": Disposition("unreadable", "every wrapped data key version deleted")}
    disposed = dispositions(STORES, declared, inp, physical["state"])
    holds = [{"action": "placed", "at": T0.isoformat()}, {"action": "released", "at": T0.isoformat()}]
    body = receipt_body(inp, row, disposed, physical, holds, T0 + timedelta(minutes=3, seconds=1))
    return sign(body, key)


def physical_attestation(key: Ed25519PrivateKey, receipt: dict[str, Any]) -> dict[str, Any]:
    """The physical job's signed attestation for ``receipt``: every store covered by a run after the
    request's last deletion, with the keys table's statement."""
    deleted_by = T0 + timedelta(minutes=3)
    pending = Pending(REQUEST_ID, "erasure", deleted_by, deleted_by + timedelta(minutes=5))
    started = deleted_by + timedelta(minutes=1)
    coverage = {
        "vacuum": Coverage(True, "", {"before": {"sessions": {"vacuums": 2, "running": False}}}),
        "compaction": Coverage(True, "", {"before": {"volume 3": {"revision": 2, "read_only": False}}}),
    }
    bound = T0 + timedelta(days=67)
    keys_table = {"vacuum_full": "done", "switch_wal": "done", "checkpoint": "done"}
    body = attestation_body(
        pending,
        digest(receipt),
        "run-0001",
        started,
        coverage,
        started + timedelta(seconds=30),
        bound,
        {"name": "erasure-orchestrator", "version": "0.1.0"},
        keys_table,
        [keys_statement(keys_table, bound)],
    )
    return sign(body, key)
