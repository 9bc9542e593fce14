"""Bearer JWTs from the identity provider, validated against its JWKS (``joserfc``).

The provider's discovery document names its JWKS; keys are cached and fetched again when a token names a
key id the cache does not hold (a rotation), at most once per ``refresh_interval``. A token is accepted
only with a valid signature by one of those keys (RS256 or ES256), the configured issuer and audience, and
an expiry in the future (``leeway`` seconds of clock skew). Roles come from one claim (a list, or a
space-separated string), filtered to the known roles.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from console.identity import ROLES, Principal

ALGORITHMS = ["RS256", "ES256"]


class InvalidToken(Exception):
    """The bearer token is not acceptable (the reason is safe to log: no token content)."""


class OidcVerifier:
    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        roles_claim: str = "roles",
        leeway: int = 30,
        refresh_interval: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.audience = audience
        self.roles_claim = roles_claim
        self.leeway = leeway
        self.refresh_interval = refresh_interval
        self._http = http or httpx.Client(timeout=5.0)
        self._lock = threading.Lock()
        self._keys: KeySet | None = None
        self._fetched_at = 0.0
        self._discovery: dict[str, Any] | None = None
        self.fetches = 0  # JWKS fetches so far (tests: rotation refetches, a cache hit does not)

    def discovery(self) -> dict[str, Any]:
        if self._discovery is None:
            reply = self._http.get(f"{self.issuer}/.well-known/openid-configuration")
            reply.raise_for_status()
            doc = reply.json()
            if str(doc.get("issuer", "")).rstrip("/") != self.issuer:
                raise InvalidToken("the discovery document names another issuer")
            self._discovery = doc
        return self._discovery

    def _fetch_keys(self) -> KeySet:
        reply = self._http.get(self.discovery()["jwks_uri"])
        reply.raise_for_status()
        self.fetches += 1
        self._fetched_at = time.monotonic()
        return KeySet.import_key_set(reply.json())

    def _key_set(self, kid: str | None) -> KeySet:
        with self._lock:
            stale = time.monotonic() - self._fetched_at >= self.refresh_interval
            known = self._keys is not None and (kid is None or any(k.kid == kid for k in self._keys.keys))
            if self._keys is None or (not known and stale):
                self._keys = self._fetch_keys()
            return self._keys

    def verify(self, token: str) -> Principal:
        try:
            header = jws.extract_compact(token.encode()).headers()
        except (JoseError, ValueError, UnicodeError) as exc:
            raise InvalidToken("malformed token") from exc
        try:
            decoded = jwt.decode(token, self._key_set(header.get("kid")), algorithms=ALGORITHMS)
        except (JoseError, ValueError) as exc:
            raise InvalidToken(f"signature not valid ({type(exc).__name__})") from exc
        registry = jwt.JWTClaimsRegistry(
            leeway=self.leeway,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.audience},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(decoded.claims)
        except JoseError as exc:
            raise InvalidToken(f"claims not valid ({type(exc).__name__})") from exc
        raw = decoded.claims.get(self.roles_claim, [])
        roles = raw.split() if isinstance(raw, str) else [str(r) for r in raw] if isinstance(raw, list) else []
        name = str(decoded.claims.get("email") or decoded.claims.get("name") or "")
        return Principal(str(decoded.claims["sub"]), frozenset(r for r in roles if r in ROLES), "oidc", name)
