"""One typed settings object, read from ``ERASURE_*`` environment variables (pydantic-settings).

Every field's variable is ``ERASURE_`` + its name in capitals; its description is the meaning shown in
docs/configuration.md, and ``json_schema_extra={"required_in_production": True}`` marks what production mode insists on.
``settings_doc()`` lists them all, and ``workers/settings_doc.py`` renders docs/configuration.md from it;
the tests check that page and the deploy files against it.

Two modes (``ERASURE_MODE``):

- ``local`` (default): empty endpoints mean the embedded local stack, and secrets left empty are read from
  the local stack's secrets file (``workers/local_secrets.py``).
- ``production``: every field marked required must be set, every secret must come from its variable or from
  the file its ``*_FILE`` variable names (a Kubernetes secret volume, say), and the local secrets file is
  never read or created.

Secrets are ``SecretStr`` (``**********`` in repr, str and errors). A secret read from ``ERASURE_X_FILE``
lands in field ``x`` (the file is read once, when the settings are built). A bad value becomes one
``ConfigError`` line naming the variable, never a traceback and never the secret's value: URLs must have an
allowed scheme, a host and a port in 1..65535, the Temporal address must be ``host:port``, and certificate
and key files must be readable PEM (``workers/config_checks.py``); every such problem is named in that line.

The standard ``TEMPORAL_*`` client configuration (``TEMPORAL_ADDRESS``, ``TEMPORAL_PROFILE``, ...) fills the
``ERASURE_TEMPORAL_*`` settings left unset, through ``temporalio.envconfig`` (``workers/temporal_env.py``).
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlsplit

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from workers import config_checks
from workers.errors import ConfigError
from workers.temporal_env import standard_temporal

PREFIX = "ERASURE_"
_REQUIRED: dict[str, Any] = {"required_in_production": True}

Port = Annotated[int, Field(ge=1, le=65535)]

#: secret field -> the field naming a file that may hold it instead (``ERASURE_<SECRET>_FILE``)
SECRET_FILES: dict[str, str] = {
    "database_url": "database_url_file",
    "cache_url": "cache_url_file",
    "webhook_secret": "webhook_secret_file",
    "smtp_url": "smtp_url_file",
    "subject_key_secret": "subject_key_secret_file",
    "signing_key": "signing_key_file",
    "payload_key": "payload_key_file",
    "payload_old_keys": "payload_old_keys_file",
    "codec_token": "codec_token_file",
    "temporal_api_key": "temporal_api_key_file",
}

#: secrets that are 32 random bytes written as 64 hex digits
HEX_SECRETS = ("subject_key_secret", "signing_key", "payload_key")

_HTTP = frozenset({"http", "https"})

#: URL field -> how ``config_checks.url_problem`` checks it (``oidc_issuer``: https, http in local mode only)
URL_RULES: dict[str, dict[str, Any]] = {
    "s3_endpoint": {"schemes": _HTTP, "words": ("aws",)},
    "kms_endpoint": {"schemes": _HTTP, "words": ("aws",)},
    "s3_compaction_url": {
        "schemes": _HTTP,
        "words": ("none",),
        "origin_only": True,
        "expected": "the SeaweedFS master's http(s) URL or 'none'",
    },
    "s3_compaction_filer_url": {
        "schemes": _HTTP,
        "words": ("none",),
        "origin_only": True,
        "expected": "the SeaweedFS filer's http(s) URL or 'none'",
    },
    "temporal_ui_url": {"schemes": _HTTP},
    "temporal_ui_upstream": {"schemes": _HTTP, "words": ("none",)},
    "console_url": {"schemes": _HTTP},
    "trace_otlp_endpoint": {"schemes": _HTTP},
    "oidc_issuer": {"schemes": _HTTP},
    "cache_url": {
        "schemes": frozenset({"redis", "rediss", "valkey", "valkeys", "unix"}),
        "words": ("none",),
        "hostless_schemes": ("unix",),
        "secret": True,
    },
    "smtp_url": {"schemes": frozenset({"smtp", "smtps"}), "secret": True},
}

#: comma-separated URL fields -> how each entry is checked
URL_LIST_RULES: dict[str, dict[str, Any]] = {
    "webhook_urls": {"schemes": _HTTP},
    "callback_allowed_urls": {"schemes": _HTTP, "no_user_or_query": True},
    "codec_allowed_origins": {"schemes": _HTTP, "origin_only": True},
}

#: fields naming PEM files: certificates (a CA bundle or one certificate) and the private key
CERTIFICATE_FILES = ("temporal_tls_ca_file", "temporal_tls_cert_file", "aws_ca_bundle", "database_sslrootcert")
KEY_FILES = ("temporal_tls_key_file",)

_environ: ContextVar[Mapping[str, str] | None] = ContextVar("erasure_settings_environ", default=None)


def var(name: str) -> str:
    """The environment variable of field ``name``."""
    return PREFIX + name.upper()


class _MappingEnvSource(EnvSettingsSource):
    """The environment source, reading the mapping given to ``Settings.from_env`` (``os.environ`` by default)."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        environ = _environ.get()
        env = os.environ if environ is None else environ
        return {k.lower(): v for k, v in env.items()}


