"""API tokens for machine integrations: shown once, stored as a SHA-256 hash, one role each, expiring,
revocable and rotatable.

A token reads ``et_<token id>_<secret>``; the database holds ``sha256(token)`` only, so a copy of the table
lets nobody call the API. Lookups are by the hash's unique index.

A token acts for the person who minted it (``Principal.person``): four eyes compares people, so an admin
who mints a requester token and an approver token still cannot file and approve alone. The roles that
decide or govern (``approver``, ``admin``) are never minted into a token from the console
(``MINTABLE``): an approval is a person's signed-in decision, and an admin cannot grant themselves a role.

Issue 40: a token carries exactly one role. Two roles on one token combined into a power neither has
(``requester`` and ``auditor`` cancelled anyone's request); tokens minted with several before are revoked
by migration 0036 and refused at the door whatever their row says (``TokenRefused``). Every token expires
(``lifetime_days``, the setting ``api_token_lifetime_days``: the default and the longest a mint may ask for),
records its last use (written at most once a minute, so a busy integration does not write on every call)
and rotates: a replacement with the same name, role and apps, minted by whoever rotates it (the new token
acts for them), and the old one revoked, in one transaction.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from psycopg import Connection
from psycopg_pool import ConnectionPool

from console.identity import ROLES, Principal

if TYPE_CHECKING:
    from console.audit import AuditLog

#: roles a token may carry when minted from the console (the CLI's operator may mint any)
MINTABLE = frozenset({"requester", "auditor"})
#: how stale a token's recorded last use may get before a call writes it again
LAST_USE_RESOLUTION = timedelta(minutes=1)
_COLUMNS = (
    "token_id, name, roles, created_by, created_at, revoked_at, apps, expires_at, last_used_at, rotated_from, "
    "revoked_reason"
)


class TokenError(ValueError):
    """A token request that cannot be done (unknown role, several roles, revoked token): nothing was changed."""


class UnknownToken(TokenError):
    """No token has that id."""


class TokenRefused(TokenError):
    """A token that exists but may not be used (expired, or carrying several roles): the reason says which."""


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    name: str
    roles: list[str]
    created_by: str
    created_at: datetime
    revoked_at: datetime | None
    apps: list[str] | None = None  # the apps it may file for (None: every app)
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    rotated_from: str | None = None  # the token this one replaced
    revoked_reason: str | None = None  # why it was revoked, when it says more than "revoked"

    @property
    def state(self) -> str:
        """What the tokens page shows: revoked (and why), expired, or active."""
        if self.revoked_at is not None:
            return f"revoked ({self.revoked_reason})" if self.revoked_reason else "revoked"
        if self.expires_at is not None and self.expires_at <= datetime.now(UTC):
            return "expired"
        return "active"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _info(row: Any) -> TokenInfo:
    return TokenInfo(row[0], row[1], list(row[2]), row[3], row[4], row[5], list(row[6]) if row[6] else None, *row[7:11])


def _one_role(roles: list[str], allowed: frozenset[str]) -> str:
    """The one role a new token carries (``TokenError`` when unknown, several or not ``allowed``)."""
    unknown = sorted(set(roles) - set(ROLES))
    if unknown or not roles:
        raise TokenError(f"roles must be some of {', '.join(ROLES)} (got {', '.join(unknown) or 'none'})")
    refused = sorted(set(roles) - allowed)
    if refused:
        raise TokenError(
            f"a token cannot carry {', '.join(refused)}: approvals and administration are a person's, "
            "signed in (tokens may carry " + ", ".join(sorted(allowed)) + ")"
        )
    if len(set(roles)) != 1:
        raise TokenError(
            f"a token carries one role (got {', '.join(sorted(set(roles)))}): roles on one token combine "
            "into powers neither has; mint one token per role"
        )
    return roles[0]


class TokenStore:
    def __init__(self, pool: ConnectionPool, lifetime_days: int = 90) -> None:
        self._pool = pool
        self.lifetime_days = lifetime_days

    def create(
        self,
        name: str,
        roles: list[str],
        created_by: str,
        *,
        allowed: frozenset[str] = frozenset(ROLES),
        apps: list[str] | None = None,
        expires_in_days: int | None = None,
    ) -> tuple[TokenInfo, str]:
        """A new token: its record and the token itself (shown once, never stored). ``allowed``: the roles
        this caller may mint (the console passes ``MINTABLE``); ``expires_in_days``: shorter than the
        lifetime (``None``: the lifetime)."""
        role = _one_role(roles, allowed)
        if not name.strip() or len(name) > 100:
            raise TokenError("a token needs a name of 1-100 characters")
        scope = sorted({a.strip() for a in apps if a.strip()}) if apps is not None else None
        if apps is not None and not scope:
            raise TokenError("a token scoped to apps needs at least one app name")
        days = self.lifetime_days if expires_in_days is None else expires_in_days
        if not 1 <= days <= self.lifetime_days:
            raise TokenError(f"a token lives 1 to {self.lifetime_days} days (asked for {days})")
        with self._pool.connection() as conn:
            return self._insert(conn, name, role, created_by, scope, days, None)

    def _insert(
        self,
        conn: Connection[Any],
        name: str,
        role: str,
        created_by: str,
        apps: list[str] | None,
        days: int,
        rotated_from: str | None,
    ) -> tuple[TokenInfo, str]:
        token_id = secrets.token_hex(6)
        token = f"et_{token_id}_{secrets.token_urlsafe(32)}"
        now = datetime.now(UTC)
        row = conn.execute(
            "INSERT INTO api_tokens (token_id, name, token_hash, roles, created_by, created_at, apps, expires_at, "
            f"rotated_from) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
            (token_id, name, _hash(token), [role], created_by, now, apps, now + timedelta(days=days), rotated_from),
        ).fetchone()
        return _info(row), token

    def authenticate(self, token: str) -> Principal | None:
        """The principal a token acts as; ``None`` for an unknown or revoked token, ``TokenRefused`` (with
        the reason) for an expired one or one carrying several roles. Records the use, at most once a
        minute."""
        if not token.startswith("et_"):
            return None
        now = datetime.now(UTC)
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT token_id, name, roles, created_by, apps, expires_at, last_used_at FROM api_tokens "
                "WHERE token_hash = %s AND revoked_at IS NULL",
                (_hash(token),),
            ).fetchone()
            if row is None:
                return None
            token_id, name, roles, created_by, apps, expires_at, last_used_at = row
            if len(roles) != 1:
                raise TokenRefused(
                    f"API token {token_id} carries several roles ({', '.join(sorted(roles))}): a token carries "
                    "one role; mint one token per role"
                )
            if expires_at <= now:
                raise TokenRefused(f"API token {token_id} expired at {expires_at:%Y-%m-%d %H:%M} UTC: rotate it")
            if last_used_at is None or now - last_used_at >= LAST_USE_RESOLUTION:
                conn.execute(  # the condition again: two calls at once write once
                    "UPDATE api_tokens SET last_used_at = %s WHERE token_id = %s "
                    "AND (last_used_at IS NULL OR last_used_at <= %s)",
                    (now, token_id, now - LAST_USE_RESOLUTION),
                )
        scope = frozenset(apps) if apps is not None else None
        return Principal(f"token:{token_id}", frozenset(roles), "token", str(name), person=str(created_by), apps=scope)

    def person_of(self, subject: str) -> str:
        """The person behind a principal's subject: the minter of a token (``token:<id>``), else itself."""
        if not subject.startswith("token:"):
            return subject
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT created_by FROM api_tokens WHERE token_id = %s", (subject.removeprefix("token:"),)
            ).fetchone()
        return str(row[0]) if row else subject

    def subjects_of(self, person: str) -> frozenset[str]:
        """Every subject that acts for ``person``: their own, and each token they minted (revoked ones too:
        what they filed stays theirs)."""
        with self._pool.connection() as conn:
            rows = conn.execute("SELECT token_id FROM api_tokens WHERE created_by = %s", (person,)).fetchall()
        return frozenset({person, *(f"token:{r[0]}" for r in rows)})

    def list(self) -> list[TokenInfo]:
        with self._pool.connection() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM api_tokens ORDER BY created_at").fetchall()
        return [_info(r) for r in rows]

    def revoke(self, token_id: str, reason: str | None = None) -> TokenInfo:
        with self._pool.connection() as conn:
            row = conn.execute(
                "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, %s), "
                "revoked_reason = CASE WHEN revoked_at IS NULL THEN %s ELSE revoked_reason END "
                f"WHERE token_id = %s RETURNING {_COLUMNS}",
                (datetime.now(UTC), reason, token_id),
            ).fetchone()
        if row is None:
            raise UnknownToken(f"no token {token_id!r}")
        return _info(row)

    def rotate(
        self,
        token_id: str,
        by: str,
        *,
        allowed: frozenset[str] = frozenset(ROLES),
        also: Callable[[Connection[Any], TokenInfo, TokenInfo], None] | None = None,
    ) -> tuple[TokenInfo, str, TokenInfo]:
        """A replacement for a live token (same name, role and apps, a fresh lifetime, minted by ``by``) and
        the old one revoked, in one transaction with ``also(conn, new, old)`` (the audit entries): (the new
        record, the new token, the old record). ``UnknownToken`` for no such token; ``TokenError`` for a
        revoked one (rotating does not bring a token back) or a role ``by`` may not mint."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM api_tokens WHERE token_id = %s FOR UPDATE", (token_id,)
            ).fetchone()
            if row is None:
                raise UnknownToken(f"no token {token_id!r}")
            old = _info(row)
            if old.revoked_at is not None:
                raise TokenError(f"token {token_id} is revoked: mint a new one")
            role = _one_role(old.roles, allowed)
            new, token = self._insert(conn, old.name, role, by, old.apps, self.lifetime_days, token_id)
            revoked = conn.execute(
                f"UPDATE api_tokens SET revoked_at = %s, revoked_reason = %s WHERE token_id = %s RETURNING {_COLUMNS}",
                (new.created_at, f"rotated: replaced by {new.token_id}", token_id),
            ).fetchone()
            old = _info(revoked)
            if also is not None:
                also(conn, new, old)
        return new, token, old


def rotate_audited(tokens: TokenStore, audit: AuditLog, p: Principal, token_id: str) -> tuple[TokenInfo, str]:
    """Rotate ``token_id`` as ``p`` from the console (the API and the tokens page): the replacement acts for
    ``p``, carries only a role the console may mint, and the rotation commits with its audit entries (the
    new token's ``token_created`` naming the one it replaces, the old one's ``token_revoked`` naming its
    replacement) or not at all."""

    def audited(conn: Connection[Any], new: TokenInfo, old: TokenInfo) -> None:
        created = {"token_id": new.token_id, "roles": new.roles, "apps": new.apps, "replaces": old.token_id}
        audit.append(p.actor, "token_created", None, created, conn=conn)
        audit.append(p.actor, "token_revoked", None, {"token_id": old.token_id, "replaced_by": new.token_id}, conn=conn)

    new, token, _old = tokens.rotate(token_id, p.human, allowed=MINTABLE, also=audited)
    return new, token
