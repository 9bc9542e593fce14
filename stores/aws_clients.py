"""boto3 clients for S3 and KMS, built from explicit endpoints (``None`` means AWS itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class AwsEndpoints:
    s3_url: str | None
    kms_url: str | None
    region: str
    local: bool  # local stack: static dummy credentials, path-style addressing


_RETRIES = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=3, read_timeout=30)


def _key(ep: AwsEndpoints) -> str | None:
    """Static dummy credentials on the local stack; the default AWS chain otherwise."""
    return "local" if ep.local else None


def s3_client(ep: AwsEndpoints) -> S3Client:
    config = _RETRIES.merge(Config(s3={"addressing_style": "path"})) if ep.local else _RETRIES
    return boto3.client(
        "s3",
        endpoint_url=ep.s3_url,
        region_name=ep.region,
        config=config,
        aws_access_key_id=_key(ep),
        aws_secret_access_key=_key(ep),
    )


def kms_client(ep: AwsEndpoints) -> KMSClient:
    return boto3.client(
        "kms",
        endpoint_url=ep.kms_url,
        region_name=ep.region,
        config=_RETRIES,
        aws_access_key_id=_key(ep),
        aws_secret_access_key=_key(ep),
    )
