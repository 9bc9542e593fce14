"""The console's traces and Prometheus metrics.

Every HTTP request is one span, named by its method and route *template* (``POST /api/requests/{request_id}
/approve``), never the raw path or query; it is the root of the request's trace, so filing a request
continues it into the workflow and its activities (``workers/tracing.py``). Probes (``/healthz``,
``/readyz``) are counted but not traced.

Metrics live in the console's own registry and are served on a port of their own
(``ERASURE_CONSOLE_METRICS_PORT``), never on the console's port, which the Ingress exposes to the internet:

==============================================  =========  ======================  ================================
metric                                          type       labels                  meaning
==============================================  =========  ======================  ================================
``erasure_console_http_requests_total``         counter    method, route, status   answers, by route template
``erasure_console_http_request_seconds``        histogram  method, route           time to answer
``erasure_console_requests_filed_total``        counter    source                  new requests (api, csv, ketch,
                                                                                   form)
``erasure_console_decisions_total``             counter    decision, outcome       approvals, denials,
                                                                                   cancellations: taken or refused
``erasure_console_access_refused_total``        counter    permission              403s: a role lacked permission
``erasure_console_requests_open``               gauge      state                   open requests by state (read at
                                                                                   scrape time)
==============================================  =========  ======================  ================================
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stores.infra.tracing import span

#: answered without a span: the probes, asked every few seconds
UNTRACED = frozenset({"/healthz", "/readyz"})
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: the label of a path no route matched (a 404, or refused before routing): never the raw path
UNMATCHED = "unmatched"


class _OpenRequests(Collector):
    def __init__(self, count: Callable[[], Mapping[str, int]]) -> None:
        self._count = count

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily("erasure_console_requests_open", "Open erasure requests by state.", labels=["state"])]

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("erasure_console_requests_open", "Open erasure requests by state.", labels=["state"])
        try:
            counts = self._count()
        except Exception:  # the database away: the gauge has no samples this scrape, the rest still answers
            counts = {}
        for state, n in sorted(counts.items()):
            family.add_metric([state], n)
        yield family


class ConsoleMetrics:
    """The console's counters, in a registry of their own (one per console: tests build several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.http_requests = Counter(
            "erasure_console_http_requests",
            "HTTP requests answered by the console, by route template.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_seconds = Histogram(
            "erasure_console_http_request_seconds",
            "Seconds the console took to answer, by route template.",
            ["method", "route"],
            registry=self.registry,
        )
        self.filed = Counter(
            "erasure_console_requests_filed", "Requests filed through the console.", ["source"], registry=self.registry
        )
        self.decisions = Counter(
            "erasure_console_decisions",
            "Approvals, denials and cancellations, taken or refused.",
            ["decision", "outcome"],
            registry=self.registry,
        )
        self.access_refused = Counter(
            "erasure_console_access_refused",
            "Signed-in callers refused for lack of a role (403), by the permission asked for.",
            ["permission"],
            registry=self.registry,
        )
        self._states: _OpenRequests | None = None

    def count_open_requests(self, count: Callable[[], Mapping[str, int]]) -> None:
        """Report ``count()`` (state -> open requests) at every scrape."""
        if self._states is None:
            self._states = _OpenRequests(count)
            self.registry.register(self._states)

    def answered(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in _METHODS else "OTHER"
        self.http_requests.labels(method, route, str(status)).inc()
        self.http_seconds.labels(method, route).observe(seconds)


def route_of(scope: Scope) -> str:
    """The template of the route that answered (``/api/requests/{request_id}``), or ``unmatched``."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


class Telemetry:
    """ASGI middleware: a span per request (the trace's root) and the request's metrics."""

    def __init__(self, app: ASGIApp, metrics: ConsoleMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = str(scope.get("method", "GET")).upper()
        status = 500  # what an exception that escapes every handler becomes
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            if scope.get("path") in UNTRACED:
                await self.app(scope, receive, sending)
                return
            attributes: dict[str, Any] = {"http.request.method": method}
            with span(method, attributes, SpanKind.SERVER, of="erasure.console") as current:
                try:
                    await self.app(scope, receive, sending)
                finally:
                    route = route_of(scope)
                    current.update_name(f"{method} {route}")
                    current.set_attribute("http.route", route)
                    current.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        current.set_status(Status(StatusCode.ERROR))
        finally:
            self.metrics.answered(method, route_of(scope), status, time.perf_counter() - started)


def serve_metrics(metrics: ConsoleMetrics, host: str, port: int) -> Any:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread; the server (its ``server_port``, ``shutdown``)."""
    server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    return server
