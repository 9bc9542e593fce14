"""One typed settings object, read from ``ERASURE_*`` environment variables.

Every field names its variable, default and meaning in ``SETTINGS_DOC`` so the README table and the
deploy manifests can be checked against it by the tests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from workers.errors import ConfigError


def _env(name: str, default: str, help_: str, *, required_in_production: bool = False) -> Any:
    return field(
        default=default,
        metadata={"env": name, "help": help_, "required_in_production": required_in_production},
    )


@dataclass(frozen=True)
class Settings:
    """Raw settings as strings; typed accessors below parse and validate them."""

    state_dir: str = _env("ERASURE_STATE_DIR", ".state", "Directory for local stack data, pids, logs and secrets.")
    temporal_address: str = _env(
        "ERASURE_TEMPORAL_ADDRESS",
        "",
        "host:port of an external Temporal frontend. Empty: the local dev server on ERASURE_TEMPORAL_PORT.",
        required_in_production=True,
    )
    temporal_port: str = _env("ERASURE_TEMPORAL_PORT", "7233", "Port of the local Temporal dev server (gRPC).")
    temporal_ui_port: str = _env("ERASURE_TEMPORAL_UI_PORT", "8233", "Port of the local Temporal web UI.")
    temporal_ui_url: str = _env(
        "ERASURE_TEMPORAL_UI_URL", "", "Base URL of Temporal UI for links. Empty: the local UI's URL."
    )
    temporal_namespace: str = _env("ERASURE_TEMPORAL_NAMESPACE", "default", "Temporal namespace.")
    task_queue: str = _env("ERASURE_TASK_QUEUE", "erasure", "Task queue of the erasure worker.")
    database_url: str = _env(
        "ERASURE_DATABASE_URL",
        "",
        "Postgres URL of the platform stores. Empty: the embedded pgserver on ERASURE_PG_PORT.",
        required_in_production=True,
    )
    pg_port: str = _env("ERASURE_PG_PORT", "55432", "Port of the embedded Postgres.")
    s3_endpoint: str = _env(
        "ERASURE_S3_ENDPOINT",
        "",
        "S3 endpoint URL. Empty: the local SeaweedFS on ERASURE_S3_PORT (AWS S3 needs 'aws').",
        required_in_production=True,
    )
    s3_port: str = _env(
        "ERASURE_S3_PORT", "8333", "Port of the local SeaweedFS S3 gateway (its other ports follow it)."
    )
    s3_region: str = _env("ERASURE_S3_REGION", "us-east-1", "Region for S3 and KMS clients.")
    artifact_bucket: str = _env("ERASURE_ARTIFACT_BUCKET", "erasure-artifacts", "Bucket of agent artifacts.")
    log_bucket: str = _env("ERASURE_LOG_BUCKET", "erasure-logs", "Bucket of the shipped log archive.")
    receipt_bucket: str = _env("ERASURE_RECEIPT_BUCKET", "erasure-receipts", "Bucket receipts are exported to.")
    kms_endpoint: str = _env(
        "ERASURE_KMS_ENDPOINT",
        "",
        "KMS endpoint URL. Empty: the local moto KMS on ERASURE_KMS_PORT; 'aws' for real AWS KMS.",
        required_in_production=True,
    )
    kms_port: str = _env("ERASURE_KMS_PORT", "4599", "Port of the local KMS endpoint.")
    kms_key_id: str = _env(
        "ERASURE_KMS_KEY_ID",
        "",
        "KMS key that wraps per-user data keys. Empty: the key created by 'erasure stack up'.",
        required_in_production=True,
    )
    ingestion_delay_seconds: str = _env(
        "ERASURE_INGESTION_DELAY_SECONDS",
        "3600",
        "Longest ingestion delay: the durable wait before the second sweep.",
    )
    due_days: str = _env("ERASURE_DUE_DAYS", "30", "Days from receipt to a request's due date.")
    subject_key_secret: str = _env(
        "ERASURE_SUBJECT_KEY_SECRET",
        "",
        "Hex secret keying the pseudonymous subject key. Empty: from the local secrets file ('erasure stack up').",
        required_in_production=True,
    )
    signing_key: str = _env(
        "ERASURE_SIGNING_KEY",
        "",
        "Hex Ed25519 private key (32 bytes) signing receipts. Empty: from the local secrets file ('erasure stack up').",
        required_in_production=True,
    )
    payload_key: str = _env(
        "ERASURE_PAYLOAD_KEY",
        "",
        "Hex AES-256 key of the Temporal payload codec. Empty: from the local secrets file ('erasure stack up').",
        required_in_production=True,
    )
    codec_token: str = _env(
        "ERASURE_CODEC_TOKEN",
        "",
        "Bearer token (32+ characters) the codec server requires. Empty: 'erasure codec-server' refuses to start.",
    )
    log_format: str = _env("ERASURE_LOG_FORMAT", "auto", "Log output: auto (console on a terminal), json or console.")
    metrics_port: str = _env("ERASURE_METRICS_PORT", "0", "Prometheus metrics port of the worker (0: off).")
    sweep_interval_minutes: str = _env(
        "ERASURE_SWEEP_INTERVAL_MINUTES", "60", "How often the scheduled late-writer sweep runs."
    )
    sweep_lookback_hours: str = _env(
        "ERASURE_SWEEP_LOOKBACK_HOURS", "720", "The sweep checks every subject erased within this many hours."
    )
    s3_delete_batch: str = _env(
        "ERASURE_S3_DELETE_BATCH", "1000", "Keys per S3 DeleteObjects request (1-1000; lower for rate-limited stores)."
    )
    chaos_pause_ms: str = _env(
        "ERASURE_CHAOS_PAUSE_MS",
        "0",
        "Crash drills only: pause after every heartbeat so a kill lands inside a batched step.",
    )

    # ----- construction -------------------------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, str] = {f.name: env.get(f.metadata["env"], str(f.default)) for f in fields(cls)}
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        for name in ("temporal_port", "temporal_ui_port", "pg_port", "s3_port", "kms_port", "metrics_port"):
            port = self._int(name)
            if not 0 <= port <= 65535 or (port == 0 and name != "metrics_port"):
                raise ConfigError(f"{self._var(name)} must be a port number, got {getattr(self, name)!r}")
        if self.ingestion_delay < 0:
            raise ConfigError("ERASURE_INGESTION_DELAY_SECONDS must not be negative")
        if self.sweep_interval <= 0 or self.sweep_lookback <= 0:
            raise ConfigError("ERASURE_SWEEP_INTERVAL_MINUTES and ERASURE_SWEEP_LOOKBACK_HOURS must be positive")
        if not 1 <= self._int("s3_delete_batch") <= 1000:
            raise ConfigError("ERASURE_S3_DELETE_BATCH must be between 1 and 1000")
        if self.due_days_int <= 0:
            raise ConfigError("ERASURE_DUE_DAYS must be positive")
        if self.log_format not in ("auto", "json", "console"):
            raise ConfigError("ERASURE_LOG_FORMAT must be auto, json or console")

    def _var(self, name: str) -> str:
        return str(next(f.metadata["env"] for f in fields(self) if f.name == name))

    def _int(self, name: str) -> int:
        raw = getattr(self, name)
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{self._var(name)} must be an integer, got {raw!r}") from None

    # ----- typed accessors ----------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir).resolve()

    @property
    def embedded_temporal(self) -> bool:
        return not self.temporal_address

    @property
    def embedded_postgres(self) -> bool:
        return not self.database_url

    @property
    def embedded_s3(self) -> bool:
        return not self.s3_endpoint

    @property
    def embedded_kms(self) -> bool:
        return not self.kms_endpoint

    @property
    def temporal_target(self) -> str:
        return self.temporal_address or f"127.0.0.1:{self._int('temporal_port')}"

    @property
    def ui_url(self) -> str:
        if self.temporal_ui_url:
            return self.temporal_ui_url.rstrip("/")
        return f"http://127.0.0.1:{self._int('temporal_ui_port')}"

    @property
    def postgres_url(self) -> str:
        return self.database_url or f"postgresql://postgres@127.0.0.1:{self._int('pg_port')}/postgres"

    @property
    def s3_url(self) -> str | None:
        """Endpoint for boto3: ``None`` means AWS's own."""
        if self.s3_endpoint == "aws":
            return None
        return self.s3_endpoint or f"http://127.0.0.1:{self._int('s3_port')}"

    @property
    def kms_url(self) -> str | None:
        if self.kms_endpoint == "aws":
            return None
        return self.kms_endpoint or f"http://127.0.0.1:{self._int('kms_port')}"

    @property
    def ingestion_delay(self) -> int:
        return self._int("ingestion_delay_seconds")

    @property
    def due_days_int(self) -> int:
        return self._int("due_days")

    @property
    def ports(self) -> dict[str, int]:
        return {
            "temporal": self._int("temporal_port"),
            "temporal-ui": self._int("temporal_ui_port"),
            "postgres": self._int("pg_port"),
            "s3": self._int("s3_port"),
            "kms": self._int("kms_port"),
        }

    @property
    def sweep_interval(self) -> int:
        return self._int("sweep_interval_minutes")

    @property
    def sweep_lookback(self) -> int:
        return self._int("sweep_lookback_hours")

    @property
    def chaos_pause_seconds(self) -> float:
        return self._int("chaos_pause_ms") / 1000.0

    @property
    def metrics_port_int(self) -> int:
        return self._int("metrics_port")

    def env(self) -> dict[str, str]:
        """The settings as environment variables (to hand to child processes)."""
        return {f.metadata["env"]: str(getattr(self, f.name)) for f in fields(self)}


def settings_doc() -> list[tuple[str, str, str, bool]]:
    """(variable, default, meaning, required in production) for every setting."""
    return [
        (f.metadata["env"], str(f.default), f.metadata["help"], f.metadata["required_in_production"])
        for f in fields(Settings)
    ]