#: ``ERASURE_*`` variables that are not settings: the test suite's own knobs (see tests/unit/test_replay.py)
NOT_SETTINGS = frozenset({"ERASURE_LOAD_USERS", "ERASURE_RECORD_HISTORY", "ERASURE_RECORD_FORGET_HISTORY"})


def store_settings() -> dict[str, str]:
    """The settings the registered stores declare for themselves: ``ERASURE_<NAME>`` -> meaning, from each
    adapter's ``settings`` (entry points ``erasure.adapters``). A store added as a folder of its own declares
    its variables there and reads them as options (``workers.wiring.store_options``), with no edit to this
    module: one route for every store (``ERASURE_QDRANT_PATH``). An adapter whose module cannot be imported
    declares nothing here (the registry reports it by name when the worker starts)."""
    from importlib.metadata import entry_points

    from stores.adapters.interface import ENTRY_POINT_GROUP

    declared: dict[str, str] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            adapter = ep.load()
        except ImportError:
            continue
        for name, meaning in dict(getattr(adapter, "settings", None) or {}).items():
            declared[var(str(name))] = str(meaning)
    return declared


def unknown_settings(environ: Mapping[str, str]) -> None:
    """``ConfigError`` naming every ``ERASURE_*`` variable that is no setting (of the worker, or declared by a
    registered store: ``store_settings``), with the closest one that is: a misspelled name
    (``ERASURE_TEMPORAL_TLS_CA`` for ``..._CA_FILE``) must not be ignored and silently fall back to a default
    (there: plain gRPC)."""
    import difflib

    known = {var(name) for name in Settings.model_fields}
    unknown = sorted(
        name for name in environ if name.upper().startswith(PREFIX) and name.upper() not in known | NOT_SETTINGS
    )
    if unknown:  # the stores' own settings, read only when needed (loading the adapters imports their stores)
        known |= set(store_settings())
        unknown = [name for name in unknown if name.upper() not in known]
    if not unknown:
        return
    said = []
    for name in unknown:
        longer = sorted(k for k in known if k.startswith(name.upper() + "_"))  # a suffix left off: _FILE, _URL
        close = longer[:1] or difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.75)
        said.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise ConfigError(f"unknown setting{'s' if len(said) > 1 else ''}: {', '.join(said)}; nothing was started")


def _file_help(secret: str) -> str:
    return f"File holding {var(secret)} (a mounted secret); set one of the two, not both."


