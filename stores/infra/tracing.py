"""OpenTelemetry spans around the stores' Postgres, S3 and KMS calls, with nothing personal in them.

The stores make *child* spans only: a call made while no span is current (a seeder, a migration, a scheduled
sweep's activity outside any trace) makes none, so every span belongs to the trace of the request that
caused it, and a process that traces nothing pays one context lookup per call.

What a span may carry is fixed here, never taken from the call's arguments: the operation (``SELECT``,
``DeleteObjects``), the table a statement names, the bucket; never SQL parameters, object keys (they hold
subject keys and paths), key ids or values. Span names are fixed strings.

The tracer provider is looked up at every span (``use`` sets it; ``None`` falls back to OpenTelemetry's
global one), so tests can install an in-memory provider for one test and take it away again: the global
provider can be set only once per process.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util import types as otel_types
from psycopg import sql
from psycopg.rows import Row

_provider: trace.TracerProvider | None = None


def use(provider: trace.TracerProvider | None) -> trace.TracerProvider | None:
    """Make ``provider`` this process's tracer provider (``None``: OpenTelemetry's global one); the one
    it replaces."""
    global _provider
    before, _provider = _provider, provider
    return before


def installed() -> trace.TracerProvider | None:
    """The provider ``use`` set, if any (a process that traces has one)."""
    return _provider


def provider() -> trace.TracerProvider:
    return _provider if _provider is not None else trace.get_tracer_provider()


class _Tracer(trace.Tracer):
    """A tracer that asks ``provider()`` at every span (so one made at start follows a later ``use``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _real(self) -> trace.Tracer:
        return provider().get_tracer(self._name)

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        return self._real().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:  # the real tracer's context manager
        return self._real().start_as_current_span(*args, **kwargs)


def tracer(name: str) -> trace.Tracer:
    return _Tracer(name)


_TRACER = tracer("erasure.stores")


def in_trace() -> bool:
    """Whether a span is current (a child span would join a trace)."""
    return trace.get_current_span().get_span_context().is_valid


def child_span(name: str, attributes: otel_types.Attributes = None, kind: SpanKind = SpanKind.CLIENT) -> Span | None:
    """A started span under the current one, or ``None`` when no span is current. The caller ends it."""
    if not in_trace():
        return None
    return _TRACER.start_span(name, attributes=attributes, kind=kind)


@contextmanager
def span(
    name: str, attributes: otel_types.Attributes = None, kind: SpanKind = SpanKind.INTERNAL, *, of: str = "erasure"
) -> Iterator[Span]:
    """A span made current for the block (a child of the current one, else a new trace's root). An exception
    marks it failed with the exception's type only: messages may quote what a person typed."""
    with tracer(of).start_as_current_span(
        name, attributes=attributes, kind=kind, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__name__)
            current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


# ----- Postgres -------------------------------------------------------------------------------------------

_OPERATION = re.compile(r"\s*(?:--[^\n]*\n\s*)*([A-Za-z]+)")
#: the first table a statement names (after FROM or JOIN, a name followed by "(" is a function: unnest(...))
_TABLE = re.compile(
    r"\b(?:(?:FROM|JOIN)\s+(?:ONLY\s+)?([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()"
    r"|(?:INTO|UPDATE|TABLE)\s+(?:ONLY\s+)?([A-Za-z_][A-Za-z0-9_]*)\b)",
    re.IGNORECASE,
)


def statement_attributes(query: str) -> tuple[str, dict[str, str]]:
    """(span name, attributes) of a SQL statement: its first keyword and the first table it names. The
    statement's text and its parameters are left out."""
    op = _OPERATION.match(query)
    operation = op.group(1).upper() if op else "SQL"
    if operation == "WITH":  # a CTE: name it by what it ends up doing
        found = re.search(r"\)\s*(SELECT|INSERT|UPDATE|DELETE)\b", query, re.IGNORECASE)
        operation = found.group(1).upper() if found else "SELECT"
    attributes = {"db.system.name": "postgresql", "db.operation.name": operation}
    found = _TABLE.search(query)
    table = (found.group(1) or found.group(2)) if found else None
    name = f"postgres {operation}"
    if table and table.upper() not in ("SELECT", "LATERAL"):
        attributes["db.collection.name"] = table.lower()
        name += f" {attributes['db.collection.name']}"
    return name, attributes


def _query_text(query: Any, conn: psycopg.Connection[Any]) -> str:
    if isinstance(query, str):
        return query
    if isinstance(query, bytes):
        return query.decode("utf-8", errors="replace")
    if isinstance(query, sql.Composable):
        try:
            return query.as_string(conn)
        except Exception:  # a span must never fail the statement
            return ""
    return ""


@contextmanager
def _statement_span(query: Any, conn: psycopg.Connection[Any]) -> Iterator[None]:
    if not in_trace():
        yield
        return
    name, attributes = statement_attributes(_query_text(query, conn))
    span = _TRACER.start_span(name, attributes=attributes, kind=SpanKind.CLIENT)
    try:
        yield
    except Exception as exc:
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))  # the type: messages may quote values
        span.set_attribute("error.type", type(exc).__name__)
        raise
    finally:
        span.end()


