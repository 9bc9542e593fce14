"""Bearer JWTs from the identity provider, validated against its JWKS (``joserfc``).

The provider's discovery document names its JWKS; keys are cached for ``max_age`` seconds at most (a key the
provider removed stops being trusted within that time, whether or not a token names an unknown key id), and
fetched again sooner when a token names a key id the cache does not hold (a rotation), at most once per
``refresh_interval``. A fetch that fails raises ``IdpUnavailable`` (the console answers 503): keys older than
``max_age`` are never used instead. A token is accepted
only with a valid signature by one of those keys (RS256 or ES256), the configured issuer and audience, and
an expiry in the future (``leeway`` seconds of clock skew). Only access tokens are bearer tokens: an ID token
(one carrying a ``nonce``, ``typ: ID`` or an ``id+jwt`` header) is refused; ``verify_id_token`` checks the
login's ID token and its nonce instead. Roles come from one claim (a list, or a space-separated string),
filtered to the known roles.
"""

from __future__ import annotations

import hmac
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


class IdpUnavailable(Exception):
    """The identity provider's discovery document or keys could not be fetched (no stale keys are used)."""


class OidcVerifier:
    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        roles_claim: str = "roles",
        apps_claim: str = "erasure_apps",
        leeway: int = 30,
        refresh_interval: float = 30.0,
        max_age: float = 300.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.audience = audience
        self.roles_claim = roles_claim
        self.apps_claim = apps_claim
        self.leeway = leeway
        self.refresh_interval = refresh_interval
        self.max_age = max_age
        self._http = http or httpx.Client(timeout=5.0)
        self._lock = threading.Lock()
        self._keys: KeySet | None = None
        self._fetched_at = 0.0
        self._discovery: dict[str, Any] | None = None
        self.fetches = 0  # JWKS fetches so far (tests: rotation refetches, a cache hit does not)

    def discovery(self) -> dict[str, Any]:
        if self._discovery is None:
            try:
                reply = self._http.get(f"{self.issuer}/.well-known/openid-configuration")
                reply.raise_for_status()
                doc = reply.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise IdpUnavailable(f"the identity provider's discovery failed ({type(exc).__name__})") from None
            if str(doc.get("issuer", "")).rstrip("/") != self.issuer:
                raise InvalidToken("the discovery document names another issuer")
            self._discovery = doc
        return self._discovery

    def _fetch_keys(self) -> KeySet:
        try:
            reply = self._http.get(self.discovery()["jwks_uri"])
            reply.raise_for_status()
            keys = KeySet.import_key_set(reply.json())
        except (httpx.HTTPError, ValueError, JoseError) as exc:
            raise IdpUnavailable(f"the identity provider's keys could not be fetched ({type(exc).__name__})") from None
        self.fetches += 1
        self._fetched_at = time.monotonic()
        return keys

    def _key_set(self, kid: str | None) -> KeySet:
        with self._lock:
            age = time.monotonic() - self._fetched_at
            if self._keys is not None and age >= self.max_age:
                self._keys = None  # too old to trust: fetched again, or nothing (503)
            known = self._keys is not None and (kid is None or any(k.kid == kid for k in self._keys.keys))
            if self._keys is None or (not known and age >= self.refresh_interval):
                self._keys = self._fetch_keys()
            return self._keys

    def _decoded(self, token: str, audience: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(header, claims) of a token signed by the provider for ``audience``, still valid."""
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
            aud={"essential": True, "value": audience},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(decoded.claims)
        except JoseError as exc:
            raise InvalidToken(f"claims not valid ({type(exc).__name__})") from exc
        return dict(header), dict(decoded.claims)

    def verify_id_token(self, token: str, client_id: str, nonce: str) -> str:
        """The login's ID token: signed, for this client, carrying the nonce the login sent; its ``sub``."""
        _header, claims = self._decoded(token, client_id)
        given = claims.get("nonce")
        if not isinstance(given, str) or not hmac.compare_digest(given, nonce):
            raise InvalidToken("the ID token's nonce is not the one this login sent")
        return str(claims["sub"])

    def verify(self, token: str) -> Principal:
        """An access token presented as a bearer (an ID token is refused)."""
        header, claims = self._decoded(token, self.audience)
        if "nonce" in claims or str(claims.get("typ", "")).lower() == "id" or header.get("typ") == "id+jwt":
            raise InvalidToken("an ID token is not a bearer token: send the access token")
        decoded_claims = claims
        raw = decoded_claims.get(self.roles_claim, [])
        roles = raw.split() if isinstance(raw, str) else [str(r) for r in raw] if isinstance(raw, list) else []
        name = str(decoded_claims.get("email") or decoded_claims.get("name") or "")
        raw_apps = decoded_claims.get(self.apps_claim)
        apps = (
            None
            if raw_apps is None
            else frozenset(raw_apps.split() if isinstance(raw_apps, str) else [str(a) for a in raw_apps])
            if isinstance(raw_apps, str | list)
            else frozenset()  # a claim in a shape nobody meant: no app rather than every app
        )
        roles_given = frozenset(r for r in roles if r in ROLES)
        return Principal(str(decoded_claims["sub"]), roles_given, "oidc", name, apps=apps)
