"""Issue 40 items 2 and 5: the forget preview is no oracle for memory content, and what costs is rate-limited.

A requester may not read a data subject's words (``content_shown: false``), yet the preview answered with
``matched`` runs of the items' own words: ``account number 8014`` answered ``8014``, ``account number 8015``
did not, and an item repeating the number (an echo) showed ``8014`` whatever was guessed. Now a reply to a
role without ``content:read`` holds ids, kinds, dates and counts only, the same whichever digits were
guessed; previews are limited per principal and per subject (429 with ``Retry-After``), a burst of previews
of one subject is audited (``preview_burst``) and logged, and filing, search and export are limited per
principal. Behind a trusted proxy each forwarded client is a bucket of its own; anyone else is their peer.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from console.app import create_app
from console.wiring import build_console
from stores.privacy.identity import subject_key
from tests.console_harness import APP, Api, Browser
from workers.local_secrets import load_secrets

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

SAID = ["My account number is 8014 at the river bank.", "Noted, 8014 it is."]  # the second: an echo


async def _seeded(api: Api) -> str:
    from tests.forget_fixtures import ingest, make_sessions

    platform = api.saga.platform
    user = f"oracle-{uuid.uuid4().hex[:8]}@example.org"
    await ingest(platform, await make_sessions(platform, APP, user, [SAID]))
    return user


@asynccontextmanager
async def _console(api: Api, **update: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A console built as ``erasure serve`` builds it, with some settings changed."""
    settings = api.app.state.console.settings.model_copy(update=update)
    console = build_console(settings, load_secrets(settings), api.saga.platform, api.saga.client)
    app = create_app(console)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        http.app = app  # type: ignore[attr-defined]
        yield http


async def test_a_requesters_preview_is_the_same_whichever_digits_were_guessed(api: Api) -> None:
    user = await _seeded(api)
    rita = api.bearer("rita@compliance.example", "requester")
    replies: dict[str, dict[str, Any]] = {}
    for guess in ("8014", "8015"):
        about = f"account number {guess}"
        shown = await api.http.post(
            "/api/forget/preview", json={"app_name": APP, "user_id": user, "about": about}, headers=rita
        )
        assert shown.status_code == 200, shown.text
        assert "8014" not in shown.text  # not the guess echoed back, not the echo's run of digits
        assert "account" not in shown.text  # no run of the items' words at all
        replies[guess] = shown.json()
    assert replies["8014"] == replies["8015"]
    assert replies["8014"]["content_shown"] is False
    assert len(replies["8014"]["candidates"]) == 3  # the item, the fact drawn from it, the echo: id, kind, date
    assert {c["kind"] for c in replies["8014"]["candidates"]} <= {"episode", "fact", "summary"}
    # the approver reads the words (so there was something to leak): the item and its echo
    amir = api.bearer("amir@compliance.example", "approver", "requester")
    read = await api.http.post(
        "/api/forget/preview", json={"app_name": APP, "user_id": user, "about": "account number 8015"}, headers=amir
    )
    assert all("8014" in c["text"] for c in read.json()["candidates"])
    assert {c["memory_id"] for c in read.json()["candidates"]} == {
        c["memory_id"] for c in replies["8014"]["candidates"]
    }


async def test_the_forget_page_shows_a_requester_no_word_of_the_items(api: Api) -> None:
    user = await _seeded(api)
    rita = Browser(api)
    try:
        await rita.login("rita@compliance.example", "requester")
        csrf = rita.csrf((await rita.http.get("/forget")).text)
        pages: dict[str, str] = {}
        for guess in ("8014", "8015"):
            about = f"account number {guess}"
            form = {"csrf": csrf, "app_name": APP, "user_id": user, "about": about}
            shown = await rita.http.post("/forget/preview", data=form)
            assert shown.status_code == 200
            assert shown.text.count('name="memory_id"') == 3
            pages[guess] = shown.text.replace(about, "THE DESCRIPTION")  # the requester's own words, echoed
        assert "8014" not in pages["8015"]
        assert "8014" not in pages["8014"]
        assert pages["8014"] == pages["8015"]
        # the confirm form re-runs the preview: with nothing chosen it shows it again, withheld the same way
        form = {"csrf": csrf, "app_name": APP, "user_id": user, "about": "account number 8015"}
        again = await rita.http.post("/forget/confirm", data=form)
        assert "choose one or more" in again.text
        assert "8014" not in again.text
    finally:
        await rita.close()


