"""What every request meets before any route, authentication or body parsing: size limits, rate limits, and
the security headers every answer carries.

- **Body size** (``BodyLimit``): a body over its path's limit is answered 413 before anything parses it
  (a declared ``Content-Length`` at once; a chunked body as soon as it passes the limit). Unauthenticated
  bodies used to be parsed whole first: a 381 MB POST took the console from 177 MB to 962 MB.
- **Rate** (``RateLimit``): the login and the intake routes take at most ``per_minute`` requests a minute
  from one client address (a token bucket per address, in this process), then 429 with ``Retry-After``.
- **Headers** (``SecurityHeaders``): a Content-Security-Policy with ``frame-ancestors 'none'`` on the
  console's pages (no page can be framed, so no one-click approval can be clickjacked), ``X-Frame-Options``,
  ``nosniff`` and no referrer; the proxied Temporal UI gets the framing rules only (it brings its own code).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_LIMIT = 64 * 1024
#: bigger bodies where the route needs them (path prefix -> bytes)
LIMITS: dict[str, int] = {
    "/api/requests/bulk": 4 * 1024 * 1024,  # 5,000 CSV rows
    "/codec/decode": 4 * 1024 * 1024,  # a history page of payloads
}
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"
)
RATE_LIMITED = ("/login", "/auth/callback", "/api/intake/ketch", "/api/requests/bulk")


def limit_for(path: str) -> int:
    return next((n for prefix, n in LIMITS.items() if path.startswith(prefix)), DEFAULT_LIMIT)


class _HttpOnly:
    """An ASGI middleware that acts on HTTP requests (``http``) and passes every other scope through."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class BodyLimit(_HttpOnly):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = limit_for(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = JSONResponse({"detail": f"the body is larger than {limit} bytes"}, status_code=413)
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await too_large(scope, receive, send)
            return
        seen = 0
        over = False
        started = False

        async def counted() -> Message:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:  # the app sees the client gone; the answer below is ours
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def unless_over(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if not over:
                started = started or message["type"] == "http.response.start"
                await send(message)

        try:
            await self._app(scope, counted, unless_over)
        except Exception:
            if not over:
                raise
        if over and not started:
            await too_large(scope, receive, send)


class RateLimit:
    """A token bucket per (path, client address): ``per_minute`` requests, refilled continuously."""

    def __init__(self, app: ASGIApp, per_minute: int = 30, paths: Iterable[str] = RATE_LIMITED) -> None:
        self._app = app
        self._rate = per_minute / 60.0
        self._burst = float(per_minute)
        self._paths = tuple(paths)
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}
        self._lock = threading.Lock()

    def _take(self, key: tuple[str, str]) -> bool:
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - at) * self._rate)
            allowed = tokens >= 1.0
            self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
            if len(self._buckets) > 10_000:  # forget the quiet ones
                self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < 120}
            return allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path in self._paths:
            client = (scope.get("client") or ("?", 0))[0]
            if not self._take((path, str(client))):
                reply = JSONResponse({"detail": "too many requests; try again in a minute"}, status_code=429)
                reply.headers["Retry-After"] = "60"
                await reply(scope, receive, send)
                return
        await self._app(scope, receive, send)


class SecurityHeaders(_HttpOnly):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        proxied = scope["path"].startswith("/temporal")
        extra = [
            (b"x-frame-options", b"DENY"),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"content-security-policy", b"frame-ancestors 'none'" if proxied else CSP.encode()),
        ]

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _v in message.get("headers", [])}
                message = {
                    **message,
                    "headers": [*message.get("headers", []), *((k, v) for k, v in extra if k not in names)],
                }
            await send(message)

        await self._app(scope, receive, with_headers)
