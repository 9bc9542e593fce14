"""Liveness and readiness: ``/healthz`` (a constant) and ``/readyz`` (every service the console depends on,
``console.readiness``). Both public: probes and the Ingress reach them without a login."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from console.context import ConsoleDep

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers (a constant; no service is asked)."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a part is not ready or was not reached in time"}})
async def readyz(console: ConsoleDep) -> JSONResponse:
    """Readiness: every service the console depends on, checked at once under one deadline; one line
    (name, ok, detail) per part, 503 unless all are ok."""
    ready, body = await console.readiness.answer()
    return JSONResponse(body, status_code=200 if ready else 503)
