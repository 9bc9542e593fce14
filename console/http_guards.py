"""What every request meets before any route, authentication or body parsing: size limits, rate limits, and
the security headers every answer carries.

- **Body size** (``BodyLimit``): a body over its path's limit is answered 413 before anything parses it
  (a declared ``Content-Length`` at once; a chunked body as soon as it passes the limit). Unauthenticated
  bodies used to be parsed whole first: a 381 MB POST took the console from 177 MB to 962 MB.
- **Who the client is** (``TrustedProxies``): the socket peer, unless the peer is one of the trusted proxies
  (``ERASURE_CONSOLE_TRUSTED_PROXIES``, CIDRs; none by default); then the right-most address of
  ``X-Forwarded-For`` that is not itself a trusted proxy (the left of the header is whatever the client
  wrote). ``erasure serve`` runs uvicorn without its own proxy handling, which trusted the header from
  127.0.0.1 and let any client there (or every client behind a local ingress, sharing one bucket) choose its
  address (issue 40).
- **Rate** (``RateLimit``): the login and the intake routes take at most ``per_minute`` requests a minute
  from one client address, then 429 with ``Retry-After``. The routes that cost (filing, preview, search,
  export: ``COSTLY``) are limited per authenticated principal too (``PrincipalLimits``, added to each such
  route by the app after its guard). Both count in the database (``console.rate_limits``), so every console
  process draws on the same budget; counted in each process, they multiplied by the replicas (issue 40).
- **Headers** (``SecurityHeaders``): a Content-Security-Policy with ``frame-ancestors 'none'`` on the
  console's pages (no page can be framed, so no one-click approval can be clickjacked), ``X-Frame-Options``,
  ``nosniff`` and no referrer; the proxied Temporal UI gets the framing rules only (it brings its own code).
"""

from __future__ import annotations

import inspect
import ipaddress
import math
import secrets
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from typing import Annotated, Any

from fastapi import Depends, HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from console.rate_limits import RateLimits

