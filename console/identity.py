"""Who is calling: a ``Principal`` from an OIDC token or an API token, and the digest the history holds."""

from __future__ import annotations

from dataclasses import dataclass

from stores.books.approvals import actor_ref

__all__ = ["ROLES", "Principal", "actor_ref"]

ROLES = ("requester", "approver", "auditor", "admin")


@dataclass(frozen=True)
class Principal:
    subject: str  # the identity provider's ``sub``, or ``token:<id>`` for an API token
    roles: frozenset[str]
    via: str  # "oidc" or "token"
    name: str = ""
    #: the person behind it: the ``sub`` itself for a login, the person who minted it for an API token
    person: str = ""
    #: the apps a requester may file for (``None``: every app); from a claim or the token's scope
    apps: frozenset[str] | None = None

    def may_file_for(self, app_name: str) -> bool:
        return self.apps is None or app_name in self.apps

    def has(self, role: str) -> bool:
        return role in self.roles

    @property
    def actor(self) -> str:
        """How the audit log names who acted: the person, and the token when one was used."""
        return f"{self.person} via {self.subject}" if self.person and self.person != self.subject else self.subject

    @property
    def human(self) -> str:
        """Who decides, for four eyes: a token acts for the person who minted it, never as someone new."""
        return self.person or self.subject
