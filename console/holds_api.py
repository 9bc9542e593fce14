"""Legal holds through the API: place or release a hold on a request's subject (admins), audited with the
reason and signalled to the running erasure (``console.erasure_requests.change_hold``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from console.context import ConsoleDep
from console.dependencies import Holds
from console.erasure_requests import change_hold

router = APIRouter()


class HoldBody(BaseModel):
    reason: str = Field(min_length=3, max_length=500)


@router.post("/api/requests/{request_id}/hold")
async def place_hold(request_id: str, body: HoldBody, p: Holds, console: ConsoleDep) -> dict[str, Any]:
    return {"changed": await change_hold(console, request_id, p, body.reason, place=True)}


@router.post("/api/requests/{request_id}/release")
async def release_hold(request_id: str, body: HoldBody, p: Holds, console: ConsoleDep) -> dict[str, Any]:
    return {"changed": await change_hold(console, request_id, p, body.reason, place=False)}
