"""The console (``erasure serve``): login (OIDC), rate limits, approval, API tokens, forwarded intake, webhooks
and the data subject's completion notice."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr

from workers.settings.names import Port, file_help


class ConsoleSettings(BaseModel):
    """The compliance team's API and console."""

    oidc_issuer: str = Field(
        default="",
        description="OIDC issuer URL of the identity provider the console trusts (its discovery document and JWKS "
        "are fetched from it). Empty: API tokens only.",
    )
    oidc_audience: str = Field(default="erasure-console", description="Audience the console's bearer JWTs must name.")
    oidc_roles_claim: str = Field(
        default="roles", description="JWT claim holding the caller's roles (requester, approver, auditor, admin)."
    )
    oidc_apps_claim: str = Field(
        default="erasure_apps",
        description="JWT claim listing the apps a requester may file for (a list or a space-separated string); "
        "absent: every app.",
    )
    serve_port: Port = Field(default=8088, description="Port of 'erasure serve' (the compliance API).")
    oidc_client_id: str = Field(
        default="erasure-console",
        description="OIDC client id of the console's pages (a public client: authorization code with PKCE).",
    )
    console_url: str = Field(
        default="",
        description="Where browsers reach the console (its login redirect URI). Empty: "
        "http://127.0.0.1:<ERASURE_SERVE_PORT>.",
    )
    console_rate_per_minute: int = Field(
        default=30,
        ge=1,
        le=100000,
        description="Requests a minute one client address may send to the console's login and intake routes.",
    )
    console_trusted_proxies: str = Field(
        default="",
        description="Comma-separated networks (CIDR; a bare address is one host) of the proxies in front of the "
        "console whose X-Forwarded-For and X-Forwarded-Proto it believes: the client is then the right-most "
        "forwarded address that is not a trusted proxy. Empty: no proxy is trusted, the headers are ignored and "
        "the socket peer is the client (rate limits key on it).",
    )
    console_costly_per_minute: int = Field(
        default=60,
        ge=1,
        le=100000,
        description="Calls a minute one principal (an OIDC subject, an API token) may make of each kind of "
        "costly console route: filing, search, export (a bucket per kind), then 429 with Retry-After.",
    )
    console_preview_per_minute: int = Field(
        default=10,
        ge=1,
        le=100000,
        description="Forget previews a minute one principal may ask for (the API and the forget page), then 429.",
    )
    console_preview_per_subject_hour: int = Field(
        default=30,
        ge=1,
        le=100000,
        description="Forget previews an hour of one data subject, whoever asks, then 429 (counted in Postgres: "
        "one budget for every console process).",
    )
    console_preview_burst_alert: int = Field(
        default=10,
        ge=1,
        le=100000,
        description="A data subject previewed more than this many times in an hour's window is audited "
        "(preview_burst) and logged as a warning, once per window, when the count first passes it.",
    )
    approval_waiting_seconds: int = Field(
        default=0,
        ge=0,
        le=30 * 86400,
        description="Seconds a console request waits after its approval, still cancellable, before it runs.",
    )
    api_token_lifetime_days: int = Field(
        default=90,
        ge=1,
        le=3650,
        description="Days an API token of the console lives: the lifetime a new or rotated token gets, and "
        "the longest one minted with expires_in_days may ask for. Expired tokens are refused.",
    )
    intake_identity_space: str = Field(
        default="user_id",
        description="Identity space of a forwarded (Ketch forwarder) request whose raw value is the user id.",
    )
    webhook_urls: str = Field(
        default="",
        description="Comma-separated URLs told of every state change of a console-filed request (signed JSON).",
    )
    callback_allowed_urls: str = Field(
        default="",
        description="Comma-separated URL prefixes a forwarded request's status callbacks may target (scheme, "
        "host, the port if named, a path prefix). Empty: forwarded requests with callbacks are refused. A "
        "name resolving to a private or link-local address is refused unless the entry names that address.",
    )
    webhook_secret: SecretStr = Field(
        default=SecretStr(""), description="HMAC-SHA256 key of the webhook signature (X-Erasure-Signature)."
    )
    webhook_secret_file: str = Field(default="", description=file_help("webhook_secret"))
    smtp_url: SecretStr = Field(
        default=SecretStr(""),
        description="smtp://[user:password@]host:port (or smtps://) for the data subject's completion notice. "
        "Empty: no notice is sent (the contact address is deleted all the same).",
    )
    smtp_url_file: str = Field(default="", description=file_help("smtp_url"))
    mail_from: str = Field(default="privacy@localhost", description="From: address of the data subject's notice.")
