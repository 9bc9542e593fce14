"""Tracing set-up (issue 31 item 6): where spans go by default, what a Postgres span is named, and that the
stores make child spans only."""

from __future__ import annotations

import io
import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from stores.infra import tracing as store_tracing
from workers import tracing
from workers.settings import Settings


def test_console_in_production_none_locally_otlp_when_asked() -> None:
    local = Settings.from_env({})
    assert local.traces_to == "none"
    assert tracing.exporter(local, "erasure-worker") is None
    production = local.model_copy(update={"mode": "production"})
    assert production.traces_to == "console"
    assert Settings.from_env({"ERASURE_TRACE_EXPORTER": "console"}).traces_to == "console"
    otlp = Settings.from_env({"ERASURE_TRACE_EXPORTER": "otlp", "ERASURE_TRACE_OTLP_ENDPOINT": "http://collector:4317"})
    assert type(tracing.exporter(otlp, "erasure-worker")).__name__ == "OTLPSpanExporter"


def test_the_console_exporter_writes_one_json_line_per_span() -> None:
    out = io.StringIO()
    chosen = tracing.exporter(Settings.from_env({"ERASURE_TRACE_EXPORTER": "console"}), "erasure-worker", out)
    assert chosen is not None
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(chosen))
    with tracing.installed(provider), store_tracing.span("file erasure request"):
        pass
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["name"] == "file erasure request"


def test_statements_are_named_by_operation_and_table_never_by_values() -> None:
    name, attributes = store_tracing.statement_attributes(
        "UPDATE erasure_requests SET state = %s WHERE request_id = %s AND note = 'alice@example.com'"
    )
    assert name == "postgres UPDATE erasure_requests"
    assert "alice" not in str(attributes)
    assert store_tracing.statement_attributes("SELECT k FROM unnest(%s) AS u(k)")[0] == "postgres SELECT"
    assert store_tracing.statement_attributes("INSERT INTO memories (a) VALUES (%s)")[0] == "postgres INSERT memories"


def test_store_calls_outside_a_trace_make_no_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tracing.installed(provider):
        assert store_tracing.child_span("S3 GetObject") is None  # no current span: no orphan trace
        with store_tracing.span("POST /api/requests") as root:
            child = store_tracing.child_span("S3 GetObject")
            assert child is not None
            child.end()
    assert not tracing.interceptors()  # the provider is gone with the block
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["S3 GetObject", "POST /api/requests"]
    assert spans[0].context.trace_id == root.get_span_context().trace_id
