"""Who is calling: a ``Principal`` from an OIDC token or an API token, and the digest the history holds."""

from __future__ import annotations

from dataclasses import dataclass

from stores.approvals import actor_ref

__all__ = ["ROLES", "Principal", "actor_ref"]

ROLES = ("requester", "approver", "auditor", "admin")


@dataclass(frozen=True)
class Principal:
    subject: str  # the identity provider's ``sub``, or ``token:<id>`` for an API token
    roles: frozenset[str]
    via: str  # "oidc" or "token"
    name: str = ""

    def has(self, role: str) -> bool:
        return role in self.roles
