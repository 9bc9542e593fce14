"""Logs, Prometheus metrics and OpenTelemetry traces."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ObservabilitySettings(BaseModel):
    """Log format, metrics ports and where spans go."""

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
