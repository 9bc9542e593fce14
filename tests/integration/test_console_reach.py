"""Issue 40 items 1 and 7 (tokens), against the real stack: roles that mean one thing, tokens that end.

- an admin holding ``requester`` and ``auditor`` (a login, or a token minted before one role per token)
  cancelled another person's pending erasure (200 ``cancelled``, the sealed user id forgotten at once):
  ownership was only checked when the caller's *only* role was requester. Now reach is decided per action
  (``console.permissions.reach``): the auditor reads every request, cancels none; a requester cancels, reads
  and opens receipts of what their own person filed, whichever login or token they use;
- a token carries exactly one role: minting several is refused, one minted before is refused at the door
  (and the migration revoked it, saying why);
- tokens expire (a default lifetime, an optional shorter one at mint), record their last use (written at
  most once a minute), and rotate (a replacement with the same name, role and apps; the old one revoked in
  the same transaction), in the API and on the tokens page.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.console_harness import APP, Api, Browser
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

FILER = "rita@compliance.example"
ADMIN = "ada@ops.example"
APPROVER = "amir@compliance.example"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _plant_token(api: Api, roles: list[str], created_by: str) -> tuple[str, str]:
    """A token row as the console minted them before issue 40 (several roles allowed), written directly."""
    token_id = secrets.token_hex(6)
    token = f"et_{token_id}_{secrets.token_urlsafe(32)}"
    with api.saga.platform.pool.connection() as conn:
        columns = {
            r[0]
            for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'api_tokens'")
        }
        extra = ", expires_at" if "expires_at" in columns else ""
        values = ", now() + interval '30 days'" if extra else ""
        conn.execute(
            f"INSERT INTO api_tokens (token_id, name, token_hash, roles, created_by, created_at{extra}) "
            f"VALUES (%s, %s, %s, %s, %s, now(){values})",
            (token_id, "legacy-both", hashlib.sha256(token.encode()).hexdigest(), roles, created_by),
        )
    return token_id, token


async def _pending(api: Api, seed: int) -> tuple[str, str]:
    target = user_ids(1, seed, prefix="reach")[0]
    await api.saga.seed(APP, [target])
    request_id = await api.file(target, sub=FILER)
    await api.wait_for_state(request_id, "pending_approval")
    return request_id, target


async def test_a_requester_who_also_audits_cannot_cancel_another_persons_pending_erasure(api: Api) -> None:
    """The issue's reproduction: on the old code each of these cancels answered 200 ``cancelled``."""
    platform = api.saga.platform
    request_id, target = await _pending(api, 4001)

    admin_both = api.bearer(ADMIN, "requester", "auditor")  # a login with both roles: still possible
    seen = await api.http.get(f"/api/requests/{request_id}", headers=admin_both)
    assert seen.status_code == 200, seen.text  # the auditor in them reads every request
    refused = await api.http.post(f"/api/requests/{request_id}/cancel", json={"reason": "x"}, headers=admin_both)
    assert refused.status_code == 403, refused.text
    assert "filed it" in refused.json()["detail"]

    _legacy_id, legacy = _plant_token(api, ["auditor", "requester"], ADMIN)  # minted before issue 40
    by_token = await api.http.post(f"/api/requests/{request_id}/cancel", json={"reason": "x"}, headers=_bearer(legacy))
    assert by_token.status_code == 401, by_token.text
    assert "one role" in by_token.json()["detail"]

    await asyncio.sleep(1)  # a cancellation that went through would have reached the workflow by now
    assert platform.requests.get(request_id).state == "pending_approval"
    assert platform.requests.user_id(request_id) == target  # the sealed user id is still there
    actions = [e.action for e in api.app.state.console.audit.entries(request_id)]
    assert "decision_refused" in actions
    assert "cancelled" not in actions

    # the filer cancels their own, through a token of their own: the same person, another subject
    _info, own_token = api.app.state.console.tokens.create("rita-bridge", ["requester"], FILER)
    mine = await api.http.post(
        f"/api/requests/{request_id}/cancel", json={"reason": "withdrawn"}, headers=_bearer(own_token)
    )
    assert mine.status_code == 200, mine.text
    assert await api.wait_for_state(request_id, "cancelled") == "cancelled"

    # an approver cancels anyone's
    other_id, _other = await _pending(api, 4002)
    by_approver = await api.http.post(
        f"/api/requests/{other_id}/cancel", json={"reason": "duplicate"}, headers=api.bearer(APPROVER, "approver")
    )
    assert by_approver.status_code == 200, by_approver.text


