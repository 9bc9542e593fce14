"""Issue 40 item 7, the lows, against the real stack and the console built as ``erasure serve`` builds it.

- the physical attestation showed a requester the platform's inside: the SeaweedFS volumes it names by their
  volume server's ``host:port`` (its evidence, and the notes). A requester now gets it redacted, in the
  receipt API, on the receipt page and in the download; an auditor still gets the signed original;
- ``identity_verified_by`` was free text the requester filled in (``"the DPO"``): the verification is now
  recorded as by the authenticated caller, whatever the body, the CSV or the form says;
- the pages' Content-Security-Policy allowed inline scripts (``'unsafe-inline'``): now only the page's own
  script runs, by a nonce that changes with every response.
"""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.physical_job import PhysicalJobActivities
from console.attestation_view import redacted
from tests.console_harness import APP, Api, Browser
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.physical import PhysicalAttestInput, PhysicalBeginInput, PhysicalCoverInput

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

FILER = "rita@compliance.example"
APPROVER = "amir@compliance.example"
AUDITOR = "olga@audit.example"
#: a network address with a port: an IPv4 host, localhost, or a volume key's ``host:port/id``
ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d{2,5}\b|\blocalhost:\d{2,5}\b|\b[\w.-]+:\d{2,5}/\d+\b")


async def _attested(api: Api, seed: int) -> str:
    """A request erased, then covered by the platform's physical job and attested (its activities, as its
    scheduled run calls them): the request id."""
    (target,) = user_ids(1, seed, prefix="lows")
    await api.saga.seed(APP, [target])
    request_id = await api.file(target, sub=FILER)
    await api.wait_for_state(request_id, "pending_approval")
    approve = await api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver"))
    assert approve.status_code == 200, approve.text
    assert (await api.saga.result(request_id)).status == "completed"
    job = PhysicalJobActivities(api.saga.platform, load_secrets(api.saga.settings).signing_key)
    env, run_id = ActivityEnvironment(), f"physical-lows-{uuid.uuid4().hex[:8]}"
    begun = env.run(job.physical_begin, PhysicalBeginInput(run_id, 100_000))
    assert request_id in begun.request_ids
    for store in begun.stores:
        env.run(job.physical_cover, PhysicalCoverInput(run_id, store, [request_id]))
    attested = env.run(job.physical_attest, PhysicalAttestInput(run_id, begun.started_at, [request_id], begun.stores))
    assert attested.attested == 1
    return request_id


async def test_a_requester_sees_the_physical_attestation_without_internal_addresses(api: Api) -> None:
    request_id = await _attested(api, 1401)

    # the auditor's view is the signed original: it does name the volume servers (else this test proves nothing)
    full = (await api.http.get(f"/api/requests/{request_id}/receipt", headers=api.bearer(AUDITOR, "auditor"))).json()
    assert full["attestation"]["signature_valid"] is True
    assert ADDRESS.search(json.dumps(full["attestation"])), full["attestation"]["body"]["stores"]
    assert full["attestation"]["document"]["receipt"] == full["attestation"]["body"]

    mine = await api.http.get(f"/api/requests/{request_id}/receipt", headers=api.bearer(FILER, "requester"))
    assert mine.status_code == 200
    view = mine.json()
    assert not ADDRESS.search(json.dumps(view["attestation"])), view["attestation"]
    assert view["attestation"]["redacted"] is True
    assert view["attestation"]["document"] is None  # a redacted copy could not verify: not handed out
    # the claims stay: the console checked the signature, the link to the receipt, per store covered or not
    assert view["attestation"]["signature_valid"] is True
    assert view["attestation"]["linked_to_receipt"] is True
    body = view["attestation"]["body"]
    assert body["request_id"] == request_id
    assert body["receipt_sha256"] == full["attestation"]["body"]["receipt_sha256"]
    assert [(s["store"], s["covered"]) for s in body["stores"]] == [
        (s["store"], s["covered"]) for s in full["attestation"]["body"]["stores"]
    ]
    assert all("evidence" not in s for s in body["stores"])

    rita = Browser(api)
    try:
        await rita.login(FILER, "requester")
        page = await rita.http.get(f"/requests/{request_id}/receipt")
        assert page.status_code == 200
        assert 'id="attestation-signature"' in page.text
        assert 'id="attestation-redacted"' in page.text
        assert not ADDRESS.search(page.text.replace(f"/requests/{request_id}", "")), page.text
        download = await rita.http.get(f"/requests/{request_id}/physical.json")
        assert download.status_code == 200
        assert not ADDRESS.search(download.text), download.text
        assert download.json()["signature_valid"] is True
    finally:
        await rita.close()


async def _filer_view(api: Api, request_id: str) -> dict[str, str]:
    got = await api.http.get(f"/api/requests/{request_id}", headers=api.bearer(FILER, "requester"))
    assert got.status_code == 200, got.text
    return dict(got.json()["identity_verification"])


