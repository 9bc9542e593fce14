"""boto3 clients for S3 and KMS, built from explicit endpoints (``None`` means AWS itself).

``ca_bundle`` names a PEM file of the CA certificates that an HTTPS endpoint's certificate must chain to
(an internal CA in front of an S3-compatible store or a KMS proxy); empty: the system's trust store.

Every call is a child span of the current trace, if any (``stores.infra.tracing.instrument_boto``: the operation
and the bucket, never a key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from stores.infra.tracing import instrument_boto

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class AwsEndpoints:
    s3_url: str | None
    kms_url: str | None
    region: str
    local: bool  # local stack: static dummy credentials, path-style addressing
    ca_bundle: str = ""  # PEM file of CA certificates for HTTPS endpoints ('': the system's trust store)


#: connections kept per client: one per activity slot (16) and the verifier's readers at once, so a busy worker
#: reuses its connections instead of discarding one after each request over botocore's default of 10
#: ("Connection pool is full, discarding connection", seen under the benchmark's concurrent erasures)
MAX_POOL_CONNECTIONS = 32
_RETRIES = Config(
    retries={"max_attempts": 3, "mode": "standard"},
    connect_timeout=3,
    read_timeout=30,
    max_pool_connections=MAX_POOL_CONNECTIONS,
)
#: a readiness probe's client: one attempt, short timeouts (a service that accepts and never answers must not
#: hold the probe for botocore's retries times its read timeout)
SINGLE_ATTEMPT = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2, read_timeout=5)


def _key(ep: AwsEndpoints) -> str | None:
    """Static dummy credentials on the local stack; the default AWS chain otherwise."""
    return "local" if ep.local else None


def _verify(ep: AwsEndpoints) -> str | None:
    return ep.ca_bundle or None  # None: botocore verifies against its default trust store


def s3_client(ep: AwsEndpoints, base: Config = _RETRIES) -> S3Client:
    config = base.merge(Config(s3={"addressing_style": "path"})) if ep.local else base
    if ep.s3_url is not None:
        # an S3-compatible store (not AWS): over HTTPS botocore's default streams the body with a trailing
        # checksum (aws-chunked), which such stores (SeaweedFS among them) refuse; send checksums only
        # where the API requires one (DeleteObjects)
        config = config.merge(
            Config(request_checksum_calculation="when_required", response_checksum_validation="when_required")
        )
    client = boto3.client(
        "s3",
        endpoint_url=ep.s3_url,
        region_name=ep.region,
        config=config,
        verify=_verify(ep),
        aws_access_key_id=_key(ep),
        aws_secret_access_key=_key(ep),
    )
    return instrument_boto(client)


def kms_client(ep: AwsEndpoints, base: Config = _RETRIES) -> KMSClient:
    client = boto3.client(
        "kms",
        endpoint_url=ep.kms_url,
        region_name=ep.region,
        config=base,
        verify=_verify(ep),
        aws_access_key_id=_key(ep),
        aws_secret_access_key=_key(ep),
    )
    return instrument_boto(client)
