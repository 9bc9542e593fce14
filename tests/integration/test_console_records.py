"""Issue 27, what compliance officers expect of the console's records, against the real stack:

- a decision and its audit entry commit together (the audit write failing leaves no approval and no hold);
- a request records how it was filed: the source, the requester's note and how the data subject's identity
  was verified (method, by whom, when), shown on its page and in the API;
- an approver extends the due date from the request page with a reason; buttons a role cannot use are not
  shown, and an approver who filed a request is told another approver decides it (and is refused);
- the audit log filters (action, who, request, dates) and exports CSV; refused routes, history views and
  codec decodes are audited;
- requesters scoped to apps (a token's apps, the identity provider's apps claim) file for those apps only.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from botocore.exceptions import ClientError
from google.protobuf import json_format

from stores.privacy.identity import subject_key
from tests.console_harness import APP, Api, Browser
from workers.codec import EncryptionCodec
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APPROVER = "amir@compliance.example"
REQUESTER = "rita@compliance.example"


def _key(api: Api, user: str) -> str:
    return subject_key(api.saga.platform.config.subject_secret, APP, user)


def _actions(api: Api, request_id: str) -> list[str]:
    return [e.action for e in api.app.state.console.audit.entries(request_id)]


async def test_a_decision_and_its_audit_entry_commit_together_or_not_at_all(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit write failing (its anchor outside the database unreachable) used to leave the approval
    recorded and the erasure running, with no audit entry for it; a hold was placed unaudited the same way."""
    platform = api.saga.platform
    target = user_ids(1, 2741, prefix="records")[0]
    await api.saga.seed(APP, [target])
    rows = len(platform.memory_store.rows_of(APP, target))
    request_id = await api.file(target)
    await api.wait_for_state(request_id, "pending_approval")
    anchor = api.app.state.console.audit._anchor
    monkeypatch.setattr(anchor, "_bucket", "no-such-bucket-for-the-audit-anchor")

    with pytest.raises(ClientError):
        await api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver"))
    assert platform.approvals.get(request_id) is None  # no decision without its audit entry
    assert "approved" not in _actions(api, request_id)
    await asyncio.sleep(2)
    assert platform.requests.get(request_id).state == "pending_approval"  # the workflow never heard of it
    assert len(platform.memory_store.rows_of(APP, target)) == rows

    row = platform.requests.get(request_id)
    with pytest.raises(ClientError):
        await api.http.post(
            f"/api/requests/{request_id}/hold", json={"reason": "litigation"}, headers=api.bearer("ada@x", "admin")
        )
    assert platform.requests.active_hold(row.subject_key) is None

    monkeypatch.undo()  # the anchor reachable again: both are written, together
    approved = await api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver"))
    assert approved.status_code == 200, approved.text
    recorded = platform.approvals.get(request_id)
    assert recorded is not None
    assert recorded.decision == "approved"
    assert _actions(api, request_id).count("approved") == 1
    assert (await api.saga.result(request_id)).status == "completed"
    assert api.app.state.console.audit.verify().ok