async def test_identity_verified_by_is_the_caller_not_what_the_body_says(api: Api) -> None:
    one, two, three = user_ids(3, 1402, prefix="lows")
    await api.saga.seed(APP, [one, two, three])
    filed = await api.http.post(
        "/api/requests",
        json={
            "app_name": APP,
            "user_id": one,
            "identity_method": "document_checked",
            "identity_verified_by": "the DPO",
        },
        headers=api.bearer(FILER, "requester"),
    )
    assert filed.status_code == 201, filed.text
    recorded = await _filer_view(api, filed.json()["request_id"])
    assert recorded["method"] == "document_checked"
    assert recorded["verified_by"] == FILER

    csv = f"app_name,user_id,identity_method,identity_verified_by\n{APP},{two},knowledge_based,the DPO\n"
    bulk = await api.http.post(
        "/api/requests/bulk",
        content=csv,
        headers={**api.bearer(FILER, "requester"), "Content-Type": "text/csv"},
    )
    assert bulk.status_code == 200, bulk.text
    (row,) = bulk.json()["results"]
    assert row["result"] == "filed", row
    assert (await _filer_view(api, row["request_id"]))["verified_by"] == FILER

    rita = Browser(api)
    try:
        await rita.login(FILER, "requester")
        form = await rita.http.get("/requests/new")
        assert 'name="identity_verified_by"' not in form.text  # nothing to type: it is whoever is signed in
        posted = await rita.http.post(
            "/requests/new",
            data={
                "csrf": rita.csrf(form.text),
                "app_name": APP,
                "user_id": three,
                "identity_method": "account_login",
                "identity_verified_by": "the DPO",  # a hand-made form still names nobody else
            },
        )
        assert posted.status_code == 303, posted.text
        request_id = posted.headers["location"].rsplit("/", 1)[1]
        assert (await _filer_view(api, request_id))["verified_by"] == FILER
        page = await rita.http.get(f"/requests/{request_id}")
        assert f"; by {FILER}," in page.text
        assert "the DPO" not in page.text
    finally:
        await rita.close()


def _nonce(response: httpx.Response) -> str:
    policy = response.headers["content-security-policy"]
    script_src = next(d for d in policy.split(";") if d.strip().startswith("script-src")).split()
    assert "'unsafe-inline'" not in script_src, policy
    nonces = [s for s in script_src if s.startswith("'nonce-")]
    assert len(nonces) == 1, policy
    return nonces[0].removeprefix("'nonce-").rstrip("'")


async def test_the_pages_run_only_their_own_script_by_a_nonce_that_changes_per_response(api: Api) -> None:
    (target,) = user_ids(1, 1403, prefix="lows")
    await api.saga.seed(APP, [target])
    request_id = await api.file(target, sub=FILER)
    amir = Browser(api)
    try:
        await amir.login(APPROVER, "approver")
        first = await amir.http.get(f"/requests/{request_id}")
        second = await amir.http.get(f"/requests/{request_id}")
        assert first.status_code == second.status_code == 200
        nonce = _nonce(first)
        assert len(nonce) >= 16
        assert nonce != _nonce(second)  # per response: one seen in a page opens no other
        scripts = re.findall(r"<script\b[^>]*>", first.text)
        assert scripts, "the request page follows progress with its script"
        assert all(f'nonce="{nonce}"' in s for s in scripts), scripts
        assert "on" + "click=" not in first.text  # no inline handlers (a nonce does not cover them)
        listing = await amir.http.get("/")
        _nonce(listing)  # every page's policy, not only the request page's
    finally:
        await amir.close()


async def test_the_redacted_view_replaces_addresses_in_notes_and_drops_the_evidence() -> None:
    """A store not covered says why, naming its volumes by ``host:port/id``: the note stays, the address goes."""
    body = {
        "request_id": "er_x",
        "stores": [
            {
                "store": "compaction",
                "covered": False,
                "note": "127.0.0.1:18083/3: not compacted since; seaweed-vol-0.seaweed.svc:8080/7: volume not found; "
                "volume0:8080/2: not compacted since; [::1]:9333/4: not compacted since",
                "evidence": {"before": {"127.0.0.1:18083/3": {"revision": 1}}},
            },
            {"store": "vacuum", "covered": True, "note": "sessions: vacuums 3, 4 needed", "evidence": {}},
        ],
    }
    shown = redacted(body)
    assert shown is not None
    assert not ADDRESS.search(json.dumps(shown)), shown
    assert "[::1]" not in json.dumps(shown)
    assert [s["note"].count("not compacted since") for s in shown["stores"]] == [3, 0]
    assert shown["stores"][1]["note"] == "sessions: vacuums 3, 4 needed"  # table counters' words stay
    assert all("evidence" not in s for s in shown["stores"])
