"""``Console``: what the routes use (the platform's request store, Temporal, the verifiers, the audit log),
held by the app (``app.state.console``) and reached from a request with ``console_of``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from temporalio.client import Client
from temporalio.converter import PayloadCodec

from console.audit import AuditLog
from console.oidc import OidcVerifier
from console.readiness import Readiness
from console.sessions import SessionStore
from console.telemetry import ConsoleMetrics
from console.tokens import TokenStore
from stores.platform import Platform
from workers.settings import Settings


@dataclass
class Console:
    """What the routes use: the platform's request store, Temporal, the verifiers and the audit log."""

    settings: Settings
    platform: Platform
    client: Client
    oidc: OidcVerifier | None
    tokens: TokenStore
    audit: AuditLog
    actor_secret: bytes
    receipt_public_key: Any  # Ed25519PublicKey
    waiting_seconds: int = 0
    intake_identity_space: str = "user_id"
    oidc_client_id: str = ""  # the console's pages (login with PKCE); empty: the API only
    public_url: str = ""  # where browsers reach the console (the login's redirect URI)
    codec: PayloadCodec | None = None  # Temporal's payload codec: /codec/decode for Temporal UI
    codec_origins: frozenset[str] = frozenset()  # browser origins allowed to call /codec/decode
    temporal_ui_upstream: str | None = None  # a Temporal UI (public path /temporal) proxied behind the login
    temporal_ui_token: Callable[[], Awaitable[str]] | None = None  # the read-only JWT added to the UI's calls
    cross_site_cookie: bool = False  # SameSite=None session cookie (a Temporal UI on another site decodes)
    sessions: SessionStore | None = None  # server-side page sessions (logout ends them); None: from the pool
    readiness: Readiness = field(default_factory=lambda: Readiness([]))  # /readyz's parts (none: never ready)
    metrics: ConsoleMetrics = field(default_factory=ConsoleMetrics)  # Prometheus, served on a port of its own

    def __post_init__(self) -> None:
        if self.sessions is None:
            self.sessions = SessionStore(self.platform.pool)
        self.metrics.count_open_requests(self.platform.requests.open_by_state)

    @property
    def login_redirect_uri(self) -> str:
        """Where the identity provider sends the browser back after a login."""
        return f"{self.public_url.rstrip('/')}/auth/callback"


def console_of(request: Request) -> Console:
    """The console of the app serving ``request``."""
    console: Console = request.app.state.console
    return console


#: a route's console (a dependency: FastAPI hands it in, nothing appears in the OpenAPI document)
ConsoleDep = Annotated[Console, Depends(console_of)]
