"""``erasure codec-server``: decode payloads for Temporal UI (its "Codec Server" setting), and nothing else.

Temporal UI POSTs ``{"payloads": [...]}`` to ``/decode`` with the namespace in ``X-Namespace``. Whoever can
call ``/decode`` reads decrypted history, so every request must pass three checks (Starlette app, served by
uvicorn):

- ``Host`` is one of the addresses the server was started for (a DNS-rebinding page names its own host);
- ``Origin``, when a browser sends one, is Temporal UI's origin (``ERASURE_TEMPORAL_UI_URL``);
- ``Authorization: Bearer <ERASURE_CODEC_TOKEN>`` (constant-time compare). Temporal UI sends it when its
  codec setting passes the access token; a proxy in front can add it too.

There is no ``/encode``: it would be an encryption oracle for forging history payloads. Malformed input
gets a 400 with a reason that never echoes the input.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from typing import Any
from urllib.parse import urlsplit

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from workers.codec import EncryptionCodec
from workers.errors import ConfigError
from workers.settings import Settings

MIN_TOKEN_LENGTH = 32
MAX_BODY = 4 * 1024 * 1024


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class _Guard:
    """Refuses a foreign ``Origin`` (403) and a missing or wrong bearer token (401) before any route runs."""

    def __init__(self, app: ASGIApp, token: str, origin: str) -> None:
        self._app = app
        self._token = token.encode()
        self._origin = origin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS":  # CORS preflight: answered by CORS layer
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        if origin is not None and origin != self._origin:
            await JSONResponse({"error": "origin not allowed"}, status_code=403)(scope, receive, send)
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self._token):
            await JSONResponse(
                {"error": "a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )(scope, receive, send)
            return
        await self._app(scope, receive, send)


class BadInput(Exception):
    """The request body is not a codec request; the message says why, never repeating the input."""


def _strict_base64(value: Any) -> None:
    if not isinstance(value, str):
        raise BadInput("payload bytes must be base64 strings")
    try:
        base64.b64decode(value, validate=True)
    except binascii.Error:
        raise BadInput("payload bytes are not valid base64") from None


def _payloads(body: Any) -> list[Payload]:
    if not isinstance(body, dict) or not isinstance(body.get("payloads"), list):
        raise BadInput('expected {"payloads": [...]}')
    for p in body["payloads"]:
        if not isinstance(p, dict) or not isinstance(p.get("metadata", {}), dict):
            raise BadInput("a payload is not a Temporal Payload in JSON form")
        for value in [p.get("data", ""), *p.get("metadata", {}).values()]:
            _strict_base64(value)
    try:
        return [json_format.ParseDict(p, Payload()) for p in body["payloads"]]
    except (json_format.ParseError, TypeError, AttributeError, binascii.Error, ValueError):
        raise BadInput("a payload is not a Temporal Payload in JSON form") from None


async def decode_response(codec: PayloadCodec, raw: bytes) -> JSONResponse:
    """The codec protocol's ``/decode`` answer for a request body (also served by the console's ``/codec``)."""
    if len(raw) > MAX_BODY:
        return JSONResponse({"error": "request too large"}, status_code=413)
    try:
        payloads = _payloads(json.loads(raw))
    except BadInput as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    except ValueError:
        return JSONResponse({"error": "the body is not JSON"}, status_code=400)
    try:
        decoded = await codec.decode(payloads)
    except Exception:  # wrong key, tampered ciphertext, unknown key id: one answer, no detail
        return JSONResponse({"error": "a payload could not be decoded"}, status_code=400)
    return JSONResponse({"payloads": [json_format.MessageToDict(p) for p in decoded]})


def create_app(codec: EncryptionCodec, *, token: str, ui_url: str, allowed_hosts: list[str]) -> Starlette:
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(f"ERASURE_CODEC_TOKEN must be at least {MIN_TOKEN_LENGTH} characters")
    origin = _origin(ui_url)

    async def decode(request: Request) -> JSONResponse:
        return await decode_response(codec, await request.body())

    return Starlette(
        routes=[Route("/decode", decode, methods=["POST"])],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts),
            Middleware(
                CORSMiddleware,
                allow_origins=[origin],
                allow_methods=["POST"],
                allow_headers=["Authorization", "Content-Type", "X-Namespace"],
                allow_credentials=True,
            ),
            Middleware(_Guard, token=token, origin=origin),
        ],
    )


def serve(settings: Settings, port: int, host: str = "127.0.0.1") -> None:
    import uvicorn

    from workers.local_secrets import load_secrets

    token = settings.secret_value("codec_token")
    if not token:
        raise ConfigError("ERASURE_CODEC_TOKEN is not set: the codec server decodes history only for callers with it")
    secrets = load_secrets(settings)
    app = create_app(
        EncryptionCodec(secrets.payload_key, secrets.payload_old_keys),
        token=token,
        ui_url=settings.ui_url,
        allowed_hosts=[f"{host}:{port}", host, f"localhost:{port}", "localhost"],
    )
    print(f"codec server on http://{host}:{port} (set it as the Codec Server in Temporal UI, passing the token)")
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
