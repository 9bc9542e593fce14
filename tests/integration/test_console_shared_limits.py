"""Issue 40 item 5: the console's rate limits hold for the console as a whole, not for each of its processes.

The per-principal limits (filing, preview, search, export), the per-subject preview budget with its burst
alert and the per-address login limit counted in each process's memory: with two console replicas behind one
ingress, a principal got twice the limit, a subject twice the previews, and a burst spread over both was never
alerted. Here two consoles are built as ``erasure serve`` builds them, each on a platform (and connection
pool) of its own, over the same database: they share one budget, whichever of them a call reaches, and
concurrent calls (their limits are taken from worker threads) never let more than the limit through.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from console.app import create_app
from console.rate_limits import Window, shared_limits
from console.wiring import build_console
from stores.privacy.identity import subject_key
from tests.console_harness import APP, Api
from workers.local_secrets import load_secrets
from workers.wiring import build_platform

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@asynccontextmanager
async def _two_consoles(api: Api, **update: Any) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Two consoles with the same settings (some changed): the harness's platform, and one of their own."""
    settings = api.app.state.console.settings.model_copy(update=update)
    secrets = load_secrets(settings)
    with build_platform(settings, secrets) as other:
        consoles = [
            build_console(settings, secrets, api.app.state.console.platform, api.saga.client),
            build_console(settings, secrets, other, api.saga.client),
        ]
        apps = [create_app(c) for c in consoles]
        async with (
            httpx.AsyncClient(transport=httpx.ASGITransport(app=apps[0]), base_url="http://console-a") as a,
            httpx.AsyncClient(transport=httpx.ASGITransport(app=apps[1]), base_url="http://console-b") as b,
        ):
            a.app, b.app = apps  # type: ignore[attr-defined]
            yield a, b


def _retry_after(reply: httpx.Response, most: int) -> int:
    assert reply.status_code == 429, reply.text
    seconds = int(reply.headers["retry-after"])
    assert 1 <= seconds <= most, seconds
    return seconds


async def test_one_principals_searches_draw_on_one_budget_whichever_console_answers(api: Api) -> None:
    limit = 4
    async with _two_consoles(api, console_costly_per_minute=limit) as (a, b):
        auditor = api.bearer(f"aud-{uuid.uuid4().hex[:8]}@compliance.example", "auditor")
        codes = [(await (a, b)[n % 2].get("/api/requests", headers=auditor)).status_code for n in range(limit)]
        assert codes == [200] * limit  # spread over both consoles
        _retry_after(await a.get("/api/requests", headers=auditor), 60)  # the limit+1th, on either
        _retry_after(await b.get("/api/audit", headers=auditor), 60)  # a search too: the same budget
        other = api.bearer(f"aud-{uuid.uuid4().hex[:8]}@compliance.example", "auditor")
        assert (await b.get("/api/requests", headers=other)).status_code == 200  # per principal
        assert (await a.get("/api/audit/export", headers=auditor)).status_code == 200  # an export: its own


async def test_concurrent_calls_through_both_consoles_let_exactly_the_limit_through(api: Api) -> None:
    limit = 5
    async with _two_consoles(api, console_costly_per_minute=limit) as (a, b):
        auditor = api.bearer(f"aud-{uuid.uuid4().hex[:8]}@compliance.example", "auditor")
        replies = await asyncio.gather(*((a, b)[n % 2].get("/api/requests", headers=auditor) for n in range(3 * limit)))
    codes = [r.status_code for r in replies]
    assert codes.count(200) == limit, codes
    assert codes.count(429) == 2 * limit, codes
    for refused in (r for r in replies if r.status_code == 429):
        _retry_after(refused, 60)


async def test_previews_of_one_subject_share_one_budget_and_one_alert_across_consoles(api: Api) -> None:
    from tests.forget_fixtures import ingest, make_sessions

    platform = api.saga.platform
    user = f"shared-{uuid.uuid4().hex[:8]}@example.org"
    await ingest(platform, await make_sessions(platform, APP, user, [["My locker code is 5521."]]))
    limits = {"console_preview_per_subject_hour": 3, "console_preview_burst_alert": 2}
    async with _two_consoles(api, **limits) as (a, b):
        body = {"app_name": APP, "user_id": user, "about": "locker code"}
        replies = []
        for n in range(4):  # four people, one subject, both consoles
            who = api.bearer(f"staff{n}-{uuid.uuid4().hex[:6]}@compliance.example", "requester")
            replies.append(await (a, b)[n % 2].post("/api/forget/preview", json=body, headers=who))
        assert [r.status_code for r in replies] == [200, 200, 200, 429]
        _retry_after(replies[3], 3600)
        again = await a.post("/api/forget/preview", json=body, headers=api.bearer("x@c.example", "requester"))
        _retry_after(again, 3600)
        entries = a.app.state.console.audit.entries(None, 100_000)  # type: ignore[attr-defined]
    sk = subject_key(platform.config.subject_secret, APP, user)
    bursts = [e for e in entries if e.action == "preview_burst" and e.detail.get("subject_key") == sk]
    assert len(bursts) == 1  # once, by whichever console saw the count pass the threshold
    assert bursts[0].detail["previews_in_hour"] == 3
    assert user not in json.dumps([e.detail for e in bursts])


