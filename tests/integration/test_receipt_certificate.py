"""Issue 42 item 2, the people's part: the receipt as a certificate anyone can read, on the real stack.

A real erasure (filed by a requester, approved by an approver, run by the worker) of a user whose rows two
other users summarised: one of them under a legal hold. Its receipt page says in plain words, per store, what
was erased (``8 session events``, ``1 derived summary``), what was kept for the held owner, how each phase
checked it, where physical removal stands and how to check the signature; the PDF (fpdf2) says the same; no
raw user id appears in either. The page and the PDF are read with the receipt's permission, exactly as the
receipt API; opening the page is audited as a view (it was logged as a download), the PDF as a download.
"""

from __future__ import annotations

import html
import re
import zlib
from typing import Any

import pytest

from stores.privacy.identity import subject_key
from tests.console_harness import APP, Api, Browser
from verifier.receipts.issuing import load_receipt
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

REQUESTER = "rita@compliance.example"
APPROVER = "amir@compliance.example"


def page_text(markup: str) -> str:
    """What a reader sees of a page: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f", b"(": b"(", b")": b")", b"\\": b"\\"}


def _unescape(literal: bytes) -> bytes:
    out = re.sub(rb"\\([0-7]{1,3})", lambda m: bytes([int(m.group(1), 8) & 0xFF]), literal)
    return re.sub(rb"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), out, flags=re.S)


def pdf_text(pdf: bytes) -> str:
    """The text a PDF shows: every content stream inflated and its string operands (``(...) Tj``) read, in
    order, joined by spaces (a wrapped line joins its next with a space, as a reader sees it)."""
    shown: list[str] = []
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.S):
        try:
            content = zlib.decompress(stream)
        except zlib.error:
            content = stream
        for literal in re.findall(rb"\(((?:\\.|[^\\)])*)\)\s*Tj", content, re.S):
            shown.append(_unescape(literal).decode("latin-1"))
    return " ".join(" ".join(shown).split())


def _phrases(body: dict[str, Any], document: dict[str, Any]) -> list[str]:
    """What the certificate must say of this receipt, in words, from the verified receipt's own counts."""
    counts = {d["store"]: d["counts"] for d in body["dispositions"]}
    sessions, artifacts, memory = counts["sessions"], counts["artifacts"], counts["memory"]
    for n in (sessions["events"], artifacts["objects"], memory["rows"]):
        assert n > 1  # else the phrases prove little
    request_id = body["request_id"]
    return [
        "Certificate of erasure",
        f"Request {request_id}",
        f"Subject key {body['subject_key']}",
        f"{sessions['events']} session events",
        f"{sessions['sessions']} sessions" if sessions["sessions"] > 1 else "1 session",
        f"{artifacts['objects']} artifact versions (every version and delete marker)",
        f"{memory['rows']} memory rows (with their embeddings)",
        # the summary filed under the unheld user: erased; the held user's: kept, and said so
        "Erased: " + f"{memory['rows']} memory rows (with their embeddings), 1 derived summary.",
        "Kept under a legal hold: 1 derived summary filed under another user who is under a legal hold (kept).",
        "1 data key version (crypto-shredded)",
        "met: completed on or before the due date",
        "First check, right after the erasure: passed",
        "Final check, after the second sweep: passed",
        "The second sweep, after the longest ingestion delay, found nothing new.",
        "Pending: the platform's clean-up job removes the deleted bytes",
        "Ed25519",
        document["signature"]["key_id"],
        "RFC 8785 (the JSON Canonicalization Scheme)",
        f"erasure receipt verify receipt-{request_id}.json --public-key public.pem",
        f"node verifier/node/verify.mjs receipt-{request_id}.json public.pem",
        "-----BEGIN PUBLIC KEY-----",
    ]


async def _erased_with_a_held_summary(api: Api) -> tuple[str, list[str]]:
    """A's erasure, filed by the requester and approved; B's summary of A's rows kept (B held), C's erased.
    The request id and the three raw user ids."""
    platform = api.saga.platform
    a, b, c = users = user_ids(3, 4242, prefix="certificate")
    for n, user in enumerate(users):  # seeded apart: the only links between them are the summaries
        await api.saga.seed(APP, [user], seed=4242 + n)
    rows = [r[0] for r in platform.memory_store.rows_of(APP, a)]
    assert platform.memory_store.summarise(APP, b, rows[:2]) is not None
    assert platform.memory_store.summarise(APP, c, rows[2:4]) is not None
    b_key = subject_key(platform.config.subject_secret, APP, b)
    assert platform.requests.place_hold(b_key, APP, "litigation hold on b", "counsel@x.example")
    try:
        request_id = await api.file(a, sub=REQUESTER)
        await api.wait_for_state(request_id, "pending_approval")
        approved = await api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver"))
        assert approved.status_code == 200, approved.text
        assert (await api.saga.result(request_id)).status == "completed"
    finally:
        platform.requests.release_hold(b_key, "test over", "counsel@x.example")
    return request_id, list(users)


def _audited(api: Api, request_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e.actor, e.action, e.detail) for e in api.app.state.console.audit.entries(request_id)]


