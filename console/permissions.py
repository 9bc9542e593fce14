"""Who may do what: the permissions routes declare, the roles that hold each, and the deny-by-default check.

Every route declares the permission it needs through a guard (``console.dependencies``) marked with
``GUARD_MARK``; a route without one that is not public stops the app at start (``assert_every_route_guarded``),
so a new route cannot be public by mistake.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import APIRoute

PERMISSIONS: dict[str, frozenset[str]] = {
    "self": frozenset({"requester", "approver", "auditor", "admin"}),
    "requests:file": frozenset({"requester"}),
    "requests:read": frozenset({"requester", "approver", "auditor", "admin"}),  # requesters: their own
    "requests:decide": frozenset({"approver"}),
    "requests:cancel": frozenset({"requester", "approver"}),  # requesters: their own
    "requests:extend": frozenset({"approver"}),
    "receipts:read": frozenset({"requester", "approver", "auditor"}),  # requesters: their own
    "audit:read": frozenset({"auditor", "admin"}),
    "holds:manage": frozenset({"admin"}),
    "tokens:manage": frozenset({"admin"}),
    "history:read": frozenset({"approver", "auditor", "admin"}),  # Temporal UI, decoded
    # a data subject's own words (memory text, state values) in a forget's preview: the approver who decides
    # reads them; a requester files by description and sees which items matched, not what they say
    "content:read": frozenset({"approver"}),
}
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/login", "/auth/callback", "/logout"})
#: the attribute a guard carries: the permission it checks
GUARD_MARK = "__erasure_permission__"


def may(roles: frozenset[str], permission: str) -> bool:
    """Whether any of ``roles`` holds ``permission``."""
    return bool(roles & PERMISSIONS[permission])


def route_permission(route: APIRoute) -> str | None:
    for dep in route.dependant.dependencies:
        permission = getattr(dep.call, GUARD_MARK, None)
        if permission:
            return str(permission)
    return None


def assert_every_route_guarded(app: FastAPI) -> None:
    """Deny by default: a route that declares no permission and is not public stops the app at start."""
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path not in PUBLIC_PATHS and route_permission(route) is None:
            raise RuntimeError(f"route {route.path} declares no permission")