async def test_one_client_addresss_logins_draw_on_one_budget_whichever_console_answers(api: Api) -> None:
    async with _two_consoles(api, console_rate_per_minute=2) as (a, b):
        codes = [(await c.get("/login")).status_code for c in (a, b)]
        assert codes == [303, 303]
        _retry_after(await a.get("/login"), 60)
        _retry_after(await b.get("/login"), 60)


async def test_the_counts_name_no_principal_subject_or_address(api: Api) -> None:
    user = f"named-{uuid.uuid4().hex[:8]}@example.org"
    sub = f"aud-{uuid.uuid4().hex[:8]}@compliance.example"
    async with _two_consoles(api) as (a, _b):
        assert (await a.get("/api/requests", headers=api.bearer(sub, "auditor"))).status_code == 200
        body = {"app_name": APP, "user_id": user, "about": "anything"}
        await a.post("/api/forget/preview", json=body, headers=api.bearer(sub + ".r", "requester"))
        await a.get("/login")
    with api.saga.platform.pool.connection() as conn:
        rows = conn.execute("SELECT * FROM rate_limit_windows").fetchall()
    kinds = {str(r[0]).split(":", 1)[0] for r in rows}
    assert {"principal.search", "principal.preview", "subject.preview", "address/login"} <= kinds
    stored = json.dumps([list(r) for r in rows], default=str)
    sk = subject_key(api.saga.platform.config.subject_secret, APP, user)
    for named in (sub, user, sk, sk.removeprefix("sk_"), "127.0.0.1", "compliance.example", "example.org"):
        assert named not in stored, named


async def test_takes_from_many_threads_on_two_pools_count_each_call_once(api: Api) -> None:
    """Truly concurrent takes (threads released together, on two connection pools): every call gets its own
    count, so exactly ``limit`` of them are within it."""
    console = api.app.state.console  # connected as the console connects
    settings = console.settings
    secret = load_secrets(settings).subject_key_secret
    limit, calls = 7, 24
    bucket = f"test-{uuid.uuid4().hex[:8]}"
    with build_platform(settings) as other:
        counters = [shared_limits(console.platform.pool, secret), shared_limits(other.pool, secret)]
        start = threading.Barrier(calls)

        def take(n: int) -> Window:
            start.wait()
            return counters[n % 2].take("test", bucket, 60.0)

        def run() -> list[Window]:
            with ThreadPoolExecutor(calls) as pool:
                return list(pool.map(take, range(calls)))

        windows = await asyncio.to_thread(run)
    assert sorted(w.count for w in windows) == list(range(1, calls + 1))
    assert sum(not w.over(limit) for w in windows) == limit
    assert all(0 < w.resets_in <= 60 for w in windows)


async def test_the_wait_a_refusal_names_is_the_wait_until_a_call_passes_and_ended_windows_go(api: Api) -> None:
    limits = shared_limits(api.app.state.console.platform.pool, b"k" * 32)
    who = f"test-{uuid.uuid4().hex[:8]}"
    first = limits.take("test", who, 2.0)
    assert (first.count, limits.take("test", who, 2.0).count) == (1, 2)
    refused = limits.take("test", who, 2.0)
    assert refused.over(2)
    assert 0 < refused.resets_in <= 2.0
    await asyncio.sleep(refused.resets_in + 0.05)  # as long as Retry-After says (it rounds this up to whole seconds)
    assert limits.take("test", who, 2.0).count == 1  # a fresh window: the call passes
    ended = limits.bucket("test", f"gone-{uuid.uuid4().hex[:8]}")
    with api.saga.platform.pool.connection() as conn:
        conn.execute(
            "INSERT INTO rate_limit_windows VALUES (%s, now() - interval '2 hours', now() - interval '1 hour', 5)",
            (ended,),
        )
        limits.take("test", f"new-{uuid.uuid4().hex[:8]}", 2.0)  # a window opens: ended ones are cleared
        assert conn.execute("SELECT 1 FROM rate_limit_windows WHERE bucket = %s", (ended,)).fetchone() is None
