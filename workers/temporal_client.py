"""One Temporal client per process, always with the encrypting data converter and the failure converter
that encodes messages (``workers.codec.data_converter``).

Connection options come from the settings: namespace; TLS with the system roots or a custom CA
(``ERASURE_TEMPORAL_TLS_CA_FILE``); an mTLS client certificate and key (``..._TLS_CERT_FILE``,
``..._TLS_KEY_FILE``); a server name to verify instead of the address's host (``..._TLS_SERVER_NAME``); an
API key (``ERASURE_TEMPORAL_API_KEY``, Temporal Cloud) or a client-credentials JWT for a self-hosted
frontend's stock authorizer (``ERASURE_TEMPORAL_OAUTH_*``, ``workers.temporal_token``), sent only over TLS
and never logged. The standard
``TEMPORAL_*`` variables and profiles (``temporalio.envconfig``) reach these settings when their
``ERASURE_TEMPORAL_*`` equivalents are unset (``workers/temporal_env.py``). A connection that
fails (an untrusted server certificate, a refused client certificate, nothing listening) becomes one
``TemporalUnreachable`` line naming the target and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import TLSConfig

from workers import tracing
from workers.codec import data_converter
from workers.errors import ConfigError, ErasureCliError, ExitCode
from workers.local_secrets import Secrets, load_secrets
from workers.settings import Settings
from workers.temporal_token import ClientCredentials, token_source

_runtimes: dict[int, Runtime] = {}


class TemporalUnreachable(ErasureCliError, RuntimeError):
    """The Temporal frontend could not be reached or refused the connection (TLS, credentials).

    Still a ``RuntimeError``, as the SDK's own connection error was, for callers that catch that."""

    exit_code = ExitCode.UNREACHABLE


def runtime_for(metrics_port: int) -> Runtime | None:
    """A runtime exporting the SDK's own metrics to Prometheus on ``metrics_port`` (0: default runtime)."""
    if not metrics_port:
        return None
    if metrics_port not in _runtimes:
        _runtimes[metrics_port] = Runtime(
            telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"0.0.0.0:{metrics_port}"))
        )
    return _runtimes[metrics_port]


@dataclass(frozen=True)
class TemporalTls:
    """TLS options as given (file paths, not contents): what ``tls_config`` turns into the SDK's config."""

    enabled: bool = False
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""

    @property
    def wanted(self) -> bool:
        return self.enabled or bool(self.ca_file or self.cert_file or self.key_file or self.server_name)


def _read(path: str, variable: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{variable}: cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    if not data.strip():
        raise ConfigError(f"{variable}: {path} is empty")
    return data


def tls_config(tls: TemporalTls, *, api_key: bool = False) -> TLSConfig | bool:
    """The SDK's ``tls`` argument: ``False`` (plain), ``True`` (system roots) or a ``TLSConfig``.

    An API key implies TLS (Temporal Cloud); a client certificate needs its key and the other way round.
    """
    if not tls.wanted:
        return api_key
    if bool(tls.cert_file) != bool(tls.key_file):
        raise ConfigError("ERASURE_TEMPORAL_TLS_CERT_FILE and ERASURE_TEMPORAL_TLS_KEY_FILE go together: set both")
    if not (tls.ca_file or tls.cert_file or tls.server_name):
        return True
    return TLSConfig(
        server_root_ca_cert=_read(tls.ca_file, "ERASURE_TEMPORAL_TLS_CA_FILE") if tls.ca_file else None,
        client_cert=_read(tls.cert_file, "ERASURE_TEMPORAL_TLS_CERT_FILE") if tls.cert_file else None,
        client_private_key=_read(tls.key_file, "ERASURE_TEMPORAL_TLS_KEY_FILE") if tls.key_file else None,
        domain=tls.server_name or None,
    )


def settings_tls(settings: Settings) -> TemporalTls:
    return TemporalTls(
        enabled=settings.temporal_tls,
        ca_file=settings.temporal_tls_ca_file,
        cert_file=settings.temporal_tls_cert_file,
        key_file=settings.temporal_tls_key_file,
        server_name=settings.temporal_tls_server_name,
    )


def temporal_api_key(settings: Settings) -> str | None:
    """The API key as it is now: read again from ``ERASURE_TEMPORAL_API_KEY_FILE`` when one is named (a
    rotated secret is used by the next connection), else the value given."""
    if settings.temporal_api_key_file:
        return _read(settings.temporal_api_key_file, "ERASURE_TEMPORAL_API_KEY_FILE").decode().strip() or None
    return settings.secret_value("temporal_api_key") or None


def oauth_credentials(settings: Settings, *, ui: bool = False) -> ClientCredentials | None:
    """The client-credentials login for this process's Temporal token (``ui``: the read-only one the console
    adds to Temporal UI's calls); ``None`` when none is configured."""
    client_id = settings.temporal_ui_oauth_client_id if ui else settings.temporal_oauth_client_id
    secret = settings.secret_value("temporal_ui_oauth_client_secret" if ui else "temporal_oauth_client_secret")
    if not (settings.temporal_oauth_token_url and client_id and secret):
        return None
    return ClientCredentials(settings.temporal_oauth_token_url, client_id, secret)


async def bearer_token(settings: Settings) -> str | None:
    """What the client sends as its bearer token: the client-credentials JWT (current, fetched when due) or
    the API key; ``None`` for neither."""
    source = token_source(oauth_credentials(settings))
    if source is not None:
        return await source.token()
    return temporal_api_key(settings)


async def connect(settings: Settings, secrets: Secrets | None = None, *, metrics_port: int = 0) -> Client:
    secrets = secrets or load_secrets(settings)
    api_key = await bearer_token(settings)
    tls = tls_config(settings_tls(settings), api_key=api_key is not None)
    try:
        return await Client.connect(
            settings.temporal_target,
            namespace=settings.temporal_namespace,
            data_converter=data_converter(secrets.payload_key, secrets.payload_old_keys),
            runtime=runtime_for(metrics_port),
            tls=tls,
            api_key=api_key,
            interceptors=tracing.interceptors(),  # workflow and activity spans in the caller's trace
        )
    except RuntimeError as exc:  # the SDK's connection errors; they never carry the API key
        mode = "TLS" if tls else "plain gRPC"
        reason = str(exc).replace(api_key, "**********") if api_key else str(exc)
        raise TemporalUnreachable(
            f"cannot connect to Temporal at {settings.temporal_target} ({mode}): {reason[:500]}"
        ) from None