async def test_a_request_records_how_it_was_filed_and_an_approver_extends_it_from_its_page(api: Api) -> None:
    users = user_ids(3, 2742, prefix="records")
    await api.saga.seed(APP, users)
    rita, amir, olga = Browser(api), Browser(api), Browser(api)
    try:
        await rita.login(REQUESTER, "requester")
        form = await rita.http.get("/requests/new")
        assert 'id="identity_method"' in form.text
        fields = {"csrf": rita.csrf(form.text), "app_name": APP, "user_id": users[0], "reason": "GDPR art. 17"}
        unsaid = await rita.http.post("/requests/new", data=fields)
        assert unsaid.status_code == 200
        assert "Not filed" in unsaid.text
        assert api.saga.platform.requests.active_for(_key(api, users[0])) is None  # nothing filed
        verified_on = (date.today() - timedelta(days=1)).isoformat()
        filed = await rita.http.post(
            "/requests/new",
            data={
                **fields,
                "note": "asked by phone, ticket 4411",
                "identity_method": "email_confirmation",
                "identity_verified_at": verified_on,
            },
        )
        assert filed.status_code == 303, filed.text
        request_id = filed.headers["location"].rsplit("/", 1)[1]
        await api.wait_for_state(request_id, "pending_approval")
        mine = await rita.http.get(f"/requests/{request_id}")
        assert re.search(r'id="source">console_form<', mine.text)
        assert "asked by phone, ticket 4411" in mine.text
        assert "GDPR art. 17" in mine.text
        assert f"confirmed through a link sent to the account&#39;s e-mail address; by {REQUESTER}" in mine.text
        assert verified_on in mine.text
        assert "Extend the due date" not in mine.text
        assert "Approve" not in mine.text
        stored = api.saga.platform.pool.connection
        with stored() as conn:
            sealed = conn.execute("SELECT filing FROM erasure_requests WHERE request_id = %s", (request_id,)).fetchone()
        assert sealed is not None
        assert "ticket 4411" not in str(sealed[0])

        api_view = (await api.http.get(f"/api/requests/{request_id}", headers=api.bearer(APPROVER, "auditor"))).json()
        assert api_view["source"] == "console_form"
        assert api_view["identity_verification"]["method"] == "email_confirmation"
        assert api_view["identity_verification"]["verified_by"] == REQUESTER

        await amir.login(APPROVER, "approver")
        page = await amir.http.get(f"/requests/{request_id}")
        assert "Extend the due date" in page.text
        assert "Approve" in page.text
        due_before = api.saga.platform.requests.get(request_id).due_at
        short = await amir.http.post(
            f"/requests/{request_id}/extend", data={"csrf": amir.csrf(page.text), "days": "10", "reason": ""}
        )
        assert "needs a reason" in short.text
        extended = await amir.http.post(
            f"/requests/{request_id}/extend",
            data={"csrf": amir.csrf(page.text), "days": "10", "reason": "complex request, subject told"},
        )
        assert extended.status_code == 303, extended.text
        assert api.saga.platform.requests.get(request_id).due_at == due_before + timedelta(days=10)
        entry = next(e for e in api.app.state.console.audit.entries(request_id) if e.action == "extended")
        assert entry.detail["reason"] == "complex request, subject told"
        assert entry.detail["days"] == 10
        again = await amir.http.post(
            f"/requests/{request_id}/extend",
            data={"csrf": amir.csrf(page.text), "days": "5", "reason": "once more"},
        )
        assert again.status_code == 200
        assert "extended" in again.text.lower()

        # an approver who also files: no Approve button on their own request, and the form refused if sent
        await olga.login("olga@compliance.example", "requester", "approver")
        form = await olga.http.get("/requests/new")
        own = await olga.http.post(
            "/requests/new",
            data={
                "csrf": olga.csrf(form.text),
                "app_name": APP,
                "user_id": users[1],
                "identity_method": "account_login",
            },
        )
        own_id = own.headers["location"].rsplit("/", 1)[1]
        await api.wait_for_state(own_id, "pending_approval")
        own_page = await olga.http.get(f"/requests/{own_id}")
        assert 'id="own-request"' in own_page.text
        assert ">Approve</button>" not in own_page.text
        tried = await olga.http.post(f"/requests/{own_id}/approve", data={"csrf": olga.csrf(own_page.text)})
        assert "four eyes" in tried.text
        assert "decision_refused" in _actions(api, own_id)
        assert api.saga.platform.requests.get(own_id).state == "pending_approval"
    finally:
        for b in (rita, amir, olga):
            await b.close()

    # the API and a CSV line record the same, and an unknown method is refused with nothing filed
    requester = api.bearer("rob@compliance.example", "requester")
    bad = await api.http.post(
        "/api/requests",
        json={"app_name": APP, "user_id": users[2], "identity_method": "vibes"},
        headers=requester,
    )
    assert bad.status_code == 422
    assert "identity_method" in bad.text
    assert api.saga.platform.requests.active_for(_key(api, users[2])) is None  # nothing filed
    sheet = f"app_name,user_id,note,identity_method\n{APP},{users[2]},bulk batch 7,document_checked\n"
    bulk = await api.http.post("/api/requests/bulk", content=sheet, headers={**requester, "Content-Type": "text/csv"})
    assert bulk.json()["filed"] == 1, bulk.text
    bulk_id = bulk.json()["results"][0]["request_id"]
    view = (await api.http.get(f"/api/requests/{bulk_id}", headers=requester)).json()
    assert view["source"] == "csv"
    assert view["note"] == "bulk batch 7"
    assert view["identity_verification"]["method"] == "document_checked"


