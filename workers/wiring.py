"""Build the store layer from settings: one ``Platform`` per process, shared by its activities, and the
process's adapter registry (entry points ``erasure.adapters``, each factory given the platform's
``StoreContext``: never the platform itself).

Production code: nothing here imports the local stack (``workers/stack``, psutil, pgserver, moto). The one
local-only lookup, the KMS key that ``erasure stack up`` created, is read from the state directory
(``workers.kms_key``) in local mode only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from pydantic import SecretStr

from stores.adapters.registry import AdapterRegistry
from stores.infra.aws_clients import AwsEndpoints
from stores.infra.outbound import parse_allowlist
from stores.memory.lifecycle_rules import Caps
from stores.platform import Platform, PlatformConfig
from workers.errors import ConfigError
from workers.kms_key import resolve_kms_key_id
from workers.local_secrets import Secrets, load_secrets
from workers.settings import PREFIX, Settings


def aws_endpoints(settings: Settings) -> AwsEndpoints:
    return AwsEndpoints(
        s3_url=settings.s3_url,
        kms_url=settings.kms_url,
        region=settings.s3_region,
        local=settings.embedded_s3 or settings.embedded_kms,
        ca_bundle=settings.aws_ca_bundle,
    )


def kms_key_id(settings: Settings) -> str:
    """``ERASURE_KMS_KEY_ID``; in local mode only, when empty, the key ``erasure stack up`` created."""
    if settings.kms_key_id:
        return settings.kms_key_id
    if settings.production:
        raise ConfigError("ERASURE_KMS_KEY_ID is not set (required in production)")
    return resolve_kms_key_id(settings)


def store_options(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings of stores the worker's settings do not define, by name: every ``ERASURE_<NAME>``
    variable that is not a ``Settings`` field (``ERASURE_QDRANT_PATH`` -> ``qdrant_path``). A store added
    as a folder of its own reads its configuration here, with no edit to the settings."""
    environ = os.environ if environ is None else environ
    known = set(Settings.model_fields)
    prefix = PREFIX.upper()
    found = {k[len(prefix) :].lower(): v for k, v in environ.items() if k.upper().startswith(prefix)}
    return {name: value for name, value in found.items() if name not in known}


def platform_config(settings: Settings, secrets: Secrets | None = None, **overrides: object) -> PlatformConfig:
    secrets = secrets or load_secrets(settings)
    config = PlatformConfig(
        postgres_url=settings.postgres_url,
        aws=aws_endpoints(settings),
        artifact_bucket=settings.artifact_bucket,
        log_bucket=settings.log_bucket,
        receipt_bucket=settings.receipt_bucket,
        kms_key_id=kms_key_id(settings),
        subject_secret=secrets.subject_key_secret,
        pool_size=settings.pool_size,
        pool_timeout=settings.pool_timeout_seconds,
        key_cache_ttl=settings.key_cache_ttl_seconds,
        per_user_kms_keys=settings.per_user_kms_keys,
        s3_delete_batch=settings.s3_delete_batch,
        cache_url=settings.response_cache_url,
        chroma_path=settings.chroma_memory_path,
        s3_compaction_url=settings.s3_compaction_master,
        s3_filer_url=settings.s3_compaction_filer,
        webhook_urls=tuple(u.strip() for u in settings.webhook_urls.split(",") if u.strip()),
        webhook_secret=settings.webhook_secret.get_secret_value().encode(),
        callback_allowlist=parse_allowlist(settings.callback_allowed_urls),
        smtp_url=settings.smtp_url.get_secret_value() or None,
        mail_from=settings.mail_from,
        memory_caps=Caps(settings.memory_max_records, settings.memory_max_tokens),
        session_capture=(settings.memory_session_purpose, settings.memory_session_retention),
        store_options=store_options(),
        physical_window=settings.physical_window,
    )
    if overrides:
        config = replace(config, **overrides)  # type: ignore[arg-type]
    return config


def console_settings(settings: Settings) -> Settings:
    """The settings ``erasure serve`` runs with (issue 40): the console's own database login in place of the
    owner's, so its pool, its readiness check and all it builds connect as a role that may read and append
    the audit log and nothing else on it; migrations and the worker keep the owner's URL (the physical job's
    VACUUM FULL, CHECKPOINT and WAL switch need it). In production a console without a login of its own
    refuses to start; locally it falls back to the database URL's role (``erasure serve`` says so)."""
    url = settings.console_login_url
    if not url:
        if settings.production:
            raise ConfigError(
                "ERASURE_CONSOLE_DATABASE_URL is not set (required by 'erasure serve' in production): the console "
                "connects with a login of its own, granted erasure_console_rights (docs/operations.md)"
            )
        return settings
    return settings.model_copy(update={"database_url": SecretStr(url), "database_url_file": ""})


def build_registry(platform: Platform) -> AdapterRegistry:
    """The process's adapters: every entry point's factory called with the platform's ``StoreContext``."""
    return AdapterRegistry(platform.store_context)


def build_platform(settings: Settings, secrets: Secrets | None = None, **overrides: object) -> Platform:
    """The platform, its adapter registry wired to be built on first use (``platform.adapters``)."""
    platform = Platform(platform_config(settings, secrets, **overrides))
    platform.wire_adapters(lambda: build_registry(platform))
    return platform
