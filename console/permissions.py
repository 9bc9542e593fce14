"""Who may do what: the permissions routes declare, the roles that hold each, how far each role reaches with
it, and the deny-by-default check.

Every route declares the permission it needs through a guard (``console.dependencies``) marked with
``GUARD_MARK``; a route without one that is not public stops the app at start (``assert_every_route_guarded``),
so a new route cannot be public by mistake.

Reach is decided per action, from the roles that hold *that* action (``reach``): a requester cancels, reads
and opens receipts of their own requests only, and a role that does not hold the action never widens it.
Issue 40: ownership used to be checked only when the caller's *only* role was requester, so an admin's
token with ``requester`` and ``auditor`` cancelled anyone's pending erasure (the auditor may read every
request, not cancel one). A request is someone's own when the same person filed it (``Principal.human``: a
token acts for the person who minted it), whichever of their logins or tokens they used.
"""

from __future__ import annotations

from typing import Literal

from fastapi import FastAPI
from fastapi.routing import APIRoute

from console.identity import Principal

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
#: the roles that hold a permission over the requests their own person filed only; every other holder of it
#: reaches every request (a permission missing here: every holder reaches every request)
OWN_ONLY: dict[str, frozenset[str]] = {
    "requests:read": frozenset({"requester"}),
    "requests:cancel": frozenset({"requester"}),
    "receipts:read": frozenset({"requester"}),
}
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/login", "/auth/callback", "/logout"})
#: the attribute a guard carries: the permission it checks
GUARD_MARK = "__erasure_permission__"


def may(roles: frozenset[str], permission: str) -> bool:
    """Whether any of ``roles`` holds ``permission``."""
    return bool(roles & PERMISSIONS[permission])


Reach = Literal["all", "own", "none"]


def reach(roles: frozenset[str], permission: str) -> Reach:
    """How far ``roles`` reach with ``permission``: ``all`` requests when a role holding it is not limited to
    its own; ``own`` when every role holding it is; ``none`` when no role holds it. Only the roles that hold
    this permission count: an auditor's reading never widens a requester's cancelling."""
    holding = roles & PERMISSIONS[permission]
    if not holding:
        return "none"
    return "own" if holding <= OWN_ONLY.get(permission, frozenset()) else "all"


def reaches(principal: Principal, permission: str, filer: str | None) -> bool:
    """Whether ``principal`` may use ``permission`` on a request the person ``filer`` filed (the person behind
    the filing subject: ``TokenStore.person_of``; ``None`` when unknown, which is nobody's own)."""
    where = reach(principal.roles, permission)
    return where == "all" or (where == "own" and filer is not None and filer == principal.human)


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