async def test_reach_is_decided_per_action_not_by_the_other_roles_held(api: Api) -> None:
    """The reach table itself, and a receipt: ``requester`` and ``admin`` opened every receipt (the admin holds
    no receipt reading at all; the requester only their own)."""
    from console.permissions import PERMISSIONS, reach

    assert reach(frozenset({"requester", "auditor"}), "requests:cancel") == "own"
    assert reach(frozenset({"requester", "auditor"}), "requests:read") == "all"
    assert reach(frozenset({"requester", "admin"}), "receipts:read") == "own"
    assert reach(frozenset({"approver"}), "requests:cancel") == "all"
    assert reach(frozenset({"auditor", "admin"}), "requests:cancel") == "none"
    for permission in PERMISSIONS:  # no combination of other roles widens a lone requester's reach
        alone = reach(frozenset({"requester"}), permission)
        for other in ("auditor", "admin"):
            if not {other} & PERMISSIONS[permission]:
                assert reach(frozenset({"requester", other}), permission) == alone, (permission, other)

    request_id, _target = await _pending(api, 4003)
    approved = await api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver"))
    assert approved.status_code == 200, approved.text
    assert (await api.saga.result(request_id)).status == "completed"
    url = f"/api/requests/{request_id}/receipt"
    wider = await api.http.get(url, headers=api.bearer(ADMIN, "requester", "admin"))
    assert wider.status_code == 403, wider.text
    assert (await api.http.get(url, headers=api.bearer("olga@audit.example", "auditor"))).status_code == 200
    assert (await api.http.get(url, headers=api.bearer(FILER, "requester"))).status_code == 200


async def test_a_forget_request_is_read_by_its_filers_person_and_by_roles_that_read_all(api: Api) -> None:
    from tests.forget_fixtures import ingest, make_sessions

    platform = api.saga.platform
    user = f"reach-forget-{uuid.uuid4().hex[:8]}@example.org"
    await ingest(platform, await make_sessions(platform, APP, user, [["I live in Pune near the river."]]))
    rita = api.bearer(FILER, "requester")
    shown = await api.http.post(
        "/api/forget/preview", json={"app_name": APP, "user_id": user, "about": "Pune"}, headers=rita
    )
    assert shown.status_code == 200, shown.text
    ids = [c["memory_id"] for c in shown.json()["candidates"]]
    filed = await api.http.post("/api/forget", json={"app_name": APP, "user_id": user, "memory_ids": ids}, headers=rita)
    assert filed.status_code == 201, filed.text
    url = f"/api/forget/{filed.json()['request_id']}"

    _info, own_token = api.app.state.console.tokens.create("rita-forgets", ["requester"], FILER)
    assert (await api.http.get(url, headers=_bearer(own_token))).status_code == 200  # the same person
    assert (await api.http.get(url, headers=api.bearer("sam@compliance.example", "requester"))).status_code == 404
    assert (await api.http.get(url, headers=api.bearer(ADMIN, "requester", "auditor"))).status_code == 200
    _legacy_id, legacy = _plant_token(api, ["requester", "auditor"], "sam@compliance.example")
    assert (await api.http.get(url, headers=_bearer(legacy))).status_code == 401


async def test_a_token_carries_one_role_expires_and_records_its_last_use(api: Api) -> None:
    admin = api.bearer(ADMIN, "admin")
    pool = api.saga.platform.pool
    name = f"both-{uuid.uuid4().hex[:6]}"
    both = await api.http.post("/api/tokens", json={"name": name, "roles": ["requester", "auditor"]}, headers=admin)
    assert both.status_code == 422, both.text
    assert "one role" in both.json()["detail"]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM api_tokens WHERE name = %s", (name,)).fetchone() == (0,)

    made = await api.http.post("/api/tokens", json={"name": "bridge", "roles": ["requester"]}, headers=admin)
    assert made.status_code == 201, made.text
    lifetime = api.app.state.console.settings.api_token_lifetime_days
    expires = datetime.fromisoformat(made.json()["expires_at"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=lifetime))) < timedelta(minutes=1)
    assert made.json()["last_used_at"] is None
    short = await api.http.post(
        "/api/tokens", json={"name": "short", "roles": ["auditor"], "expires_in_days": 7}, headers=admin
    )
    assert short.status_code == 201, short.text
    assert abs(datetime.fromisoformat(short.json()["expires_at"]) - datetime.now(UTC) - timedelta(days=7)) < timedelta(
        minutes=1
    )
    too_long = await api.http.post(
        "/api/tokens", json={"name": "long", "roles": ["auditor"], "expires_in_days": lifetime + 1}, headers=admin
    )
    assert too_long.status_code == 422, too_long.text

    token_id, token = made.json()["token_id"], made.json()["token"]

    def last_used() -> datetime | None:
        with pool.connection() as conn:
            row = conn.execute("SELECT last_used_at FROM api_tokens WHERE token_id = %s", (token_id,)).fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    assert (await api.http.get("/api/me", headers=_bearer(token))).status_code == 200
    first = last_used()
    assert first is not None
    assert abs(first - datetime.now(UTC)) < timedelta(minutes=1)
    assert (await api.http.get("/api/me", headers=_bearer(token))).status_code == 200
    assert last_used() == first  # at most one write a minute per token
    with pool.connection() as conn:
        conn.execute(
            "UPDATE api_tokens SET last_used_at = now() - interval '2 minutes' WHERE token_id = %s", (token_id,)
        )
    assert (await api.http.get("/api/me", headers=_bearer(token))).status_code == 200
    later = last_used()
    assert later is not None
    assert abs(later - datetime.now(UTC)) < timedelta(seconds=30)
    listed = next(t for t in (await api.http.get("/api/tokens", headers=admin)).json() if t["token_id"] == token_id)
    assert listed["last_used_at"] == later.isoformat()

    with pool.connection() as conn:
        conn.execute("UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE token_id = %s", (token_id,))
    expired = await api.http.get("/api/me", headers=_bearer(token))
    assert expired.status_code == 401
    assert "expired" in expired.json()["detail"]


