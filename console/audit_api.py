"""The audit log through the API: search it, export it as CSV (the export itself audited), verify its hash
chain. Auditors and admins."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from console.audit import AuditQuery
from console.audit_export import EXPORT_ROWS, entry_json, exported
from console.context import ConsoleDep
from console.dependencies import Audits

router = APIRouter()


@dataclass
class AuditFilters:
    """The audit API's filters (query parameters), all optional."""

    request_id: str | None = None
    action: str | None = None
    actor: str | None = None  # a part of the staff identity, any case
    since: datetime | None = None
    until: datetime | None = None

    def query(self, limit: int) -> AuditQuery:
        return AuditQuery(self.request_id, self.action, self.actor, self.since, self.until, limit)


@router.get("/api/audit")
async def audit(
    p: Audits, console: ConsoleDep, f: Annotated[AuditFilters, Depends()], limit: int = 500
) -> list[dict[str, Any]]:
    """Newest first; every filter optional (``actor``: a part of the staff identity, any case)."""
    query = f.query(min(max(limit, 1), 5000))
    return [entry_json(e) for e in await asyncio.to_thread(console.audit.search, query)]


@router.get("/api/audit/export")
async def audit_export(p: Audits, console: ConsoleDep, f: Annotated[AuditFilters, Depends()]) -> Response:
    """The filtered entries as CSV (at most 100,000), the export itself audited."""
    return await exported(console, p, f.query(EXPORT_ROWS))


@router.get("/api/audit/verify")
async def audit_verify(p: Audits, console: ConsoleDep) -> dict[str, Any]:
    return asdict(await asyncio.to_thread(console.audit.verify))
