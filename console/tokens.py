"""API tokens for machine integrations: shown once, stored as a SHA-256 hash, scoped to roles, revocable.

A token reads ``et_<token id>_<secret>``; the database holds ``sha256(token)`` only, so a copy of the table
lets nobody call the API. Lookups are by the hash's unique index.

A token acts for the person who minted it (``Principal.person``): four eyes compares people, so an admin
who mints a requester token and an approver token still cannot file and approve alone. The roles that
decide or govern (``approver``, ``admin``) are never minted into a token from the console
(``MINTABLE``): an approval is a person's signed-in decision, and an admin cannot grant themselves a role.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg_pool import ConnectionPool

from console.identity import ROLES, Principal

#: roles a token may carry when minted from the console (the CLI's operator may mint any)
MINTABLE = frozenset({"requester", "auditor"})


class TokenError(ValueError):
    """A token request that cannot be done (unknown role, unknown token): nothing was changed."""


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    name: str
    roles: list[str]
    created_by: str
    created_at: datetime
    revoked_at: datetime | None
    apps: list[str] | None = None  # the apps it may file for (None: every app)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    def create(
        self,
        name: str,
        roles: list[str],
        created_by: str,
        *,
        allowed: frozenset[str] = frozenset(ROLES),
        apps: list[str] | None = None,
    ) -> tuple[TokenInfo, str]:
        """A new token: its record and the token itself (shown once, never stored). ``allowed``: the roles
        this caller may mint (the console passes ``MINTABLE``)."""
        unknown = sorted(set(roles) - set(ROLES))
        if unknown or not roles:
            raise TokenError(f"roles must be some of {', '.join(ROLES)} (got {', '.join(unknown) or 'none'})")
        refused = sorted(set(roles) - allowed)
        if refused:
            raise TokenError(
                f"a token cannot carry {', '.join(refused)}: approvals and administration are a person's, "
                "signed in (tokens may carry " + ", ".join(sorted(allowed)) + ")"
            )
        if not name.strip() or len(name) > 100:
            raise TokenError("a token needs a name of 1-100 characters")
        scope = sorted({a.strip() for a in apps if a.strip()}) if apps is not None else None
        if apps is not None and not scope:
            raise TokenError("a token scoped to apps needs at least one app name")
        token_id = secrets.token_hex(6)
        token = f"et_{token_id}_{secrets.token_urlsafe(32)}"
        now = datetime.now(UTC)
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO api_tokens (token_id, name, token_hash, roles, created_by, created_at, apps) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (token_id, name, _hash(token), sorted(set(roles)), created_by, now, scope),
            )
        return TokenInfo(token_id, name, sorted(set(roles)), created_by, now, None, scope), token

    def authenticate(self, token: str) -> Principal | None:
        if not token.startswith("et_"):
            return None
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT token_id, name, roles, created_by, apps FROM api_tokens "
                "WHERE token_hash = %s AND revoked_at IS NULL",
                (_hash(token),),
            ).fetchone()
        if row is None:
            return None
        apps = frozenset(row[4]) if row[4] is not None else None
        return Principal(f"token:{row[0]}", frozenset(row[2]), "token", str(row[1]), person=str(row[3]), apps=apps)

    def person_of(self, subject: str) -> str:
        """The person behind a principal's subject: the minter of a token (``token:<id>``), else itself."""
        if not subject.startswith("token:"):
            return subject
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT created_by FROM api_tokens WHERE token_id = %s", (subject.removeprefix("token:"),)
            ).fetchone()
        return str(row[0]) if row else subject

    def list(self) -> list[TokenInfo]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT token_id, name, roles, created_by, created_at, revoked_at, apps FROM api_tokens "
                "ORDER BY created_at"
            ).fetchall()
        return [TokenInfo(r[0], r[1], list(r[2]), r[3], r[4], r[5], list(r[6]) if r[6] else None) for r in rows]

    def revoke(self, token_id: str) -> TokenInfo:
        with self._pool.connection() as conn:
            row = conn.execute(
                "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, %s) WHERE token_id = %s "
                "RETURNING token_id, name, roles, created_by, created_at, revoked_at, apps",
                (datetime.now(UTC), token_id),
            ).fetchone()
        if row is None:
            raise TokenError(f"no token {token_id!r}")
        return TokenInfo(row[0], row[1], list(row[2]), row[3], row[4], row[5], list(row[6]) if row[6] else None)