async def test_rotation_replaces_a_token_in_one_step_and_the_migration_revoked_multi_role_tokens(api: Api) -> None:
    from stores.infra.migrate import discover

    admin = api.bearer(ADMIN, "admin")
    made = await api.http.post(
        "/api/tokens", json={"name": "scoped-bridge", "roles": ["requester"], "apps": [APP]}, headers=admin
    )
    old_id, old = made.json()["token_id"], made.json()["token"]
    rotated = await api.http.post(f"/api/tokens/{old_id}/rotate", headers=admin)
    assert rotated.status_code == 201, rotated.text
    new = rotated.json()
    assert (new["name"], new["roles"], new["apps"], new["rotated_from"]) == (
        "scoped-bridge",
        ["requester"],
        [APP],
        old_id,
    )
    assert (await api.http.get("/api/me", headers=_bearer(old))).status_code == 401
    assert (await api.http.get("/api/me", headers=_bearer(new["token"]))).status_code == 200
    tokens = {t["token_id"]: t for t in (await api.http.get("/api/tokens", headers=admin)).json()}
    assert tokens[old_id]["revoked_at"] is not None
    assert new["token_id"] in tokens[old_id]["revoked_reason"]
    again = await api.http.post(f"/api/tokens/{old_id}/rotate", headers=admin)
    assert again.status_code == 409, again.text  # a revoked token is not brought back by rotating it
    assert (await api.http.post("/api/tokens/nosuchtoken/rotate", headers=admin)).status_code == 404
    audited = [e for e in api.app.state.console.audit.entries(None, 5000) if e.action.startswith("token_")][-2:]
    assert [e.action for e in audited] == ["token_created", "token_revoked"]

    # a multi-role token minted before issue 40: the migration revokes it, saying why (re-run: it is idempotent)
    legacy_id, legacy = _plant_token(api, ["requester", "auditor"], ADMIN)
    migration = next(m for m in discover() if m.name == "api_token_one_role_lifetime")
    with api.saga.platform.pool.connection() as conn:
        conn.execute(migration.path.read_bytes())
    tokens = {t["token_id"]: t for t in (await api.http.get("/api/tokens", headers=admin)).json()}
    assert tokens[legacy_id]["revoked_at"] is not None
    assert "one role" in tokens[legacy_id]["revoked_reason"]
    assert tokens[new["token_id"]]["revoked_at"] is None  # a one-role token stays
    assert (await api.http.get("/api/me", headers=_bearer(legacy))).status_code == 401


async def test_the_tokens_page_shows_expiry_last_use_and_rotates(api: Api) -> None:
    browser = Browser(api)
    try:
        await browser.login(ADMIN, "admin")
        _info, token = api.app.state.console.tokens.create(f"page-{uuid.uuid4().hex[:6]}", ["auditor"], ADMIN)
        info = _info
        assert (await api.http.get("/api/me", headers=_bearer(token))).status_code == 200
        page = (await browser.http.get("/tokens")).text
        assert "Expires" in page
        assert "Last used" in page
        assert f'action="/tokens/{info.token_id}/rotate"' in page
        assert info.expires_at is not None
        assert info.expires_at.date().isoformat() in page
        replaced = await browser.http.post(f"/tokens/{info.token_id}/rotate", data={"csrf": browser.csrf(page)})
        assert replaced.status_code == 200, replaced.text
        shown = replaced.text.split('<code id="new-token">', 1)[1].split("</code>", 1)[0]
        assert shown.startswith("et_")
        assert shown != token
        assert (await api.http.get("/api/me", headers=_bearer(shown))).status_code == 200
        assert (await api.http.get("/api/me", headers=_bearer(token))).status_code == 401
        forged = await browser.http.post(f"/tokens/{info.token_id}/rotate", data={"csrf": "forged"})
        assert forged.status_code in (400, 403)
    finally:
        await browser.close()