class TracedCursor(psycopg.Cursor[Row]):
    """A psycopg cursor whose statements are child spans (the pool's ``cursor_factory``)."""

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> TracedCursor[Row]:
        with _statement_span(query, self.connection):
            super().execute(query, params, **kwargs)
        return self

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        with _statement_span(query, self.connection):
            super().executemany(query, params_seq, **kwargs)


# ----- S3 and KMS (botocore events) -----------------------------------------------------------------------

_Client = TypeVar("_Client")
_SPAN = "erasure_otel_span"
_BUCKET = "erasure_otel_bucket"


def _remember_bucket(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
    bucket = params.get("Bucket")
    if isinstance(bucket, str):
        context[_BUCKET] = bucket  # a configured bucket's name; never the key, prefix or version


def _before_call(model: Any, context: dict[str, Any], **_: Any) -> None:
    service = str(model.service_model.service_id)
    attributes: dict[str, str] = {"rpc.system": "aws-api", "rpc.service": service, "rpc.method": model.name}
    if _BUCKET in context:
        attributes["aws.s3.bucket"] = context[_BUCKET]
    span = child_span(f"{service} {model.name}", attributes)
    if span is not None:
        context[_SPAN] = span


def _after_call(http_response: Any, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
    span: Span | None = context.pop(_SPAN, None)
    if span is None:
        return
    status = int(getattr(http_response, "status_code", 0) or 0)
    span.set_attribute("http.response.status_code", status)
    retries = (parsed.get("ResponseMetadata") or {}).get("RetryAttempts")
    if isinstance(retries, int):
        span.set_attribute("aws.retry_attempts", retries)
    if status >= 300:
        code = str((parsed.get("Error") or {}).get("Code") or status)
        span.set_attribute("error.type", code[:100])
        span.set_status(Status(StatusCode.ERROR, code[:100]))
    span.end()


def _after_call_error(exception: BaseException, context: dict[str, Any], **_: Any) -> None:
    span: Span | None = context.pop(_SPAN, None)
    if span is None:
        return
    span.set_attribute("error.type", type(exception).__name__)
    span.set_status(Status(StatusCode.ERROR, type(exception).__name__))  # the type: a URL may name a key
    span.end()


def instrument_boto(client: _Client) -> _Client:
    """Child spans around every API call of a boto3 client (S3, KMS); the client, for chaining."""
    events = client.meta.events  # type: ignore[attr-defined]
    events.register("before-parameter-build", _remember_bucket)
    events.register("before-call", _before_call)
    events.register("after-call", _after_call)
    events.register("after-call-error", _after_call_error)
    return client
