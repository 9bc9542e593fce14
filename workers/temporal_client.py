"""One Temporal client per process, always with the encrypting data converter."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from workers.codec import data_converter
from workers.local_secrets import Secrets, load_secrets
from workers.settings import Settings

_runtimes: dict[int, Runtime] = {}


def runtime_for(metrics_port: int) -> Runtime | None:
    """A runtime exporting the SDK's own metrics to Prometheus on ``metrics_port`` (0: default runtime)."""
    if not metrics_port:
        return None
    if metrics_port not in _runtimes:
        _runtimes[metrics_port] = Runtime(
            telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"0.0.0.0:{metrics_port}"))
        )
    return _runtimes[metrics_port]


async def connect(settings: Settings, secrets: Secrets | None = None, *, metrics_port: int = 0) -> Client:
    secrets = secrets or load_secrets(settings)
    return await Client.connect(
        settings.temporal_target,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(secrets.payload_key),
        runtime=runtime_for(metrics_port),
    )