async def test_previews_are_limited_per_principal(api: Api) -> None:
    user = await _seeded(api)
    async with _console(api, console_preview_per_minute=2) as http:
        rita = api.bearer("rita@compliance.example", "requester")
        body = {"app_name": APP, "user_id": user, "about": "account number"}
        codes = [(await http.post("/api/forget/preview", json=body, headers=rita)).status_code for _ in range(2)]
        assert codes == [200, 200]
        refused = await http.post("/api/forget/preview", json=body, headers=rita)
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["retry-after"]) > 0
        other = api.bearer("rosa@compliance.example", "requester")  # per principal, not for everyone
        assert (await http.post("/api/forget/preview", json=body, headers=other)).status_code == 200


async def test_previews_of_one_subject_are_limited_audited_and_alerted(api: Api) -> None:
    user, other_user = await _seeded(api), await _seeded(api)
    limits = {"console_preview_per_subject_hour": 3, "console_preview_burst_alert": 2}
    async with _console(api, **limits) as http:
        body = {"app_name": APP, "user_id": user, "about": "account number"}
        with capture_logs() as logs:
            codes = []
            for n in range(4):  # four people, one subject
                who = api.bearer(f"staff{n}@compliance.example", "requester")
                codes.append((await http.post("/api/forget/preview", json=body, headers=who)).status_code)
        assert codes == [200, 200, 200, 429]
        refused = await http.post("/api/forget/preview", json=body, headers=api.bearer("x@c.example", "requester"))
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) > 0
        elsewhere = {**body, "user_id": other_user}  # per subject: another subject is previewed at once
        fine = await http.post("/api/forget/preview", json=elsewhere, headers=api.bearer("x@c.example", "requester"))
        assert fine.status_code == 200
        sk = subject_key(api.saga.platform.config.subject_secret, APP, user)
        entries = http.app.state.console.audit.entries(None, 100_000)  # type: ignore[attr-defined]
        previewed = [e for e in entries if e.action == "forget_previewed" and e.detail.get("subject_key") == sk]
        assert len(previewed) == 3  # every preview audited
        bursts = [e for e in entries if e.action == "preview_burst" and e.detail.get("subject_key") == sk]
        assert len(bursts) == 1  # once, when the count passed the threshold
        assert bursts[0].detail["previews_in_hour"] == 3
        assert user not in json.dumps([e.detail for e in bursts])
        assert user not in bursts[0].actor
        warned = [e for e in logs if e.get("event") == "preview_burst"]
        assert len(warned) == 1
        assert warned[0]["log_level"] == "warning"
        assert warned[0]["subject_key"] == sk
        assert user not in json.dumps(warned, default=str)


async def test_searches_are_limited_per_principal(api: Api) -> None:
    async with _console(api, console_costly_per_minute=2) as http:
        auditor = api.bearer("aud@compliance.example", "auditor")
        codes = [(await http.get("/api/requests", headers=auditor)).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        refused = await http.get("/api/audit", headers=auditor)  # a search too: the same bucket
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) > 0
        assert (await http.get("/api/audit/export", headers=auditor)).status_code == 200  # an export: its own
        assert (await http.get("/api/requests", headers=api.bearer("aud2@compliance.example", "auditor"))).is_success
        assert (await http.get("/api/requests")).status_code == 401  # no principal: refused before any count


async def test_the_login_limit_follows_the_trusted_proxys_forwarded_client(api: Api) -> None:
    async def logins(http: httpx.AsyncClient, *forwarded: str) -> list[int]:
        return [(await http.get("/login", headers={"X-Forwarded-For": f})).status_code for f in forwarded]

    # the in-process client is 127.0.0.1: as a trusted proxy, each forwarded client has a bucket
    async with _console(api, console_rate_per_minute=2, console_trusted_proxies="127.0.0.1/32") as http:
        assert await logins(http, "203.0.113.1", "203.0.113.1", "203.0.113.1") == [303, 303, 429]
        assert await logins(http, "203.0.113.2", "203.0.113.2") == [303, 303]
    # trusted by no one (the default), the header is the client's own word: one bucket whatever it says
    async with _console(api, console_rate_per_minute=2) as http:
        assert await logins(http, "203.0.113.3", "203.0.113.4", "203.0.113.5") == [303, 303, 429]
