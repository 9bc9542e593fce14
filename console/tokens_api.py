"""API tokens through the API: list, create (shown once, stored hashed, one role, expiring), rotate, revoke.
Admins; creating, rotating and revoking are audited (a rotation as the new token's ``token_created`` naming
the token it replaces, and the old one's ``token_revoked`` naming its replacement)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from console.context import ConsoleDep
from console.dependencies import Tokens
from console.tokens import MINTABLE, TokenError, TokenInfo, UnknownToken, rotate_audited

router = APIRouter()


class NewToken(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    roles: list[str] = Field(min_length=1, description="exactly one role: roles on one token would combine")
    apps: list[str] | None = Field(default=None, max_length=100, description="the apps it may file for; none: all")
    expires_in_days: int | None = Field(
        default=None, ge=1, description="shorter than the configured token lifetime (none: the lifetime)"
    )


@router.get("/api/tokens")
async def list_tokens(p: Tokens, console: ConsoleDep) -> list[dict[str, Any]]:
    return [token_json(t) for t in console.tokens.list()]


@router.post("/api/tokens", status_code=201)
async def create_token(body: NewToken, p: Tokens, console: ConsoleDep) -> dict[str, Any]:
    try:
        info, token = console.tokens.create(
            body.name, body.roles, p.human, allowed=MINTABLE, apps=body.apps, expires_in_days=body.expires_in_days
        )
    except TokenError as exc:
        raise HTTPException(422, str(exc)) from None
    detail = {"token_id": info.token_id, "roles": info.roles, "apps": info.apps}
    console.audit.append(p.actor, "token_created", None, detail)
    return {**token_json(info), "token": token}


@router.post("/api/tokens/{token_id}/rotate", status_code=201)
async def rotate_token(token_id: str, p: Tokens, console: ConsoleDep) -> dict[str, Any]:
    """A replacement with the same name, role and apps and a fresh lifetime (shown once); the old token is
    revoked in the same transaction, with its audit entries. 404: no such token; 409: a revoked one, or a role
    you may not mint."""
    try:
        info, token = rotate_audited(console.tokens, console.audit, p, token_id)
    except UnknownToken as exc:
        raise HTTPException(404, str(exc)) from None
    except TokenError as exc:
        raise HTTPException(409, str(exc)) from None
    return {**token_json(info), "token": token}


@router.delete("/api/tokens/{token_id}")
async def revoke_token(token_id: str, p: Tokens, console: ConsoleDep) -> dict[str, Any]:
    try:
        info = console.tokens.revoke(token_id)
    except TokenError as exc:
        raise HTTPException(404, str(exc)) from None
    console.audit.append(p.actor, "token_revoked", None, {"token_id": token_id})
    return token_json(info)


def token_json(info: TokenInfo) -> dict[str, Any]:
    return {
        "token_id": info.token_id,
        "name": info.name,
        "roles": info.roles,
        "created_by": info.created_by,
        "created_at": info.created_at.isoformat(),
        "expires_at": info.expires_at.isoformat() if info.expires_at else None,
        "last_used_at": info.last_used_at.isoformat() if info.last_used_at else None,
        "revoked_at": info.revoked_at.isoformat() if info.revoked_at else None,
        "revoked_reason": info.revoked_reason,
        "rotated_from": info.rotated_from,
        "apps": info.apps,
    }
