"""API tokens through the API: list, create (shown once, stored hashed), revoke. Admins; creating and
revoking are audited."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from console.context import ConsoleDep
from console.dependencies import Tokens
from console.tokens import MINTABLE, TokenError, TokenInfo

router = APIRouter()


class NewToken(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    roles: list[str] = Field(min_length=1)
    apps: list[str] | None = Field(default=None, max_length=100, description="the apps it may file for; none: all")


@router.get("/api/tokens")
async def list_tokens(p: Tokens, console: ConsoleDep) -> list[dict[str, Any]]:
    return [_token(t) for t in console.tokens.list()]


@router.post("/api/tokens", status_code=201)
async def create_token(body: NewToken, p: Tokens, console: ConsoleDep) -> dict[str, Any]:
    try:
        info, token = console.tokens.create(body.name, body.roles, p.human, allowed=MINTABLE, apps=body.apps)
    except TokenError as exc:
        raise HTTPException(422, str(exc)) from None
    detail = {"token_id": info.token_id, "roles": info.roles, "apps": info.apps}
    console.audit.append(p.actor, "token_created", None, detail)
    return {**_token(info), "token": token}


@router.delete("/api/tokens/{token_id}")
async def revoke_token(token_id: str, p: Tokens, console: ConsoleDep) -> dict[str, Any]:
    try:
        info = console.tokens.revoke(token_id)
    except TokenError as exc:
        raise HTTPException(404, str(exc)) from None
    console.audit.append(p.actor, "token_revoked", None, {"token_id": token_id})
    return _token(info)


def _token(info: TokenInfo) -> dict[str, Any]:
    return {
        "token_id": info.token_id,
        "name": info.name,
        "roles": info.roles,
        "created_by": info.created_by,
        "created_at": info.created_at.isoformat(),
        "revoked_at": info.revoked_at.isoformat() if info.revoked_at else None,
        "apps": info.apps,
    }
