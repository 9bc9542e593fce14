"""The compliance console under test: a local OIDC issuer, the app in process on the real stack, a browser.

``api`` builds the console exactly as ``erasure serve`` does (``build_console`` on a platform connected as the
console's own database login, ``console_platform``) on the session's stack, with a real local identity
provider (``tests.oidc_issuer``); ``Browser`` is a cookie-keeping client that logs in through that provider
with PKCE. Test modules import the fixtures by name.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from console.app import create_app
from console.wiring import build_console
from stores.platform import Platform
from tests.oidc_issuer import AUDIENCE, LocalIssuer
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.wiring import build_platform, console_settings

APP = "console-app"


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    started = LocalIssuer().start()
    yield started
    started.stop()


@dataclasses.dataclass
class Api:
    app: FastAPI
    http: httpx.AsyncClient
    issuer: LocalIssuer
    saga: SagaHarness

    def bearer(self, sub: str, *roles: str, **kwargs: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.issuer.mint(sub, list(roles), **kwargs)}"}

    async def file(self, user: str, sub: str = "rita@compliance.example") -> str:
        reply = await self.http.post(
            "/api/requests", json={"app_name": APP, "user_id": user}, headers=self.bearer(sub, "requester")
        )
        assert reply.status_code == 201, reply.text
        return str(reply.json()["request_id"])

    async def wait_for_state(self, request_id: str, *states: str, seconds: float = 60) -> str:
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            state = self.saga.platform.requests.get(request_id).state
            if state in states:
                return state
            assert asyncio.get_running_loop().time() < deadline, f"{request_id} stayed {state}"
            await asyncio.sleep(0.2)


@pytest.fixture(scope="session")
def console_platform(local_stack: Settings) -> Iterator[Platform]:
    """The console's own store layer, connected as ``erasure serve`` connects: the console's login (a member of
    erasure_console_rights), not the owner's the worker's platform (``saga.platform``) uses."""
    platform = build_platform(console_settings(local_stack))
    try:
        yield platform
    finally:
        platform.close()


@pytest_asyncio.fixture(loop_scope="session")
async def api(saga: SagaHarness, issuer: LocalIssuer, console_platform: Platform) -> AsyncIterator[Api]:
    settings = console_settings(
        saga.settings.model_copy(
            update={
                "oidc_issuer": issuer.url,
                "oidc_audience": AUDIENCE,
                "console_url": "http://127.0.0.1:8088",
                "codec_allowed_origins": "https://cloud.temporal.io",
            }
        )
    )
    console = build_console(settings, load_secrets(settings), console_platform, saga.client)
    app = create_app(console)
    with saga.platform.pool.connection() as conn:  # each test's console starts with no calls counted
        conn.execute("DELETE FROM rate_limit_windows")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as http:
        yield Api(app, http, issuer, saga)


class Browser:
    """A cookie-keeping client of the console (in process) that follows the login through the real issuer."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=api.app), base_url="http://127.0.0.1:8088")

    async def login(self, sub: str, *roles: str) -> None:
        self.api.issuer.next_login = (sub, list(roles))
        start = await self.http.get("/login")
        assert start.status_code == 303
        to_issuer = start.headers["location"]
        assert to_issuer.startswith(self.api.issuer.url + "/authorize?")
        assert "code_challenge_method=S256" in to_issuer
        async with httpx.AsyncClient() as outside:  # the identity provider is a real server
            back = await outside.get(to_issuer)
        assert back.status_code == 303, back.text
        callback = back.headers["location"].removeprefix("http://127.0.0.1:8088")
        done = await self.http.get(callback)
        assert done.status_code == 303, done.text
        assert done.headers["location"] == "/"

    def csrf(self, page: str) -> str:
        return page.split('<meta name="csrf" content="', 1)[1].split('"', 1)[0]

    async def close(self) -> None:
        await self.http.aclose()