async def test_the_audit_log_filters_exports_csv_and_records_refusals_views_and_decodes(api: Api) -> None:
    console = api.app.state.console
    target = user_ids(1, 2743, prefix="records")[0]
    await api.saga.seed(APP, [target])
    filed = await api.http.post(
        "/api/requests",
        json={"app_name": APP, "user_id": target, "identity_method": "account_login"},
        headers=api.bearer("=SUM(filer-2743)@compliance.example", "requester"),  # a formula, to a spreadsheet
    )
    request_id = filed.json()["request_id"]
    auditor = api.bearer("aud@compliance.example", "auditor")

    # refused routes are audited with who, which route and what it needs
    refused = await api.http.get("/api/audit", headers=api.bearer("nosy-2743@compliance.example", "requester"))
    assert refused.status_code == 403
    found = (
        await api.http.get("/api/audit", params={"action": "access_refused", "actor": "NOSY-2743"}, headers=auditor)
    ).json()
    assert [e["detail"]["route"] for e in found] == ["/api/audit"]
    assert found[0]["detail"]["needs"] == "audit:read"

    # filters: by request and action, by a part of the actor, by dates
    only = (
        await api.http.get("/api/audit", params={"request_id": request_id, "action": "filed"}, headers=auditor)
    ).json()
    assert [(e["action"], e["request_id"]) for e in only] == [("filed", request_id)]
    by_actor = (await api.http.get("/api/audit", params={"actor": "filer-2743"}, headers=auditor)).json()
    assert {e["actor"] for e in by_actor} == {"=SUM(filer-2743)@compliance.example"}
    assert (await api.http.get("/api/audit", params={"actor": "%"}, headers=auditor)).json() == []  # literal
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    later = (await api.http.get("/api/audit", params={"since": tomorrow}, headers=auditor)).json()
    assert later == []

    # a history view through the proxied Temporal UI and a codec decode, each audited
    amir = Browser(api)
    try:
        await amir.login(APPROVER, "approver")
        path = f"/temporal/api/v1/namespaces/default/workflows/erasure-{request_id}/history"
        assert (await amir.http.get(path)).status_code == 502  # no UI server behind it here; audited first
        await amir.http.get(path)  # the UI polling: one entry per person and workflow in a window
    finally:
        await amir.close()
    views = [e for e in console.audit.entries(request_id) if e.action == "history_viewed"]
    assert len(views) == 1
    assert views[0].actor == APPROVER
    from temporalio.converter import DataConverter

    codec = EncryptionCodec(load_secrets(console.settings).payload_key)
    sealed = await codec.encode(DataConverter.default.payload_converter.to_payloads([{"a": 1}, {"b": 2}]))
    body = {"payloads": [json_format.MessageToDict(p) for p in sealed]}
    assert (await api.http.post("/codec/decode", json=body, headers=auditor)).status_code == 200
    decodes = (
        await api.http.get("/api/audit", params={"action": "payloads_decoded", "limit": 1}, headers=auditor)
    ).json()
    assert decodes[0]["detail"] == {"payloads": 2}
    assert decodes[0]["actor"] == "aud@compliance.example"

    # CSV export: the filtered rows, a formula-looking cell made inert, the export itself audited
    export = await api.http.get("/api/audit/export", params={"request_id": request_id}, headers=auditor)
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(export.text)))
    assert lines[0] == ["seq", "at", "actor", "action", "request_id", "detail", "hash"]
    assert {line[3] for line in lines[1:]} >= {"filed", "history_viewed"}
    assert all(line[4] == request_id for line in lines[1:])
    filed_line = next(line for line in lines[1:] if line[3] == "filed")
    assert filed_line[2] == "'=SUM(filer-2743)@compliance.example"  # inert in a spreadsheet
    exports = (
        await api.http.get("/api/audit", params={"action": "audit_exported", "limit": 1}, headers=auditor)
    ).json()
    assert exports[0]["detail"]["rows"] == len(lines) - 1

    # the page: filters and the export link for the same filters
    kim = Browser(api)
    try:
        await kim.login("kim@compliance.example", "auditor")
        page = await kim.http.get("/audit", params={"request_id": request_id, "action": "filed"})
        assert page.status_code == 200
        assert 'id="audit-filters"' in page.text
        assert page.text.count("<tr><td>") == 1
        assert f"/audit.csv?action=filed&amp;request_id={request_id}" in page.text
        download = await kim.http.get("/audit.csv", params={"request_id": request_id, "action": "filed"})
        assert "attachment" in download.headers["content-disposition"]
        assert len(list(csv.reader(io.StringIO(download.text)))) == 2
        assert (await kim.http.get("/audit", params={"since": "yesterday"})).status_code == 422
    finally:
        await kim.close()


async def test_requesters_scoped_to_apps_file_only_for_those_apps(api: Api) -> None:
    users = user_ids(2, 2744, prefix="records")
    await api.saga.seed(APP, users)
    admin = api.bearer("ada@ops.example", "admin")
    made = await api.http.post(
        "/api/tokens", json={"name": "other-app-bridge", "roles": ["requester"], "apps": ["another-app"]}, headers=admin
    )
    assert made.status_code == 201, made.text
    assert made.json()["apps"] == ["another-app"]
    scoped = {"Authorization": f"Bearer {made.json()['token']}"}
    outside = await api.http.post("/api/requests", json={"app_name": APP, "user_id": users[0]}, headers=scoped)
    assert outside.status_code == 403
    assert "may not file" in outside.text
    preview = await api.http.post(
        "/api/forget/preview", json={"app_name": APP, "user_id": users[0], "about": "phone"}, headers=scoped
    )
    assert preview.status_code == 403
    # the identity provider's apps claim scopes a signed-in requester the same way
    claimed = api.bearer("sam@compliance.example", "requester", erasure_apps=["another-app"])
    assert (
        await api.http.post("/api/requests", json={"app_name": APP, "user_id": users[0]}, headers=claimed)
    ).status_code == 403
    allowed = api.bearer("sam@compliance.example", "requester", erasure_apps=[APP])
    ok = await api.http.post("/api/requests", json={"app_name": APP, "user_id": users[1]}, headers=allowed)
    assert ok.status_code == 201, ok.text
    assert api.saga.platform.requests.active_for(_key(api, users[0])) is None  # the refused ones filed nothing
    assert api.saga.platform.requests.active_for(_key(api, users[1])) is not None
