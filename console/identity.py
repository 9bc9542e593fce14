"""Who is calling: a ``Principal`` from an OIDC token or an API token, and the digest the history holds."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from stores.identity import derived_key

ROLES = ("requester", "approver", "auditor", "admin")


@dataclass(frozen=True)
class Principal:
    subject: str  # the identity provider's ``sub``, or ``token:<id>`` for an API token
    roles: frozenset[str]
    via: str  # "oidc" or "token"
    name: str = ""

    def has(self, role: str) -> bool:
        return role in self.roles


def actor_ref(secret: bytes, principal_subject: str) -> str:
    """A keyed digest of a staff identity: what the workflow history holds instead of a name or e-mail
    (the approval rule compares two of them; the audit log holds the identity itself)."""
    digest = hmac.new(derived_key(secret, "console-actor"), principal_subject.encode(), hashlib.sha256)
    return "act_" + digest.hexdigest()[:32]