async def test_the_certificate_page_and_its_pdf_say_in_plain_words_what_was_erased_kept_checked_and_signed(
    api: Api,
) -> None:
    request_id, raw_ids = await _erased_with_a_held_summary(api)
    body = api.saga.receipt_body(request_id)
    document = load_receipt(api.saga.platform, request_id)
    assert document is not None
    memory = next(d for d in body["dispositions"] if d["store"] == "memory")["counts"]
    assert (memory.get("derived_rows"), memory.get("derived_rows_held")) == (1, 1)  # the setup did what it says
    wanted = _phrases(body, document)

    amir = Browser(api)
    try:
        await amir.login(APPROVER, "approver")
        before = _audited(api, request_id)
        page = await amir.http.get(f"/requests/{request_id}/receipt")
        assert page.status_code == 200, page.text
        after_view = _audited(api, request_id)
        # issue 42: opening the page is a view, audited once as one (it was logged as a download)
        viewed = after_view[len(before) :]
        assert [(actor, action) for actor, action, _ in viewed] == [(APPROVER, "receipt_viewed")]
        pdf = await amir.http.get(f"/requests/{request_id}/receipt.pdf")
        after_pdf = _audited(api, request_id)
        raw = await amir.http.get(f"/requests/{request_id}/receipt.json")
    finally:
        await amir.close()

    seen = page_text(page.text)
    missing = [w for w in wanted if w not in seen]
    assert not missing, (missing, seen)
    assert f'href="/requests/{request_id}/receipt.json"' in page.text  # the signed JSON, a link away
    assert f'href="/requests/{request_id}/receipt.pdf"' in page.text
    assert '"signature":' not in page.text  # no raw JSON dump any more
    assert raw.json() == document  # the signed document itself, downloadable as it is stored

    assert pdf.status_code == 200
    assert pdf.headers["content-type"] == "application/pdf"
    assert f'filename="receipt-{request_id}.pdf"' in pdf.headers["content-disposition"]
    assert pdf.content.startswith(b"%PDF-")
    shown = pdf_text(pdf.content)
    missing = [w for w in wanted if w not in shown]
    assert not missing, (missing, shown)

    for user in raw_ids:  # no raw user id anywhere: the page, the PDF's text, the PDF's bytes
        assert user not in page.text
        assert user not in shown
        assert user.encode() not in pdf.content

    # the PDF is a download, audited with its format
    downloaded = after_pdf[len(after_view) :]
    assert [(actor, action, d.get("format")) for actor, action, d in downloaded] == [
        (APPROVER, "receipt_downloaded", "pdf")
    ]


async def test_the_page_and_the_pdf_are_read_with_the_receipts_permission(api: Api) -> None:
    """The filing requester reads their receipt's page and PDF, another requester does not learn the request
    exists (404), an admin (no receipts:read) is refused (403), an auditor reads it: the receipt API's
    answers, for each of them. A receipt whose signature no longer verifies gets no certificate."""
    (target,) = user_ids(1, 4243, prefix="certificate")
    await api.saga.seed(APP, [target])
    request_id = await api.file(target, sub=REQUESTER)
    await api.wait_for_state(request_id, "pending_approval")
    approved = await api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver"))
    assert approved.status_code == 200, approved.text
    assert (await api.saga.result(request_id)).status == "completed"

    people = {
        "filer": (REQUESTER, "requester"),
        "another requester": ("rob@compliance.example", "requester"),
        "admin": ("ada@ops.example", "admin"),
        "auditor": ("olga@audit.example", "auditor"),
    }
    answers: dict[str, tuple[int, int, int]] = {}
    for who, (sub, role) in people.items():
        browser = Browser(api)
        try:
            await browser.login(sub, role)
            page = await browser.http.get(f"/requests/{request_id}/receipt")
            pdf = await browser.http.get(f"/requests/{request_id}/receipt.pdf")
        finally:
            await browser.close()
        receipt = await api.http.get(f"/api/requests/{request_id}/receipt", headers=api.bearer(sub, role))
        answers[who] = (receipt.status_code, page.status_code, pdf.status_code)
        if page.status_code == 200:
            assert "Certificate of erasure" in page.text
            assert pdf.content.startswith(b"%PDF-")
    assert answers == {
        "filer": (200, 200, 200),
        "another requester": (404, 404, 404),
        "admin": (403, 403, 403),
        "auditor": (200, 200, 200),
    }
    readers = {actor for actor, action, _ in _audited(api, request_id) if action.startswith("receipt_")}
    assert readers == {REQUESTER, "olga@audit.example"}  # audited for those who read it, nobody else

    with api.saga.platform.pool.connection() as conn:  # the stored receipt altered: it no longer verifies
        conn.execute(
            "UPDATE receipts SET body = jsonb_set(body, '{app_name}', '\"another-app\"') WHERE request_id = %s",
            (request_id,),
        )
    rita = Browser(api)
    try:
        await rita.login(REQUESTER, "requester")
        page = await rita.http.get(f"/requests/{request_id}/receipt")
        pdf = await rita.http.get(f"/requests/{request_id}/receipt.pdf")
    finally:
        await rita.close()
    assert page.status_code == 200
    assert "Signature NOT valid" in page.text
    assert "Certificate of erasure" not in page.text
    assert "another-app" not in page.text  # nothing the altered receipt says is shown as fact
    assert pdf.status_code == 409