DEFAULT_LIMIT = 64 * 1024
#: bigger bodies where the route needs them (path prefix -> bytes)
LIMITS: dict[str, int] = {
    "/api/requests/bulk": 4 * 1024 * 1024,  # 5,000 CSV rows
    "/codec/decode": 4 * 1024 * 1024,  # a history page of payloads
}
#: the pages' policy; ``{nonce}``: this response's own script nonce (``SecurityHeaders``). No 'unsafe-inline'
#: for scripts (issue 40): an injected ``<script>`` or ``onclick=`` runs nowhere, only the page's own script
#: carrying the nonce does. Styles stay inline (the base template's one block): a style cannot run code.
CSP = (
    "default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
#: where a response's script nonce is kept in the request's state, for the templates (``console.rendering``)
NONCE_STATE = "csp_nonce"
RATE_LIMITED = ("/login", "/auth/callback", "/api/intake/ketch", "/api/requests/bulk")
#: the routes that cost, limited per principal: (method, path) -> the bucket they draw from
COSTLY: dict[tuple[str, str], str] = {
    ("POST", "/api/requests"): "filing",
    ("POST", "/api/requests/bulk"): "filing",
    ("POST", "/api/intake/ketch"): "filing",
    ("POST", "/api/forget"): "filing",
    ("POST", "/requests/new"): "filing",
    ("POST", "/api/forget/preview"): "preview",
    ("POST", "/forget/preview"): "preview",
    ("POST", "/forget/confirm"): "preview",  # it previews again, and shows it when the choice is refused
    ("GET", "/api/requests"): "search",
    ("GET", "/api/audit"): "search",
    ("GET", "/"): "search",
    ("GET", "/audit"): "search",
    ("GET", "/api/audit/export"): "export",
    ("GET", "/audit.csv"): "export",
}
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated networks in CIDR notation (a bare address is a network of one); ``ValueError`` names a
    bad entry."""
    networks = []
    for entry in (e.strip() for e in text.split(",")):
        if entry:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (CIDR)") from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("["):  # [v6]:port
        text = text[1 : text.find("]")] if "]" in text else text
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _trusted(text: str, trusted: Sequence[Network]) -> bool:
    address = _address(text)
    return address is not None and any(address in network for network in trusted)


def client_address(peer: str, headers: Iterable[tuple[bytes, bytes]], trusted: Sequence[Network]) -> str:
    """The client: ``peer``, unless it is a trusted proxy; then the right-most ``X-Forwarded-For`` entry that is
    not a trusted proxy (every proxy appends the address it was reached from; what is left of the last trusted
    one is the client's own claim). When every hop is trusted, the right-most (the address the nearest proxy
    saw), never the left-most: that one the client may have written (uvicorn's ``*`` took it)."""
    if not _trusted(peer, trusted):
        return peer
    hops = [
        h.strip() for name, value in headers if name == b"x-forwarded-for" for h in value.decode("latin-1").split(",")
    ]
    hops = [h for h in hops if h]
    for hop in reversed(hops):
        if not _trusted(hop, trusted):
            address = _address(hop)
            return str(address) if address is not None else hop
    return str(_address(hops[-1]) or hops[-1]) if hops else peer


class TrustedProxies(_HttpOnly):
    """The request's client (and scheme) as the trusted proxies tell it; from anyone else, the socket peer and
    the scheme it connected with, whatever the headers say."""

    def __init__(self, app: ASGIApp, trusted: Sequence[Network] = ()) -> None:
        super().__init__(app)
        self._trusted = tuple(trusted)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer, port = scope.get("client") or ("", 0)
        if self._trusted and _trusted(peer, self._trusted):
            headers = scope["headers"]
            scope = {**scope, "client": (client_address(peer, headers, self._trusted), port)}
            proto = dict(headers).get(b"x-forwarded-proto", b"").decode("latin-1").split(",")[-1].strip().lower()
            if proto in ("http", "https"):
                scope["scheme"] = proto
        await self._app(scope, receive, send)


def too_many(wait: float, what: str = "requests") -> HTTPException:
    """429 with ``Retry-After``: the whole seconds until the next request is taken."""
    seconds = max(1, math.ceil(wait))
    return HTTPException(429, f"too many {what}; try again in {seconds} s", headers={"Retry-After": str(seconds)})


class RateLimit:
    """``per_minute`` requests a minute per (path, client address) on ``paths``, counted by ``limits``."""

    def __init__(
        self, app: ASGIApp, limits: RateLimits, per_minute: int = 30, paths: Iterable[str] = RATE_LIMITED
    ) -> None:
        self._app = app
        self._limits = limits
        self._per_minute = per_minute
        self._paths = tuple(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path in self._paths:
            client = str((scope.get("client") or ("?", 0))[0])
            window = await run_in_threadpool(self._limits.take, f"address{path}", client, 60.0)
            if window.over(self._per_minute):
                seconds = str(max(1, math.ceil(window.resets_in)))
                reply = JSONResponse({"detail": f"too many requests; try again in {seconds} s"}, status_code=429)
                reply.headers["Retry-After"] = seconds
                await reply(scope, receive, send)
                return
        await self._app(scope, receive, send)


class PrincipalLimits:
    """The costly routes' limits per authenticated principal (an OIDC ``sub``, an API token): one bucket per
    (kind of call, principal), ``per_minute[kind]`` requests a minute, counted by ``limits``. A route gets
    ``dependency(kind, guard)`` next to its guard: FastAPI resolves the guard once, so the principal is the one
    the route acts for, and an unauthenticated or refused call is answered 401/403 before it counts."""

    def __init__(self, limits: RateLimits, per_minute: dict[str, int]) -> None:
        self._limits = limits
        self._per_minute = dict(per_minute)

    def dependency(self, kind: str, guard: Callable[..., Any]) -> Callable[..., Any]:
        limit = self._per_minute[kind]

        def limited(principal: Any) -> None:  # a plain function: FastAPI runs it on a worker thread
            window = self._limits.take(f"principal.{kind}", principal.subject, 60.0)
            if window.over(limit):
                raise too_many(window.resets_in, f"{kind} calls")

        # the guard as the principal's dependency (built here: the guard is known only now)
        given = inspect.Parameter(
            "principal", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[Any, Depends(guard)]
        )
        limited.__signature__ = inspect.Signature([given], return_annotation=None)  # type: ignore[attr-defined]
        return limited


class SecurityHeaders(_HttpOnly):
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        proxied = scope["path"].startswith("/temporal")
        nonce = secrets.token_urlsafe(18)  # per response: a page's script runs, an injected one does not
        # this request's own state (a server may hand every request a copy of one shared dict)
        scope["state"] = {**scope.get("state", {}), NONCE_STATE: nonce}
        extra = [
            (b"x-frame-options", b"DENY"),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"content-security-policy", b"frame-ancestors 'none'" if proxied else CSP.format(nonce=nonce).encode()),
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
