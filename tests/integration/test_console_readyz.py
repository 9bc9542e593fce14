"""Issue 31, item 1: the console's ``/readyz`` asks the services it depends on, at once, within one deadline.

On the local stack every part (postgres, temporal, the receipts bucket) answers ok and the route says 200,
with no login. With one part's address a listener that accepts and never answers, the route says 503 within
its deadline, that part's line says it was not reached, and the other parts' lines still say what they
found; ``/healthz`` (liveness) answers at once meanwhile: the check runs off the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from console.app import create_app
from console.readiness import DEADLINE, Readiness
from console.wiring import build_console
from tests.saga_harness import SagaHarness
from tests.silent_port import silent_port_fixture  # noqa: F401 (the fixture `silent_port`, used by name)
from workers.local_secrets import load_secrets
from workers.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

PARTS = ["postgres", "temporal", "buckets"]


def _settings(saga: SagaHarness, **update: Any) -> Settings:
    """The session's stack as the console sees it: Temporal is the test dev server the saga's client uses."""
    target = saga.client.service_client.config.target_host
    return saga.settings.model_copy(update={"temporal_address": target, **update})


@asynccontextmanager
async def _client(saga: SagaHarness, settings: Settings, **console: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The console as ``erasure serve`` builds it from ``settings`` (on the session's stack), in process."""
    built = build_console(settings, load_secrets(settings), saga.platform, saga.client)
    app = create_app(dataclasses.replace(built, **console))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console") as http:
        yield http


async def _readyz(http: httpx.AsyncClient) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    reply = await asyncio.wait_for(http.get("/readyz"), DEADLINE + 10)  # no bearer token: the route is public
    return reply, time.monotonic() - started


async def test_readyz_is_200_with_every_part_ok_on_the_local_stack(saga: SagaHarness) -> None:
    settings = _settings(saga)
    async with _client(saga, settings) as http:
        reply, took = await _readyz(http)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["ready"] is True
    assert [p["name"] for p in body["parts"]] == PARTS
    parts = {p["name"]: p for p in body["parts"]}
    assert all(p["ok"] for p in parts.values()), body
    assert "(latest)" in parts["postgres"]["detail"]
    assert settings.temporal_target in parts["temporal"]["detail"]
    assert parts["buckets"]["detail"] == settings.receipt_bucket  # the one bucket the console uses
    assert took < DEADLINE + 1


@pytest.mark.parametrize("silent", ["postgres", "temporal", "buckets"])
async def test_readyz_is_503_within_its_deadline_when_a_part_never_answers(
    saga: SagaHarness, silent_port: int, silent: str
) -> None:
    endpoint = f"127.0.0.1:{silent_port}"
    update: dict[str, Any] = {
        "postgres": {"database_url": SecretStr(f"postgresql://erasure:not-shown@{endpoint}/erasure")},
        "temporal": {"temporal_address": endpoint},
        "buckets": {"s3_endpoint": f"http://{endpoint}"},
    }[silent]
    settings = _settings(saga, **update)
    async with _client(saga, settings) as http:
        checking = asyncio.create_task(_readyz(http))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        alive = await http.get("/healthz")  # the event loop is free while the parts are checked
        assert alive.status_code == 200
        assert time.monotonic() - started < 1.0, "/healthz waited for the readiness check"
        assert not checking.done()
        reply, took = await checking
    assert reply.status_code == 503, reply.text
    assert took < DEADLINE + 1, f"/readyz took {took:.1f} s against a deadline of {DEADLINE} s"
    body = reply.json()
    assert body["ready"] is False
    assert [p["name"] for p in body["parts"]] == PARTS
    parts = {p["name"]: p for p in body["parts"]}
    assert not parts[silent]["ok"]
    assert parts[silent]["detail"] == f"not reached: no answer within the check's {DEADLINE:g} s deadline"
    for name in set(PARTS) - {silent}:
        assert parts[name]["ok"], body  # the others say what they found, not the silent part's failure
    assert "not-shown" not in reply.text


async def test_readyz_without_parts_is_not_ready(saga: SagaHarness) -> None:
    """A console built without its parts never claims to be ready (nothing was checked)."""
    async with _client(saga, _settings(saga), readiness=Readiness([])) as http:
        reply = await http.get("/readyz")
    assert reply.status_code == 503
    assert reply.json() == {"ready": False, "parts": []}
