"""Requests forwarded by privacy-request platforms, and bulk intake from CSV.

``POST /api/intake/ketch`` takes a Ketch forwarder ``DeleteRequest`` (``dsr/v1``): the identity in the
configured identity space (``ERASURE_INTAKE_IDENTITY_SPACE``, ``identityFormat: raw``: a hashed identity
cannot be matched exactly and is refused), the property code as the app, the due timestamp, the subject's
e-mail as the contact for the completion notice, and the callbacks, which are told of every state change
as ``DeleteStatusEvent``\\s (sealed in the request store: their headers are the platform's credentials).
A second request for a subject whose erasure is active attaches to it (duplicate detection by subject key)
and answers that request's id. Refusals use the protocol's ``Error`` object.

``POST /api/requests/bulk`` takes ``text/csv`` with a header row naming ``app_name`` and ``user_id`` (and
optionally ``reason``, ``contact_email``, ``due``); each row is filed on its own, and the answer lists per
line whether it was filed, attached to an active request, or refused and why, never echoing a user id.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

API_VERSION = "dsr/v1"
MAX_ROWS = 5000


class KetchIdentity(BaseModel):
    identitySpace: str
    identityFormat: str = "raw"
    identityValue: str


class KetchCallback(BaseModel):
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)


class KetchSubject(BaseModel):
    email: str | None = None


class KetchDeleteBody(BaseModel):
    property: str
    environment: str = ""
    regulation: str = ""
    jurisdiction: str = ""
    identities: list[KetchIdentity]
    callbacks: list[KetchCallback] = Field(default_factory=list)
    subject: KetchSubject = Field(default_factory=KetchSubject)
    submittedTimestamp: int | None = None
    dueTimestamp: int | None = None


class KetchMetadata(BaseModel):
    uid: str = Field(max_length=100)
    tenant: str = Field(default="", max_length=100)


class KetchDeleteRequest(BaseModel):
    apiVersion: str
    kind: str
    metadata: KetchMetadata
    request: KetchDeleteBody


def ketch_error(code: int, message: str) -> dict[str, Any]:
    status = {400: "invalid", 401: "unauthenticated", 403: "unauthorized", 409: "conflict"}.get(code, "invalid")
    return {"apiVersion": API_VERSION, "kind": "Error", "error": {"code": code, "status": status, "message": message}}


def ketch_identity(body: KetchDeleteRequest, space: str) -> str:
    """The raw identity in ``space``; ``ValueError`` (a clear, PII-free reason) when there is none."""
    if body.apiVersion != API_VERSION or body.kind != "DeleteRequest":
        raise ValueError(f"expected apiVersion {API_VERSION} and kind DeleteRequest")
    found = [i for i in body.request.identities if i.identitySpace == space]
    if not found:
        raise ValueError(f"no identity in the identity space {space!r}")
    if len(found) > 1:
        raise ValueError(f"more than one identity in the identity space {space!r}")
    if found[0].identityFormat != "raw":
        raise ValueError(f"the {space!r} identity is {found[0].identityFormat}: only raw identities match exactly")
    return found[0].identityValue


def ketch_due(body: KetchDeleteRequest) -> str | None:
    if body.request.dueTimestamp is None:
        return None
    return datetime.fromtimestamp(body.request.dueTimestamp, UTC).date().isoformat()


def ketch_response(metadata: KetchMetadata, request_id: str, due_at: datetime) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "DeleteResponse",
        "metadata": metadata.model_dump(),
        "response": {
            "status": "pending",
            "requestID": request_id,
            "expectedCompletionTimestamp": int(due_at.timestamp()),
        },
    }


def csv_rows(text: str) -> list[dict[str, str]]:
    """The rows of a bulk upload; ``ValueError`` when the header lacks a required column or it is too long."""
    reader = csv.DictReader(io.StringIO(text))
    names = set(reader.fieldnames or [])
    missing = {"app_name", "user_id"} - names
    if missing == {"user_id"} and "user_id_hex" in names:
        missing = set()
    if missing:
        raise ValueError(f"the header row must name {', '.join(sorted(missing))} (or user_id_hex)")
    rows = []
    for row in reader:
        rows.append({k: (v or "") for k, v in row.items() if k})
        if len(rows) > MAX_ROWS:
            raise ValueError(f"at most {MAX_ROWS} rows per upload")
    return rows
