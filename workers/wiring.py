"""Build the store layer from settings: one ``Platform`` per process, shared by its activities."""

from __future__ import annotations

from stores.platform import Platform, PlatformConfig
from workers.local_secrets import Secrets, load_secrets
from workers.settings import Settings
from workers.stack.launcher import resolve_kms_key_id
from workers.stack.parts import aws_endpoints


def platform_config(settings: Settings, secrets: Secrets | None = None, **overrides: object) -> PlatformConfig:
    secrets = secrets or load_secrets(settings)
    config = PlatformConfig(
        postgres_url=settings.postgres_url,
        aws=aws_endpoints(settings),
        artifact_bucket=settings.artifact_bucket,
        log_bucket=settings.log_bucket,
        receipt_bucket=settings.receipt_bucket,
        kms_key_id=resolve_kms_key_id(settings),
        subject_secret=secrets.subject_key_secret,
        s3_delete_batch=int(settings.s3_delete_batch),
    )
    if overrides:
        from dataclasses import replace

        config = replace(config, **overrides)  # type: ignore[arg-type]
    return config


def build_platform(settings: Settings, secrets: Secrets | None = None, **overrides: object) -> Platform:
    return Platform(platform_config(settings, secrets, **overrides))