class Settings(BaseSettings):
    """Every setting of the worker and the CLI; typed accessors below derive endpoints and ports."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, frozen=True, extra="forbid", case_sensitive=False, validate_default=True
    )

    mode: Literal["local", "production"] = Field(
        default="local",
        description="local (the embedded stack, secrets from the local secrets file) or production (every "
        "required setting and secret must be given; the local secrets file is never read or created).",
    )
    state_dir: str = Field(default=".state", description="Directory for local stack data, pids, logs and secrets.")
    temporal_address: str = Field(
        default="",
        description="host:port of an external Temporal frontend. Empty: the local dev server on ERASURE_TEMPORAL_PORT.",
        json_schema_extra=_REQUIRED,
    )
    temporal_port: Port = Field(default=7233, description="Port of the local Temporal dev server (gRPC).")
    temporal_ui_port: Port = Field(default=8233, description="Port of the local Temporal web UI.")
    temporal_ui_url: str = Field(
        default="",
        description="Base URL of Temporal UI for links (the console's /temporal when it proxies the UI). Empty: "
        "the console's /temporal in local mode (the local UI, decoded behind the console's login).",
    )
    temporal_ui_upstream: str = Field(
        default="",
        description="A Temporal UI served under the public path /temporal that the console proxies behind its "
        "login (so the UI's codec calls carry the console session). Empty: the local UI in local mode, none in "
        "production; 'none': no proxy.",
    )
    codec_allowed_origins: str = Field(
        default="",
        description="Comma-separated browser origins of Temporal UIs on another origin allowed to call the "
        "console's /codec/decode (e.g. https://cloud.temporal.io). The console's own origin is always allowed.",
    )
    console_cross_site_cookie: bool = Field(
        default=False,
        description="true: the console's session cookie is SameSite=None; Secure, so a Temporal UI on another "
        "site (Temporal Cloud) sends it to /codec/decode with 'include cross-origin credentials' (HTTPS only).",
    )
    idp_port: Port = Field(
        default=8090, description="Port of the local stack's identity provider (demo logins for the console)."
    )
    temporal_namespace: str = Field(default="default", min_length=1, description="Temporal namespace.")
    temporal_tls: bool = Field(
        default=False,
        description="true: connect to Temporal over TLS with the system's trust store (implied by any "
        "ERASURE_TEMPORAL_TLS_* setting or an API key).",
    )
    temporal_tls_ca_file: str = Field(
        default="", description="PEM file of the CA(s) the Temporal frontend's certificate must chain to."
    )
    temporal_tls_cert_file: str = Field(
        default="", description="PEM client certificate for mTLS to Temporal (with ERASURE_TEMPORAL_TLS_KEY_FILE)."
    )
    temporal_tls_key_file: str = Field(
        default="", description="PEM private key of the mTLS client certificate (a mounted secret file)."
    )
    temporal_tls_server_name: str = Field(
        default="", description="Name the Temporal server's certificate must carry, when not the address's host."
    )
    temporal_api_key: SecretStr = Field(
        default=SecretStr(""), description="Temporal Cloud API key (a secret; sent over TLS only, never logged)."
    )
    temporal_api_key_file: str = Field(default="", description=_file_help("temporal_api_key"))
    task_queue: str = Field(default="erasure", min_length=1, description="Task queue of the erasure worker.")
    physical_task_queue: str = Field(
        default="erasure-physical",
        min_length=1,
        description="Task queue of the physical clean-up job (its own slots: it never takes an erasure's).",
    )
    worker_deployment_name: str = Field(
        default="",
        description="Temporal Worker Deployment of the workers (worker versioning, see deploy/README.md): a worker "
        "then needs ERASURE_WORKER_BUILD_ID; 'erasure deployment' operates on it. Empty: unversioned workers.",
    )
    worker_build_id: str = Field(
        default="",
        description="Build id of this worker's code within ERASURE_WORKER_DEPLOYMENT_NAME (the image tag, say); "
        "a new build id for every release that changes workflow code.",
    )
    database_url: SecretStr = Field(
        default=SecretStr(""),
        description="Postgres URL of the platform stores (a secret: it may hold a password). Empty: the "
        "embedded pgserver on ERASURE_PG_PORT.",
        json_schema_extra=_REQUIRED,
    )
    database_url_file: str = Field(default="", description=_file_help("database_url"))
    database_sslmode: Literal["", "disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = Field(
        default="",
        description="libpq sslmode added to the database URL (verify-full: TLS with the server's name checked). "
        "Empty: the URL's own.",
    )
    database_sslrootcert: str = Field(
        default="", description="PEM file of the CA(s) the Postgres server's certificate must chain to."
    )
    pg_port: Port = Field(default=55432, description="Port of the embedded Postgres.")
    pool_size: int = Field(default=8, ge=1, le=1000, description="Postgres connections per process (pool maximum).")
    pool_timeout_seconds: float = Field(
        default=5.0, gt=0, le=3600, description="Seconds to wait for a pooled Postgres connection before failing."
    )
    s3_endpoint: str = Field(
        default="",
        description="S3 endpoint URL. Empty: the local SeaweedFS on ERASURE_S3_PORT (AWS S3 needs 'aws').",
        json_schema_extra=_REQUIRED,
    )
    s3_port: Port = Field(
        default=8333, description="Port of the local SeaweedFS S3 gateway (its other ports follow it)."
    )
    aws_ca_bundle: str = Field(
        default="",
        description="PEM file of the CA(s) that HTTPS S3 and KMS endpoints' certificates must chain to. Empty: "
        "the system's trust store.",
    )
    s3_region: str = Field(default="us-east-1", min_length=1, description="Region for S3 and KMS clients.")
    artifact_bucket: str = Field(default="erasure-artifacts", min_length=1, description="Bucket of agent artifacts.")
    log_bucket: str = Field(default="erasure-logs", min_length=1, description="Bucket of the shipped log archive.")
    receipt_bucket: str = Field(
        default="erasure-receipts", min_length=1, description="Bucket receipts are exported to."
    )
    s3_delete_batch: int = Field(
        default=1000,
        ge=1,
        le=1000,
        description="Keys per S3 DeleteObjects request (1-1000; lower for rate-limited stores).",
    )
    s3_compaction_url: str = Field(
        default="",
        description="URL of the SeaweedFS master the physical clean-up asks to compact volumes holding deleted "
        "objects. Empty: the local SeaweedFS's master (ERASURE_S3_PORT+1) in local mode, none otherwise (AWS S3 "
        "offers no compaction: the provider reclaims deleted versions' space on its own schedule); 'none': none.",
    )
    s3_compaction_filer_url: str = Field(
        default="",
        description="URL of the SeaweedFS filer behind the S3 gateway: the physical clean-up sends a marker through "
        "its deletion queue to know when deleted objects have left the volumes. Empty: the local SeaweedFS's filer "
        "(ERASURE_S3_PORT+5) when the local master compacts, none otherwise (a fixed wait instead); 'none': none.",
    )
    kms_endpoint: str = Field(
        default="",
        description="KMS endpoint URL. Empty: the local moto KMS on ERASURE_KMS_PORT; 'aws' for real AWS KMS.",
        json_schema_extra=_REQUIRED,
    )
    kms_port: Port = Field(default=4599, description="Port of the local KMS endpoint.")
    cache_url: SecretStr = Field(
        default=SecretStr(""),
        description="Redis-protocol URL of the LLM response cache (a secret: it may hold a password). Empty: "
        "the local Valkey on ERASURE_CACHE_PORT in local mode, no response cache in production; 'none': no "
        "response cache.",
    )
    cache_url_file: str = Field(default="", description=_file_help("cache_url"))
    cache_port: Port = Field(default=4600, description="Port of the local Valkey (the response cache).")
    chroma_path: str = Field(
        default="",
        description="Directory of the Chroma memory backend (embedded persistent mode; the erasure worker must "
        "see the same files the platform writes). Empty: <state dir>/chroma in local mode when chromadb is "
        "installed, none in production; 'none': no Chroma backend.",
    )
    memory_max_records: int = Field(
        default=500, ge=1, description="Per-user cap on memory rows; the memory service evicts above it."
    )
    memory_max_tokens: int = Field(
        default=40_000,
        ge=1,
        description="Per-user cap on remembered words (tokens); the memory service evicts above it.",
    )
    memory_session_purpose: str = Field(
        default="conversation_recall",
        description="The purpose the platform names for memories ingested from sessions (a write without a purpose "
        "is refused).",
    )
    memory_session_retention: str = Field(
        default="conversation",
        description="The retention class of memories ingested from sessions (one of "
        "stores.memory.lifecycle_rules.RETENTION_CLASSES).",
    )
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
        description="Forget previews an hour of one data subject, whoever asks, then 429 (in each console process).",
    )
    console_preview_burst_alert: int = Field(
        default=10,
        ge=1,
        le=100000,
        description="A data subject previewed more than this many times in an hour is audited (preview_burst) and "
        "logged as a warning, once each time the count passes it.",
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
    webhook_secret_file: str = Field(default="", description=_file_help("webhook_secret"))
    smtp_url: SecretStr = Field(
        default=SecretStr(""),
        description="smtp://[user:password@]host:port (or smtps://) for the data subject's completion notice. "
        "Empty: no notice is sent (the contact address is deleted all the same).",
    )
    smtp_url_file: str = Field(default="", description=_file_help("smtp_url"))
    mail_from: str = Field(default="privacy@localhost", description="From: address of the data subject's notice.")
    kms_key_id: str = Field(
        default="",
        description="KMS key that wraps per-user data keys. Empty: the key created by 'erasure stack up'.",
        json_schema_extra=_REQUIRED,
    )
    per_user_kms_keys: bool = Field(
        default=False,
        description="true: each subject's data keys are wrapped by a KMS key of its own, scheduled for deletion "
        "by the erasure.",
    )
    key_cache_ttl_seconds: float = Field(
        default=30.0, ge=0, le=86400, description="Seconds an unwrapped data key stays cached in memory (0: no cache)."
    )
    ingestion_delay_seconds: int = Field(
        default=3600, ge=0, description="Longest ingestion delay: the durable wait before the second sweep."
    )
    due_days: int = Field(default=30, ge=1, description="Days from receipt to a request's due date.")
    subject_key_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Hex secret keying the pseudonymous subject key. Empty: from the local secrets file "
        "('erasure stack up').",
        json_schema_extra=_REQUIRED,
    )
    subject_key_secret_file: str = Field(default="", description=_file_help("subject_key_secret"))
    signing_key: SecretStr = Field(
        default=SecretStr(""),
        description="Hex Ed25519 private key (32 bytes) signing receipts. Empty: from the local secrets file "
        "('erasure stack up').",
        json_schema_extra=_REQUIRED,
    )
    signing_key_file: str = Field(default="", description=_file_help("signing_key"))
    payload_key: SecretStr = Field(
        default=SecretStr(""),
        description="Hex AES-256 key of the Temporal payload codec. Empty: from the local secrets file "
        "('erasure stack up').",
        json_schema_extra=_REQUIRED,
    )
    payload_key_file: str = Field(default="", description=_file_help("payload_key"))
    payload_old_keys: SecretStr = Field(
        default=SecretStr(""),
        description="Comma-separated hex AES-256 payload keys retired by a rotation, still used to decode (never "
        "to encode) until no open workflow holds payloads sealed under them.",
    )
    payload_old_keys_file: str = Field(default="", description=_file_help("payload_old_keys"))
    codec_token: SecretStr = Field(
        default=SecretStr(""),
        description="Bearer token (32+ characters) the codec server requires. Empty: 'erasure codec-server' "
        "refuses to start.",
    )
    codec_token_file: str = Field(default="", description=_file_help("codec_token"))
    log_format: Literal["auto", "json", "console"] = Field(
        default="auto", description="Log output: auto (console on a terminal), json or console."
    )
    metrics_port: int = Field(default=0, ge=0, le=65535, description="Prometheus metrics port of the worker (0: off).")
    console_metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of the console's Prometheus /metrics (requests by route, requests by state, decisions, "
        "refused accesses), apart from the console's own port so that the Ingress never exposes it (0: off).",
    )
    trace_exporter: Literal["", "none", "console", "otlp"] = Field(
        default="",
        description="Where OpenTelemetry spans go: console (one JSON line per span on stdout; stderr for one-shot "
        "CLI commands), otlp (OTLP/gRPC to ERASURE_TRACE_OTLP_ENDPOINT) or none. Empty: console in production "
        "mode, none in local mode.",
    )
    trace_otlp_endpoint: str = Field(
        default="",
        description="OTLP/gRPC collector URL for ERASURE_TRACE_EXPORTER=otlp (http:// for plain gRPC). Empty: "
        "the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else "
        "http://localhost:4317.",
    )
    sweep_interval_minutes: int = Field(default=60, ge=1, description="How often the scheduled late-writer sweep runs.")
    sweep_lookback_hours: int = Field(
        default=720, ge=1, description="The sweep checks every subject erased within this many hours."
    )
    expiry_interval_minutes: int = Field(
        default=60,
        ge=1,
        description="How often the scheduled retention-expiry sweep forgets memory rows whose retention ended.",
    )
    key_epoch_days: float = Field(
        default=30.0,
        gt=0,
        description="Wrapping-key epochs: age at which the scheduled key-epoch job opens a new epoch (a new KMS "
        "key) and re-wraps every live data key under it. A shredded data key is unwrappable everywhere "
        "(backups, WAL) by shred + this + ERASURE_BACKUP_RETENTION_DAYS + two days (docs/privacy-model.md).",
    )
    backup_retention_days: float = Field(
        default=35.0,
        ge=0,
        description="The longest retention of any database backup, snapshot or WAL archive: a retired epoch's "
        "KMS key is scheduled for deletion this long after no live data key uses it.",
    )
    key_epoch_rewrite: Literal["full", "table", "off"] = Field(
        default="full",
        description="After a rotation the key-epoch job, and after erasures the physical clean-up job, rewrite "
        "the keys table and the WAL: full (VACUUM FULL data_keys, pg_switch_wal(), CHECKPOINT), table (VACUUM FULL "
        "only: a managed database without the WAL functions) or off.",
    )
    physical_window_minutes: float = Field(
        default=0,
        ge=0,
        description="The physical clean-up window: a finished erasure or destructive forget gets its physical "
        "attestation (vacuum and compaction done, signed) within this many minutes of its deletions, or the "
        "physical job's watch fails and erasure_physical_overdue counts it. 0: 1440 (24 h) in production, "
        "5 on the local stack (so make demo shows both documents).",
    )
    physical_interval_minutes: float = Field(
        default=0,
        ge=0,
        description="How often the scheduled physical clean-up job runs (one run at a time, on the physical "
        "task queue). 0: a quarter of the window (at least a minute).",
    )
    chaos_pause_ms: int = Field(
        default=0,
        ge=0,
        description="Crash drills only: pause after every heartbeat so a kill lands inside a batched step.",
    )

    # ----- construction -------------------------------------------------------------------------

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _MappingEnvSource(settings_cls))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings from ``environ`` (default ``os.environ``); a ``ConfigError`` naming the variable.

        ``TEMPORAL_*`` values fill the ``ERASURE_TEMPORAL_*`` settings left unset (``workers/temporal_env.py``);
        their problems and the settings' own are reported together, in one line."""
        env = os.environ if environ is None else environ
        unknown_settings(env)
        standard = standard_temporal(env)
        token = _environ.set(environ)
        try:
            settings = cls(**standard.values)
        except ValidationError as exc:
            problems = [*standard.problems, *_problems(exc, env, standard.origins)]
            raise ConfigError("; ".join(problems)) from None
        except ConfigError as exc:
            raise ConfigError("; ".join([*standard.problems, str(exc)])) from None
        finally:
            _environ.reset(token)
        if standard.problems:
            raise ConfigError("; ".join(standard.problems))
        return settings

    @field_validator(*URL_RULES, mode="after")
    @classmethod
    def _url(cls, value: str | SecretStr, info: ValidationInfo) -> str | SecretStr:
        name = str(info.field_name)
        rule = dict(URL_RULES[name])
        if name == "oidc_issuer" and info.data.get("mode") == "production":
            rule.update(schemes=frozenset({"https"}), expected="an https URL (production mode)")
        plain = value.get_secret_value() if isinstance(value, SecretStr) else value
        problem = config_checks.url_problem(plain, **rule)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator(*URL_LIST_RULES, mode="after")
    @classmethod
    def _url_list(cls, value: str, info: ValidationInfo) -> str:
        rule = URL_LIST_RULES[str(info.field_name)]
        entries = [e.strip() for e in value.split(",") if e.strip()]
        problems = [p for p in (config_checks.url_problem(e, **rule) for e in entries) if p]
        if problems:
            raise ValueError(f"entries {' and '.join(problems)}" if len(problems) > 1 else f"entry {problems[0]}")
        return value

    @field_validator("console_trusted_proxies", mode="after")
    @classmethod
    def _networks(cls, value: str) -> str:
        for entry in (e.strip() for e in value.split(",")):
            try:
                if entry:
                    ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (CIDR)") from None
        return value

    @field_validator("database_url", mode="after")
    @classmethod
    def _database_url(cls, value: SecretStr) -> SecretStr:
        plain = value.get_secret_value()
        if plain and "://" not in plain and "=" not in plain:
            raise ValueError("must be a postgresql:// URL or a key=value connection string")
        problem = config_checks.url_problem(
            plain if "://" in plain else "", schemes={"postgresql", "postgres"}, host_required=False, secret=True
        )
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("temporal_address", mode="after")
    @classmethod
    def _address(cls, value: str) -> str:
        problem = config_checks.address_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator(*CERTIFICATE_FILES, *KEY_FILES, mode="after")
    @classmethod
    def _pem_file(cls, value: str, info: ValidationInfo) -> str:
        if info.field_name in KEY_FILES:
            problem = config_checks.pem_private_key_problem(value)
        else:  # libpq's sslrootcert=system: the system's trust store
            words = ("system",) if info.field_name == "database_sslrootcert" else ()
            problem = config_checks.pem_certificates_problem(value, words=words)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="before")
    @classmethod
    def _read_secret_files(cls, data: Any) -> Any:
        """``ERASURE_X_FILE`` -> field ``x``: read once, here; missing, unreadable or empty is an error."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for secret, file_field in SECRET_FILES.items():
            path = str(data.get(file_field) or "")
            if not path:
                continue
            given = data.get(secret)
            if isinstance(given, SecretStr):
                given = given.get_secret_value()
            if given:
                raise ConfigError(f"set {var(secret)} or {var(file_field)}, not both")
            try:
                value = Path(path).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise ConfigError(f"{var(file_field)}: cannot read {path}: {reason}") from None
            if not value:
                raise ConfigError(f"{var(file_field)}: {path} is empty")
            data[secret] = value
        return data

    @model_validator(mode="after")
    def _check(self) -> Settings:
        for name in HEX_SECRETS:
            value = self.secret_value(name)
            if value and not re.fullmatch(r"[0-9a-fA-F]{64}", value):
                raise ConfigError(f"{var(name)}{self._from(name)} must be 32 bytes (64 hex digits)")
        for i, key in enumerate(self.payload_old_key_list):
            if not re.fullmatch(r"[0-9a-fA-F]{64}", key):
                where = var("payload_old_keys") + self._from("payload_old_keys")
                raise ConfigError(f"{where}: key {i + 1} must be 32 bytes (64 hex digits); separate keys with commas")
        if self.worker_build_id and not self.worker_deployment_name:
            raise ConfigError("ERASURE_WORKER_BUILD_ID needs ERASURE_WORKER_DEPLOYMENT_NAME (the deployment it is of)")
        if "." in self.worker_deployment_name:
            raise ConfigError("ERASURE_WORKER_DEPLOYMENT_NAME must not contain '.' (Temporal joins name.build_id)")
        if bool(self.temporal_tls_cert_file) != bool(self.temporal_tls_key_file):
            raise ConfigError("ERASURE_TEMPORAL_TLS_CERT_FILE and ERASURE_TEMPORAL_TLS_KEY_FILE go together: set both")
        if self.mode == "production":
            missing = [_or_standard(var(name)) for name in required_in_production() if not self._plain(name)]
            if missing:
                raise ConfigError(
                    f"ERASURE_MODE=production requires {', '.join(missing)} (secrets may come from the "
                    "matching *_FILE variable); nothing is read from or created in the state directory"
                )
        return self

    def source_of(self, name: str) -> str:
        """Where secret ``name`` came from, for error messages: its variable, or the file variable."""
        file_field = SECRET_FILES.get(name)
        return var(file_field) if file_field and getattr(self, file_field) else var(name)

    def _from(self, name: str) -> str:
        file_field = SECRET_FILES.get(name)
        return f" (from {var(file_field)})" if file_field and getattr(self, file_field) else ""

    def secret_value(self, name: str) -> str:
        """The plain value of secret field ``name`` (empty when unset): for the code that uses it, never to log."""
        value = getattr(self, name)
        assert isinstance(value, SecretStr)
        return value.get_secret_value()

    def _plain(self, name: str) -> str:
        value = getattr(self, name)
        return value.get_secret_value() if isinstance(value, SecretStr) else str(value)

    # ----- typed accessors ----------------------------------------------------------------------

    @property
    def payload_old_key_list(self) -> list[str]:
        """The retired payload keys (hex), in the order given; empty entries dropped."""
        return [k.strip() for k in self.secret_value("payload_old_keys").split(",") if k.strip()]

    @property
    def production(self) -> bool:
        return self.mode == "production"

    @property
    def physical_window(self) -> timedelta:
        """The physical clean-up window (ERASURE_PHYSICAL_WINDOW_MINUTES; 24 h in production, 5 min locally)."""
        minutes = self.physical_window_minutes or (1440.0 if self.production else 5.0)
        return timedelta(minutes=minutes)

    @property
    def physical_interval(self) -> timedelta:
        """How often the physical job runs (ERASURE_PHYSICAL_INTERVAL_MINUTES; a quarter of the window)."""
        if self.physical_interval_minutes:
            return timedelta(minutes=self.physical_interval_minutes)
        return max(self.physical_window / 4, timedelta(minutes=1))

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir).resolve()

    @property
    def embedded_temporal(self) -> bool:
        return not self.temporal_address

    @property
    def embedded_postgres(self) -> bool:
        return not self.database_url.get_secret_value()

    @property
    def embedded_s3(self) -> bool:
        return not self.s3_endpoint

    @property
    def embedded_kms(self) -> bool:
        return not self.kms_endpoint

    @property
    def temporal_target(self) -> str:
        return self.temporal_address or f"127.0.0.1:{self.temporal_port}"

    @property
    def ui_url(self) -> str:
        """Where people open Temporal UI: the configured URL, else the local UI behind the console."""
        if self.temporal_ui_url:
            return self.temporal_ui_url.rstrip("/")
        if self.ui_proxy_upstream is not None:
            return f"{self.console_base_url}/temporal"
        return self.local_ui_url

    @property
    def local_ui_url(self) -> str:
        """The local dev server's own UI (served under /temporal; payloads stay ciphertext there)."""
        return f"http://127.0.0.1:{self.temporal_ui_port}/temporal"

    @property
    def console_base_url(self) -> str:
        return (self.console_url or f"http://127.0.0.1:{self.serve_port}").rstrip("/")

    @property
    def ui_proxy_upstream(self) -> str | None:
        """The Temporal UI the console proxies at /temporal, or ``None``."""
        if self.temporal_ui_upstream == "none":
            return None
        if self.temporal_ui_upstream:
            return self.temporal_ui_upstream.rstrip("/")
        if self.production or not self.embedded_temporal:
            return None
        return f"http://127.0.0.1:{self.temporal_ui_port}"

    @property
    def codec_origins(self) -> frozenset[str]:
        """Browser origins allowed to call the console's codec endpoint."""
        given = {o.strip().rstrip("/") for o in self.codec_allowed_origins.split(",") if o.strip()}
        own = urlsplit(self.console_base_url)
        return frozenset({*given, f"{own.scheme}://{own.netloc}"})

    @property
    def local_idp_url(self) -> str:
        return f"http://127.0.0.1:{self.idp_port}"

    @property
    def postgres_url(self) -> str:
        """The database URL, with ``sslmode`` and ``sslrootcert`` from their settings added as libpq URL
        parameters (so the pool, migrations and google-adk's engine all connect the same way)."""
        url = self.database_url.get_secret_value() or f"postgresql://postgres@127.0.0.1:{self.pg_port}/postgres"
        params = {"sslmode": self.database_sslmode, "sslrootcert": self.database_sslrootcert}
        given = {k: v for k, v in params.items() if v}
        if not given:
            return url
        if not url.startswith(("postgresql://", "postgres://")):  # key=value conninfo
            return " ".join([url, *(f"{k}='{v}'" for k, v in given.items())])
        extra = "&".join(f"{k}={quote(v, safe='/')}" for k, v in given.items())
        return f"{url}{'&' if '?' in url else '?'}{extra}"

    @property
    def s3_url(self) -> str | None:
        """Endpoint for boto3: ``None`` means AWS's own."""
        if self.s3_endpoint == "aws":
            return None
        return self.s3_endpoint or f"http://127.0.0.1:{self.s3_port}"

    @property
    def s3_compaction_master(self) -> str | None:
        """The SeaweedFS master that compacts volumes; ``None`` when the object store offers no compaction.

        The local stack's ``weed server`` puts its master on the port after the S3 gateway's (``S3Part``)."""
        if self.s3_compaction_url == "none":
            return None
        if self.s3_compaction_url:
            return self.s3_compaction_url.rstrip("/")
        if self.production or not self.embedded_s3:
            return None
        return f"http://127.0.0.1:{self.s3_port + 1}"

    @property
    def s3_compaction_filer(self) -> str | None:
        """The SeaweedFS filer whose deletion queue the compaction waits on; ``None``: a fixed wait instead.

        Only with a compacting master; the local stack's filer is on the S3 port + 5 (``S3Part``)."""
        if self.s3_compaction_filer_url == "none" or self.s3_compaction_master is None:
            return None
        if self.s3_compaction_filer_url:
            return self.s3_compaction_filer_url.rstrip("/")
        if self.s3_compaction_url or self.production or not self.embedded_s3:
            return None
        return f"http://127.0.0.1:{self.s3_port + 5}"

    @property
    def embedded_cache(self) -> bool:
        return not self.production and not self.cache_url.get_secret_value()

    @property
    def response_cache_url(self) -> str | None:
        """The response cache's URL; ``None`` when the platform has none (its adapter is left out)."""
        url = self.cache_url.get_secret_value()
        if url == "none" or (not url and self.production):
            return None
        return url or f"redis://127.0.0.1:{self.cache_port}/0"

    @property
    def chroma_memory_path(self) -> str | None:
        """The Chroma backend's directory; ``None`` when the platform has none (its adapter is left out)."""
        if self.chroma_path == "none" or (not self.chroma_path and self.production):
            return None
        if self.chroma_path:
            return str(Path(self.chroma_path).resolve())
        if importlib.util.find_spec("chromadb") is None:
            return None
        return str(self.state_path / "chroma")

    @property
    def kms_url(self) -> str | None:
        if self.kms_endpoint == "aws":
            return None
        return self.kms_endpoint or f"http://127.0.0.1:{self.kms_port}"

    @property
    def ingestion_delay(self) -> int:
        return self.ingestion_delay_seconds

    @property
    def due_days_int(self) -> int:
        return self.due_days

    @property
    def ports(self) -> dict[str, int]:
        return {
            "temporal": self.temporal_port,
            "temporal-ui": self.temporal_ui_port,
            "postgres": self.pg_port,
            "s3": self.s3_port,
            "kms": self.kms_port,
            "cache": self.cache_port,
            "idp": self.idp_port,
            "console": self.serve_port,
        }

    @property
    def sweep_interval(self) -> int:
        return self.sweep_interval_minutes

    @property
    def sweep_lookback(self) -> int:
        return self.sweep_lookback_hours

    @property
    def expiry_interval(self) -> int:
        return self.expiry_interval_minutes

    @property
    def chaos_pause_seconds(self) -> float:
        return self.chaos_pause_ms / 1000.0

    @property
    def metrics_port_int(self) -> int:
        return self.metrics_port

    @property
    def traces_to(self) -> str:
        """Where spans go (``ERASURE_TRACE_EXPORTER``, its default resolved): none, console or otlp."""
        return self.trace_exporter or ("console" if self.production else "none")

    def env(self) -> dict[str, str]:
        """The settings as environment variables (to hand to child processes).

        Secrets are given by value (a child must not depend on the parent's files), so every ``*_FILE``
        variable is emptied."""
        result = {var(name): _env_value(self._plain(name)) for name in type(self).model_fields}
        result.update({var(file_field): "" for file_field in SECRET_FILES.values()})
        result.update({var(secret): self.secret_value(secret) for secret in SECRET_FILES})
        return result


