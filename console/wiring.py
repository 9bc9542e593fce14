"""Build the console from settings: the OIDC verifier, the token store, the audit log, the receipt key, the
readiness check's parts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio.client import Client

from console.audit import AuditLog
from console.context import Console
from console.oidc import OidcVerifier
from console.readiness import Readiness
from console.tokens import TokenStore
from stores.platform import Platform
from verifier.receipts.signing import signing_key
from workers.check import console_parts
from workers.codec import EncryptionCodec
from workers.local_secrets import Secrets
from workers.settings import Settings
from workers.temporal_client import oauth_credentials
from workers.temporal_token import token_source


def build_console(settings: Settings, secrets: Secrets, platform: Platform, client: Client) -> Console:
    oidc = (
        OidcVerifier(
            settings.oidc_issuer,
            settings.oidc_audience,
            roles_claim=settings.oidc_roles_claim,
            apps_claim=settings.oidc_apps_claim,
        )
        if settings.oidc_issuer
        else None
    )
    return Console(
        settings=settings,
        platform=platform,
        client=client,
        oidc=oidc,
        tokens=TokenStore(platform.pool, settings.api_token_lifetime_days),
        audit=AuditLog.of(platform),
        actor_secret=secrets.subject_key_secret,
        receipt_public_key=signing_key(secrets.signing_key).public_key(),
        waiting_seconds=settings.approval_waiting_seconds,
        intake_identity_space=settings.intake_identity_space,
        oidc_client_id=settings.oidc_client_id,
        public_url=settings.console_base_url,
        codec=EncryptionCodec(secrets.payload_key, secrets.payload_old_keys),
        codec_origins=settings.codec_origins,
        temporal_ui_upstream=settings.ui_proxy_upstream,
        temporal_ui_token=_ui_token(settings),
        cross_site_cookie=settings.console_cross_site_cookie,
        readiness=Readiness(console_parts(settings, secrets)),
    )


def _ui_token(settings: Settings) -> Callable[[], Awaitable[str]] | None:
    """The read-only Temporal token the console adds to every call it proxies to Temporal UI, if configured."""
    source = token_source(oauth_credentials(settings, ui=True))
    return source.token if source is not None else None
