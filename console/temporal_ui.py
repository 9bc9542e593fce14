"""Temporal UI, decoded for the people allowed to see it: the console's codec endpoint and UI proxy.

Every payload the orchestrator sends through Temporal is encrypted (``workers.codec``), so Temporal UI on
its own shows ciphertext. Two routes let the people the console trusts read it:

- ``POST /codec/decode``: the codec-server protocol (``{"payloads": [...]}`` in, decoded out; no
  ``/encode``, which would be an encryption oracle). Temporal UI calls it from the browser. The caller
  needs the ``history:read`` permission, shown by the console's session cookie (the UI sends it when it is
  served from the console's origin, or with "include cross-origin credentials"), or by a bearer token (an
  OIDC access token the UI passes with ``passAccessToken``, or an API token). A request from a browser
  origin other than the console's own and ``ERASURE_CODEC_ALLOWED_ORIGINS`` is refused (403); the
  preflight of an allowed origin is answered with credentials allowed.
- ``/temporal/...``: a Temporal UI served under the public path ``/temporal``
  (``ERASURE_TEMPORAL_UI_UPSTREAM``; the local stack's by default) proxied behind the console's login. The
  UI then runs on the console's origin, so its codec calls carry the session cookie and decode, while the
  same UI opened directly shows ciphertext only. Through the console the UI is read-only by construction:
  a raw path holding a dot segment, an encoded slash, dot or backslash is refused (400) before anything
  else looks at it, so the path checked is the path forwarded; then GETs and one exact POST, a workflow
  query, pass (``ALLOWED``); start, terminate, reset, signal and every other write are refused (403).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote

import httpx
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.converter import PayloadCodec

from console.context import console_of
from console.dependencies import History, PageBrowses
from console.sessions import SESSION_COOKIE
from workers.codec_server import decode_response
from workers.temporal_token import TokenRefused

CODEC_PATH = "/codec/decode"
PROXY_PREFIX = "/temporal"
#: the one kind of POST the proxied UI may send: a workflow query (the progress query); terminate, reset,
#: signal, cancel and the rest are refused (the console's roles read history, they do not steer workflows)
QUERY_PATH = re.compile(r"^/temporal/api/v1/namespaces/[^/]+/workflows/[^/]+/query/[^/]+$")
#: (method, path pattern) pairs forwarded, matched against the path exactly as it will be sent
ALLOWED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("GET", re.compile(r"^/temporal(/[^/]*)*$")),
    ("POST", QUERY_PATH),
)
#: what a raw path may not hold: dot segments, encoded slashes, dots and backslashes, NUL
_UNSAFE_RAW = re.compile(r"(^|/)\.{1,2}(/|$)|%2[ef]|%5c|%00|\\", re.IGNORECASE)


def forwardable(method: str, raw_path: str) -> str | None:
    """The path to forward for this request, or ``None`` when the proxy refuses it. ``raw_path`` is the path
    exactly as the client sent it (percent-encoding and dot segments intact): one the upstream client would
    normalise, or that decodes to something else, is refused rather than checked in one form and sent in
    another."""
    if _UNSAFE_RAW.search(raw_path) or "//" in raw_path:
        return None
    for allowed_method, pattern in ALLOWED:
        if method == allowed_method and pattern.match(raw_path):
            return raw_path
    return None


_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "origin",
        "cookie",
        "authorization",
    }
)


class CodecOrigins:
    """CORS for ``/codec/decode`` only: a preflight from an allowed origin is answered (credentials allowed),
    a request from any other browser origin is refused before authentication; other paths pass untouched."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self._app = app
        self._allowed = frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != CODEC_PATH:
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        if origin is not None and origin not in self._allowed:
            await JSONResponse({"error": "origin not allowed"}, status_code=403)(scope, receive, send)
            return
        cors = (
            {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true", "Vary": "Origin"}
            if origin
            else {}
        )
        if scope["method"] == "OPTIONS":
            preflight = {
                **cors,
                "Access-Control-Allow-Methods": "POST",
                "Access-Control-Allow-Headers": "Authorization, Authorization-Extras, Content-Type, X-Namespace",
                "Access-Control-Max-Age": "600",
            }
            await Response(status_code=204, headers=preflight)(scope, receive, send)
            return

        async def with_cors(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and cors:
                raw = list(message.get("headers", []))
                raw += [(k.lower().encode(), v.encode()) for k, v in cors.items()]
                message = {**message, "headers": raw}
            await send(message)

        await self._app(scope, receive, with_cors)


def codec_router(codec: PayloadCodec) -> APIRouter:
    """``POST /codec/decode`` with ``codec``."""
    router = APIRouter()

    @router.post(CODEC_PATH)
    async def codec_decode(request: Request, p: History) -> JSONResponse:
        """Temporal's codec-server protocol: ``{"payloads": [...]}`` (Payloads in protobuf JSON) decoded with
        the orchestrator's payload key, for Temporal UI. Needs ``history:read`` (a session or a bearer); each
        decode that answers is audited with how many payloads it opened (never what they hold)."""
        raw = await request.body()
        answer = await decode_response(codec, raw)
        if answer.status_code == 200:
            count = raw.count(b'"data"')  # one per payload in the codec protocol's JSON
            await asyncio.to_thread(
                console_of(request).audit.append, p.actor, "payloads_decoded", None, {"payloads": count}
            )
        return answer

    return router


#: a workflow's event history read through the proxied UI (what the audit log records as a view)
HISTORY_PATH = re.compile(r"^/temporal/api/v1/namespaces/[^/]+/workflows/([^/]+)/history(?:-reverse)?$")
#: the request a workflow belongs to: erasure-<id>, forget-<id>, verify-<id>-..., reverify-<id>...
REQUEST_OF_WORKFLOW = re.compile(r"^(?:erasure|forget|verify|reverify)-((?:er|fr)_[0-9a-f]+)")


class ViewWindow:
    """One audit entry per person and workflow every ``seconds``: Temporal UI reloads a history while it is
    open, and the log should say who looked, not how often the page polled."""

    def __init__(self, seconds: float = 300.0) -> None:
        self.seconds = seconds
        self._seen: dict[tuple[str, str], float] = {}

    def first_in_window(self, actor: str, workflow: str) -> bool:
        now = time.monotonic()
        if len(self._seen) > 10_000:
            self._seen = {k: t for k, t in self._seen.items() if now - t < self.seconds}
        last = self._seen.get((actor, workflow))
        if last is not None and now - last < self.seconds:
            return False
        self._seen[(actor, workflow)] = now
        return True


def _forwarded_cookie(header: str) -> str:
    """The browser's cookies less the console's session (the UI server has no business with it)."""
    kept = [c.strip() for c in header.split(";") if c.strip() and not c.strip().startswith(SESSION_COOKIE + "=")]
    return "; ".join(kept)


def proxy_router(upstream: str, token: Callable[[], Awaitable[str]] | None = None) -> APIRouter:
    """``/temporal/...`` forwarded to a Temporal UI served under that public path, behind the login.

    ``token``: the read-only Temporal JWT (``ERASURE_TEMPORAL_UI_OAUTH_*``) sent as the call's
    ``Authorization`` (the browser's own never passes): Temporal UI's server hands it to the frontend with
    each call it makes, and the frontend's stock authorizer lets a ``read`` token do nothing else, so a write
    this proxy's method and path filter missed is refused by Temporal itself."""
    router = APIRouter()
    client = httpx.AsyncClient(base_url=upstream.rstrip("/"), timeout=30.0, follow_redirects=False)
    views = ViewWindow()

    @router.get(PROXY_PREFIX, include_in_schema=False)
    async def temporal_root(p: PageBrowses) -> Response:
        return RedirectResponse(PROXY_PREFIX + "/", status_code=307)

    @router.api_route(PROXY_PREFIX + "/{path:path}", methods=["GET", "POST"], include_in_schema=False)
    async def temporal_ui(request: Request, path: str, p: PageBrowses) -> Response:
        raw = request.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0]
        if _UNSAFE_RAW.search(raw) or "//" in raw:
            raise HTTPException(400, "a path with dot segments or encoded separators is refused")
        target = forwardable(request.method, raw)
        if target is None:
            raise HTTPException(403, "Temporal UI through the console is read-only (workflow queries allowed)")
        viewed = HISTORY_PATH.match(target) if request.method == "GET" else None
        if viewed and views.first_in_window(p.actor, viewed.group(1)):
            workflow = unquote(viewed.group(1))
            owner = REQUEST_OF_WORKFLOW.match(workflow)
            await asyncio.to_thread(
                console_of(request).audit.append,
                p.actor,
                "history_viewed",
                owner.group(1) if owner else None,
                {"workflow_id": workflow},
            )
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP]
        cookie = _forwarded_cookie(request.headers.get("cookie", ""))
        if cookie:
            headers.append(("cookie", cookie))
        if token is not None:
            try:
                headers.append(("authorization", f"Bearer {await token()}"))
            except TokenRefused:
                raise HTTPException(502, "Temporal UI's read-only token could not be fetched") from None
        outgoing = client.build_request(
            request.method,
            httpx.URL(upstream.rstrip("/") + target, query=request.url.query.encode("latin-1")),
            headers=headers,
            content=await request.body(),
        )
        try:
            reply = await client.send(outgoing, stream=True)
        except httpx.HTTPError:
            raise HTTPException(502, "Temporal UI is not reachable") from None
        kept = {k: v for k, v in reply.headers.multi_items() if k.lower() not in _HOP_BY_HOP | {"set-cookie"}}
        response = StreamingResponse(
            reply.aiter_raw(), status_code=reply.status_code, headers=kept, background=BackgroundTask(reply.aclose)
        )
        for value in reply.headers.get_list("set-cookie"):
            response.raw_headers.append((b"set-cookie", value.encode("latin-1")))
        return response

    router.on_shutdown.append(client.aclose)
    return router
