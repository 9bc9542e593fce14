"""TLS everywhere, end to end, with certificates generated here (tests/tls_fixture.py).

- Temporal: ``temporal server start-dev`` cannot serve TLS, so a TLS-terminating proxy that requires a
  client certificate (mTLS, ALPN h2) stands in front of it; the client comes from
  ``workers.temporal_client.connect(settings)``.
- Postgres: pgserver's build has no SSL support, so a proxy speaks Postgres's in-protocol TLS (SSLRequest,
  then the handshake) in front of it and refuses plain startups; clients use ``sslmode=verify-full`` with the
  test CA (``ERASURE_DATABASE_SSLMODE``, ``ERASURE_DATABASE_SSLROOTCERT``).
- S3 and KMS: HTTPS proxies in front of SeaweedFS and the KMS endpoint, trusted through
  ``ERASURE_AWS_CA_BUNDLE``.

One erasure runs to completion with every connection over TLS; clients missing the CA (or the client
certificate) fail.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from botocore.exceptions import SSLError
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

from stores.infra.aws_clients import AwsEndpoints, s3_client
from tests.oidc_issuer import LocalIssuer
from tests.saga_harness import SagaHarness
from tests.tls_fixture import Pki, PostgresTlsProxy, TlsProxy, issue_client, make_pki
from workers.credential_reload import TemporalCredentials
from workers.errors import ConfigError
from workers.local_idp import ServiceClient
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.temporal_client import TemporalTls, TemporalUnreachable, connect, tls_config
from workers.temporal_token import TokenRefused
from workers.wiring import build_platform
from workers.worker import build_worker

pytestmark = [pytest.mark.integration]
aio = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _port(target: str) -> int:
    return int(target.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def proxies(pki: Pki, local_stack: Settings, temporal_env: object) -> Iterator[dict[str, TlsProxy]]:
    from temporalio.testing import WorkflowEnvironment

    assert isinstance(temporal_env, WorkflowEnvironment)
    temporal = _port(temporal_env.client.service_client.config.target_host)
    started = {
        "temporal": TlsProxy(pki, temporal, require_client_cert=True, alpn=["h2"]).start(),
        "s3": TlsProxy(pki, local_stack.s3_port, require_client_cert=False, alpn=[]).start(),
        "kms": TlsProxy(pki, local_stack.kms_port, require_client_cert=False, alpn=[]).start(),
        "postgres": PostgresTlsProxy(pki, local_stack.ports["postgres"]).start(),
    }
    try:
        yield started
    finally:
        for proxy in started.values():
            proxy.stop()


def tls_settings(local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy], **env: str) -> Settings:
    """The test stack's settings with Temporal, Postgres, S3 and KMS reached over TLS, trusted through the
    test CA."""
    values = {
        **local_stack.env(),
        "ERASURE_DATABASE_URL": f"postgresql://postgres@localhost:{proxies['postgres'].port}/postgres",
        "ERASURE_DATABASE_SSLMODE": "verify-full",
        "ERASURE_DATABASE_SSLROOTCERT": str(pki.ca),
        "ERASURE_TASK_QUEUE": f"tls-{uuid.uuid4().hex[:8]}",
        "ERASURE_TEMPORAL_ADDRESS": f"127.0.0.1:{proxies['temporal'].port}",
        "ERASURE_TEMPORAL_TLS_CA_FILE": str(pki.ca),
        "ERASURE_TEMPORAL_TLS_CERT_FILE": str(pki.client_cert),
        "ERASURE_TEMPORAL_TLS_KEY_FILE": str(pki.client_key),
        "ERASURE_S3_ENDPOINT": f"https://127.0.0.1:{proxies['s3'].port}",
        "ERASURE_KMS_ENDPOINT": f"https://localhost:{proxies['kms'].port}",
        "ERASURE_KMS_KEY_ID": load_kms_key(local_stack),
        "ERASURE_AWS_CA_BUNDLE": str(pki.ca),
    }
    values.update(env)
    return Settings.from_env(values)


def load_kms_key(settings: Settings) -> str:
    from workers.wiring import kms_key_id

    return kms_key_id(settings)


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explicit endpoints use the default AWS credential chain; the local stores accept any key."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")


# ----- one erasure over TLS everywhere -----------------------------------------------------------


@aio
@pytest.mark.usefixtures("aws_credentials")
async def test_an_erasure_completes_over_tls_to_temporal_postgres_s3_and_kms(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy]
) -> None:
    settings = tls_settings(local_stack, pki, proxies)
    seen = {name: proxy.connections for name, proxy in proxies.items()}
    client = await connect(settings)
    with build_platform(settings, key_cache_ttl=0.0) as platform:
        harness = SagaHarness(client, platform, settings)
        await harness.seed("tls", ["tls-alice", "tls-bob"], "small", 91)
        async with build_worker(client, settings.task_queue, platform, load_secrets(settings).signing_key):
            result = await harness.erase("tls", "tls-alice")
        assert result.status == "completed", result
        body = harness.receipt_body(result.request_id)
        assert all(v["passed"] for v in body["verifications"])
    # every part was reached through its TLS proxy
    assert all(proxies[name].connections > seen[name] for name in proxies), {
        n: (seen[n], p.connections) for n, p in proxies.items()
    }


# ----- Temporal: who cannot connect ---------------------------------------------------------------


@aio
async def test_temporal_client_without_the_ca_fails_with_a_clear_error(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy]
) -> None:
    settings = tls_settings(local_stack, pki, proxies, ERASURE_TEMPORAL_TLS_CA_FILE="", ERASURE_TEMPORAL_TLS="true")
    with pytest.raises(TemporalUnreachable) as refused:
        await connect(settings)
    message = str(refused.value)
    assert message.startswith(f"cannot connect to Temporal at 127.0.0.1:{proxies['temporal'].port} (TLS): ")
    assert "UnknownIssuer" in message or "certificate" in message.lower(), message


@aio
async def test_temporal_client_trusting_another_ca_fails(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy]
) -> None:
    settings = tls_settings(local_stack, pki, proxies, ERASURE_TEMPORAL_TLS_CA_FILE=str(pki.other_ca))
    with pytest.raises(TemporalUnreachable, match=r"(?i)certificate|UnknownIssuer"):
        await connect(settings)


@aio
async def test_temporal_client_without_a_client_certificate_is_refused(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy]
) -> None:
    settings = tls_settings(
        local_stack, pki, proxies, ERASURE_TEMPORAL_TLS_CERT_FILE="", ERASURE_TEMPORAL_TLS_KEY_FILE=""
    )
    with pytest.raises(TemporalUnreachable):
        await asyncio.wait_for(connect(settings), 30)


def test_tls_options_are_checked_before_connecting(pki: Pki, tmp_path: Path) -> None:
    assert tls_config(TemporalTls()) is False
    assert tls_config(TemporalTls(), api_key=True) is True  # an API key goes over TLS only
    assert tls_config(TemporalTls(enabled=True)) is True
    with pytest.raises(ConfigError, match="ERASURE_TEMPORAL_TLS_CERT_FILE and ERASURE_TEMPORAL_TLS_KEY_FILE"):
        tls_config(TemporalTls(cert_file=str(pki.client_cert)))
    with pytest.raises(ConfigError, match="ERASURE_TEMPORAL_TLS_CA_FILE: cannot read"):
        tls_config(TemporalTls(ca_file=str(tmp_path / "missing.pem")))
    config = tls_config(TemporalTls(ca_file=str(pki.ca), server_name="temporal.internal"))
    assert not isinstance(config, bool)
    assert config.server_root_ca_cert == pki.ca.read_bytes()
    assert config.domain == "temporal.internal"


# ----- Postgres: verify-full against the TLS proxy -------------------------------------------------


def test_postgres_verify_full_needs_the_root_certificate(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy]
) -> None:
    settings = tls_settings(local_stack, pki, proxies)
    params = psycopg.conninfo.conninfo_to_dict(settings.postgres_url)
    assert (params["sslmode"], params["sslrootcert"]) == ("verify-full", str(pki.ca))
    with psycopg.connect(settings.postgres_url, connect_timeout=5) as conn:  # TLS, the server verified
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.pgconn.ssl_in_use
    other = tls_settings(local_stack, pki, proxies, ERASURE_DATABASE_SSLROOTCERT=str(pki.other_ca))
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(other.postgres_url, connect_timeout=5)
    proxy = proxies["postgres"]
    assert isinstance(proxy, PostgresTlsProxy)
    refused = proxy.refused_plain
    plain = f"postgresql://postgres@localhost:{proxy.port}/postgres?sslmode=disable"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(plain, connect_timeout=5)
    assert proxy.refused_plain == refused + 1


# ----- S3 and KMS over HTTPS ----------------------------------------------------------------------


@pytest.mark.usefixtures("aws_credentials")
def test_s3_over_https_needs_the_ca_bundle(local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy]) -> None:
    url = f"https://127.0.0.1:{proxies['s3'].port}"
    trusted = s3_client(AwsEndpoints(s3_url=url, kms_url=None, region="us-east-1", local=True, ca_bundle=str(pki.ca)))
    trusted.head_bucket(Bucket=local_stack.artifact_bucket)  # raises unless the bucket answers over HTTPS
    untrusted = s3_client(AwsEndpoints(s3_url=url, kms_url=None, region="us-east-1", local=True))
    with pytest.raises(SSLError):
        untrusted.head_bucket(Bucket=local_stack.artifact_bucket)


# ----- Temporal: a client certificate rotated on disk ---------------------------------------------


@aio
@pytest.mark.usefixtures("aws_credentials")
async def test_a_client_certificate_replaced_on_disk_is_used_by_the_running_workers_next_connection(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy], tmp_path: Path
) -> None:
    """The worker's certificate is renewed in place; the server then stops accepting the old one (closes
    its connections, refuses new ones). The running worker, refreshed, finishes an erasure on the new one."""
    cert, key = tmp_path / "client.pem", tmp_path / "client-key.pem"
    first = issue_client(pki, cert, key)
    settings = tls_settings(
        local_stack, pki, proxies, ERASURE_TEMPORAL_TLS_CERT_FILE=str(cert), ERASURE_TEMPORAL_TLS_KEY_FILE=str(key)
    )
    secrets = load_secrets(settings)
    temporal = proxies["temporal"]
    credentials = TemporalCredentials(settings, secrets, await connect(settings, secrets))
    assert first in temporal.peer_serials
    assert await credentials.refresh() == "unchanged"
    with build_platform(settings, key_cache_ttl=0.0) as platform:
        await SagaHarness(credentials.client, platform, settings).seed("tls", ["tls-carol", "tls-dave"], "small", 92)
        worker = build_worker(credentials.client, settings.task_queue, platform, secrets.signing_key)
        async with worker:
            second = issue_client(pki, cert, key)
            assert await credentials.refresh(worker) == "reconnected"
            assert worker.client is credentials.client
            assert second in temporal.peer_serials
            temporal.refuse(first)  # the old certificate is no longer accepted: only the new connection works
            harness = SagaHarness(credentials.client, platform, settings)
            result = await asyncio.wait_for(harness.erase("tls", "tls-carol"), 120)
        assert result.status == "completed", result
    # a certificate caught half-written changes nothing: the current connection stays
    cert.write_text("-----BEGIN CERTIFICATE-----\nMIIB")
    kept = credentials.client
    assert await credentials.refresh() == "failed"
    assert credentials.client is kept
    assert await credentials.refresh() == "failed"  # and the next poll tries again


# ----- a client-credentials JWT for the stock authorizer, fetched again before it expires --------------


@pytest.fixture
def token_issuer() -> Iterator[LocalIssuer]:
    issuer = LocalIssuer()
    issuer.service_clients = {
        "erasure-worker": ServiceClient("s3cret-worker", ("default:write",), lifetime=4),
        "temporal-ui": ServiceClient("s3cret-ui", ("default:read",), lifetime=300),
    }
    issuer.start()
    yield issuer
    issuer.stop()


def _claims(issuer: LocalIssuer, token: str) -> dict[str, object]:
    from joserfc import jwt
    from joserfc.jwk import KeySet

    return dict(jwt.decode(token, KeySet(list(issuer.keys))).claims)


@aio
async def test_the_worker_sends_a_client_credentials_jwt_and_fetches_the_next_before_it_expires(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy], token_issuer: LocalIssuer
) -> None:
    """The frontend's stock JWT claim mapper reads ``permissions``: the worker's token says ``default:write``,
    signed by the provider's key; a quarter of its lifetime before expiry the watch puts the next on the
    running client, which keeps working."""
    settings = tls_settings(
        local_stack,
        pki,
        proxies,
        ERASURE_TEMPORAL_OAUTH_TOKEN_URL=f"{token_issuer.url}/token",
        ERASURE_TEMPORAL_OAUTH_CLIENT_ID="erasure-worker",
        ERASURE_TEMPORAL_OAUTH_CLIENT_SECRET="s3cret-worker",
    )
    secrets = load_secrets(settings)
    credentials = TemporalCredentials(settings, secrets, await connect(settings, secrets))
    first = credentials.client.api_key
    assert first is not None
    claims = _claims(token_issuer, first)
    assert (claims["sub"], claims["aud"], claims["permissions"]) == ("erasure-worker", "temporal", ["default:write"])
    assert await credentials.refresh() == "unchanged"  # not due yet
    await asyncio.sleep(3.2)  # 4 s lifetime: due at 3 s
    assert await credentials.refresh() == "api_key"
    second = credentials.client.api_key
    assert second is not None
    assert second != first
    assert _claims(token_issuer, second)["permissions"] == ["default:write"]
    await credentials.client.workflow_service.get_system_info(GetSystemInfoRequest())  # still connected
    fetched = [r for r in token_issuer.token_requests if r.get("grant_type") == "client_credentials"]
    assert len(fetched) == 2
    assert all("client_secret" not in r for r in token_issuer.token_requests)


@aio
async def test_a_refused_client_secret_is_one_clear_error_without_the_secret(
    local_stack: Settings, pki: Pki, proxies: dict[str, TlsProxy], token_issuer: LocalIssuer
) -> None:
    settings = tls_settings(
        local_stack,
        pki,
        proxies,
        ERASURE_TEMPORAL_OAUTH_TOKEN_URL=f"{token_issuer.url}/token",
        ERASURE_TEMPORAL_OAUTH_CLIENT_ID="erasure-worker",
        ERASURE_TEMPORAL_OAUTH_CLIENT_SECRET="not-the-secret",
    )
    with pytest.raises(TokenRefused) as refused:
        await connect(settings, load_secrets(settings))
    assert "answered 401 (invalid_client)" in str(refused.value)
    assert "not-the-secret" not in str(refused.value)
