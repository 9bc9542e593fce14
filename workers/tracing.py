"""OpenTelemetry tracing for a process: one tracer provider, set up once from the settings.

``ERASURE_TRACE_EXPORTER`` says where spans go: ``console`` (one JSON line per span; on stdout for the
worker and the console, whose stdout is their log stream, on stderr for one-shot CLI commands, whose stdout
is their answer), ``otlp`` (OTLP/gRPC to ``ERASURE_TRACE_OTLP_ENDPOINT`` or the standard ``OTEL_EXPORTER_
OTLP_*`` variables) or ``none``. Unset, production mode uses ``console`` and local mode ``none`` (the test
suite's and ``make demo``'s output stay readable).

One trace per request: the console's HTTP span (``console/telemetry.py``) or the CLI's filing span
(``workers/service.py``) is the root; the Temporal client's ``TracingInterceptor`` carries it in the
workflow's start header, so the workflow's spans, its activities' and their Postgres, S3 and KMS calls
(``stores/infra/tracing.py``) share its trace id. Nothing personal: span names are fixed strings; attributes are
workflow, run and activity ids (``erasure-er_...``: request ids), operations, tables and buckets.

``install`` takes a ready provider (a test's in-memory exporter) and ``uninstall`` puts the previous one
back: OpenTelemetry's global provider can be set only once per process, so the stores and the interceptor
ask ``stores.infra.tracing.provider()`` instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from temporalio.client import Interceptor

from stores.infra import tracing as store_tracing
from workers.settings import Settings

#: the process's own provider, once ``configure`` made one (flushed by ``shutdown``)
_configured: TracerProvider | None = None
#: the processes whose stdout is a log stream (the console exporter writes there); others use stderr
LOG_STREAM_PROCESSES = frozenset({"erasure-worker", "erasure-console"})


def _one_line(span: ReadableSpan) -> str:
    return str(span.to_json(indent=None)) + "\n"


def exporter(settings: Settings, service: str, stream: TextIO | None = None) -> SpanExporter | None:
    """The span exporter the settings name; ``None`` for ``none``."""
    kind = settings.traces_to
    if kind == "none":
        return None
    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=settings.trace_otlp_endpoint or None)
    out = stream or (sys.stdout if service in LOG_STREAM_PROCESSES else sys.stderr)
    return ConsoleSpanExporter(service_name=service, out=out, formatter=_one_line)


def configure(settings: Settings, service: str) -> TracerProvider | None:
    """Set up this process's tracer provider once (later calls return the first); ``None`` when the settings
    trace nothing."""
    global _configured
    if _configured is not None:
        return _configured
    chosen = exporter(settings, service)
    if chosen is None:
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(chosen))
    trace.set_tracer_provider(provider)  # other libraries' instrumentation joins the same traces
    store_tracing.use(provider)
    _configured = provider
    return provider


def shutdown() -> None:
    """Export what is buffered and stop (the CLI ends with ``os._exit``, which runs no exit handlers)."""
    global _configured
    if _configured is not None:
        _configured.shutdown()
        _configured = None


def interceptors() -> list[Interceptor]:
    """The Temporal client's tracing interceptor when this process traces (the worker built from the client
    inherits it: workflow and activity spans), else none."""
    if store_tracing.installed() is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(store_tracing.tracer("temporalio"))]


@contextmanager
def installed(provider: trace.TracerProvider) -> Iterator[trace.TracerProvider]:
    """``provider`` as this process's tracer provider for the block (a test's in-memory exporter)."""
    before = store_tracing.use(provider)
    try:
        yield provider
    finally:
        store_tracing.use(before)
