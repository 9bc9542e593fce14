"""Short-lived JWTs for Temporal's stock authorizer, from the identity provider's client-credentials grant.

A self-hosted Temporal frontend authorises calls with its default claim mapper and default authorizer
(``deploy/temporal/frontend-mtls.yaml``): the bearer token is a JWT signed by a key from the provider's
JWKS, whose ``permissions`` claim (``["default:write"]``) gives the caller a role in the namespace. Only
the worker's and the console's clients hold ``write``, which start, signal, update and terminate; Temporal UI
behind the console gets ``read``. Nothing is built into the server: both are Temporal's own components.

The worker and the console fetch their token with the OAuth 2.0 client-credentials grant (RFC 6749 §4.4:
``ERASURE_TEMPORAL_OAUTH_TOKEN_URL``, ``..._CLIENT_ID``, ``..._CLIENT_SECRET``) and fetch the next one
when a quarter of its lifetime is left (``TokenSource.due``): ``workers.credential_reload`` hands it to the
running client (``Client.api_key``: the SDK sends it as ``authorization: Bearer`` with the next call, over
TLS only). A refused or failed fetch raises ``TokenRefused`` naming the endpoint and the status (never the
secret, never the token); the current token stays in use until it expires.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from workers.errors import ErasureCliError, ExitCode

#: fetch the next token when this share of the current one's lifetime is left
MARGIN = 0.25
#: an ``expires_in`` the provider did not give is taken as this (seconds): a token is never used for ever
DEFAULT_LIFETIME = 300.0
TIMEOUT = 10.0


class TokenRefused(ErasureCliError):
    """The token endpoint did not give a token (unreachable, refused the client, or answered nonsense)."""

    exit_code = ExitCode.UNREACHABLE


@dataclass(frozen=True)
class ClientCredentials:
    token_url: str
    client_id: str
    client_secret: str

    def __repr__(self) -> str:  # never the secret, in a traceback or a log line
        return f"ClientCredentials(token_url={self.token_url!r}, client_id={self.client_id!r})"


class TokenSource:
    """One client's current token and when to fetch the next (``token``, ``due``, ``fetch``)."""

    def __init__(
        self,
        credentials: ClientCredentials,
        *,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.credentials = credentials
        self._clock = clock
        self._transport = transport
        self._token = ""
        self._refresh_at = 0.0

    def due(self) -> bool:
        return not self._token or self._clock() >= self._refresh_at

    def seconds_until_due(self) -> float:
        return 0.0 if not self._token else max(0.0, self._refresh_at - self._clock())

    async def token(self) -> str:
        """The current token, fetched first when none is held or it is due."""
        if self.due():
            return await self.fetch()
        return self._token

    async def fetch(self) -> str:
        """Ask the token endpoint for a new token (``TokenRefused`` when it gives none) and keep it."""
        url = self.credentials.token_url
        asked = self._clock()
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT, transport=self._transport, trust_env=False) as http:
                reply = await http.post(
                    url,
                    data={"grant_type": "client_credentials"},
                    auth=(self.credentials.client_id, self.credentials.client_secret),
                    headers={"accept": "application/json"},
                )
        except httpx.HTTPError as exc:
            raise TokenRefused(f"Temporal token endpoint {url}: {type(exc).__name__}") from None
        if reply.status_code != 200:
            raise TokenRefused(f"Temporal token endpoint {url} answered {reply.status_code}{_oauth_error(reply)}")
        try:
            body = reply.json()
            token = body["access_token"]
            lifetime = float(body.get("expires_in") or DEFAULT_LIFETIME)
        except (ValueError, KeyError, TypeError):
            raise TokenRefused(f"Temporal token endpoint {url}: no access_token in its answer") from None
        if not isinstance(token, str) or not token or lifetime <= 0:
            raise TokenRefused(f"Temporal token endpoint {url}: an empty or expired token")
        self._token = token
        self._refresh_at = asked + lifetime * (1 - MARGIN)
        return token


def _oauth_error(reply: httpx.Response) -> str:
    """The RFC 6749 §5.2 ``error`` code of a refusal (a fixed vocabulary; the description is not repeated)."""
    try:
        error = reply.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return f" ({error})" if isinstance(error, str) and error.isascii() and len(error) <= 40 else ""


_sources: dict[ClientCredentials, TokenSource] = {}


def token_source(credentials: ClientCredentials | None) -> TokenSource | None:
    """The process's one source for these credentials (the first connection and the refresher share it)."""
    if credentials is None:
        return None
    if credentials not in _sources:
        _sources[credentials] = TokenSource(credentials)
    return _sources[credentials]
