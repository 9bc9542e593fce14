"""The audit log as the API and the pages hand it out: one entry as JSON, the filtered entries as an audited
CSV download."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from fastapi.responses import Response

from console.audit import AuditEntry, AuditQuery, as_csv
from console.context import Console
from console.identity import Principal

#: the most entries one export holds
EXPORT_ROWS = 100_000


def entry_json(e: AuditEntry) -> dict[str, Any]:
    """One audit entry as the API answers it (the time in ISO 8601)."""
    out = asdict(e)
    out["at"] = e.at.isoformat()
    return out


async def exported(console: Console, p: Principal, query: AuditQuery) -> Response:
    """The audit entries ``query`` selects, as a CSV download; the export is audited with its filters."""
    entries = await asyncio.to_thread(console.audit.search, query)
    filters = {k: str(v) for k, v in asdict(query).items() if v is not None and k != "limit"}
    console.audit.append(p.actor, "audit_exported", None, {"rows": len(entries), "filters": filters})
    headers = {"Content-Disposition": 'attachment; filename="audit-log.csv"'}
    return Response(as_csv(entries), media_type="text/csv; charset=utf-8", headers=headers)
