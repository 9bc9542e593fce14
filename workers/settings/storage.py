"""Postgres (the platform stores' database and its pool), the S3 object store (buckets, batches, volume
compaction) and the KMS endpoint."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from workers.settings.names import REQUIRED_IN_PRODUCTION, Port, file_help


class StorageSettings(BaseModel):
    """The database, the object store and the KMS endpoint."""

    database_url: SecretStr = Field(
        default=SecretStr(""),
        description="Postgres URL of the platform stores (a secret: it may hold a password). Empty: the "
        "embedded pgserver on ERASURE_PG_PORT.",
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    database_url_file: str = Field(default="", description=file_help("database_url"))
    console_database_url: SecretStr = Field(
        default=SecretStr(""),
        description="Postgres URL of the console's own login ('erasure serve'; a secret): a role granted "
        "erasure_console_rights, which may read and append the audit log and nothing else on it. Migrations and "
        "the worker use ERASURE_DATABASE_URL (the tables' owner). Empty: the local stack's erasure_console login "
        "on the embedded Postgres; in production 'erasure serve' refuses to start without it.",
    )
    console_database_url_file: str = Field(default="", description=file_help("console_database_url"))
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
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    s3_port: Port = Field(
        default=8333,
        description="Port of the local SeaweedFS S3 gateway; SeaweedFS also takes the seven ports after it "
        "(checked at start: no other port setting may fall in them).",
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
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    kms_port: Port = Field(default=4599, description="Port of the local KMS endpoint.")
