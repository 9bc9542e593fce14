"""Temporal UI behind the console reaches the frontend with a read-only token (issue 40 item 4).

The console adds the ``temporal-ui`` client's client-credentials JWT (``default:read``) as the
``Authorization`` of every call it proxies, in place of anything the browser sent: Temporal UI's server
hands it to the frontend, whose stock authorizer lets a read token do nothing but read. The UI server here is
a real HTTP server recording what reaches it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from console.app import create_app
from console.wiring import build_console
from tests.console_harness import Api, Browser
from tests.oidc_issuer import AUDIENCE, LocalIssuer
from tests.saga_harness import SagaHarness
from tests.stack_fixture import free_port_block
from workers.local_idp import ServiceClient
from workers.local_secrets import load_secrets

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


class RecordingUi:
    """A stand-in Temporal UI server: answers every path, keeps each request's Authorization header."""

    def __init__(self) -> None:
        self.port = free_port_block(1)
        self.authorizations: list[str | None] = []

        async def anything(request: Request) -> JSONResponse:
            self.authorizations.append(request.headers.get("authorization"))
            return JSONResponse({"ok": True})

        app = Starlette(routes=[Route("/{path:path}", anything, methods=["GET", "POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> RecordingUi:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            assert time.monotonic() < deadline, "the stand-in UI did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)


@pytest.fixture
def ui() -> Iterator[RecordingUi]:
    with RecordingUi() as started:
        yield started


async def test_every_proxied_ui_call_carries_the_read_only_token_never_the_browsers(
    saga: SagaHarness, issuer: LocalIssuer, ui: RecordingUi
) -> None:
    issuer.service_clients["temporal-ui"] = ServiceClient("ui-s3cret", ("default:read",))
    settings = saga.settings.model_copy(
        update={
            "oidc_issuer": issuer.url,
            "oidc_audience": AUDIENCE,
            "console_url": "http://127.0.0.1:8088",
            "temporal_ui_upstream": f"http://127.0.0.1:{ui.port}",
            "temporal_oauth_token_url": f"{issuer.url}/token",
            "temporal_ui_oauth_client_id": "temporal-ui",
            "temporal_ui_oauth_client_secret": SecretStr("ui-s3cret"),
        }
    )
    app = create_app(build_console(settings, load_secrets(settings), saga.platform, saga.client))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as http:
        browser = Browser(Api(app, http, issuer, saga))
        try:
            await browser.login("amir@compliance.example", "approver")
            base = "/temporal/api/v1/namespaces/default/workflows/erasure-x"
            forged = {"Authorization": f"Bearer {issuer.mint('amir', ['admin'], permissions=['default:admin'])}"}
            for _ in range(2):
                assert (await browser.http.get(base, headers=forged)).status_code == 200
            assert (await browser.http.post(base + "/query/progress", json={})).status_code == 200
        finally:
            await browser.close()
    assert len(ui.authorizations) == 3
    tokens = {a.removeprefix("Bearer ") for a in ui.authorizations if a and a.startswith("Bearer ")}
    assert len(tokens) == 1  # one token, fetched once and reused while it is fresh
    claims = jwt.decode(tokens.pop(), KeySet(list(issuer.keys))).claims
    assert (claims["sub"], claims["permissions"]) == ("temporal-ui", ["default:read"])
