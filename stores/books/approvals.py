"""Approvals: the record the worker reads before anything destructive, signed so that SQL cannot forge one.

A request (an erasure ``er_...`` or a forget ``fr_...``) may change a user's data only once a decision to do
so is recorded here by a path that may take it:

- ``four_eyes``: the console, when a second person approved what someone else filed;
- ``single_person``: the CLI (an operator with the worker's own secrets), and the console's suppressions,
  which delete nothing;
- ``data_subject``: the user's own confirmation through the agent's forget tool;
- ``retention_policy``: the retention-expiry sweep, for rows the platform's policy expired.

Each row is signed (HMAC-SHA256 under a key derived from the service secret; the database holds only the
tag), binding the request id, the subject key, the kind, the path, the decision and who filed and decided
(keyed digests ``act_...``, never names). ``require`` is what the worker's approval gate calls: a missing
row, a tag that does not verify, another subject, a decision other than ``approved`` or a four-eyes row
decided by the person who filed it each raise ``NotApproved`` with a reason and no personal data.

Decisions are final, but for one: an approval may still be cancelled during its waiting period. And a
decision the console wrote but its request's workflow then refused to take (the workflow was terminated, or
decided otherwise) is voided (``void``: the row it wrote is deleted, so ``require`` finds none): the record
and the workflow never disagree about whether a request was approved (issue 40 item 4).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from psycopg import Connection
from psycopg_pool import ConnectionPool

from stores.infra.errors import NotApproved
from stores.infra.in_transaction import Also
from stores.privacy.identity import derived_key

Kind = Literal["erasure", "forget"]
Path = Literal["four_eyes", "single_person", "data_subject", "retention_policy"]
Decision = Literal["approved", "denied", "cancelled"]
KINDS: tuple[Kind, ...] = ("erasure", "forget")
PATHS: tuple[Path, ...] = ("four_eyes", "single_person", "data_subject", "retention_policy")
DECISIONS: tuple[Decision, ...] = ("approved", "denied", "cancelled")
_COLUMNS = "request_id, subject_key, kind, path, decision, requested_by, decided_by, decided_at, signature"


@dataclass(frozen=True)
class Approval:
    request_id: str
    subject_key: str
    kind: str
    path: str
    decision: str
    requested_by: str  # keyed digest of who filed
    decided_by: str  # keyed digest of who decided
    decided_at: datetime

    def canonical(self) -> bytes:
        """The signed bytes: every field, in a fixed order, the time in UTC to the microsecond."""
        fields = {
            "v": 1,
            "request_id": self.request_id,
            "subject_key": self.subject_key,
            "kind": self.kind,
            "path": self.path,
            "decision": self.decision,
            "requested_by": self.requested_by,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at.astimezone(UTC).isoformat(timespec="microseconds"),
        }
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def actor_ref(secret: bytes, identity: str) -> str:
    """A keyed digest of a staff identity: what histories and approvals hold instead of a name or e-mail
    (the four-eyes rule compares two of them; the audit log holds the identity itself)."""
    digest = hmac.new(derived_key(secret, "console-actor"), identity.encode(), hashlib.sha256)
    return "act_" + digest.hexdigest()[:32]


class ApprovalSigner:
    """HMAC-SHA256 tags of approvals under a key derived from the service secret."""

    def __init__(self, service_secret: bytes) -> None:
        self._key = derived_key(service_secret, "request-approval")

    def sign(self, approval: Approval) -> bytes:
        return hmac.new(self._key, approval.canonical(), hashlib.sha256).digest()

    def verifies(self, approval: Approval, signature: bytes) -> bool:
        return hmac.compare_digest(self.sign(approval), signature)


class ApprovalStore:
    def __init__(self, pool: ConnectionPool, service_secret: bytes) -> None:
        self._pool = pool
        self._signer = ApprovalSigner(service_secret)

    def record(
        self,
        *,
        request_id: str,
        subject_key: str,
        kind: Kind,
        path: Path,
        decision: Decision,
        requested_by: str,
        decided_by: str,
        also: Also | None = None,
    ) -> Approval:
        """Record a decision; the one already recorded wins (``NotApproved`` when it differs), except that an
        approval may be cancelled. A four-eyes approval by the person who filed is refused. ``also`` runs in the
        same transaction (the decision's audit entry): both are written, or neither."""
        return self.record_new(
            request_id=request_id,
            subject_key=subject_key,
            kind=kind,
            path=path,
            decision=decision,
            requested_by=requested_by,
            decided_by=decided_by,
            also=also,
        )[0]

    def record_new(
        self,
        *,
        request_id: str,
        subject_key: str,
        kind: Kind,
        path: Path,
        decision: Decision,
        requested_by: str,
        decided_by: str,
        also: Also | None = None,
    ) -> tuple[Approval, bool]:
        """``record``, and whether this call wrote the row (``False``: the same decision was already there):
        only a row the caller wrote is one it may ``void``."""
        if kind not in KINDS or path not in PATHS or decision not in DECISIONS:
            raise ValueError("unknown approval kind, path or decision")
        if path == "four_eyes" and decision == "approved" and requested_by == decided_by:
            raise NotApproved("four eyes: the person who filed a request cannot approve it")
        approval = Approval(request_id, subject_key, kind, path, decision, requested_by, decided_by, datetime.now(UTC))
        signature = self._signer.sign(approval)
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                f"INSERT INTO request_approvals ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (request_id) DO UPDATE SET decision = EXCLUDED.decision, "
                "decided_by = EXCLUDED.decided_by, decided_at = EXCLUDED.decided_at, signature = EXCLUDED.signature "
                "WHERE request_approvals.decision = 'approved' AND EXCLUDED.decision = 'cancelled' "
                "AND request_approvals.subject_key = EXCLUDED.subject_key "
                "AND request_approvals.requested_by = EXCLUDED.requested_by "
                "AND request_approvals.path = EXCLUDED.path AND request_approvals.kind = EXCLUDED.kind "
                "RETURNING request_id",
                (*dataclasses.astuple(approval), signature),
            ).fetchone()
            if row is None:
                existing = self._read(conn, request_id)
                same = existing is not None and existing[0].decision == decision
                if not (same and existing is not None and existing[0].subject_key == subject_key):
                    found = existing[0].decision if existing else "decided"
                    raise NotApproved(f"this request was already {found}")
                approval = existing[0]  # the same decision again (a retry): idempotent
            if also is not None:
                also(conn)
        return approval, row is not None

    def void(self, approval: Approval, also: Also | None = None) -> bool:
        """Delete the row ``approval`` was recorded as, when it is still that row (``False`` otherwise: a later
        decision replaced it). ``also`` runs in the same transaction (the audit entry saying so)."""
        with self._pool.connection() as conn, conn.transaction():
            gone = conn.execute(
                "DELETE FROM request_approvals WHERE request_id = %s AND decision = %s AND decided_by = %s "
                "AND decided_at = %s",
                (approval.request_id, approval.decision, approval.decided_by, approval.decided_at),
            ).rowcount
            if gone and also is not None:
                also(conn)
        return bool(gone)

    def get(self, request_id: str) -> Approval | None:
        """The recorded decision, whether or not it verifies (``require`` is the check)."""
        found = self._row(request_id)
        return found[0] if found else None

    def _row(self, request_id: str) -> tuple[Approval, bytes] | None:
        with self._pool.connection() as conn:
            return self._read(conn, request_id)

    @staticmethod
    def _read(conn: Connection[Any], request_id: str) -> tuple[Approval, bytes] | None:
        row = conn.execute(f"SELECT {_COLUMNS} FROM request_approvals WHERE request_id = %s", (request_id,)).fetchone()
        if row is None:
            return None
        rid, sk, kind, path, decision, by, decided_by, at, signature = row
        return Approval(rid, sk, kind, path, decision, by, decided_by, at), bytes(signature)

    def require(self, request_id: str, subject_key: str | None = None, kind: Kind | None = None) -> Approval:
        """The request's verified approval, or ``NotApproved`` saying why (no personal data in the reason)."""
        found = self._row(request_id)
        if found is None:
            raise NotApproved("no approval is recorded for this request: nothing may be changed")
        approval, signature = found
        if not self._signer.verifies(approval, signature):
            raise NotApproved("the recorded approval's signature does not verify: nothing may be changed")
        if subject_key is not None and approval.subject_key != subject_key:
            raise NotApproved("the recorded approval names another subject: nothing may be changed")
        if kind is not None and approval.kind != kind:
            raise NotApproved(f"the recorded approval is for a {approval.kind}, not a {kind}")
        if approval.decision != "approved":
            raise NotApproved(f"this request was {approval.decision}: nothing may be changed")
        if approval.path == "four_eyes" and approval.requested_by == approval.decided_by:
            raise NotApproved("four eyes: the approval was given by the person who filed it")
        return approval