def _env_value(value: str) -> str:
    return {"True": "true", "False": "false"}.get(value, value)


def _default_text(info: FieldInfo) -> str:
    value = info.default
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _is_required(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and extra.get("required_in_production") is True


def required_in_production() -> Iterator[str]:
    """Names of the fields production mode requires."""
    return (name for name, info in Settings.model_fields.items() if _is_required(info))


def settings_doc() -> list[tuple[str, str, str, bool]]:
    """(variable, default, meaning, required in production) for every setting."""
    return [
        (var(name), _default_text(info), info.description or "", _is_required(info))
        for name, info in Settings.model_fields.items()
    ]


def _or_standard(variable: str) -> str:
    return f"{variable} (or TEMPORAL_ADDRESS)" if variable == var("temporal_address") else variable


def _describe(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind == "value_error":  # our own checks: worded to follow the name, a value shown only when not secret
        return str(ctx.get("error", "is invalid"))
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be an integer"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}"
    return str(error.get("msg", "is invalid")).lower()


def _problems(exc: ValidationError, env: Mapping[str, str], origins: Mapping[str, str]) -> list[str]:
    """One phrase naming each bad variable (the ``TEMPORAL_*`` one or the ``*_FILE`` one a value came from).
    Values are shown for plain settings only, never for secrets."""
    given = {k.upper() for k, v in env.items() if v}
    parts = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error.get("loc") else ""
        where = origins.get(name) or (var(name) if name else "settings")
        file_field = SECRET_FILES.get(name)
        if file_field and name not in origins and var(file_field) in given:
            where = f"{var(name)} (from {var(file_field)})"
        shown = ""
        if name and name not in SECRET_FILES and isinstance(error.get("input"), str) and error["type"] != "value_error":
            shown = f", got {error['input']!r}"
        parts.append(f"{where} {_describe(error)}{shown}")
    return parts
